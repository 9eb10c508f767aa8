"""Templates of vLLM's lines: a line of the log behind its server's year-less envelope, as compiled-matcher steps.

The message is cut as :mod:`acceptmon.parse.fast.templates` cuts a sample: its head (literal text and the
grammar's own fields), then its keys in order, each value captured as the int's or float's own text
(``1250 tokens``: the unit is literal; an engine's digits), or, for percentages and per-position lists, as
text the compiled matcher converts (:data:`~acceptmon.parse.fast.pieces.CONVERTED`); ``nan`` is a spelling of
its own. Unknown keys are literal, their values' numbers loose (the pair reader's careful
path, which a list takes, reads a key it does not know as a key only if it looks like one). A head field
whose converter gives the same for any number in it (``2 Engines Aggregated``) is literal with its
digits loose. A line whose message starts it (no logging prefix: vLLM under a custom logging format) gives a
bare template (its first step ``bare``): its lines have no envelope, its rows no timestamp and no rank. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

import regex

from acceptmon.parse.fast.bodies import LOOSE_NUMBER, aliases, shaped, value_unit
from acceptmon.parse.fast.model import LINE_SECONDS, Template
from acceptmon.parse.fast.pieces import EXTRA_KEY, VALUE
from acceptmon.parse.fast.templates import split_of
from acceptmon.parse.grammar import Grammar, GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.pairs import keylike
from acceptmon.parse.streams import NONE
from acceptmon.parse.streams import split as split_stream

NUMBER = LOOSE_NUMBER


def _envelopes(grammars: GrammarSet, server: str) -> list[Grammar]:
    """The server's own logging prefix: envelopes with a year-less time and no foreign prefix group."""
    return [
        e
        for e in grammars.envelopes_of(server)
        if any(f.kind == "monthday" for f in e.spec.fields.values()) and "prefix" not in e.spec.fields
    ]


def _grammars(grammars: GrammarSet) -> list[tuple[Grammar, list[Grammar]]]:
    """Table grammars of a year-less server that read pairs, with the grammars of their anchor before them."""
    out = []
    for g in grammars.records:
        kind = KINDS.get(g.spec.record or "")
        if kind is None or not kind.table or kind.starts_run or g.spec.body != "pairs" or not g.anchor:
            continue
        if not _envelopes(grammars, g.spec.server):
            continue
        out.append((g, grammars.records))
    return out


def template_of(grammars: GrammarSet, line: str) -> Template | None:
    """The template of one log line behind its server's year-less envelope, or None.

    No grammar the parser tries before the line's (those of every anchor the line holds, in anchor order)
    may match it. ``line`` is without colour (ANSI), as the parser reads it."""
    for g, records in _grammars(grammars):
        if not g.anchor or g.anchor not in line:
            continue
        envelope = "|".join(f"(?:{e.spec.pattern})" for e in _envelopes(grammars, g.spec.server))
        split = regex.compile(f"(?:{envelope})(?P<fastlane_message>{g.spec.pattern})")
        try:
            m = split.match(line, timeout=LINE_SECONDS)
            bare = m is None
            m = _bare(grammars, g, line) if m is None else m
            if m is None:
                continue
            tried = [x for a in grammars.anchors if a in line for x in records if x.anchor == a]
            if any(x.regex is not None and x.regex.match(line, timeout=LINE_SECONDS) for x in tried[: tried.index(g)]):
                return None
        except TimeoutError:
            return None
        t = _template(g, m, [a.encode() for a in grammars.anchors])
        if t is not None and bare:
            t.ops.insert(0, ("bare", -1))
        return t
    return None


def _bare(grammars: GrammarSet, g: Grammar, line: str) -> regex.Match[str] | None:
    """The line's match if its message starts it (an envelope of the server's that reads nothing, as vLLM's bare
    one: a custom logging format), and it has no stream prefix: the template's lines have no timestamp and no rank.
    """
    if split_stream(line) != (NONE, line):
        return None
    m = split_of(grammars, g).match(line, timeout=LINE_SECONDS)
    return m if m is not None and m.start("fastlane_message") == 0 else None


def _template(g: Grammar, m: regex.Match[str], anchors: list[bytes]) -> Template | None:
    t = Template(g, g.spec.record or "", b"")
    head = _head(g, m, t)
    if head is None:
        return None
    t.head, t.head_groups = head, len(t.groups)
    body = m.group("body")
    stripped = body.rstrip(", \t")
    tail = m.string[m.end("body") :]
    if body[len(stripped) :] not in ("", ", ") or (tail and (body != stripped or not tail.strip())):
        return None
    pieces = _pieces(g, stripped.split(", "))
    if pieces is None or not _body(g, t, pieces, anchors):
        return None
    if tail:
        t.ops.append(("lit", tail.encode()))
    t.literal = _literal(t)
    t.body += re.escape(tail.encode())
    return t if (g.anchor or "").encode() in t.literal else None


