"""Fast templates, learned from the grammar files' samples and from the log: one per message head and key order.

Each sample line of a record grammar that reads ``key: value`` pairs is cut into its envelope (only timestamp
and rank groups, between literal brackets), its head (literal text and the grammar's own groups, e.g. ``Decode
batch [N], ``) and its body (the keys in order). A known key may be replaced by any key that fills the same
field the same way (``cuda graph``/``npu graph``); an unknown key is any key the grammar does not know. The
template is then a whole-line ``re`` pattern whose captures are output text (see
:mod:`acceptmon.parse.fast.pieces`); heads and bodies are read in :mod:`acceptmon.parse.fast.bodies` (a value
with ', ' in it as the careful body reader reads it). A value kind without a fast form, or an envelope with
other groups, gives no template: the general parser keeps those lines. A line of the log that the general parser
read gives a template the same way (:func:`template_from_line`); the lane keeps it only once the template's row
for that line is the parser's (:meth:`acceptmon.parse.fast.lane.FastLane.feed`).
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import regex

from acceptmon.parse.fast.bodies import loose_steps, read_body, read_head
from acceptmon.parse.fast.model import LINE_SECONDS, Op, Shape, Template
from acceptmon.parse.fast.pieces import ENVELOPE_KINDS
from acceptmon.parse.grammar import Grammar, GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser
from acceptmon.parse.streams import NONE
from acceptmon.parse.streams import split as split_stream


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
    return tuple(loose_steps(lead, DIGITS, "lint"))


def _template(g: Grammar, m: regex.Match[str], others: set[bytes]) -> Template | None:
    start, body_start = m.start("fastlane_message"), m.start("body")
    t = Template(g, g.spec.record or "", b"")
    head, literal = read_head(g, m, start, body_start, t)
    if head is None:
        return None
    t.head, t.literal, t.head_groups = head, literal, len(t.groups)
    body = m.group("body")
    stripped = body.rstrip(", \t")
    if body[len(stripped) :] not in ("", ", ") or not read_body(g, t, stripped.split(", ")):
        return None
    if (g.anchor or "").encode() not in t.literal or any(a in t.literal for a in others):
        return None
    return t


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
    kinds: dict[str, int] = {}
    for template, n, e in zip(templates, counts, exempt, strict=False):
        if n:
            kinds[template.kind] = kinds.get(template.kind, 0) + n
            if e:
                accepts -= n
    parser.line = base
    parser.account(kinds, lines, accepts)


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
