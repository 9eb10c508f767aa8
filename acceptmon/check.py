"""Check a grammar's own samples against the loaded grammar set.

Kept apart from :mod:`acceptmon.grammar` because it runs the parser, which
itself depends on grammars. A sample must be matched *by this grammar* (not by
another one that happens to come first) and yield every expected value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import regex

from acceptmon.errors import GrammarError
from acceptmon.grammar import Grammar, GrammarSet
from acceptmon.parse import Parser
from acceptmon.records import ServerLaunch


def check_samples(g: Grammar, gset: GrammarSet) -> None:
    """Raise GrammarError unless every sample and counter-sample of ``g`` behaves."""
    if g.spec.kind == "envelope":
        _check_envelope(g, gset)
        return
    for i, sample in enumerate(g.spec.samples):
        where = f"samples.{i}"
        assert g.regex is not None
        if g.regex.match(sample.line) is None:
            raise GrammarError(str(g.path), where, "sample line does not match the pattern")
        record = Parser(gset).parse_line(sample.line)
        if record is None:
            raise GrammarError(str(g.path), where, "sample line yields no record (a value did not convert)")
        if record.kind != g.spec.record:
            raise GrammarError(str(g.path), where, f"sample line yields a {record.kind} record")
        _compare(g, where, _values(record), sample.expect)
    for i, line in enumerate(g.spec.counter_samples):
        assert g.regex is not None
        if g.regex.match(line) is not None:
            raise GrammarError(str(g.path), f"counter_samples.{i}", "line must not match, but does")


def _check_envelope(g: Grammar, gset: GrammarSet) -> None:
    messages = "|".join(r.spec.starts_like for r in gset.records if r.spec.starts_like)
    pattern = regex.compile(f"(?:{g.spec.pattern})(?:{messages})")
    for i, sample in enumerate(g.spec.samples):
        m = pattern.match(sample.line)
        if m is None:
            raise GrammarError(str(g.path), f"samples.{i}", "sample line does not start with this envelope")
        got = {name: g.fields[name](raw) for name, raw in m.groupdict().items() if raw is not None}
        _compare(g, f"samples.{i}", got, sample.expect)
    for i, line in enumerate(g.spec.counter_samples):
        if pattern.match(line) is not None:
            raise GrammarError(str(g.path), f"counter_samples.{i}", "line must not match, but does")


def _values(record: Any) -> dict[str, Any]:
    values = dict(record.__dict__)
    if isinstance(record, ServerLaunch):
        values.update(record.config.__dict__)
    return values


def _compare(g: Grammar, where: str, got: dict[str, Any], expect: dict[str, Any]) -> None:
    for key, want in expect.items():
        have = got.get(key)
        if isinstance(have, datetime) and isinstance(want, str):
            have = have.isoformat()
        if have != want:
            raise GrammarError(str(g.path), f"{where}.expect.{key}", f"expected {want!r}, got {have!r}")
