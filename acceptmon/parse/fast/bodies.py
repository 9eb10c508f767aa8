"""A template's head and body, read from a sample or a log line as the parser's pair reader reads them. Pure.

The head is literal text and the grammar's own groups (``Decode batch [N], ``); the body is the keys in
order, each a known key (or any key that fills the same field the same way: ``cuda graph``/``npu graph``)
or an unknown one. A value with ', ' in it (``#token: full=8192, swa=4096``) is read as the careful body
reader reads it: the pieces it joins, the number its key's own value pattern finds captured, the rest
literal with loose numbers (:func:`joined_value`).
"""

from __future__ import annotations

import re

import regex

from acceptmon.parse.fast.model import LINE_SECONDS, Op, Template
from acceptmon.parse.fast.pieces import EXTRA_KEY, EXTRA_VALUE, LOOSE, STR, UNITS, VALUE
from acceptmon.parse.grammar import Converter, Grammar
from acceptmon.parse.pairs import keylike
from acceptmon.parse.values import VALUE_KINDS


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


def read_body(g: Grammar, t: Template, pieces: list[str]) -> bool:
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
                ops += [("lkey", (key.encode() + b": ", len(t.groups))), ("lstr", -1), ("vend", len(t.groups) + 1)]
                literal.append(key.encode())
            else:
                known = b"|".join(re.escape(k.encode()) for k in sorted(g.keys, key=len, reverse=True))
                patterns.append(rb"(?!(?:" + known + rb"): )" + EXTRA_KEY + rb": " + EXTRA_VALUE)
                ops.append(("extra", (tuple(k.encode() for k in g.keys), len(t.groups))))
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
    return loose_steps(value, LOOSE_NUMBER, "lnumber")


def loose_steps(text: str, numbers: re.Pattern[str], op: str) -> list[Op]:
    """``text`` as steps: each match of ``numbers`` a loose ``op`` step, the text between them literal."""
    ops: list[Op] = []
    pos = 0
    for m in numbers.finditer(text):
        ops += [("lit", text[pos : m.start()].encode())] if m.start() > pos else []
        ops.append((op, -1))
        pos = m.end()
    return ops + ([("lit", text[pos:].encode())] if pos < len(text) else [])


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
