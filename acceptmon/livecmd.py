"""The live commands, ``serve``, ``tail`` and ``demo``: one :class:`~acceptmon.follow.LiveSource` wired to sinks.

``serve`` feeds :class:`~acceptmon.live.LiveStats` and the /metrics server; ``tail``
feeds :class:`~acceptmon.dashboard.DashboardState` and the Textual app (or prints
plain lines), optionally the exporter too; ``demo`` replays a bundled log into a
temporary file and runs ``tail`` on it. Textual, prometheus_client and watchfiles
are imported inside the command that needs them.
"""

from __future__ import annotations

import argparse
import glob
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from acceptmon.grammar import GrammarSet, load_grammars
from acceptmon.parse import Tally
from acceptmon.records import DecodeStats, Record
from acceptmon.sinks.table import fmt_number
from acceptmon.source import check_path

if TYPE_CHECKING:
    from acceptmon.dashboard import DashboardState
    from acceptmon.follow import LiveSource


def say(message: str) -> None:
    print(f"acceptmon: {message}", file=sys.stderr, flush=True)


def stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_serve(args: argparse.Namespace) -> int:
    from acceptmon.follow import LiveSource
    from acceptmon.live import LiveStats
    from acceptmon.sinks.httpserver import MetricsServer, load_web_config
    from acceptmon.sinks.prometheus import MetricsPage

    grammars = load_grammars(args.grammar)
    check_live_paths(args.files)
    web, tls = load_web_config(args.web_config) if args.web_config else (None, None)
    live = LiveStats(max_series=max(1, args.max_series))
    source = LiveSource(
        args.files,
        grammars,
        live.update,
        from_start=args.from_start,
        state_file=args.state_file,
        note=say,
        on_waiting=live.set_waiting,
        on_forget=live.forget,
    )
    server = MetricsServer(
        MetricsPage(live, stale_after=args.stale_after).render, args.host, args.port, web=web, tls=tls
    )
    stop = threading.Event()
    stop_on_signals(stop)
    server.start()
    say(f"serving metrics at {server.url}")
    if args.host in ("127.0.0.1", "localhost", "::1"):
        say("only this machine can scrape it; to expose it: --host 0.0.0.0 --web-config web.yml (TLS, basic auth)")
    elif web is None or not web.basic_auth_users:
        say("listening beyond this machine without authentication; see --web-config")
    elif tls is None:
        say("basic auth without TLS: passwords cross the network in clear text; add tls_server_config")
    try:
        source.run(stop, poll=args.poll, interval=args.poll_interval)
    finally:
        server.stop()
        source.close()
    for info in live.snapshot().files:
        k = info.lines
        say(
            f"stopped: {info.file}: {sum(k.values()):,} lines read, {k['decode']:,} decode, {k['launch']:,} launch, "
            f"{k['unrecognized']:,} unrecognized"
        )
    if args.state_file:
        say(f"positions saved to {args.state_file}")
    return 0


def plain_line(r: DecodeStats, with_file: bool = False) -> str:
    """One compact, grep-friendly line per decode record."""
    ts = r.timestamp.isoformat(sep=" ", timespec="seconds") if r.timestamp else "-"
    where = f"{r.file} " if with_file else ""
    return (
        f"{where}{ts} {r.rank or '-'} accept_len={fmt_number(r.accept_len)} accept_rate={fmt_number(r.accept_rate)} "
        f"draft_accept_rate={fmt_number(r.draft_accept_rate)} gen_throughput={fmt_number(r.gen_throughput)}"
    )


def check_live_paths(patterns: Sequence[str]) -> None:
    """One-line error now for a path that can never be followed (a directory, unreadable)."""
    for pattern in patterns:
        if not glob.has_magic(pattern):
            check_path(pattern, may_be_missing=True)


def cmd_tail(args: argparse.Namespace) -> int:
    grammars = load_grammars(args.grammar)
    check_live_paths(args.files)
    plain = args.plain or not sys.stdout.isatty()
    return _tail(args, args.files, grammars, plain=plain)