def _head(g: Grammar, m: regex.Match[str], t: Template) -> bytes | None:
    """The head as steps: literal text and the grammar's own fields (see :func:`bodies.read_head`); a field
    whose converter gives the same for any number in it (``2 Engines Aggregated`` is ``all``) is literal
    text with its numbers loose, and its value a constant of the template."""
    start, stop = m.start("fastlane_message"), m.start("body")
    spans = sorted((m.start(n), m.end(n), n) for n in g.fields if start <= m.start(n) < stop)
    pos, out = start, []
    for s, e, name in spans:
        text, conv = m.string[s:e], g.fields[name]
        t.ops.append(("lit", m.string[pos:s].encode()))
        out.append(re.escape(m.string[pos:s].encode()))
        kind = g.spec.fields[name].kind
        if kind in VALUE and re.fullmatch(VALUE[kind], text.encode()):
            t.ops.append((kind, len(t.groups)))
            t.fields[conv.field] = len(t.groups)
            t.groups.append((conv.field, kind))
            out.append(VALUE[kind])
        else:
            steps = shaped(text) if re.search(r"[0-9]", text) and not re.search(r"[0-9]\.[0-9]", text) else None
            if steps is None or not _invariant(conv, text):
                return None
            t.ops += [("lint", -1) if op[0] == "lnumber" else op for op in steps]  # a group's \d++: digits only
            out.append(NUMBER.sub("0", text).encode())
            t.fields.pop(conv.field, None)
        t.values[conv.field] = conv(text)
        pos = e
    t.ops.append(("lit", m.string[pos:stop].encode()))
    t.ops = [op for op in t.ops if op != ("lit", b"")]
    return b"".join([*out, re.escape(m.string[pos:stop].encode())])


def _invariant(conv: Any, text: str) -> bool:
    """Whether ``conv`` gives the same for ``text`` with other numbers in it (tried with a few)."""
    try:
        want = conv(text)
        return all(conv(NUMBER.sub(n, text)) == want for n in ("0", "7", "12", "65536"))
    except ValueError:
        return False


def _pieces(g: Grammar, pieces: list[str]) -> list[str] | None:
    """The body's pairs: a list value's numbers (pieces without ': ') joined to its key's piece."""
    out: list[str] = []
    for piece in pieces:
        if ": " in piece:
            out.append(piece)
            continue
        key = out[-1].partition(": ")[0] if out else ""
        spec = g.spec.keys.get(key)
        if not out or (spec is not None and (spec.kind != "float_list" or not NUMBER.fullmatch(piece))):
            return None  # a piece that joins a known key's value, which is not a list's
        out[-1] += ", " + piece  # the careful reader joins it to the pair before
    return out


def _body(g: Grammar, t: Template, pieces: list[str], anchors: list[bytes]) -> bool:
    """The keys in order as steps: known keys (and their aliases, if each holds every anchor as often) with
    their values; unknown ones literal, their values a number (and unit) where the line has one, else text."""
    found: set[str] = set()
    patterns: list[bytes] = []
    for i, piece in enumerate(pieces):
        key, _, value = piece.partition(": ")
        t.ops += [("lit", b", ")] if i else []
        conv = g.keys.get(key)
        if conv is None:  # the key named, its value's shape matched and its text captured (the row's extra)
            steps = shaped(value)
            if not (keylike(key) and re.fullmatch(EXTRA_KEY, key.encode())) or steps is None:
                return False
            t.ops += [("lkey", (key.encode() + b": ", len(t.groups))), *steps, ("vend", len(t.groups) + 1)]
            t.extras.append((len(t.groups), len(t.groups) + 1))
            t.groups += [(None, "str"), (None, "str")]
            patterns.append(re.escape(key.encode() + b": ") + NUMBER.sub("0", value).encode())
            continue
        spec = g.spec.keys[key]
        number, unit = value_unit(spec.kind, value)
        if number is None and _nan(conv, value):  # 'nan' (no value yet): one spelling, a constant of its own
            t.ops += [("alt", (key.encode() + b": " + value.encode(),))]
            patterns.append(re.escape(key.encode() + b": " + value.encode()))
            if not (conv.fallback and conv.field in found):
                t.values[conv.field] = None
                t.fields.pop(conv.field, None)
                found.add(conv.field)
            continue
        if number is None:
            return False
        names = aliases(g, key) if i else [key]
        if len({tuple(n.encode().count(a) for a in anchors) for n in names}) > 1:
            names = [key]
        t.ops += [("alt", tuple(n.encode() + b": " for n in names)), (spec.kind, len(t.groups))]
        patterns.append(
            b"(?:" + b"|".join(re.escape(n.encode()) for n in names) + b"): " + VALUE[spec.kind] + re.escape(unit)
        )
        t.ops += [("lit", unit)] if unit else []
        t.capture(conv.field, spec.kind, conv(value), found, conv.fallback)
    t.body = b", ".join(patterns)
    return True


def _nan(conv: Any, value: str) -> bool:
    """Whether a value is ``nan`` (with its unit), which the converter reads as no value."""
    if value.partition(" ")[0].removesuffix("%") != "nan":
        return False
    try:
        return conv(value) is None
    except ValueError:
        return False


def _literal(t: Template) -> bytes:
    """Every fixed byte of the template, in line order, a NUL where a value is."""
    out = []
    for op, arg in t.ops:
        out.append(arg if op == "lit" else arg[0] if op in ("alt", "lkey") else b"\0")
    return b"".join(out)
