"""The batch commands: ``parse`` (rows), ``runs`` (one summary per launch) and ``grammars``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acceptmon.cli.args import Subcommands, grammar_option, grammars_for, say_year, size, year_option
from acceptmon.display import line_counts, plural, requests_only
from acceptmon.errors import InputError
from acceptmon.inputs.files import check_path, is_stream, open_log
from acceptmon.inputs.refs import unique_paths
from acceptmon.inputs.remote import is_url, local_names
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars, read_grammar_file
from acceptmon.parse.parser import Tally
from acceptmon.pipeline.batch import Job, Progress, default_jobs, run
from acceptmon.sinks.atomic import atomic_output, check_output, output_path, stdout_writes
from acceptmon.sinks.table import FORMATS, TableJob, Writer, check_parquet, columns, infer_format, row_format

if TYPE_CHECKING:
    from acceptmon.measure.summary import RunSummary
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
RUNS_HELP = """\
One row per server launch: its speculative config, accept length, rates and throughput.

draft_rate is accepted drafts over proposed drafts. With tree drafts (topk > 1, e.g. topk 8 and
64 draft tokens) verification accepts one path of the tree, so draft_rate is low by design: judge
such a run by accept_len (the table says so under it). A file without decode or spec lines gets a
hint on stderr (a binary file is called so) and exit code 0.

The table's columns are one word each, and so are its cells (start is YYYY-MM-DDTHH:MM:SS; a
value that is not known is -), so awk and column -t read it."""


def add_parsers(sub: Subcommands) -> None:
    """The ``parse``, ``runs`` and ``grammars`` commands."""
    parse = sub.add_parser(
        "parse",
        help="convert logs to one CSV/JSONL row per decode-batch line",
        description=PARSE_HELP.format(columns=", ".join(columns())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="log files, .gz files, - for stdin, or URLs (s3://, gs://, https://; quote a glob in one)",
    )
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
    parse.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
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

    runs = sub.add_parser(
        "runs",
        help="one summary per server launch (config, accept len, throughput)",
        description=RUNS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runs.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="log files, .gz files, - for stdin, or URLs (s3://, gs://, https://; quote a glob in one)",
    )
    runs.add_argument("--format", choices=("table", "json", "csv"), default="table", help="default: table")
    runs.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the runs to FILE instead of stdout, in the format of its suffix: .csv, .json or .parquet "
        "(Parquet: typed columns; pyarrow, pip install 'acceptmon[parquet]')",
    )
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
    args.files = unique_paths(args.files)
    for f in args.files:
        check_path(f)
    args.output = output_path(args.output)
    _local_output(args.output)
    check_output(args.output, local_names(args.files))
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
            # the fast lane writes the default table's rows as text; Parquet's are typed values
            fast = None if args.kind or fmt == "parquet" else row_format(fmt)
            jobs = max(1, args.jobs)
            result = run(
                args.files,
                grammars,
                cast("Job[Any]", job),
                jobs=jobs,
                on_progress=_progress_printer(),
                fast=fast,
                as_read=streams,
            )
            job.finish()
    except KeyboardInterrupt:
        where = f"; nothing written to {args.output}" if args.output else ""
        print(f"\nacceptmon: interrupted{where}", file=sys.stderr)
        return 130
    _summary(result.tally, job.records, time.monotonic() - started, args.output, args.kind)
    say_year(grammars, result.tally)
    if not job.records:
        _no_rows_hint(args.files, args.kind, result.tally)
    return 0


def _local_output(output: str | None) -> None:
    """``-o`` names a local file: a URL is read, never written."""
    if output is not None and is_url(output):
        raise InputError(output, "-o writes a local file; URLs are read, not written (copy the file up afterwards)")


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
        _no_rows_hint(args.files, args.kind, done.tally)
    return 0


def _parquet_job(out: Writer, kinds: tuple[RecordKind, ...] | None) -> ParquetJob:
    from acceptmon.sinks.parquet import ParquetJob

    return ParquetJob(out, kinds)


def cmd_runs(args: argparse.Namespace) -> int:
    from acceptmon.cli.wiring import say_left_out, say_unrecognized
    from acceptmon.measure.summary import with_unrecognized
    from acceptmon.sinks.runs_table import StatsJob  # the run statistics: not on `parse`'s path

    args.files = unique_paths(args.files)
    for f in args.files:
        check_path(f)
    args.output = output_path(args.output)
    _local_output(args.output)
    check_output(args.output, local_names(args.files))
    fmt = runs_output(args.output, args.format)
    grammars = grammars_for(args)
    job = StatsJob()
    result = run(
        args.files, grammars, job, jobs=max(1, args.jobs), on_progress=_progress_printer(), limit=args.max_bytes
    )
    summaries = with_unrecognized(job.stats.summaries(), result.tally.unrecognized_runs)
    say_year(grammars, result.tally)
    if job.records or not any(map(looks_binary, args.files)):  # a binary file's "lines" are no format change
        say_unrecognized(result.tally)
    say_left_out(sum(s.invalid_values for s in summaries), sum(s.refused_configs for s in summaries))
    if not job.records:
        _no_rows_hint(args.files)
    _print_runs(summaries, fmt, args.output)
    return 0


RUNS_SUFFIXES = {".csv": "csv", ".json": "json", ".parquet": "parquet"}
"""What ``runs -o FILE`` writes, by the file's suffix."""


