"""``acceptmon runs``: one summary per server launch, and with ``--baseline`` each run's speedup and verdict."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acceptmon.cli.args import (
    Subcommands,
    files_argument,
    grammar_option,
    grammars_for,
    jobs_option,
    say_year,
    size,
    year_option,
)
from acceptmon.cli.hints import checked_io, looks_binary, no_rows_hint, progress_printer
from acceptmon.display import plural
from acceptmon.errors import InputError
from acceptmon.pipeline.batch import Job, run
from acceptmon.sinks.atomic import atomic_output, stdout_writes

if TYPE_CHECKING:
    from acceptmon.measure.summary import RunSummary

RUNS_HELP = """\
One row per server launch: its speculative config, accept length, rates and throughput.

draft_rate is accepted drafts over proposed drafts. With tree drafts (topk > 1, e.g. topk 8 and
64 draft tokens) verification accepts one path of the tree, so draft_rate is low by design: judge
such a run by accept_len (the table says so under it). A file without decode or spec lines gets a
hint on stderr (a binary file is called so) and exit code 0.

--baseline adds each speculative run's speedup S = G_spec/G_base against runs without speculation:
within shared #running-req buckets (exact up to 16, then ranges) of steady batches (#queue-req 0, no
prefill since the rank's previous line), weighted by batches, as compare's matched load and the
doctor's break-even; a 95 % interval from compare's block bootstrap; the doctor's verdict (its P18
thresholds: loses below 1.00, marginal below 1.03, else pays); best (the highest tok/s/rank) and tied
(a throughput interval overlapping the best's). Too few shared steady batches: too_few, said why.

The table's columns are one word each, and so are its cells (start is YYYY-MM-DDTHH:MM:SS; a
value that is not known is -), so awk and column -t read it."""


def add_parser(sub: Subcommands) -> None:
    runs = sub.add_parser(
        "runs",
        help="one summary per server launch (config, accept len, throughput)",
        description=RUNS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    files_argument(runs)
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
    jobs_option(runs)
    runs.add_argument(
        "--max-bytes", type=size, metavar="SIZE", help="read only the first SIZE bytes of each file (1M, 2G, 4096)"
    )
    runs.add_argument(
        "--baseline",
        nargs="?",
        const="",
        metavar="FILE[#N]",
        help="each speculative run's speedup S against a log (or run N of it) without speculation, with a 95 %% "
        "interval and a verdict, and the best run; without FILE, against the runs without speculation of the "
        "files listed",
    )
    runs.set_defaults(func=cmd_runs)


def cmd_runs(args: argparse.Namespace) -> int:
    from acceptmon.cli.wiring import say, say_left_out, say_unrecognized
    from acceptmon.measure.summary import with_unrecognized
    from acceptmon.pipeline.sweep import Both, RunSides, with_speedups
    from acceptmon.sinks.runs_table import StatsJob  # the run statistics: not on `parse`'s path

    args.files, args.output = checked_io(args.files, args.output)
    fmt = runs_output(args.output, args.format)
    grammars = grammars_for(args)
    job = StatsJob()
    sides = RunSides() if args.baseline is not None else None
    both: Job[Any] = job if sides is None else Both(job, sides)
    result = run(
        args.files, grammars, both, jobs=max(1, args.jobs), on_progress=progress_printer(), limit=args.max_bytes
    )
    summaries = with_unrecognized(job.stats.summaries(), result.tally.unrecognized_runs)
    if sides is not None:
        from acceptmon.diagnose.rules import load_rules, speedup_thresholds

        thresholds = speedup_thresholds(load_rules())
        summaries, found = with_speedups(summaries, sides, args.baseline, grammars, max(1, args.jobs), thresholds)
        if not found:
            say("no run without speculation in these files to measure a speedup against: give --baseline FILE")
    say_year(grammars, result.tally)
    if job.records or not any(map(looks_binary, args.files)):  # a binary file's "lines" are no format change
        say_unrecognized(result.tally)
    say_left_out(sum(s.invalid_values for s in summaries), sum(s.refused_configs for s in summaries))
    if not job.records:
        no_rows_hint(args.files)
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


def _model(summaries: list[RunSummary]) -> type[RunSummary]:
    """The summaries' model: :class:`RunSummary`, or with ``--baseline`` its sweep columns too."""
    from acceptmon.measure.summary import RunSummary

    return type(summaries[0]) if summaries else RunSummary


def _runs_text(summaries: list[RunSummary], fmt: str) -> str:
    import csv
    import io

    from acceptmon.display import strict_json
    from acceptmon.sinks.runs_table import render_runs_table

    if fmt == "json":
        return strict_json([s.model_dump(mode="json") for s in summaries], indent=2) + "\n"
    if fmt == "csv":
        text = io.StringIO()
        w = csv.writer(text)
        w.writerow(_model(summaries).model_fields)
        for s in summaries:
            w.writerow([_cell(v) for v in s.model_dump(mode="json").values()])
        return text.getvalue()
    return render_runs_table(summaries) + "\n"


def _print_runs(summaries: list[RunSummary], fmt: str, output: str | None = None) -> None:
    from acceptmon.sinks.runs_table import sweep_notes, tree_notes

    if output is not None:
        with atomic_output(output) as out:
            if fmt == "parquet":
                from acceptmon.sinks.parquet import write_models

                write_models(out, summaries, _model(summaries))
            else:
                out.write(_runs_text(summaries, fmt).encode())
        print(f"acceptmon: {plural(len(summaries), 'run')} -> {output}", file=sys.stderr)
        return
    with stdout_writes():
        sys.stdout.write(_runs_text(summaries, fmt))
    if fmt == "table":  # under the table, on stderr: the table stays one row per line for awk
        for note in [*tree_notes(summaries), *sweep_notes(summaries)]:
            print(f"acceptmon: {note}", file=sys.stderr)


def _cell(value: object) -> object:
    """A CSV cell: empty for None, a list ``;``-separated (as ``parse`` writes it)."""
    if isinstance(value, list):
        return ";".join("" if v is None else str(v) for v in value)
    return "" if value is None else value
