"""The command line: parses arguments, wires one source to sinks, reports errors in one line.

Heavy or optional libraries (textual, prometheus_client, watchfiles) are imported
inside the command that needs them, so ``parse`` and ``runs`` start fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, NoReturn

from acceptmon import __version__, livecmd
from acceptmon.errors import AcceptmonError, InputError
from acceptmon.grammar import load_grammars, read_grammar_file
from acceptmon.parse import Tally
from acceptmon.pipeline import Progress, StatsJob, default_jobs, run
from acceptmon.records import Record
from acceptmon.sinks.table import TableFormat, fmt_number, format_records, header, infer_format
from acceptmon.source import check_path
from acceptmon.stats import RunSummary


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acceptmon`` command; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except AcceptmonError as exc:
        print(f"acceptmon: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        sys.stderr.close()  # the reader (e.g. `head`) went away: not an error
        return 0
    except KeyboardInterrupt:
        return 130


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``acceptmon tail: error: ... (see --help)``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="acceptmon", description="Speculative-decoding acceptance from SGLang server logs.")
    p.add_argument("--version", action="version", version=f"acceptmon {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    parse = sub.add_parser("parse", help="convert logs to one CSV/JSONL row per decode-batch line")
    parse.add_argument("files", nargs="+", metavar="FILE", help="log files, .gz files, or - for stdin")
    parse.add_argument("-o", "--output", help="output file (default: stdout)")
    parse.add_argument("--format", choices=("csv", "jsonl"), help="default: from -o's suffix, else csv")
    _grammar_option(parse)
    parse.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    parse.set_defaults(func=cmd_parse)

    runs = sub.add_parser("runs", help="one summary per server launch (config, accept len, throughput)")
    runs.add_argument("files", nargs="+", metavar="FILE")
    runs.add_argument("--format", choices=("table", "json", "csv"), default="table")
    _grammar_option(runs)
    runs.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    runs.add_argument("--max-bytes", type=int, metavar="N", help="read only the first N bytes of each file")
    runs.set_defaults(func=cmd_runs)

    serve = sub.add_parser("serve", help="follow live logs and export Prometheus metrics at /metrics")
    serve.add_argument("files", nargs="+", metavar="FILE", help="log files or globs ('/var/log/sglang/*.log')")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, default=9464, help="port to bind (default: 9464)")
    serve.add_argument("--web-config", type=Path, metavar="FILE", help="exporter-toolkit web config: TLS, basic auth")
    serve.add_argument("--stale-after", type=duration, default=300.0, metavar="DURATION",
                       help="drop a rank's gauges after this long without a line (default: 5m)")  # fmt: skip
    serve.add_argument("--max-series", type=int, default=512, help="cap on (file, rank) series (default: 512)")
    _live_options(serve)
    _grammar_option(serve)
    serve.set_defaults(func=livecmd.cmd_serve)

    tail = sub.add_parser("tail", help="live dashboard of a server log (or one line per record with --plain)")
    tail.add_argument("files", nargs="+", metavar="FILE", help="log files or globs")
    _tail_options(tail)
    _live_options(tail)
    _grammar_option(tail)
    tail.set_defaults(func=livecmd.cmd_tail)

    demo = sub.add_parser("demo", help="replay the bundled sample log (broken config, fix, steps sweep) live")
    demo.add_argument("--speed", type=positive, default=10.0, help="replay speed against log time (default: 10x)")
    demo.add_argument("--sample", default="seed_eagle3_moe.log", help="bundled sample log to replay")
    _tail_options(demo)
    demo.set_defaults(func=livecmd.cmd_demo, files=[], from_start=True, poll=False, poll_interval=0.1, state_file=None,
                      grammar=[])  # fmt: skip

    gram = sub.add_parser("grammars", help="list loaded grammars; 'grammars check FILE' validates one")
    gram.add_argument("action", nargs="?", choices=("list", "check"), default="list")
    gram.add_argument("files", nargs="*", metavar="FILE")
    _grammar_option(gram)
    gram.set_defaults(func=cmd_grammars)
    return p


def _tail_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", type=duration, default=300.0, metavar="DURATION", help="window (log time; default 5m)")
    p.add_argument("--alert-below", type=float, default=1.5, metavar="LEN",
                   help="flag a window mean accept len below this (default: 1.5; 0: off)")  # fmt: skip
    p.add_argument("--stale-after", type=duration, default=30.0, metavar="DURATION",
                   help="flag no decode line for this long while requests are queued (default: 30s)")  # fmt: skip
    p.add_argument("--metrics-port", type=int, metavar="PORT", help="also serve Prometheus metrics on this port")
    p.add_argument("--plain", action="store_true", help="one line per record instead of the dashboard")


def _live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-start", action="store_true", help="process whole files, not just the current run")
    p.add_argument("--poll", action="store_true", help="poll instead of inotify (network filesystems, containers)")
    p.add_argument("--poll-interval", type=duration, default=0.1, metavar="DURATION", help="default: 100ms")
    p.add_argument("--state-file", type=Path, metavar="FILE", help="persist positions here; resume on restart")


def positive(text: str) -> float:
    """A number above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above zero: {text!r}")
    return value


