"""The batch commands: ``parse`` (rows), ``runs`` (one summary per launch) and ``grammars``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from acceptmon.cli.args import Subcommands, YearSource, grammar_option, grammars_for, size, year_option
from acceptmon.errors import InputError
from acceptmon.inputs.files import check_path, is_stream
from acceptmon.inputs.refs import unique_paths
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars, read_grammar_file
from acceptmon.parse.parser import Tally
from acceptmon.pipeline.batch import Progress, default_jobs, run
from acceptmon.sinks.atomic import atomic_output, check_output, output_path, stdout_writes
from acceptmon.sinks.table import TableJob, columns, infer_format

if TYPE_CHECKING:
    from acceptmon.measure.summary import RunSummary

PARSE_HELP = """\
One row per decode-batch line (other record kinds are counted, not written).

Acceptance columns:
  accept_len         tokens per verify step per request, the bonus token included (as logged by
                     the server; 1.0 means no draft token was ever accepted)
  accept_rate        exactly as logged; its definition changed across server versions, so do not
                     compare it across versions
  draft_accept_rate  (accept_len - 1) / (draft tokens - 1): accepted drafts over proposed drafts,
                     one definition everywhere (needs the launch line for the draft token count)
Columns, in order: {columns}
The summary on stderr counts every line by kind."""


def add_parsers(sub: Subcommands) -> None:
    """The ``parse``, ``runs`` and ``grammars`` commands."""
    parse = sub.add_parser(
        "parse",
        help="convert logs to one CSV/JSONL row per decode-batch line",
        description=PARSE_HELP.format(columns=", ".join(columns())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument("files", nargs="+", metavar="FILE", help="log files, .gz files, or - for stdin")
    parse.add_argument(
        "-o", "--output", help="output file: .csv or .jsonl, either with .gz (default, or -: CSV on stdout)"
    )
    parse.add_argument("--format", choices=("csv", "jsonl"), help="default: from -o's suffix, else csv")
    rows = sorted(k for k, v in KINDS.items() if not v.starts_run)
    parse.add_argument(
        "--kind",
        choices=rows,
        metavar="KIND",
        help=f"rows of this record kind instead of decode batches: {', '.join(rows)}",
    )
    grammar_option(parse)
    year_option(parse)
    parse.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    parse.set_defaults(func=cmd_parse)

    runs = sub.add_parser("runs", help="one summary per server launch (config, accept len, throughput)")
    runs.add_argument("files", nargs="+", metavar="FILE", help="log files, .gz files, or - for stdin")
    runs.add_argument("--format", choices=("table", "json", "csv"), default="table", help="default: table")
    grammar_option(runs)
    year_option(runs)
    runs.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    runs.add_argument(
        "--max-bytes", type=size, metavar="SIZE", help="read only the first SIZE bytes of each file (1M, 2G, 4096)"
    )
    runs.set_defaults(func=cmd_runs)

    gram = sub.add_parser("grammars", help="list loaded grammars; 'grammars check FILE' validates one")
    gram.add_argument(
        "action",
        nargs="?",
        choices=("list", "check"),
        default="list",
        help="list the grammars (default), or check grammar files",
    )
    gram.add_argument("files", nargs="*", metavar="FILE", help="grammar files to check (a copy of a built-in one too)")
    grammar_option(gram)
    gram.set_defaults(func=cmd_grammars)


def cmd_parse(args: argparse.Namespace) -> int:
    args.files = unique_paths(args.files)
    for f in args.files:
        check_path(f)
    args.output = output_path(args.output)
    check_output(args.output, args.files)
    grammars = grammars_for(args)
    fmt = infer_format(args.output, args.format)
    started = time.monotonic()
    try:
        streams = any(map(is_stream, args.files))  # read as they come: a row is written when its line is
        with atomic_output(args.output, flush=streams) as out:
            job = TableJob(fmt, out, (KINDS[args.kind],) if args.kind else None)
            fast = None if args.kind else fmt  # the fast lane writes the default table's rows
            jobs = max(1, args.jobs)
            result = run(
                args.files, grammars, job, jobs=jobs, on_progress=_progress_printer(), fast=fast, as_read=streams
            )
            job.finish()
    except KeyboardInterrupt:
        where = f"; nothing written to {args.output}" if args.output else ""
        print(f"\nacceptmon: interrupted{where}", file=sys.stderr)
        return 130
    _summary(result.tally, job.records, time.monotonic() - started, args.output, args.kind)
    _year_note(result.tally, grammars.year_for)
    if not job.records:
        _no_rows_hint(args.files, args.kind)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from acceptmon.cli.wiring import say_left_out
    from acceptmon.sinks.runs_table import StatsJob  # the run statistics: not on `parse`'s path

    args.files = unique_paths(args.files)
    for f in args.files:
        check_path(f)
    grammars = grammars_for(args)
    job = StatsJob()
    result = run(
        args.files, grammars, job, jobs=max(1, args.jobs), on_progress=_progress_printer(), limit=args.max_bytes
    )
    summaries = job.stats.summaries()
    _year_note(result.tally, grammars.year_for)
    say_left_out(sum(s.invalid_values for s in summaries), sum(s.refused_configs for s in summaries))
    if not job.records:
        _no_rows_hint(args.files)
    _print_runs(summaries, args.format)
    return 0


def _print_runs(summaries: list[RunSummary], fmt: str) -> None:
    import csv

    from acceptmon.display import strict_json
    from acceptmon.measure.summary import RunSummary
    from acceptmon.sinks.runs_table import render_runs_table

    with stdout_writes():
        if fmt == "json":
            print(strict_json([s.model_dump(mode="json") for s in summaries], indent=2))
        elif fmt == "csv":
            w = csv.writer(sys.stdout)
            w.writerow(RunSummary.model_fields)
            for s in summaries:
                w.writerow([_cell(v) for v in s.model_dump(mode="json").values()])
        else:
            print(render_runs_table(summaries))


def cmd_grammars(args: argparse.Namespace) -> int:
    if args.action == "check":
        if not args.files:
            raise InputError("grammars check", "name at least one grammar FILE")
        checked = []
        for f in args.files:
            check_path(f)
            checked.append(read_grammar_file(Path(f)).name)
        # A checked file stands in for a built-in grammar of the same name (a bundled file, or an edited copy).
        # As extra files, they get every check, with the samples of the whole set.
        load_grammars([*args.grammar, *map(Path, args.files)], replace=checked)
        with stdout_writes():
            for f in args.files:
                print(f"{f}: ok")
        return 0
    gset = load_grammars(args.grammar)
    with stdout_writes():
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


def _summary(tally: Tally, records: int, seconds: float, output: str | None, kind: str | None = None) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    k = tally.kinds
    noun = f"{kind} records" if kind else "records" if k["spec"] or k["throughput"] else "decode records"
    print(
        f"acceptmon: {tally.lines:,} lines read, {records:,} {noun}"
        f"{' -> ' + output if output else ''}; {k['prefill']:,} prefill, {k['launch']:,} launch lines; "
        f"{tally.accept_noise:,} noise lines contain 'accept'; {k['unrecognized']:,} unrecognized; "
        f"{k['oversized']:,} oversized ({seconds:.2f}s)",
        file=sys.stderr,
    )
    if k["spec"] or k["throughput"]:
        print(f"acceptmon: of which {k['spec']:,} spec, {k['throughput']:,} throughput lines", file=sys.stderr)
    for file, line, text in tally.unrecognized[:3]:
        print(f"acceptmon: unrecognized {file}:{line}: {text[:160]}", file=sys.stderr)


def _no_rows_hint(files: list[str], kind: str | None = None) -> None:
    what = f"{kind} lines" if kind else "decode or spec lines"
    for f in files:
        print(f"acceptmon: no {what} found in {f}: is this an SGLang or vLLM server log?", file=sys.stderr)


def _year_note(tally: Tally, years: object) -> None:
    """Say where the year of year-less (vLLM) timestamps came from, when a file had them."""
    if isinstance(years, YearSource) and (years.used or tally.kinds["spec"] or tally.kinds["throughput"]):
        print(f"acceptmon: {years.describe()}", file=sys.stderr)


def _cell(value: object) -> object:
    """A CSV cell: empty for None, a list ``;``-separated (as ``parse`` writes it)."""
    if isinstance(value, list):
        return ";".join("" if v is None else str(v) for v in value)
    return "" if value is None else value
