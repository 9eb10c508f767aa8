"""The live commands, ``serve``, ``tail`` and ``demo``: one :class:`~acceptmon.follow.LiveSource` wired to sinks.

``serve`` feeds :class:`~acceptmon.live.LiveStats` and the /metrics server; ``tail``
feeds :class:`~acceptmon.dashboard.DashboardState` and the Textual app (or prints
plain lines), optionally the exporter too; ``demo`` replays a bundled log into a
temporary file and runs ``tail`` on it. Textual, prometheus_client and watchfiles
are imported inside the command that needs them.
"""

from __future__ import annotations

import argparse
import gc
import glob
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from acceptmon.cli import args as cli_args
from acceptmon.cli.args import Subcommands, duration, grammar_option, live_options, positive, tail_options
from acceptmon.cli.wiring import Before, ignore, make_doctor, say, wire
from acceptmon.inputs.files import check_path, reads_stdin
from acceptmon.inputs.remote import is_url
from acceptmon.inputs.replay import sample_names
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.load import load_grammars
from acceptmon.sinks.atomic import stdout_writes

if TYPE_CHECKING:
    from acceptmon.pipeline.live import LiveSource
    from acceptmon.tui.model import DashboardState


def add_parsers(sub: Subcommands) -> None:
    """The ``serve``, ``tail`` and ``demo`` commands."""
    serve = sub.add_parser("serve", help="follow live logs and export Prometheus metrics at /metrics")
    serve.add_argument("files", nargs="+", metavar="FILE", help="log files or globs ('/var/log/sglang/*.log')")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, default=9464, help="port to bind (default: 9464)")
    serve.add_argument("--web-config", type=Path, metavar="FILE", help="exporter-toolkit web config: TLS, basic auth")
    serve.add_argument(
        "--stale-after",
        type=duration,
        default=300.0,
        metavar="DURATION",
        help="drop a rank's gauges after this long without a line (default: 5m)",
    )
    serve.add_argument("--max-series", type=int, default=512, help="cap on (file, rank) series (default: 512)")
    live_options(serve)
    grammar_option(serve)
    serve.set_defaults(func=cmd_serve)

    tail = sub.add_parser("tail", help="live dashboard of a server log (or one line per record with --plain)")
    tail.add_argument("files", nargs="+", metavar="FILE", help="log files or globs")
    tail_options(tail)
    live_options(tail)
    grammar_option(tail)
    tail.set_defaults(func=cmd_tail)

    demo = sub.add_parser("demo", help="replay the bundled sample log (broken config, fix, steps sweep) live")
    demo.add_argument("--speed", type=positive, default=10.0, help="replay speed against log time (default: 10x)")
    samples = ", ".join(sample_names())
    demo.add_argument(
        "--sample",
        default="seed_eagle3_moe.log",
        metavar="NAME",
        help=f"bundled sample log to replay, or the start of its name: {samples}",
    )
    tail_options(demo)
    demo.set_defaults(
        func=cmd_demo, files=[], from_start=True, poll=False, poll_interval=0.1, state_file=None, grammar=[], rules=[]
    )


def stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_serve(args: argparse.Namespace) -> int:
    from acceptmon.exporter.http import MetricsServer, load_web_config
    from acceptmon.exporter.metrics import MetricsPage
    from acceptmon.live.state import LiveStats
    from acceptmon.pipeline.live import LiveSource

    grammars = cli_args.grammars_for(args)
    check_live_paths(args.files)
    web, tls = load_web_config(args.web_config) if args.web_config else (None, None)
    live = LiveStats(max_series=max(1, args.max_series), doctor=make_doctor(args))
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
        MetricsPage(live, stale_after=args.stale_after, zone=args.timezone).render,
        args.host,
        args.port,
        web=web,
        tls=tls,
    )
    stop = threading.Event()
    stop_on_signals(stop)
    live.start_doctor(stop)
    server.start()
    say(f"serving metrics at {server.url}")
    if args.host in ("127.0.0.1", "localhost", "::1"):
        say("only this machine can scrape it; to expose it: --host 0.0.0.0 --web-config web.yml (TLS, basic auth)")
    elif web is None or not web.basic_auth_users:
        say("listening beyond this machine without authentication; see --web-config")
    elif tls is None:
        say("basic auth without TLS: passwords cross the network in clear text; add tls_server_config")
    gc.freeze()  # what start-up made lives as long as the process: full collections no longer walk it
    try:
        source.run(stop, poll=args.poll, interval=args.poll_interval)
    finally:
        server.stop()
        source.close()
    from acceptmon.display import line_counts

    for info in live.snapshot().files:
        say(f"stopped: {info.file}: {line_counts(info.lines)}")  # parse's wording: spec lines too
    if args.state_file:
        from acceptmon.pipeline import statefile

        if statefile.unsaved(args.state_file):
            say(f"positions not saved to {args.state_file}: its disk is full")
        else:
            say(f"positions saved to {args.state_file}")
    return 0


def check_live_paths(patterns: Sequence[str]) -> None:
    """One-line error now for a path that can never be followed (a directory, unreadable)."""
    for pattern in patterns:
        if is_url(pattern) or not glob.has_magic(pattern):  # a URL, glob or not, is refused there
            check_path(pattern, may_be_missing=True)


