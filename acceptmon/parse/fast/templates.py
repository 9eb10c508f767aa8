"""Fast templates, learned from the grammar files' samples and from the log: one per message head and key order.

Each sample line of a record grammar that reads ``key: value`` pairs is cut into its
envelope (only timestamp and rank groups, between literal brackets), its head (literal
text and the grammar's own groups, e.g. ``Decode batch [N], ``) and its body (the keys in
order). A known key may be replaced by any key that fills the same field the same way
(``cuda graph``/``npu graph``); an unknown key is any key the grammar does not know. The
template is then a whole-line ``re`` pattern whose captures are output text (see
:mod:`acceptmon.parse.fast.pieces`). A value with ', ' in it (``#token: full=8192, swa=4096``)
is read as the careful body reader reads it: the pieces it joins, the number its key's own value
pattern finds captured, the rest literal with loose numbers, every unknown key literal (only a
key-like key starts a pair there); the key's converter is tried on that shape first
(:func:`joined_value`). A value kind without a fast form, or an envelope with other groups, gives
no template: the general parser keeps those lines. A line of the log that the general parser read
gives a template the same way (:func:`template_from_line`); the lane keeps it only once the
template's row for that line is the parser's (:meth:`acceptmon.parse.fast.lane.FastLane.feed`).
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import regex

from acceptmon.parse.fast.pieces import ENVELOPE_KINDS, EXTRA_KEY, EXTRA_VALUE, LOOSE, STR, UNITS, VALUE
from acceptmon.parse.grammar import Converter, Grammar, GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.pairs import keylike
from acceptmon.parse.parser import Parser
from acceptmon.parse.streams import NONE
from acceptmon.parse.streams import split as split_stream
from acceptmon.parse.values import VALUE_KINDS

ACCEPT = b"accept"
"""The parser's grep-bait word: lines holding it that are not decode lines are counted as noise."""
Op = tuple[str, Any]
"""One step of a template: see :attr:`Template.ops`."""


@dataclass(frozen=True)
class Shape:
    """An envelope: literal ``prefix``, timestamp and rank (``inner``), literal ``suffix``; before the prefix, one of
    the ``leads`` or none."""

    prefix: bytes
    inner: bytes
    suffix: bytes
    leads: tuple[tuple[Op, ...], ...] = ()
    """Text the envelope may have before its prefix that fills no field (a Ray actor's ``(SchedulerActor pid=4242,
    ip=10.0.0.5) ``), as steps: literal text, numbers loose (:func:`lead_of`)."""

    @property
    def base(self) -> Shape:
        return replace(self, leads=())


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

    @property
    def bare(self) -> bool:
        """The template starts its line, behind no envelope (its rows have no timestamp and no rank)."""
        return bool(self.ops) and self.ops[0][0] == "bare"

    def capture(self, name: str, kind: str, value: Any, found: set[str], fallback: bool = False) -> None:
        """One group of record field ``name`` (value kind ``kind``, converted ``value``): it gives the field's
        value unless the field is a fallback one that an earlier key already gave (``found``)."""
        if not (fallback and name in found):
            self.fields[name] = len(self.groups)
            self.values[name] = value
            found.add(name)
        self.groups.append((name, kind))


def build_templates(grammars: GrammarSet) -> tuple[Shape | None, list[Template]]:
    """The envelope shape most samples show, with the leads other samples show before it, and the message templates
    of the servers whose own samples show that shape (a template is only ever matched behind its own server's
    envelope)."""
    shapes: dict[Shape, int] = {}
    servers: dict[Shape, set[str]] = {}
    templates: dict[tuple[str, bytes, bytes], Template] = {}
    kinds = _envelope_kinds(grammars)
    matched: list[tuple[Grammar, regex.Match[str]]] = []
    for g in _fast_grammars(grammars):
        split = split_of(grammars, g)
        others = {a.encode() for a in grammars.anchors if a != g.anchor}
        for sample in g.spec.samples:
            m = split.match(sample.line)
            if m is None:
                continue
            matched.append((g, m))
            shape = _shape(g, m, kinds)
            if shape is not None:
                shapes[shape] = shapes.get(shape, 0) + 1
                servers.setdefault(shape, set()).add(g.spec.server)
            t = _template(g, m, others)
            if t is not None:
                templates.setdefault(t.key, t)
    for g, m in _other_heads(grammars, matched):
        t = _template(g, m, {a.encode() for a in grammars.anchors if a != g.anchor})
        if t is not None:
            templates.setdefault(t.key, t)
    if not shapes:
        return None, []
    shape = max(shapes, key=shapes.__getitem__)
    ours = servers[shape]
    leads = {lead for g, m in matched if g.spec.server in ours for lead in [lead_of(g, m, kinds, shape)] if lead}
    return replace(shape, leads=tuple(sorted(leads))), [t for t in templates.values() if t.grammar.spec.server in ours]