def duration(text: str) -> float:
    """``250ms``, ``30s``, ``5m``, ``1h`` or plain seconds, as seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    t = text.strip().lower()
    for suffix in ("ms", "s", "m", "h"):
        if t.endswith(suffix):
            number, scale = t[: -len(suffix)], units[suffix]
            break
    else:
        number, scale = t, 1.0
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 250ms, 30s, 5m or 1h)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a duration must be positive: {text!r}")
    return value


def _grammar_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--grammar",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="extra grammar file (repeatable)",
    )


class TableJob:
    """Format decode records (in workers too) and write them in order."""

    records_wanted = frozenset({"decode"})

    def __init__(self, fmt: TableFormat, out: IO[bytes]) -> None:
        self.fmt, self.out, self.records = fmt, out, 0

    def chunk(self, records: list[Record]) -> tuple[int, bytes]:
        data = format_records(records, self.fmt)
        return sum(1 for r in records if r.kind == "decode"), data

    def collect(self, part: tuple[int, bytes]) -> None:
        self.records += part[0]
        self.out.write(part[1])


def cmd_parse(args: argparse.Namespace) -> int:
    for f in args.files:
        check_path(f)
    grammars = load_grammars(args.grammar)
    fmt = infer_format(args.output, args.format)
    out: IO[bytes]
    if args.output:
        try:
            out = open(args.output, "wb")
        except OSError as exc:
            raise InputError(args.output, f"cannot write: {exc.strerror}") from None
    else:
        out = sys.stdout.buffer
    job = TableJob(fmt, out)
    started = time.monotonic()
    try:
        out.write(header(fmt))
        result = run(args.files, grammars, job, jobs=max(1, args.jobs), on_progress=_progress_printer())
    finally:
        out.flush()
        if out is not sys.stdout.buffer:
            out.close()
    _summary(result.tally, job.records, time.monotonic() - started, args.output)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    for f in args.files:
        check_path(f)
    grammars = load_grammars(args.grammar)
    job = StatsJob()
    run(args.files, grammars, job, jobs=max(1, args.jobs), on_progress=_progress_printer(), limit=args.max_bytes)
    summaries = job.stats.summaries()
    if args.format == "json":
        print(json.dumps([s.model_dump(mode="json") for s in summaries], indent=2))
    elif args.format == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(RunSummary.model_fields)
        for s in summaries:
            w.writerow(["" if v is None else v for v in s.model_dump(mode="json").values()])
    else:
        print(render_runs_table(summaries))
    return 0


def cmd_grammars(args: argparse.Namespace) -> int:
    if args.action == "check":
        if not args.files:
            raise InputError("grammars check", "name at least one grammar FILE")
        for f in args.files:
            check_path(f)
            read_grammar_file(Path(f))
        load_grammars([*args.grammar, *map(Path, args.files)])
        for f in args.files:
            print(f"{f}: ok")
        return 0
    gset = load_grammars(args.grammar)
    for g in gset.all:
        spec = g.spec
        what = spec.kind if spec.kind == "envelope" else f"{spec.record} ({spec.server})"
        print(f"{spec.name:28} {what:18} {len(spec.samples):3} samples  {g.path}")
    return 0


def render_runs_table(summaries: Sequence[RunSummary]) -> str:
    """Aligned text table of run summaries, one row per launch."""
    head = ("file", "run", "start", "model", "spec", "steps", "topk", "draft", "batches",
            "accept_len", "p10", "p50", "p90", "rate", "draft_rate", "tok/s", "duration")  # fmt: skip
    rows = [head]
    for s in summaries:
        rows.append(
            (
                Path(s.file).name, str(s.run), s.start.isoformat(sep=" ", timespec="seconds") if s.start else "-",
                _short_model(s.model), s.spec_algorithm or "none", fmt_number(s.spec_num_steps),
                fmt_number(s.spec_eagle_topk), fmt_number(s.spec_num_draft_tokens), str(s.batches),
                fmt_number(s.accept_len_mean), fmt_number(s.accept_len_p10), fmt_number(s.accept_len_p50),
                fmt_number(s.accept_len_p90), fmt_number(s.accept_rate_mean), fmt_number(s.draft_accept_rate_mean),
                fmt_number(s.gen_throughput_mean, 1), _duration(s.duration_s),
            )
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _short_model(model: str | None) -> str:
    return model.rstrip("/").split("/")[-1] if model else "-"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def _progress_printer() -> Callable[[Progress], None] | None:
    if not sys.stderr.isatty():
        return None
    started = time.monotonic()

    def show(p: Progress) -> None:
        if p.total:
            rate = p.done / max(time.monotonic() - started, 1e-6) / 1e6
            sys.stderr.write(f"\racceptmon: {100 * p.done // p.total:3d}%  {rate:6.0f} MB/s")
            sys.stderr.flush()

    return show


def _summary(tally: Tally, records: int, seconds: float, output: str | None) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    k = tally.kinds
    print(
        f"acceptmon: {tally.lines:,} lines read, {records:,} decode records"
        f"{' -> ' + output if output else ''}; {k['prefill']:,} prefill, {k['launch']:,} launch lines; "
        f"{tally.accept_noise:,} noise lines contain 'accept'; {k['unrecognized']:,} unrecognized; "
        f"{k['oversized']:,} oversized ({seconds:.2f}s)",
        file=sys.stderr,
    )
    for file, line, text in tally.unrecognized[:3]:
        print(f"acceptmon: unrecognized {file}:{line}: {text[:160]}", file=sys.stderr)
