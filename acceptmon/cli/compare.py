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

from acceptmon.cli.args import Subcommands, grammar_option, grammars_for, jobs_option, say_year, year_option
from acceptmon.cli.wiring import say_left_out, say_unrecognized
from acceptmon.display import requests_only, strict_json
from acceptmon.errors import InputError
from acceptmon.inputs.refs import parse_ref
from acceptmon.measure.compare import RESAMPLES, Comparison, Estimate, SideResult, compare
from acceptmon.parse.records import LaunchConfig
from acceptmon.pipeline.sides import read_side
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
    jobs_option(p)
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
    sides = [read_side(path, run_no, grammars, max(1, args.jobs)) for path, run_no in refs]
    for read in sides:
        say_left_out(read.invalid_values, read.refused_configs, f"{read.side.label}: ")
    say_year(grammars)
    for read in sides[:1] if refs[0][0] == refs[1][0] else sides:  # one file: said once
        say_unrecognized(read.tally)
    (a, a_runs), (b, b_runs) = ((read.side, read.configs) for read in sides)
    result = compare(a, b, resamples=args.resamples, seed=args.seed)
    if args.format == "json":
        text = strict_json(result.model_dump(mode="json"), indent=2)
    else:
        text = render_table(result, args.metric or METRICS, resamples=args.resamples, seed=args.seed)
        if "accept_rate" in (args.metric or METRICS):
            text += "".join(f"\n{line}" for note in _tree_notes(a_runs, b_runs) for line in _wrap(note))
        alone = [(tag, read.requests_only) for tag, read in zip("AB", sides, strict=True) if read.requests_only]
        notes = [f"{tag}: compared by its finished requests: {requests_only(n)}" for tag, n in alone]
        text += "".join(f"\n{line}" for note in notes for line in _wrap(note))
    with stdout_writes():
        print(text)
    return 0


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


def render_table(result: Comparison, metrics: Sequence[str] = METRICS, *, resamples: int, seed: int) -> str:
    """The comparison for people: sides, one row per metric, the verdict; fits 100 columns."""
    a, b, c = result.a, result.b, result.change
    lines = [f"{tag}  {s.label}  {s.spec}; {s.batches} {s.unit}" for tag, s in (("A", a), ("B", b))]
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