def _tail(args: argparse.Namespace, files: Sequence[str], grammars: GrammarSet, *, plain: bool,
          label: str = "", before: Callable[[threading.Event, Callable[[str], None]], None] | None = None,
          ) -> int:  # fmt: skip
    """Wire one live source to the dashboard (or plain lines) and, optionally, the exporter."""
    from acceptmon.follow import LiveSource
    from acceptmon.live import LiveStats

    sinks: list[Callable[[str, list[Record], Tally], None]] = []
    live = LiveStats() if args.metrics_port else None
    if live is not None:
        sinks.append(live.update)
    state = None
    if plain:
        multi = len(files) > 1 or any(glob.has_magic(f) for f in files)

        def show(file: str, records: list[Record], tally: Tally) -> None:
            out = [plain_line(r, multi) for r in records if isinstance(r, DecodeStats)]
            if out:
                sys.stdout.write("\n".join(out) + "\n")
                sys.stdout.flush()

        sinks.append(show)
        note: Callable[[str], None] = say
    else:
        from acceptmon.dashboard import DashboardState

        state = DashboardState(window=args.window, alert_below=args.alert_below or None, stale_after=args.stale_after)
        sinks.append(state.add)
        note = state.note

    def sink(file: str, records: list[Record], tally: Tally) -> None:
        for s in sinks:
            s(file, records, tally)

    def on_waiting(file: str, waiting: bool) -> None:
        if live is not None:
            live.set_waiting(file, waiting)
        if state is not None:
            state.set_waiting(file, waiting)

    source = LiveSource(files, grammars, sink, from_start=args.from_start, state_file=args.state_file, note=note,
                        on_waiting=on_waiting, on_forget=live.forget if live is not None else None)  # fmt: skip
    server = None
    if live is not None:
        from acceptmon.sinks.httpserver import MetricsServer
        from acceptmon.sinks.prometheus import MetricsPage

        server = MetricsServer(MetricsPage(live).render, "127.0.0.1", args.metrics_port)
        server.start()
        note(f"serving metrics at {server.url}")

    def follow(stop: threading.Event) -> None:
        if before is not None:
            before(stop, note)
        source.discover()
        if state is not None:
            _start_history(source, args.grammar, state)
        source.run(stop, poll=args.poll, interval=args.poll_interval)

    def follow_in_background(stop: threading.Event) -> None:
        try:
            follow(stop)
        except Exception as exc:  # the dashboard stays up and says why it stopped updating
            note(f"following stopped: {exc}")
            raise

    try:
        if state is None:
            stop = threading.Event()
            stop_on_signals(stop)
            follow(stop)
        else:
            from acceptmon.tui.app import AcceptmonApp

            state.backfill = source.backfill_progress
            AcceptmonApp(state, follow=follow_in_background, files=label).run()  # its unmount stops following
    finally:
        if server is not None:
            server.stop()
        source.close()
    return 0


def _start_history(source: LiveSource, extra_grammars: Sequence[Path], state: DashboardState) -> None:
    """Read the runs before each file's live start, for the run history.

    ``acceptmon runs --max-bytes`` does it in a child process: on every core, and without
    taking the dashboard's interpreter away from the screen.
    """
    import json
    import subprocess

    from acceptmon.stats import RunSummary

    for path, end in source.history_end.items():

        def work(path: str = path, end: int = end) -> None:
            if end >= 16 << 20:
                state.note(f"{path}: reading the {end / 2**20:,.0f} MiB before the current run for the run history")
            cmd = [sys.executable, "-m", "acceptmon", "runs", path, "--format", "json", "--max-bytes", str(end)]
            for g in extra_grammars:
                cmd += ["--grammar", str(g)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                state.note(f"{path}: run history unavailable: {done.stderr.strip()[-200:]}")
                return
            runs = [RunSummary.model_validate(r) for r in json.loads(done.stdout)]
            state.set_history(path, runs)
            state.note(f"{path}: run history: {sum(1 for r in runs if r.run):,} earlier launches read")

        threading.Thread(target=work, name=f"history {path}", daemon=True).start()


def cmd_demo(args: argparse.Namespace) -> int:
    import tempfile

    from acceptmon.replay import replay, sample_path

    sample = sample_path(args.sample)
    grammars = load_grammars()
    plain = args.plain or not sys.stdout.isatty()
    with tempfile.TemporaryDirectory(prefix="acceptmon-demo-") as tmp:
        target = Path(tmp) / sample.name
        target.touch()

        def start_replay(stop: threading.Event, note: Callable[[str], None]) -> None:
            def work() -> None:
                lines = replay(sample, target, args.speed, stop)
                if plain:  # a script ran the demo: end once the replay has been read
                    time.sleep(0.5)
                    stop.set()
                else:
                    note(f"replay finished: {lines} lines of {sample.name}; press q to quit")

            threading.Thread(target=work, name="replay", daemon=True).start()

        if plain:
            say(f"replaying {sample.name} at {args.speed:g}x (log time); one line per decode batch")
        label = f"{sample.name} (demo, {args.speed:g}x)"
        code = _tail(args, [str(target)], grammars, plain=plain, label=label, before=start_replay)
        if plain:
            from acceptmon.cli import render_runs_table
            from acceptmon.pipeline import StatsJob, run

            job = StatsJob()
            run([str(target)], grammars, job)
            print("\n" + render_runs_table(job.stats.summaries()))
        return code