LINE_SECONDS = 0.05
"""Time a grammar pattern may take on one log line while a template is built from it (as the parser bounds it)."""


def _other_heads(
    grammars: GrammarSet, matched: list[tuple[Grammar, regex.Match[str]]]
) -> list[tuple[Grammar, regex.Match[str]]]:
    """Each sample of a kind that is only counted (``Prefill batch``) with every other head its grammar's samples
    show (``Prefill batch, `` for ``Prefill batch. ``), where the line so made matches the grammar and the general
    parser counts it as that kind. The lane learns a table kind's line shapes from the log, proving each by its row;
    a counted kind has no row to prove one by, so its shapes are its samples' pieces, each checked."""
    heads: dict[str, set[str]] = {}
    for g, m in matched:
        heads.setdefault(g.name, set()).add(m.string[m.start("fastlane_message") : m.start("body")])
    out = []
    for g, m in matched:
        if KINDS[g.spec.record or ""].table:
            continue
        own = m.string[m.start("fastlane_message") : m.start("body")]
        for head in sorted(heads[g.name] - {own}):
            line = m.string[: m.start("fastlane_message")] + head + m.string[m.start("body") :]
            try:
                made = m.re.match(line, timeout=LINE_SECONDS)
            except TimeoutError:
                continue
            parser = Parser(grammars, "x", records=frozenset())
            parser.feed(line.encode() + b"\n")
            if made is not None and made.group("body") == m.group("body") and +parser.tally.kinds == {g.spec.record: 1}:
                out.append((g, made))
    return out


def template_from_line(grammars: GrammarSet, shape: Shape, line: str) -> Template | None:
    """A template built from one log line as :func:`build_templates` builds one from a sample, if the
    line's envelope is ``shape`` (the lane matches every template behind that one envelope)."""
    kinds = _envelope_kinds(grammars)
    for g in _fast_grammars(grammars):
        if (g.anchor or "") not in line:
            continue
        split = split_of(grammars, g)
        try:
            m = split.match(line, timeout=LINE_SECONDS)
        except TimeoutError:
            return None
        if m is None:
            continue
        lead = lead_of(g, m, kinds, shape)
        if lead is None or (lead and lead not in shape.leads):
            return None
        return _template(g, m, {a.encode() for a in grammars.anchors if a != g.anchor})
    return None


def split_of(grammars: GrammarSet, g: Grammar) -> regex.Pattern[str]:
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


def _envelope_kinds(grammars: GrammarSet) -> dict[str, str]:
    return {n: s.kind for e in grammars.envelopes for n, s in e.spec.fields.items()}


def _envelope(g: Grammar, m: regex.Match[str], kinds: dict[str, str]) -> tuple[str, Shape] | None:
    """The text before a sample's timestamp, and its envelope with no prefix, if a timestamp and a rank group
    then literal text make the envelope, and groups that fill no field match only before the timestamp."""
    end = m.start("fastlane_message")
    found: dict[str, tuple[int, int]] = {}
    others: list[int] = []
    for name in m.re.groupindex:
        start, stop = m.span(name)
        if name in ("fastlane_message", "body") or name in g.fields or start < 0 or start > end:
            continue
        if name in g.envelope_fields:
            if kinds.get(name) not in ENVELOPE_KINDS:
                return None
            found[kinds[name]] = (start, stop)
        elif stop > start:
            others.append(stop)
    stamp, rank = found.get("timestamp"), found.get("rank")
    if stamp is None or rank is None or stamp[1] != rank[0] or len(found) != 2 or any(s > stamp[0] for s in others):
        return None
    suffix = m.string[rank[1] : end]
    if not suffix or any(c.isalnum() for c in suffix):
        return None
    inner = ENVELOPE_KINDS["timestamp"] + ENVELOPE_KINDS["rank"]
    return m.string[: stamp[0]], Shape(b"", inner, suffix.encode())


