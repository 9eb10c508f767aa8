"""``acceptmon compare A B``: read two files or runs, compare them, print a table or JSON.

The statistics live in :mod:`acceptmon.measure.compare`; this module parses the ``FILE#N``
references, reads each side's decode lines in one place (:func:`read_side`), and
renders the result.
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acceptmon.cli.args import Subcommands
from acceptmon.errors import InputError
from acceptmon.inputs.refs import parse_ref
from acceptmon.measure.compare import RESAMPLES, Batch, Comparison, Estimate, Side, SideResult, compare
from acceptmon.measure.tokens import Intervals, counters
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars
from acceptmon.parse.records import LaunchConfig, PrefillStats, Record, SpecStats
from acceptmon.pipeline.batch import default_jobs, run
from acceptmon.sinks.atomic import stdout_writes

METRICS = ("accept_len", "accept_rate", "gen_throughput")
HELP = """\
Compare two logs or runs: means with 95 % confidence intervals, the change of B against A, and a
verdict. A and B are files (all their decode lines) or runs: server.log#2 is the second launch,
numbered as in `acceptmon runs`.

Confidence intervals: circular block bootstrap over consecutive batches (neighbouring decode lines
are correlated), blocks of ceil(n^(1/3)) batches for a side of n batches, --resamples replicates,
seeded by --seed so the output is reproducible. The throughput change CI bootstraps A and B
independently and takes the 2.5/97.5 percentiles of the per-replicate ratio of means.
Verdict: better/worse when that CI excludes 0, else no difference. Matched load: the throughput
ratio within shared #running-req buckets (exact up to 16, then ranges), steady batches only
(#queue-req 0, no prefill line since the rank's previous decode line), weighted by batches."""


def add_parsers(sub: Subcommands) -> None:
    """The ``compare`` command."""
    p = sub.add_parser(
        "compare",
        help="is B better than A? accept len and throughput with confidence intervals, and a verdict",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="A", help="the reference: FILE or FILE#RUN")
    p.add_argument("b", metavar="B", help="the candidate: FILE or FILE#RUN")
    p.add_argument("--format", choices=("table", "json"), default="table", help="default: table")
    p.add_argument(
        "--metric",
        action="append",
        choices=METRICS,
        metavar="METRIC",
        help=f"table rows to show (repeatable; default: {', '.join(METRICS)}); JSON has all",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument(
        "--resamples",
        type=_resamples,
        default=RESAMPLES,
        metavar="N",
        help=f"bootstrap replicates per side (default: {RESAMPLES})",
    )
    p.add_argument(
        "--grammar", action="append", default=[], type=Path, metavar="FILE", help="extra grammar file (repeatable)"
    )
    p.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    p.set_defaults(func=cmd_compare)
    # `-#2` is run 2 of stdin, not an option: argparse reads an argument that looks like a negative
    # number as a value (this parser has no such option), and this extends what looks like one.
    p._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-#\d+$")


def _resamples(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 100 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"use 100 to 1000000 resamples, not {value}")
    return value


def cmd_compare(args: argparse.Namespace) -> int:
    refs = [parse_ref(args.a), parse_ref(args.b)]
    if refs[0][0] == refs[1][0] == "-":
        raise InputError("-", "stdin can be one side of a comparison, not both")
    grammars = load_grammars(args.grammar)
    a, b = (read_side(path, run_no, grammars, max(1, args.jobs)) for path, run_no in refs)
    result = compare(a, b, resamples=args.resamples, seed=args.seed)
    if args.format == "json":
        text = json.dumps(result.model_dump(mode="json"), indent=2)
    else:
        text = render_table(result, args.metric or METRICS, resamples=args.resamples, seed=args.seed)
    with stdout_writes():
        print(text)
    return 0


class _SideJob:
    """Reduce records to compact tuples (in workers too); mark steady batches in file order.

    A batch is an SGLang decode line (acceptance and throughput at once), or a vLLM spec line with
    the throughput, running and waiting requests of the latest throughput line of the engine it
    follows (vLLM logs no prefill lines: steady means no waiting request). ``tail`` judges runs with
    the same batches.
    """

    records_wanted = frozenset({"decode", "prefill", "spec", "throughput"})

    def __init__(self, run_no: int | None) -> None:
        self.run_no = run_no
        self.batches: list[Batch] = []
        self.runs: dict[int, LaunchConfig | None] = {}
        self._after_prefill: dict[tuple[str, int, str], bool] = {}
        self._engine: dict[str, str] = {}
        """Per file: the engine of its latest throughput line (the engine the next spec line belongs to)."""
        self._load: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.intervals = Intervals()
        self.load_batches: list[Batch] = []
        """vLLM throughput lines as batches of their own, for a side with no spec line."""
        """Per (file, engine): (throughput, running, waiting) of its latest throughput line."""

    def chunk(self, records: list[Record]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        other_runs: set[int] = set()
        for r in records:
            key = (r.file, r.run, r.rank or "")
            v = r.__dict__.get
            if KINDS[r.kind].starts_run:
                out.append(("launch", r.run, getattr(r, "config", None), r.file))
            elif isinstance(r, PrefillStats):
                out.append(("prefill", key))
            elif r.kind == "throughput":
                mine = self.run_no is None or r.run == self.run_no
                out.append(("load", r.file, v("engine"), (v("gen_throughput"), v("running_req"), v("queue_req")), mine))
            elif KINDS[r.kind].table and (self.run_no is None or r.run == self.run_no):
                batch = (v("accept_len"), v("draft_accept_rate"), v("gen_throughput"), v("running_req"), v("queue_req"))
                since = counters(r) if isinstance(r, SpecStats) and r.cumulative else None  # collected in order
                out.append(("spec" if r.kind == "spec" else "decode", (*key[:2], v("engine") or key[2]), batch, since))
            elif KINDS[r.kind].table and r.run not in other_runs:
                other_runs.add(r.run)
                out.append(("other", r.run))  # a run that exists, for the error naming them
        return out

    def collect(self, part: list[tuple[Any, ...]]) -> None:
        for item in part:
            what = item[0]
            if what == "launch":
                self.runs[item[1]] = item[2]
                self.intervals.launch(item[3], item[1])
            elif what == "prefill":
                self._after_prefill[item[1]] = True
            elif what == "other":
                self.runs.setdefault(item[1], None)
            elif what == "load":
                self._take_load(*item[1:])
            elif item[3] is None:
                self._batch(what, item[1], item[2])
            else:  # vLLM v0: counts since server start; the batch is the interval the line closes
                self._batch(what, item[1], (*self.intervals.close(item[1], item[3]), *item[2][2:]))

    def _take_load(self, file: str, engine: str | None, load: tuple[Any, ...], mine: bool) -> None:
        if mine:  # a run without spec lines (no speculation) is compared on its throughput lines alone
            self.load_batches.append(Batch(None, None, load[0], load[1], load[2] == 0))
        engine = engine or self._engine.get(file, "")
        self._engine[file] = engine
        old = self._load.get((file, engine), (None, None, None))
        self._load[(file, engine)] = tuple(new if new is not None else was for new, was in zip(load, old, strict=True))

    def _batch(self, what: str, key: tuple[str, int, str], values: tuple[Any, ...]) -> None:
        length, rate, tput, running, queue = values
        self.runs.setdefault(key[1], None)
        if what == "spec":
            tput, running, queue = self._load.get((key[0], self._engine.get(key[0], "")), (None, None, None))
            self.batches.append(Batch(length, rate, tput, running, queue == 0))
            return
        steady = queue == 0 and not self._after_prefill.get(key, True)
        self._after_prefill[key] = False
        self.batches.append(Batch(length, rate, tput, running, steady))


def read_side(path: str, run_no: int | None, grammars: GrammarSet, jobs: int = 1) -> Side:
    """Every decode line of ``path`` (or of its run ``run_no``) as one side of a comparison."""
    job = _SideJob(run_no)
    run([path], grammars, job, jobs=jobs)
    name = Path(path).name if path != "-" else "stdin"
    label = name if run_no is None else f"{name}#{run_no}"
    if run_no is not None and run_no not in job.runs:
        there = f"runs there: {_ranges(sorted(job.runs))}" if job.runs else "it has no runs"
        raise InputError(f"{path}#{run_no}", f"no run {run_no} ({there})")
    batches = job.batches or job.load_batches
    if not batches:
        raise InputError(path if run_no is None else f"{path}#{run_no}", "no decode lines to compare")
    wanted = [job.runs[run_no]] if run_no is not None else list(job.runs.values())
    return Side(label=label, batches=batches, spec=_spec(wanted))


def _ranges(numbers: Sequence[int]) -> str:
    parts: list[list[int]] = []
    for n in numbers:
        if parts and n == parts[-1][-1] + 1:
            parts[-1].append(n)
        else:
            parts.append([n])
    return ", ".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts)


def _spec(configs: Sequence[LaunchConfig | None]) -> str:
    texts = {_spec_one(c) for c in configs}
    if len(texts) == 1:
        return texts.pop()
    return f"{len(configs)} runs, mixed configs"


def _spec_one(c: LaunchConfig | None) -> str:
    if c is None:
        return "config unknown: no launch line"
    if c.method is None:
        return "no speculation"
    parts = [
        f"{name} {v}"
        for name, v in (("steps", c.spec_num_steps), ("topk", c.spec_eagle_topk), ("draft", c.spec_num_draft_tokens))
        if v is not None
    ]
    return f"{c.method} {', '.join(parts)}".strip()


def render_table(result: Comparison, metrics: Sequence[str] = METRICS, *, resamples: int, seed: int) -> str:
    """The comparison for people: sides, one row per metric, the verdict; fits 100 columns."""
    a, b, c = result.a, result.b, result.change
    lines = [f"{tag}  {s.label}  {s.spec}; {s.batches} batches" for tag, s in (("A", a), ("B", b))]
    rows = [("", "A", "B", "B vs A")]
    if "accept_len" in metrics:
        diff = _signed(c.accept_len_diff, 2) + (f" ({_signed(c.accept_len_pct, 1)} %)" if c.accept_len_pct else "")
        rows.append(("accept len", _est(a.accept_len, 2), _est(b.accept_len, 2), diff))
        rows.append(("  p10 / p50 / p90", _pcts(a), _pcts(b), ""))
    if "accept_rate" in metrics:
        rows.append(
            ("accept rate (draft)", _est(a.accept_rate, 2), _est(b.accept_rate, 2), _signed(c.accept_rate_diff, 2))
        )
    if "gen_throughput" in metrics:
        ci = f" [{_signed(c.gen_throughput_pct_ci_low, 1)}, {_signed(c.gen_throughput_pct_ci_high, 1)}]"
        tput = f"{_signed(c.gen_throughput_pct, 1)} %{ci if c.gen_throughput_pct is not None else ''}"
        rows.append(("gen throughput tok/s", _est(a.gen_throughput, 1), _est(b.gen_throughput, 1), tput))
        m = c.matched
        at_load = f"{_signed(m.gen_throughput_pct, 1)} % ({len(m.buckets)} buckets)" if m.comparable else "too few"
        rows.append(("  at matched load", f"{m.a_batches} steady", f"{m.b_batches} steady", at_load))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines += ["", *("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in rows), ""]
    if "gen_throughput" in metrics and not c.matched.comparable:
        lines += _wrap(f"matched load: {c.matched.note}")
    lines += _wrap(f"verdict: {result.verdict}. {result.reason}")
    lines += _wrap(
        f"[brackets: 95 % CI; circular block bootstrap over batches, blocks of ceil(n^(1/3)) = "
        f"{a.block_length} (A) / {b.block_length} (B), {resamples} resamples, seed {seed}]"
    )
    return "\n".join(lines)


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 100, subsequent_indent="  ", break_on_hyphens=False)


def _signed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _est(e: Estimate, digits: int) -> str:
    if e.mean is None:
        return "-"
    return f"{e.mean:.{digits}f} [{e.ci_low:.{digits}f}, {e.ci_high:.{digits}f}]"


def _pcts(s: SideResult) -> str:
    e = s.accept_len
    if e.p50 is None:
        return "-"
    return f"{e.p10:.2f} / {e.p50:.2f} / {e.p90:.2f}"
