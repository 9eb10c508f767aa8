"""Fast templates, learned from the grammar files' samples and from the log: one per message head and key order.

Each sample line of a record grammar that reads ``key: value`` pairs is cut into its
envelope (only timestamp and rank groups, between literal brackets), its head (literal
text and the grammar's own groups, e.g. ``Decode batch [N], ``) and its body (the keys in
order). A known key may be replaced by any key that fills the same field the same way
(``cuda graph``/``npu graph``); an unknown key is any key the grammar does not know. The
template is then a whole-line ``re`` pattern whose captures are output text (see
:mod:`acceptmon.parse.fast.pieces`). A sample that needs the careful body reader (a value
with ', ' in it), a value kind without a fast form, or an envelope with other groups gives
no template: the general parser keeps those lines. A line of the log that the general parser read
gives a template the same way (:func:`template_from_line`); the lane keeps it only once the
template's row for that line is the parser's (:meth:`acceptmon.parse.fast.lane.FastLane.feed`).
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from acceptmon.parse.fast.pieces import ENVELOPE_KINDS, EXTRA_KEY, EXTRA_VALUE, UNITS, VALUE
from acceptmon.parse.grammar import Grammar, GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser

ACCEPT = b"accept"
"""The parser's grep-bait word: lines holding it that are not decode lines are counted as noise."""
Op = tuple[str, Any]
"""One step of a template: see :attr:`Template.ops`."""


@dataclass(frozen=True)
class Shape:
    """An envelope: literal ``prefix``, timestamp and rank (``inner``), literal ``suffix``."""

    prefix: bytes
    inner: bytes
    suffix: bytes


@dataclass
class Template:
    """One message template of one grammar: head, then keys in order."""

    grammar: Grammar
    kind: str
    head: bytes
    """Pattern of the head, with the grammar's own groups (e.g. the iteration number)."""
    groups: list[tuple[str | None, str]] = field(default_factory=list)
    """(record field or None for an unknown key's name or value, value kind) per group, in order."""
    fields: dict[str, int] = field(default_factory=dict)
    """Record field -> index in ``groups`` of the capture that gives its final value."""
    extras: list[tuple[int, int]] = field(default_factory=list)
    """(name, value) group indexes of unknown keys, in line order."""
    values: dict[str, Any] = field(default_factory=dict)
    """The sample's converted field values (to see what the kind's ``derive`` reads and writes)."""
    body: bytes = b""
    literal: bytes = b""
    """Every fixed byte of the template (for counting anchors and 'accept')."""
    head_groups: int = 0
    """How many of ``groups`` belong to the head."""
    ops: list[Op] = field(default_factory=list)
    """The head and body as steps, for the compiled matcher (:mod:`acceptmon.parse.fast.native`):
    ``("lit", text)``, ``("alt", texts)``, ``(value kind, group index)``, ``("extra", known keys)``."""

    @property
    def key(self) -> tuple[str, bytes, bytes]:
        return (self.grammar.name, self.head, self.body)

    def capture(self, name: str, kind: str, value: Any, found: set[str], fallback: bool = False) -> None:
        """One group of record field ``name`` (value kind ``kind``, converted ``value``): it gives the field's
        value unless the field is a fallback one that an earlier key already gave (``found``)."""
        if not (fallback and name in found):
            self.fields[name] = len(self.groups)
            self.values[name] = value
            found.add(name)
        self.groups.append((name, kind))


def build_templates(grammars: GrammarSet) -> tuple[Shape | None, list[Template]]:
    """The envelope shape most samples show, and the message templates of the servers whose own
    samples show that shape (a template is only ever matched behind its own server's envelope)."""
    shapes: dict[Shape, int] = {}
    servers: dict[Shape, set[str]] = {}
    templates: dict[tuple[str, bytes, bytes], Template] = {}
    kinds = {n: s.kind for e in grammars.envelopes for n, s in e.spec.fields.items()}
    for g in _fast_grammars(grammars):
        split = _split(grammars, g)
        others = {a.encode() for a in grammars.anchors if a != g.anchor}
        for sample in g.spec.samples:
            m = split.match(sample.line)
            if m is None:
                continue
            shape = _shape(g, m, kinds)
            if shape is not None:
                shapes[shape] = shapes.get(shape, 0) + 1
                servers.setdefault(shape, set()).add(g.spec.server)
            t = _template(g, m, others)
            if t is not None:
                templates.setdefault(t.key, t)
    if not shapes:
        return None, []
    shape = max(shapes, key=shapes.__getitem__)
    return shape, [t for t in templates.values() if t.grammar.spec.server in servers[shape]]