def _shape(g: Grammar, m: regex.Match[str], kinds: dict[str, str]) -> Shape | None:
    """The envelope of a sample, if it is literal text around a timestamp and a rank group only."""
    got = _envelope(g, m, kinds)
    if got is None or not got[0] or any(c.isalnum() for c in got[0]):
        return None
    return replace(got[1], prefix=got[0].encode())


DIGITS = re.compile(r"[0-9]+")
LEAD_SPELLINGS = ("7", "123456", "0")
"""Numbers a lead's numbers are tried with (:func:`lead_of`)."""


def lead_of(g: Grammar, m: regex.Match[str], kinds: dict[str, str], shape: Shape) -> tuple[Op, ...] | None:
    """The lead of a line whose envelope is ``shape`` (its text before the prefix) as steps: literal text, each run
    of digits loose; () for none, None if the envelope is not ``shape``'s or the lead is none the lane can read.

    A lead is text only groups that fill no field matched, no stream prefix (:func:`acceptmon.parse.streams.split`)
    and nothing the parser unwraps first (a JSON line, colour, a carriage return); with its numbers spelt otherwise
    (longer, shorter) the line still matches the grammar behind the same envelope, and gives the same message."""
    got = _envelope(g, m, kinds)
    prefix = shape.prefix.decode()
    if got is None or replace(got[1], prefix=shape.prefix) != shape.base or not got[0].endswith(prefix):
        return None
    lead = got[0][: len(got[0]) - len(prefix)]
    if not lead:
        return ()
    if lead.startswith("{") or not lead.isascii() or not lead.isprintable():
        return None
    message = m.group("fastlane_message")
    for spelling in ("", *LEAD_SPELLINGS):
        text = DIGITS.sub(spelling, lead) if spelling else lead
        line = text + m.string[len(lead) :]
        try:
            variant = m.re.match(line, timeout=LINE_SECONDS)
        except TimeoutError:
            return None
        if variant is None or variant.group("fastlane_message") != message:
            return None
        if _envelope(g, variant, kinds) != (text + prefix, got[1]):
            return None
        if split_stream(line) != (NONE, line):
            return None
    ops: list[Op] = []
    pos = 0
    for d in DIGITS.finditer(lead):
        ops += [("lit", lead[pos : d.start()].encode())] if d.start() > pos else []
        ops.append(("lint", -1))
        pos = d.end()
    return tuple(ops + ([("lit", lead[pos:].encode())] if pos < len(lead) else []))


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
    pairs = careful_pairs(g, pieces)
    if pairs is None or (len(pairs) < len(pieces) and not _careful_ok(g, t, pairs)):
        return False
    careful = len(pairs) < len(pieces)
    patterns, literal = [], []
    found: set[str] = set()
    ops: list[Op] = []
    for i, (key, value) in enumerate(pairs):
        conv = g.keys.get(key)
        ops += [("lit", b", ")] if i else []
        if conv is None:
            if not re.fullmatch(EXTRA_VALUE, value.encode()) or not re.fullmatch(EXTRA_KEY, key.encode()):
                return False
            if careful:  # the careful reader takes it for a key because it looks like one: this key, literally
                patterns.append(re.escape(key.encode() + b": ") + LOOSE[STR])
                ops += [("lit", key.encode() + b": "), ("lstr", -1)]
                literal.append(key.encode())
            else:
                known = b"|".join(re.escape(k.encode()) for k in sorted(g.keys, key=len, reverse=True))
                patterns.append(rb"(?!(?:" + known + rb"): )" + EXTRA_KEY + rb": " + EXTRA_VALUE)
                ops.append(("extra", tuple(k.encode() for k in g.keys)))
            t.extras.append((len(t.groups), len(t.groups) + 1))
            t.groups += [(None, "str"), (None, "str")]
            continue
        spec = g.spec.keys[key]
        if ", " in value:  # pieces joined: the value's own pattern finds the number in them
            joined = joined_value(conv, spec.kind, value, len(t.groups))
            if joined is None:
                return False
            steps, pattern, texts = joined
            patterns.append(re.escape(key.encode() + b": ") + pattern)
            ops += [("alt", (key.encode() + b": ",)), *steps]
            literal += [key.encode(), *texts]
            t.capture(conv.field, spec.kind, conv(value), found, conv.fallback)
            continue
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


