"""``acceptmon compare A B``: read two files or runs, compare them, print a table or JSON.

The statistics live in :mod:`acceptmon.measure.compare`; this module parses the ``FILE#N``
references, reads each side's decode lines in one place (:func:`read_side`), and
renders the result.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acceptmon.cli.args import Subcommands, grammar_option, grammars_for, say_year, year_option
from acceptmon.cli.wiring import say_left_out, say_unrecognized
from acceptmon.display import strict_json
from acceptmon.errors import InputError
from acceptmon.inputs.refs import parse_ref
from acceptmon.measure.columns import Packed, pack, unpack
from acceptmon.measure.compare import RESAMPLES, Comparison, Estimate, Sample, Side, SideResult, compare
from acceptmon.measure.normalize import READS, Normalizer
from acceptmon.measure.summary import config_text
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, with_role
from acceptmon.parse.parser import Tally
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.pipeline.batch import default_jobs, run
from acceptmon.sinks.atomic import stdout_writes
from acceptmon.sinks.runs_table import tree_note

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
(#queue-req 0, no prefill line since the rank's previous decode line), weighted by batches.
A side with tree drafts (topk > 1) gets a line under the table: verification accepts one path of
the tree, so its accept rate (draft) is low by design; judge it by accept len."""


def add_parsers(sub: Subcommands) -> None:
    """The ``compare`` command."""
    p = sub.add_parser(
        "compare",
        help="is B better than A? accept len and throughput with confidence intervals, and a verdict",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="A", help="the reference: FILE or FILE#RUN (a URL too)")
    p.add_argument("b", metavar="B", help="the candidate: FILE or FILE#RUN (a URL too)")
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
    grammar_option(p)
    year_option(p)
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
    grammars = grammars_for(args)
    (a, a_runs, a_tally), (b, b_runs, b_tally) = (
        _read_side(path, run_no, grammars, max(1, args.jobs)) for path, run_no in refs
    )
    say_year(grammars)
    for tally in [a_tally] if refs[0][0] == refs[1][0] else [a_tally, b_tally]:  # one file: said once
        say_unrecognized(tally)
    result = compare(a, b, resamples=args.resamples, seed=args.seed)
    if args.format == "json":
        text = strict_json(result.model_dump(mode="json"), indent=2)
    else:
        text = render_table(result, args.metric or METRICS, resamples=args.resamples, seed=args.seed)
        if "accept_rate" in (args.metric or METRICS):
            text += "".join(f"\n{line}" for note in _tree_notes(a_runs, b_runs) for line in _wrap(note))
    with stdout_writes():
        print(text)
    return 0


class _SideJob:
    """One side's records (parsed in workers too), normalized in file order (:mod:`acceptmon.measure.normalize`).

    A batch is a record with the ``acceptance`` role: an SGLang decode line (acceptance and
    throughput at once), or a vLLM spec line with the load of its engine's latest throughput
    line. The throughput is the mean of the load lines, as ``runs`` reports it. ``tail`` and
    ``doctor`` read the same batches.
    """

    def __init__(self, run_no: int | None) -> None:
        self.run_no = run_no
        self.records_wanted = with_role("acceptance") | with_role("load") | with_role("prefill")
        self.normalizer = Normalizer()
        self.sample = Sample()
        self.runs: dict[int, LaunchConfig | None] = {}
        self.sources: dict[str, tuple[str, str]] = {}
        self.invalid_values = self.refused_configs = 0
        """Impossible values and refused launch configs the normalize step left out."""

    def chunk(self, records: list[Record]) -> tuple[Packed, set[int]]:
        """The side's records as what the normalizer reads (packed: :func:`~acceptmon.measure.columns.pack`),
        and the numbers of the other runs with stats lines."""
        if self.run_no is None:
            return pack(records, READS), set()
        mine = [r for r in records if r.run == self.run_no or KINDS[r.kind].starts_run]
        return pack(mine, READS), {r.run for r in records if r.run != self.run_no}

    def collect(self, part: tuple[Packed, set[int]]) -> None:
        mine, others = part
        for number in others:
            self.runs.setdefault(number, None)
        for fact in map(self.normalizer.fact, unpack(mine, READS)):
            r = fact.record
            if self.run_no is None or r.run == self.run_no:
                self.invalid_values += fact.invalid
                self.refused_configs += bool(fact.refused)
            if KINDS[r.kind].starts_run:
                self.runs[r.run] = getattr(r, "config", None)
                continue
            b, load = fact.batch, fact.load
            if b is None and load is None:
                continue
            self.runs.setdefault(r.run, None)
            if self.run_no is not None and r.run != self.run_no:
                continue
            self.sample.add(fact)
            self.sources.setdefault(getattr(r, "source", ""), (getattr(r, "pod", ""), getattr(r, "container", "")))

    def source_of(self) -> dict[str, Any]:
        """The side's source (one source, or several joined by commas)."""
        names = sorted(self.sources)
        one = self.sources[names[0]] if len(names) == 1 else ("", "")
        return {"source": ",".join(names), "pod": one[0], "container": one[1]}