def runs_output(output: str | None, given: str) -> str:
    """The format of ``runs``' output: ``--format`` on stdout, else ``-o``'s suffix (checked before reading)."""
    if output is None:
        return given
    fmt = RUNS_SUFFIXES.get(Path(output).suffix.lower())
    if fmt is None:
        raise InputError(output, f"runs -o writes {', '.join(RUNS_SUFFIXES)}: name the file with one of them")
    if given not in ("table", fmt):
        raise InputError(output, f"--format {given}, but the suffix means {fmt}: leave out --format")
    if fmt == "parquet":
        from acceptmon.sinks.parquet import pyarrow_module

        pyarrow_module()
    return fmt


def _runs_text(summaries: list[RunSummary], fmt: str) -> str:
    import csv
    import io

    from acceptmon.display import strict_json
    from acceptmon.measure.summary import RunSummary
    from acceptmon.sinks.runs_table import render_runs_table

    if fmt == "json":
        return strict_json([s.model_dump(mode="json") for s in summaries], indent=2) + "\n"
    if fmt == "csv":
        text = io.StringIO()
        w = csv.writer(text)
        w.writerow(RunSummary.model_fields)
        for s in summaries:
            w.writerow([_cell(v) for v in s.model_dump(mode="json").values()])
        return text.getvalue()
    return render_runs_table(summaries) + "\n"


def _print_runs(summaries: list[RunSummary], fmt: str, output: str | None = None) -> None:
    from acceptmon.measure.summary import RunSummary
    from acceptmon.sinks.runs_table import tree_notes

    if output is not None:
        with atomic_output(output) as out:
            if fmt == "parquet":
                from acceptmon.sinks.parquet import write_models

                write_models(out, summaries, RunSummary)
            else:
                out.write(_runs_text(summaries, fmt).encode())
        print(f"acceptmon: {plural(len(summaries), 'run')} -> {output}", file=sys.stderr)
        return
    with stdout_writes():
        sys.stdout.write(_runs_text(summaries, fmt))
    if fmt == "table":  # under the table, on stderr: the table stays one row per line for awk
        for note in tree_notes(summaries):
            print(f"acceptmon: {note}", file=sys.stderr)


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


def _no_rows_hint(files: list[str], kind: str | None = None, tally: Tally | None = None) -> None:
    what = f"{kind} lines" if kind else "decode or spec lines"
    requests = tally.kinds.get("request", 0) if tally is not None and kind is None else 0
    if requests:  # a server log, of finished requests only: say what it lacks, not "is this a server log?"
        named = ", ".join(files)
        print(f"acceptmon: {named}: {requests_only(requests)}; --kind request writes them as rows", file=sys.stderr)
        return
    for f in files:
        why = looks_binary(f)
        if why:
            print(f"acceptmon: {f} looks binary ({why}), not a text log: no {what} found", file=sys.stderr)
        else:
            print(f"acceptmon: no {what} found in {f}: is this an SGLang or vLLM server log?", file=sys.stderr)


SNIFF_BYTES = 64 << 10
"""How much of a file's (decompressed) start :func:`looks_binary` reads."""


def looks_binary(path: str) -> str | None:
    """Why the start of ``path`` looks like no text log (NUL bytes, mostly non-text), else None (stdin: None)."""
    if path == "-":
        return None
    try:
        with open_log(path) as f:
            head = f.read(SNIFF_BYTES)
    except (OSError, InputError):
        return None
    if not head:
        return None
    if b"\0" in head:
        return f"NUL bytes in its first {_kib(len(head))}"
    text = head.decode("utf-8", errors="replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r\x1b\f\v") or c == "\x7f")
    if odd * 10 > len(text):
        return f"{100 * odd // len(text)} % non-text characters in its first {_kib(len(head))}"
    return None


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


def _cell(value: object) -> object:
    """A CSV cell: empty for None, a list ``;``-separated (as ``parse`` writes it)."""
    if isinstance(value, list):
        return ";".join("" if v is None else str(v) for v in value)
    return "" if value is None else value