def careful_pairs(g: Grammar, pieces: list[str]) -> list[tuple[str, str]] | None:
    """The body's pairs as the pair reader reads them: one a piece where every piece has ': ' (the fast reader),
    else a piece starts a pair only if its key is known or looks like one, and the others join the pair before
    (the careful reader, :func:`acceptmon.parse.pairs.read_pairs`). None where a first piece starts none."""
    if all(": " in piece for piece in pieces):
        return [(key, value) for key, _, value in (piece.partition(": ") for piece in pieces)]
    out: list[tuple[str, str]] = []
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if sep and (key in g.keys or keylike(key)):
            out.append((key, value))
        elif not out:
            return None
        else:
            out[-1] = (out[-1][0], out[-1][1] + ", " + piece)
    return out


def _careful_ok(g: Grammar, t: Template, pairs: list[tuple[str, str]]) -> bool:
    """Whether the careful reader reads every line of the template as the template does: a piece joined to a
    value never has ': ' (it never starts a pair, whatever its numbers), and no fallback key's field can be
    there before the body (the careful reader skips such a key where the fast one reads it)."""
    before = set(t.fields) | set(g.spec.defaults) | set(g.envelope_fields)
    for key, value in pairs:
        if any(": " in piece for piece in value.split(", ")[1:]):
            return False
        conv = g.keys.get(key)
        if conv is not None and conv.fallback and conv.field in before:
            return False
    return True


STRICT_SPELLINGS = {"int": ("0", "7", "65536"), "float": ("0.5", "12.25", "3.0")}
"""Numbers a joined value's own number is tried with (:func:`joined_value`)."""
LOOSE_SPELLINGS = ("12", "0.125", "65536")
"""Numbers the other numbers of a joined value are tried with."""


def joined_value(conv: Converter, kind: str, value: str, slot: int) -> tuple[list[Op], bytes, list[bytes]] | None:
    """A known key's value that holds ', ' (``full=8192, swa=4096``, ``3.31 [3.12, 3.50]``) as steps: text before
    the number its value pattern reads (literal), the number (captured, group ``slot``), the rest with its
    numbers loose (:func:`shaped`); with its pattern and literal texts. None unless the key's converter reads
    each value of that shape as that number (tried with a few numbers, the value's first piece too: the fast
    reader converts it before it meets the piece without ': ')."""
    if kind not in STRICT_SPELLINGS or conv.value_re is None:
        return None
    try:
        m = conv.value_re.search(value, timeout=LINE_SECONDS)
    except TimeoutError:
        return None
    if m is None or m.re.groups < 1 or m.start(1) < 0:
        return None
    before, number, rest = value[: m.start(1)], value[m.start(1) : m.end(1)], value[m.end(1) :]
    tail = shaped(rest)
    if not re.fullmatch(VALUE[kind], number.encode()) or tail is None:
        return None
    convert = VALUE_KINDS[kind]
    for strict, loose in zip(STRICT_SPELLINGS[kind], LOOSE_SPELLINGS, strict=True):
        text = before + strict + LOOSE_NUMBER.sub(loose, rest)
        try:
            conv(text.partition(", ")[0])
            got, want = conv(text), convert(strict)
        except ValueError:
            return None
        if type(got) is not type(want) or got != want:
            return None
    steps: list[Op] = [("lit", before.encode())] if before else []
    steps += [(kind, slot), *tail]
    pattern = re.escape(before.encode()) + VALUE[kind] + LOOSE_NUMBER.sub("0", rest).encode()
    texts = [arg for op, arg in steps if op == "lit"]
    return steps, pattern, texts


LOOSE_NUMBER = re.compile(r"[0-9]{1,30}(?:\.[0-9]{1,30})?")
"""A number as the compiled matcher's loose step reads it."""


def shaped(value: str) -> list[Op] | None:
    """A value as steps: its numbers loose, the text between them literal (None for a value with a tab, a line
    break, colour or a trailing blank)."""
    if any(c in value for c in "\x1b\r\n\t") or value != value.rstrip():
        return None
    ops: list[Op] = []
    pos = 0
    for m in LOOSE_NUMBER.finditer(value):
        ops += [("lit", value[pos : m.start()].encode())] if m.start() > pos else []
        ops.append(("lnumber", -1))
        pos = m.end()
    return ops + ([("lit", value[pos:].encode())] if pos < len(value) else [])


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
