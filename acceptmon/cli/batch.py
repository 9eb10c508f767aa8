"""The batch commands: ``parse`` (rows), ``runs`` (one summary per launch) and ``grammars``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acceptmon.cli.args import (
    Subcommands,
    files_argument,
    grammar_option,
    grammars_for,
    jobs_option,
    say_year,
    year_option,
)
from acceptmon.cli.hints import checked_io, no_rows_hint, progress_printer
from acceptmon.display import line_counts, plural
from acceptmon.errors import InputError
from acceptmon.inputs.files import check_path, is_stream
from acceptmon.inputs.refs import unique_paths
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars, read_grammar_file
from acceptmon.parse.parser import Tally
from acceptmon.pipeline.batch import Job, run
from acceptmon.sinks.atomic import atomic_output, output_path, stdout_writes
from acceptmon.sinks.table import FORMATS, TableJob, Writer, check_parquet, columns, infer_format, row_format

if TYPE_CHECKING:
    from acceptmon.parse.kinds import RecordKind
    from acceptmon.sinks.parquet import ParquetJob

PARSE_HELP = """\
One row per decode-batch line (SGLang) and per spec and throughput line (vLLM); other record kinds
are counted, not written (--kind writes one of them instead).

Acceptance columns:
  accept_len         tokens per verify step per request, the bonus token included (1.0 means no
                     draft token was ever accepted). SGLang: as logged. vLLM: with the bonus token
                     whatever the version logs; accept_len_source says logged or derived
  accept_rate        SGLang: exactly as logged; its definition changed across server versions, so
                     do not compare it across versions (empty where the version logs none).
                     vLLM: recomputed as accepted / drafted tokens of the line, a 0-1 fraction with
                     6 decimals, not the rounded percent it logs (a logged 20.5 % of 45 accepted /
                     220 drafted tokens is 0.204545)
  draft_accept_rate  accepted drafts over proposed drafts, one definition everywhere. SGLang:
                     (accept_len - 1) / (draft tokens - 1), needs the launch line for the draft
                     token count; vLLM: accepted / drafted, the same value as accept_rate
