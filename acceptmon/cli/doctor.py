"""``acceptmon doctor FILE...``: known speculative-decoding failure patterns, per run, with causes and fixes.

Reading and the rule engine live in :mod:`acceptmon.diagnose`; this module parses the
arguments, loads grammars and rules, and prints text or JSON.
"""

from __future__ import annotations

import argparse
import sys

from acceptmon.cli.args import (
    Subcommands,
    grammar_option,
    grammars_for,
    jobs_option,
    positive,
    rules_option,
    year_option,
)
from acceptmon.cli.wiring import say_left_out, say_unrecognized
from acceptmon.diagnose.catalog import rules_json, rules_text
from acceptmon.diagnose.read import examine
from acceptmon.diagnose.report import to_json, to_text
from acceptmon.diagnose.rules import describe_signatures, load_rules
from acceptmon.errors import AcceptmonError
from acceptmon.inputs.files import check_path
from acceptmon.inputs.refs import unique_paths
from acceptmon.sinks.atomic import stdout_writes

HELP = """\
Check server logs for known speculative-decoding failure patterns (P1-P18 of the doctor
reference): per run, each finding's rule, severity (error, warning, info), evidence (line
numbers and values), likely cause, what to try, and sources. A run with no finding says so.

Launch lines, decode and prefill lines, and the launch/serving warnings the grammars know
(record kind `warning`) are read. Each speculative run also gets its break-even: with a
baseline (a run without speculation in the same file, or --baseline FILE[#N]) the speedup
S = G_spec/G_base over matched #running-req buckets of steady batches (#queue-req 0, no prefill
since the rank's previous batch) and the step-cost ratio R = L*G_base/G_spec, verdict
pays / marginal / loses; without one, the throughput a no-spec server must beat at the run's
usual batch, and the verify efficiency L/N next to B*N.

Each speculative chain-draft run also gets its draft positions' conditional acceptance (vLLM's
per-position rates, SGLang's request histograms, or its sweep's accept lengths) and its sweep's
predicted accept length and throughput per depth (measured, predicted or extrapolated), with a
recommended speculative_num_steps / num_speculative_tokens, or "do not speculate" against a baseline.

Each run reports the figures `runs` and `compare` give it (batches: stats lines with
acceptance; accept_len_mean over them; gen_throughput_per_rank and _total). The accept-length
rules judge a subset, reported apart as judged_batches and judged_accept_len_mean: a run's
first 2 batches are its warm-up (CUDA graphs, caches) and are left out.

Rules are data (rules/*.toml). --rules FILE adds rules or changes built-in ones: a [[rule]]
table with an existing id changes only what it gives (params merge key by key), e.g.
  [[rule]]
  id = "P18"
  params = { marginal_below = 1.10 }
A new rule gives id, title, signature, reads, severity, message, fix (sources, cannot_check,
params optional). Signature types [their params]:
"""


def add_parsers(sub: Subcommands) -> None:
    """The ``doctor`` command."""
    p = sub.add_parser(
        "doctor",
        help="known speculative-decoding failure patterns per run, with causes and fixes",
        description=HELP + describe_signatures(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "files", nargs="*", metavar="FILE", help="server logs ('-' for stdin; URLs too: s3://, gs://, https://)"
    )
    p.add_argument(
        "--list-rules",
        action="store_true",
        help="list the rules (with --rules files merged in): id, severity, signature, thresholds, meaning",
    )
    p.add_argument(
        "--baseline", metavar="FILE[#N]", help="a log (or run N of it) without speculation: the speedup reference"
    )
    p.add_argument(
        "--expected-accept-len",
        type=positive,
        metavar="L",
        help="accept length the draft should reach (its card or paper), for P17/P12",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="default: text")
    rules_option(p, "extra rule file: new rules or changed thresholds (repeatable)")
    grammar_option(p)
    year_option(p)
    jobs_option(p)
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.list_rules:
        return _list_rules(args)
    if not args.files:
        raise AcceptmonError("doctor: give at least one FILE, or --list-rules (see acceptmon doctor --help)")
    args.files = unique_paths(args.files)
    for path in args.files:
        check_path(path)
    rules = load_rules(args.rules)
    grammars = grammars_for(args)
    result, doctor = examine(
        args.files,
        grammars,
        rules,
        expected_accept_len=args.expected_accept_len,
        baseline=args.baseline,
        jobs=max(1, args.jobs),
    )
    findings, runs = result.findings, result.runs
    say_unrecognized(doctor.tally)
    figures = [s.figures for s in doctor.states()]
    say_left_out(sum(f.invalid_values for f in figures), sum(f.refused_configs for f in figures))
    with stdout_writes():  # first: a closed stdout has no isatty()
        print(to_json(findings, runs) if args.format == "json" else to_text(findings, runs, colour=sys.stdout.isatty()))
    return 0


def _list_rules(args: argparse.Namespace) -> int:
    rules = load_rules(args.rules)
    with stdout_writes():
        print(rules_json(rules) if args.format == "json" else rules_text(rules))
    return 0