LINE_SECONDS = 0.05
"""Time a grammar pattern may take on one log line while a template is built from it (as the parser bounds it)."""


def template_from_line(grammars: GrammarSet, shape: Shape, line: str) -> Template | None:
    """A template built from one log line as :func:`build_templates` builds one from a sample, if the
    line's envelope is ``shape`` (the lane matches every template behind that one envelope)."""
    kinds = {n: s.kind for e in grammars.envelopes for n, s in e.spec.fields.items()}
    for g in _fast_grammars(grammars):
        if (g.anchor or "") not in line:
            continue
        split = _split(grammars, g)
        try:
            m = split.match(line, timeout=LINE_SECONDS)
        except TimeoutError:
            return None
        if m is None:
            continue
        if _shape(g, m, kinds) != shape:
            return None
        return _template(g, m, {a.encode() for a in grammars.anchors if a != g.anchor})
    return None


def _split(grammars: GrammarSet, g: Grammar) -> regex.Pattern[str]:
    """A line of ``g``'s server cut into its envelope and its message (``fastlane_message``)."""
    envelope = "|".join(f"(?:{e.spec.pattern})" for e in grammars.envelopes_of(g.spec.server))
    return regex.compile(f"(?:{envelope})(?P<fastlane_message>{g.spec.pattern})")


def _fast_grammars(grammars: GrammarSet) -> list[Grammar]:
    """Grammars of kinds that do not start runs, read pairs, and come first for their anchor."""
    first: dict[str, Grammar] = {}
    for g in grammars.records:
        first.setdefault(g.anchor or "", g)
    out = []
    for g in grammars.records:
        kind = KINDS.get(g.spec.record or "")
        if kind is None or kind.starts_run or g.spec.body != "pairs" or first.get(g.anchor or "") is not g:
            continue
        out.append(g)
    return out


def _shape(g: Grammar, m: regex.Match[str], kinds: dict[str, str]) -> Shape | None:
    """The envelope of a sample, if it is literal text around a timestamp and a rank group only."""
    end = m.start("fastlane_message")
    found: dict[str, tuple[int, int]] = {}
    for name in m.re.groupindex:
        start, stop = m.span(name)
        if name in ("fastlane_message", "body") or name in g.fields or start < 0 or start > end:
            continue
        if stop > start or name in g.envelope_fields:
            if name not in g.envelope_fields or kinds.get(name) not in ENVELOPE_KINDS:
                return None
            found[kinds[name]] = (start, stop)
    stamp, rank = found.get("timestamp"), found.get("rank")
    if stamp is None or rank is None or stamp[1] != rank[0] or len(found) != 2:
        return None
    prefix, suffix = m.string[: stamp[0]], m.string[rank[1] : end]
    if not prefix or not suffix or any(c.isalnum() for c in prefix + suffix):
        return None
    return Shape(prefix.encode(), ENVELOPE_KINDS["timestamp"] + ENVELOPE_KINDS["rank"], suffix.encode())


def _template(g: Grammar, m: regex.Match[str], others: set[bytes]) -> Template | None:
    start, body_start = m.start("fastlane_message"), m.start("body")
    t = Template(g, g.spec.record or "", b"")
    head, literal = read_head(g, m, start, body_start, t)
    if head is None:
        return None
    t.head, t.literal, t.head_groups = head, literal, len(t.groups)
    body = m.group("body")
    stripped = body.rstrip(", \t")
    if body[len(stripped) :] not in ("", ", ") or not _body(g, t, stripped.split(", ")):
        return None
    if (g.anchor or "").encode() not in t.literal or any(a in t.literal for a in others):
        return None
    return t


def read_head(g: Grammar, m: regex.Match[str], start: int, stop: int, t: Template) -> tuple[bytes | None, bytes]:
    """The head's pattern (literals and the grammar's groups) and its literal bytes."""
    spans = sorted((m.start(n), m.end(n), n) for n in g.fields if start <= m.start(n) < stop)
    out, literal, pos = [], [], start
    for s, e, name in spans:
        kind = g.spec.fields[name].kind
        if kind not in VALUE or not re.fullmatch(VALUE[kind], m.string[s:e].encode()):
            return None, b""
        text = m.string[pos:s].encode()
        out += [re.escape(text), VALUE[kind]]
        literal.append(text)
        t.ops += [("lit", text), (kind, len(t.groups))]
        t.fields[g.fields[name].field] = len(t.groups)
        t.values[g.fields[name].field] = g.fields[name](m.string[s:e])
        t.groups.append((g.fields[name].field, kind))
        pos = e
    text = m.string[pos:stop].encode()
    out.append(re.escape(text))
    literal.append(text)
    t.ops.append(("lit", text))
    return b"".join(out), b"\0".join(literal)