Formats: csv; jsonl (JSON Lines: one object per line, as jq and pandas' lines=True read it); json
(one JSON array of the same objects, as json.load reads it). The format is --format, else -o's
suffix (.csv, .jsonl or .ndjson, .json, each optionally + .gz), else CSV. When --format and the
suffix name different formats, nothing is read or written: exit 2, naming both.
Columns, in order: {columns}
The summary on stderr counts every line by kind. A file without a row gets a hint on stderr (a file
that looks binary, NUL bytes or mostly non-text in its first 64 KiB, is called so); the exit code
is still 0, as for any log without decode lines: an empty table is an answer."""


def add_parsers(sub: Subcommands) -> None:
    """The ``parse``, ``runs`` and ``grammars`` commands."""
    parse = sub.add_parser(
        "parse",
        help="convert logs to one CSV/JSONL row per decode-batch line",
        description=PARSE_HELP.format(columns=", ".join(columns())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    files_argument(parse, "*")
    parse.add_argument(
        "-o",
        "--output",
        help="output file: .csv, .jsonl (or .ndjson), .json (a JSON array), each optionally .gz "
        "(default, or -: stdout)",
    )
    parse.add_argument(
        "--format",
        choices=FORMATS,
        help="csv, jsonl (one object per line) or json (one array); default: from -o's suffix, else csv. "
        "It must agree with a suffix that names a format",
    )
    rows = sorted(k for k, v in KINDS.items() if not v.starts_run)
    parse.add_argument(
        "--kind",
        choices=rows,
        metavar="KIND",
        help=f"rows of this record kind instead of decode batches: {', '.join(rows)}",
    )
    grammar_option(parse)
    year_option(parse)
    jobs_option(parse)
    parse.add_argument(
        "--ray",
        nargs="?",
        const="",
        action=_RayAddress,
        metavar="ADDRESS",
        help="parse as tasks on a Ray cluster (ADDRESS: auto, ray://HOST:PORT, HOST:PORT; default: RAY_ADDRESS or a "
        "new local one), writing -o DIR as a Parquet dataset, one file per byte range (pip install 'acceptmon[ray]')",
    )
    parse.set_defaults(func=cmd_parse, parser=parse)

    from acceptmon.cli import runs

    runs.add_parser(sub)

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


class _RayAddress(argparse.Action):
    """``--ray [ADDRESS]``: a word that is no Ray address (``auto``, ``local``, ``ray://…``, ``HOST:PORT``) or
    names a file is the first input (``parse --ray a.log -o DIR``)."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: Any, opt: Any = None) -> None:
        import os
        import re

        if value and (os.path.exists(value) or not re.fullmatch(r"auto|local|ray://\S+|[\w.-]+:\d+", value)):
            ns.ray_inputs = [*getattr(ns, "ray_inputs", []), value]
            value = ""
        ns.ray = value


def cmd_parse(args: argparse.Namespace) -> int:
    args.files = [*getattr(args, "ray_inputs", []), *args.files]
    if not args.files:
        args.parser.error("the following arguments are required: FILE")
    if args.ray is not None:
        return _parse_on_ray(args)
    args.files, args.output = checked_io(args.files, args.output)
    grammars = grammars_for(args)
    fmt = infer_format(args.output, args.format)
    kinds = (KINDS[args.kind],) if args.kind else None
    if fmt == "parquet":
        check_parquet(args.output)
        from acceptmon.sinks.parquet import pyarrow_module

        pyarrow_module()  # installed, or one line saying how, before anything is read
    started = time.monotonic()
    try:
        streams = any(map(is_stream, args.files))  # read as they come: a row is written when its line is
        with atomic_output(args.output, flush=streams) as out:
            job: TableJob | ParquetJob = TableJob(fmt, out, kinds) if fmt != "parquet" else _parquet_job(out, kinds)
            # the fast lane writes the table's rows as text (--kind's too); Parquet's are typed values
            fast = None if fmt == "parquet" else row_format(fmt)
            jobs = max(1, args.jobs)
            result = run(
                args.files,
                grammars,
                cast("Job[Any]", job),
                jobs=jobs,
                on_progress=progress_printer(),
                fast=fast,
                as_read=streams,
                note=lambda text: print(f"acceptmon: {text}", file=sys.stderr, flush=True),
            )
            job.finish()
    except KeyboardInterrupt:
        where = f"; nothing written to {args.output}" if args.output else ""
        print(f"\nacceptmon: interrupted{where}", file=sys.stderr)
        return 130
    _summary(result.tally, job.records, time.monotonic() - started, args.output, args.kind)
    say_year(grammars, result.tally)
    if not job.records:
        no_rows_hint(args.files, args.kind, result.tally)
    return 0


def _parse_on_ray(args: argparse.Namespace) -> int:
    """``parse --ray``: the rows as a Parquet dataset in ``-o DIR``, written by Ray tasks (one file per range)."""
    from functools import partial

    from acceptmon.pipeline import distributed
    from acceptmon.sinks.parquet import pyarrow_module, write_part

    args.files = unique_paths(args.files)
    out = output_path(args.output)
    if out is None or args.format not in (None, "parquet"):
        raise InputError("--ray", "writes a Parquet dataset: name its directory with -o DIR (and no other --format)")
    distributed.ray_module()
    pyarrow_module()
    distributed.check_inputs(args.files)
    grammars = grammars_for(args)
    kinds = (KINDS[args.kind],) if args.kind else None
    started = time.monotonic()
    joined = distributed.connect(args.ray)
    try:
        before = partial(distributed.prepare_directory, out)
        done = distributed.run(args.files, grammars, partial(write_part, out, kinds), before=before)
    finally:
        if joined:
            distributed.ray_module().shutdown()
    rows = sum(n for _, n in done.outputs)
    where = f"{out} ({plural(len(done.outputs), 'Parquet file')})"
    _summary(done.tally, rows, time.monotonic() - started, where, args.kind)
    say_year(grammars, done.tally)
    if not rows:
        no_rows_hint(args.files, args.kind, done.tally)
    return 0


def _parquet_job(out: Writer, kinds: tuple[RecordKind, ...] | None) -> ParquetJob:
    from acceptmon.sinks.parquet import ParquetJob

    return ParquetJob(out, kinds)


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


def _summary(tally: Tally, records: int, seconds: float, output: str | None, kind: str | None = None) -> None:
    """The one stderr line of ``parse``: lines by kind, rows written, and what ``grep accept`` would have
    counted wrongly; the same wording for every server (``serve``'s stop line counts lines the same way)."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    rows = plural(records, f"{kind} row" if kind else "row")
    noise = tally.accept_noise
    grep = (
        f"{plural(noise, 'line')} {'mentions' if noise == 1 else 'mention'} 'accept' but "
        f"{'is not an acceptance line' if noise == 1 else 'are not acceptance lines'} (grep accept would count "
        f"{'it' if noise == 1 else 'them'})"
    )
    print(
        f"acceptmon: {line_counts(tally.kinds)} ({seconds:.2f}s); {rows}{' -> ' + output if output else ''}; {grep}",
        file=sys.stderr,
    )
    from acceptmon.cli.wiring import say_unrecognized

    say_unrecognized(tally, count=False)  # the line above counts them