def cmd_tail(args: argparse.Namespace) -> int:
    grammars = cli_args.grammars_for(args)
    check_live_paths(args.files)
    if args.rules:
        make_doctor(args)  # a bad rule file is an error now, whether or not this tail runs the doctor
    plain = args.plain or not sys.stdout.isatty()
    stdin_fd = 0
    if not plain and any(map(reads_stdin, args.files)):  # the dashboard's keys come from standard input
        from acceptmon.inputs.stream import keys_from_terminal

        moved = keys_from_terminal()
        if moved is None:
            say("no terminal to read keys from while the log comes on standard input: plain lines instead")
            plain = True
        else:
            stdin_fd = moved
    if not plain:
        return _tail(args, args.files, grammars, plain=plain, stdin_fd=stdin_fd)
    with stdout_writes():  # plain lines: a full disk is one line, not a traceback
        return _tail(args, args.files, grammars, plain=plain)


def _tail(
    args: argparse.Namespace,
    files: Sequence[str],
    grammars: GrammarSet,
    *,
    plain: bool,
    label: str = "",
    before: Before | None = None,
    stdin_fd: int = 0,
) -> int:
    """Wire one live source to the dashboard (or plain lines) and, optionally, the exporter."""
    from acceptmon.pipeline.live import LiveSource

    w = wire(args, files, plain)
    source = LiveSource(
        files,
        grammars,
        w.sink,
        from_start=args.from_start,
        state_file=args.state_file,
        note=w.note,
        on_waiting=w.on_waiting,
        on_forget=w.live.forget if w.live is not None else None,
        on_ended=w.state.end_of_input if w.state is not None else None,
        stdin_fd=stdin_fd,
    )
    server = None
    if w.live is not None:
        from acceptmon.exporter.http import MetricsServer
        from acceptmon.exporter.metrics import MetricsPage

        server = MetricsServer(
            MetricsPage(w.live, zone=getattr(args, "timezone", None)).render, "127.0.0.1", args.metrics_port
        )
        server.start()
        w.note(f"serving metrics at {server.url}")

    def follow(stop: threading.Event) -> None:
        judged = w.state.live if w.state is not None else w.live
        if judged is not None:
            judged.start_doctor(stop)  # its judging never holds up the screen, a scrape or the reading
        try:
            if before is not None:
                before(stop, w.note, w.state.end_of_input if w.state is not None else ignore)
            source.discover()
            if w.state is not None:
                _start_history(source, args.grammar, w.state, getattr(args, "year", None))
            source.run(stop, poll=args.poll, interval=args.poll_interval)
        except Exception as exc:  # the dashboard stays up and says why it stopped updating
            if w.state is not None:  # plain lines: the command line reports the error itself, once
                w.note(f"following stopped: {exc}")
            raise

    try:
        if w.state is None:
            stop = threading.Event()
            stop_on_signals(stop)
            follow(stop)
        else:
            from acceptmon.tui.app import AcceptmonApp

            w.state.backfill = source.backfill_progress
            AcceptmonApp(w.state, follow=follow, files=label).run()  # its unmount stops following
    finally:
        if server is not None:
            server.stop()
        source.close()
    return 0


def _start_history(
    source: LiveSource, extra_grammars: Sequence[Path], state: DashboardState, year: int | None = None
) -> None:
    """Read the runs before each file's live start, for the run history.

    ``acceptmon runs --max-bytes`` does it in a child process: on every core, and without
    taking the dashboard's interpreter away from the screen.
    """
    import json
    import subprocess

    from acceptmon.measure.aggregate import RunSummary

    for path, end in source.history_end.items():

        def work(path: str = path, end: int = end) -> None:
            if end >= 16 << 20:
                state.note(f"{path}: reading the {end / 2**20:,.0f} MiB before the current run for the run history")
            cmd = [sys.executable, "-m", "acceptmon", "runs", path, "--format", "json", "--max-bytes", str(end)]
            cmd += ["--year", str(year)] if year is not None else []
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

    from acceptmon.inputs.replay import replay, sample_path

    sample = sample_path(args.sample)
    grammars = load_grammars()
    plain = args.plain or not sys.stdout.isatty()
    with tempfile.TemporaryDirectory(prefix="acceptmon-demo-") as tmp:
        target = Path(tmp) / sample.name
        target.touch()

        def start_replay(stop: threading.Event, note: Callable[[str], None], ended: Callable[[str], None]) -> None:
            def work() -> None:
                lines = replay(sample, target, args.speed, stop)
                if plain:  # a script ran the demo: end once the replay has been read
                    time.sleep(0.5)
                    stop.set()
                else:
                    ended(str(target))  # no stall alarm for a replay that ended with requests queued
                    note(f"replay finished: {lines} lines of {sample.name}; press q to quit")

            threading.Thread(target=work, name="replay", daemon=True).start()

        if plain:
            say(f"replaying {sample.name} at {args.speed:g}x (log time); one line per decode batch")
        label = f"{sample.name} (demo, {args.speed:g}x)"
        if not plain:
            return _tail(args, [str(target)], grammars, plain=plain, label=label, before=start_replay)
        with stdout_writes():  # plain lines: a full disk is one line, not a traceback
            code = _tail(args, [str(target)], grammars, plain=plain, label=label, before=start_replay)
            from acceptmon.pipeline.batch import run
            from acceptmon.sinks.runs_table import StatsJob, render_runs_table

            job = StatsJob()
            run([str(target)], grammars, job)
            print("\n" + render_runs_table(job.stats.summaries()))
        return code