def _body(g: Grammar, t: Template, pieces: list[str]) -> bool:
    """Add the body's keys to ``t`` as the parser's pair reader would read them."""
    patterns, literal = [], []
    found: set[str] = set()
    ops: list[Op] = []
    for i, piece in enumerate(pieces):
        key, sep, value = piece.partition(": ")
        if not sep:
            return False  # a value holds ', ': the careful reader's case
        conv = g.keys.get(key)
        ops += [("lit", b", ")] if i else []
        if conv is None:
            if not re.fullmatch(EXTRA_VALUE, value.encode()) or not re.fullmatch(EXTRA_KEY, key.encode()):
                return False
            known = b"|".join(re.escape(k.encode()) for k in sorted(g.keys, key=len, reverse=True))
            patterns.append(rb"(?!(?:" + known + rb"): )" + EXTRA_KEY + rb": " + EXTRA_VALUE)
            ops.append(("extra", tuple(k.encode() for k in g.keys)))
            t.extras.append((len(t.groups), len(t.groups) + 1))
            t.groups += [(None, "str"), (None, "str")]
            continue
        spec = g.spec.keys[key]
        number, unit = value_unit(spec.kind, value)
        if number is None:
            return False
        names = aliases(g, key) if i else [key]
        patterns.append(b"(?:" + b"|".join(re.escape(n.encode()) for n in names) + b"): " + VALUE[spec.kind])
        ops += [("alt", tuple(n.encode() + b": " for n in names)), (spec.kind, len(t.groups))]
        if unit:
            patterns[-1] += re.escape(unit)
            ops.append(("lit", unit))
            literal.append(unit)
        literal.append(key.encode())
        t.capture(conv.field, spec.kind, conv(value), found, conv.fallback)
    t.body = b", ".join(patterns)
    t.ops += ops
    t.literal += b"\0" + b"\0".join(literal)
    return True


def value_unit(kind: str, value: str) -> tuple[bytes | None, bytes]:
    """A value's number and the unit after it (:data:`~acceptmon.parse.fast.pieces.UNITS`), or (None, b"")
    if the value has no fast form."""
    text = value.encode()
    if kind not in VALUE:
        return None, b""
    if re.fullmatch(VALUE[kind], text):
        return text, b""
    m = re.fullmatch(VALUE[kind] + b"(" + UNITS[kind] + b")", text) if kind in UNITS else None
    return (m.group(1), m.group(2)) if m else (None, b"")


def aliases(g: Grammar, key: str) -> list[str]:
    """Keys the pair reader treats exactly like ``key`` (same field, kind and fallback rule)."""
    spec = g.spec.keys[key]
    same = [
        k
        for k, s in g.spec.keys.items()
        if (s.field or k, s.kind, s.fallback) == (spec.field or key, spec.kind, spec.fallback)
    ]
    counts = {(k.count("accept"), k.count(g.anchor or "\0")) for k in same}
    return sorted(same, key=len, reverse=True) if len(counts) == 1 else [key]


def account(
    parser: Parser,
    templates: Sequence[Template],
    exempt: Sequence[bool],
    counts: Sequence[int],
    lines: int,
    accepts: int,
    base: int,
) -> None:
    """A scanned stretch's tallies into the parser (:meth:`~acceptmon.parse.parser.Parser.account`): the matches
    of each template by its kind, the lines, and the lines saying 'accept' less the matches that may (``exempt``);
    the parser's line number is ``base``, the stretch's end."""
    kinds: Counter[str] = Counter()
    for template, n in zip(templates, counts, strict=False):
        if n:
            kinds[template.kind] += n
    parser.line = base
    parser.account(kinds, lines, accepts - sum(n for n, e in zip(counts, exempt, strict=False) if e))


def anchors_held(templates: Sequence[Template], anchors: Sequence[bytes]) -> list[list[tuple[int, int]]]:
    """Per template: (anchor index, how often its literal text holds that anchor), for the anchors it holds."""
    return [[(j, c) for j, c in enumerate(t.literal.count(a) for a in anchors) if c] for t in templates]


def explained(held: Sequence[Sequence[tuple[int, int]]], hits: Sequence[int], found: Sequence[int]) -> bool:
    """Whether the anchors found in a stretch (``found[j]`` of anchor ``j``) are exactly those the literal text of
    its matches holds (``hits[i]`` matches of template ``i``, which holds what ``held[i]`` says)."""
    want = [0] * len(found)
    for i, n in enumerate(hits):
        if n:
            for j, c in held[i]:
                want[j] += n * c
    return all(f == w for f, w in zip(found, want, strict=True))