def read_side(path: str, run_no: int | None, grammars: GrammarSet, jobs: int = 1) -> Side:
    """Every batch of ``path`` (or of its run ``run_no``) as one side of a comparison."""
    return _read_side(path, run_no, grammars, jobs)[0]


def _unrecognized(tally: Tally, run_no: int | None) -> int:
    """The side's lines no grammar reads: the file's, or its run's."""
    return sum(n for (_, _, number), n in tally.unrecognized_runs.items() if run_no is None or number == run_no)


def _tree_notes(a: Sequence[LaunchConfig | None], b: Sequence[LaunchConfig | None]) -> list[str]:
    """Why a tree draft's (topk > 1) accept rate (draft) is low, once per side and config."""
    notes = []
    for tag, configs in (("A", a), ("B", b)):
        trees = dict.fromkeys(
            (c.spec_eagle_topk, c.spec_num_draft_tokens)
            for c in configs
            if c is not None and c.method is not None and c.spec_eagle_topk is not None and c.spec_eagle_topk > 1
        )
        notes += [tree_note(tag, topk, draft, "accept rate (draft)", "accept len") for topk, draft in trees]
    return notes


def _read_side(
    path: str, run_no: int | None, grammars: GrammarSet, jobs: int = 1
) -> tuple[Side, list[LaunchConfig | None], Tally]:
    """The side, the launch configs of the runs it holds, and the file's tally."""
    job = _SideJob(run_no)
    tally = run([path], grammars, job, jobs=jobs).tally
    name = Path(path).name if path != "-" else "stdin"
    label = name if run_no is None else f"{name}#{run_no}"
    if run_no is not None and run_no not in job.runs:
        there = f"runs there: {_ranges(sorted(job.runs))}" if job.runs else "it has no runs"
        raise InputError(f"{path}#{run_no}", f"no run {run_no} ({there})")
    if not len(job.sample):
        raise InputError(path if run_no is None else f"{path}#{run_no}", "no decode lines to compare")
    say_left_out(job.invalid_values, job.refused_configs, f"{label}: ")
    wanted = [job.runs[run_no]] if run_no is not None else list(job.runs.values())
    extra = {**job.source_of(), "unrecognized": _unrecognized(tally, run_no)}
    return job.sample.side(label, _spec(wanted), extra, copy=False), wanted, tally


def _ranges(numbers: Sequence[int]) -> str:
    parts: list[list[int]] = []
    for n in numbers:
        if parts and n == parts[-1][-1] + 1:
            parts[-1].append(n)
        else:
            parts.append([n])
    return ", ".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts)


def _spec(configs: Sequence[LaunchConfig | None]) -> str:
    texts = {config_text(c) for c in configs}
    if len(texts) == 1:
        return texts.pop()
    return f"{len(configs)} runs, mixed configs"


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
        rows.append(("gen throughput tok/s/rank", _est(a.gen_throughput, 1), _est(b.gen_throughput, 1), tput))
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
