"""The batch commands: ``parse`` (rows), ``runs`` (one summary per launch) and ``grammars``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from acceptmon.cli.args import Subcommands, grammar_option
from acceptmon.errors import InputError
from acceptmon.loader import load_grammars, read_grammar_file
from acceptmon.parse import Tally
from acceptmon.pipeline.batch import Progress, default_jobs, run
from acceptmon.sinks.runs import StatsJob, render_runs_table
from acceptmon.sinks.table import TableJob, header, infer_format
from acceptmon.source import check_path
from acceptmon.stats import RunSummary


def add_parsers(sub: Subcommands) -> None:
    """The ``parse``, ``runs`` and ``grammars`` commands."""
    parse = sub.add_parser("parse", help="convert logs to one CSV/JSONL row per decode-batch line")
    parse.add_argument("files", nargs="+", metavar="FILE", help="log files, .gz files, or - for stdin")
    parse.add_argument("-o", "--output", help="output file (default: stdout)")
    parse.add_argument("--format", choices=("csv", "jsonl"), help="default: from -o's suffix, else csv")
    grammar_option(parse)
    parse.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    parse.set_defaults(func=cmd_parse)

    runs = sub.add_parser("runs", help="one summary per server launch (config, accept len, throughput)")
    runs.add_argument("files", nargs="+", metavar="FILE")
    runs.add_argument("--format", choices=("table", "json", "csv"), default="table")
    grammar_option(runs)
    runs.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    runs.add_argument("--max-bytes", type=int, metavar="N", help="read only the first N bytes of each file")
    runs.set_defaults(func=cmd_runs)

    gram = sub.add_parser("grammars", help="list loaded grammars; 'grammars check FILE' validates one")
    gram.add_argument("action", nargs="?", choices=("list", "check"), default="list")
    gram.add_argument("files", nargs="*", metavar="FILE")
    grammar_option(gram)
    gram.set_defaults(func=cmd_grammars)


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
        result = run(args.files, grammars, job, jobs=max(1, args.jobs), on_progress=_progress_printer(), fast=fmt)
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
        print(f"{spec.name:28} {what:18} {len(spec.samples):3} samples  {g.source}")
    return 0


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
