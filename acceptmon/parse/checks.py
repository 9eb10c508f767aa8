"""Catastrophic backtracking: the time bound on every match, and the load-time check of grammar patterns.

Grammar patterns are data, and a user grammar can hold nested or overlapping repeats
(``(a|a)+$``, ``(\\w+\\s?)*$``) whose matching time explodes on a line that nearly matches.
Two defences, both here: the parser passes :data:`MATCH_TIMEOUT` to every match (a match
that runs out counts its line ``unrecognized``), and :func:`check_pattern` rejects such a
pattern when its grammar loads, by running it on adversarial inputs built from the
grammar's own sample lines (repeated, cut short, pumped with runs of their characters,
ended by a bad character). Nothing here reads files.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import regex

from acceptmon.parse.grammar import MATCH_TIMEOUT

if TYPE_CHECKING:
    from acceptmon.parse.grammar import Grammar

__all__ = ["MATCH_TIMEOUT", "check_grammar", "check_pattern"]

CHECK_TIMEOUT = 0.01
"""Seconds one adversarial input may take at load. A linear pattern takes well under a
millisecond on any of them; 10 ms on 4 kB is growth that a 1 MiB line would make minutes."""
PROBE_CHARS = 4096
"""Length an adversarial input is pumped to: enough to show exponential and quadratic growth."""
BAD_CHAR = "\ufffd"
"""Ends a near-miss input; what an undecodable byte becomes."""
GENERIC_RUNS = ("a", " ", "0", "a ", "[a] ", "a, ", "a: 1, ")
"""Inputs that reach an envelope whatever the samples hold."""


def check_pattern(
    pattern: regex.Pattern[str],
    samples: Sequence[str] | Mapping[str, str],
    *,
    timeout: float = CHECK_TIMEOUT,
    after: str | None = None,
) -> str | None:
    """Why ``pattern`` is too slow on inputs built from ``samples``, or None when it is fine.

    ``samples``: lines the pattern is meant for, as a list (named ``samples.N``) or by name.
    ``after``: pump only from this literal on in each sample that holds it (a record
    grammar's anchor: what precedes it is the envelopes', checked on their own).
    ``pattern`` is matched (``pattern.match``, as the parser does) against every input of
    :func:`probes`; an input that exceeds ``timeout`` twice in a row (the second run rules
    out a scheduling hiccup) condemns it.
    """
    for label, text in probes(samples, after=after):
        if _too_slow(pattern, text, timeout) and _too_slow(pattern, text, timeout):
            size = f"{len(text) / 1024:.0f} kB" if len(text) >= 1024 else f"{len(text)} character"
            return (
                f"pattern takes over {timeout:g} s on a {size} input built from {label}: nested or overlapping repeats?"
            )
    return None


def check_grammar(g: Grammar) -> tuple[str, str] | None:
    """``(key, reason)`` when a compiled grammar's pattern is catastrophic, else None.

    A record grammar is checked as the parser uses it: its full pattern (envelopes joined
    in front) and, when it has repeats, its ``starts_like``, on its samples and
    counter-samples. An envelope is checked followed by a message that never matches, the
    worst case the parser meets on a line that holds an anchor but no stats. Needs the
    compiled patterns, so call it once the :class:`~acceptmon.parse.grammar.GrammarSet` is built.
    """
    lines = {f"samples.{i}": s.line for i, s in enumerate(g.spec.samples)}
    lines.update((f"counter_samples.{i}", line) for i, line in enumerate(g.spec.counter_samples))
    checks: dict[str, regex.Pattern[str] | None] = {"pattern": g.regex}
    if g.spec.kind == "envelope":
        checks["pattern"] = regex.compile(f"(?:{g.spec.pattern})(?!)")
        lines = {label: _envelope_part(g.spec.pattern, line) for label, line in lines.items()}
    elif g.spec.starts_like is not None and any(q in g.spec.starts_like for q in "*+?{"):
        checks["starts_like"] = g.starts_like  # without repeats it backtracks no more than the envelopes
    for key, compiled in checks.items():
        reason = None if compiled is None else check_pattern(compiled, lines, after=g.spec.anchor)
        if reason is not None:
            return key, reason
    return None


def _envelope_part(envelope: str, line: str) -> str:
    """The part of a sample line an envelope can reach: what it matches and a little more."""
    try:
        m = regex.compile(envelope).match(line, timeout=CHECK_TIMEOUT)
    except TimeoutError:
        return line  # slow already: check_pattern will say so
    return line if m is None else line[: m.end() + 16]


def probes(samples: Sequence[str] | Mapping[str, str], *, after: str | None = None) -> Iterator[tuple[str, str]]:
    """Adversarial inputs, each with a label saying how it was built; none built twice.
    ``after``: as for :func:`check_pattern`."""
    named = samples if isinstance(samples, Mapping) else {f"samples.{i}": s for i, s in enumerate(samples)}
    seen: set[tuple[str, str, str]] = set()
    for label, head, run, tail, rest in _all_probes(named, after):
        key = (head, run, "(the rest)" if rest else tail)  # cheaper to hash than the 4 kB text
        if key not in seen:  # the rest only has to supply the literals: one sample's will do
            seen.add(key)
            yield label, _pump(head, run, tail + rest)


_Probe = tuple[str, str, str, str, str]
"""A label, and the text as head + run repeated to PROBE_CHARS + tail + the rest of a sample."""


def _all_probes(samples: Mapping[str, str], after: str | None) -> Iterator[_Probe]:
    for label, sample in samples.items():
        if sample:
            yield label, sample, "", "", ""
            yield from _sample_probes(label, sample, sample.find(after) if after else 0)
    for run in GENERIC_RUNS:
        yield f"{run!r} repeated", "", run, BAD_CHAR, ""


def _sample_probes(label: str, sample: str, start: int) -> Iterator[_Probe]:
    """The sample repeated; then the sample with a run of its own characters (see :func:`_runs`)
    pumped in at a few points from ``start`` on (see :func:`_cuts`), followed by a bad character,
    then either nothing or the rest of the sample (which holds the literals the pattern requires)."""
    yield f"{label} (repeated)", "", sample, BAD_CHAR, ""
    kinds = {ord(c): _kind(c) for c in dict.fromkeys(sample)}  # each character's kind, in order of appearance
    same: dict[str, str] = {}  # a kind's first four characters
    for char, kind in kinds.items():
        if len(same.get(kind, "")) < 4:
            same[kind] = same.get(kind, "") + chr(char)
    for cut in _cuts(sample[max(start, 0) :].translate(kinds), max(start, 0)):
        head, rest = sample[:cut], sample[cut:]
        for run in _runs(head, same[kinds[ord(head[-1])]]):
            at = f"after character {cut}" if rest else "at its end"
            where = f"{label} ({run!r} repeated {at}, then a bad character"
            yield f"{where})", head, run, BAD_CHAR, ""
            if rest:
                yield f"{where} and the rest)", head, run, BAD_CHAR, rest


def _cuts(kinds: str, start: int) -> list[int]:
    """``kinds``: the kind of each character of a sample from ``start`` on. The cuts from ``start``
    on: its end, the ends of the first and of the last run of digits and of letters, and of the
    first three and the last run of white space (a prefix's separators): a repeat is pumped best
    with what it consumes, where it consumes it."""
    cuts = {len(kinds)}
    for kind, first_runs in (("0", 1), ("a", 1), (" ", 3)):
        cuts.add(kinds.rfind(kind) + 1)
        cuts.update(m.end() for m in itertools.islice(re.finditer(f"{kind}+", kinds), first_runs))
    return sorted((start + cut for cut in cuts if cut), reverse=True)


def _runs(head: str, same: str) -> list[str]:
    """What to repeat after ``head``: its last character, its last word with the separator
    before it, and ``same``, a few of the sample's characters of the last one's kind (digits,
    letters, white space): ``regex`` takes a run of one repeated character faster than a mixed one."""
    start = max(head.rstrip().rfind(" "), len(head) - 16) + 1
    return list(dict.fromkeys(r for r in (head[-1:], head[start:], same) if r))


def _kind(char: str) -> str:
    if char.isdigit():
        return "0"
    if char.isalpha():
        return "a"
    return " " if char.isspace() else char


def _pump(head: str, run: str, tail: str) -> str:
    if not run:
        return head + tail
    return "".join((head, run * max(1, -(-(PROBE_CHARS - len(head)) // len(run))), tail))


def _too_slow(pattern: regex.Pattern[str], text: str, timeout: float) -> bool:
    try:
        pattern.match(text, timeout=timeout)
    except TimeoutError:
        return True
    return False
