"""vLLM's lines on the compiled matcher: its logging prefix, with year-less timestamps, and its values.

vLLM prints ``[(PROCESS pid=N) ]LEVEL MM-DD HH:MM:SS [file.py:N] message`` (``vllm_envelope.toml``). The
compiled matcher reads that envelope itself (``cm_yearless`` in ``cmatch_match.c``: ANSI colour skipped
where the parser strips it, ASCII names only) and dates each matched line from the scan's year state,
the year and month of the last dated line, exactly as :meth:`Parser._dated` rolls it over at New Year
and dates a late line from before it; a 29 February hands the segment to the parser. The message is a
template of one grammar, built from a line of the log the general parser read (:func:`template_of`):
its head, then its keys in order, each value captured as the int's or float's own text (``1250
tokens``: the unit is literal), or, for percentages, per-position lists and engines, as text the row
plan converts once per distinct value (:data:`~acceptmon.parse.fast.pieces.CONVERTED`). Unknown keys
are literal too (the pair reader's careful path, which a list takes, reads a key it does not know as a
key only if it looks like one). A template joins only once the compiled matcher writes the parser's row
for its line (:meth:`Yearless.learn`); everything else stays with the parser. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

import regex

from acceptmon.parse.fast import native
from acceptmon.parse.fast.pieces import EXTRA_KEY, VALUE, Format
from acceptmon.parse.fast.rows import Plan, Unsupported
from acceptmon.parse.fast.templates import ACCEPT, LINE_SECONDS, Template, aliases, value_unit
from acceptmon.parse.grammar import Grammar, GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.pairs import keylike
from acceptmon.parse.parser import ANSI, Parser
from acceptmon.parse.records import Record

LEARN_TEMPLATES = 32
"""Templates learned at most (each is tried on every line the envelope matches)."""
_NUMBER = re.compile(r"[0-9]{1,30}(?:\.[0-9]{1,30})?")

Part = tuple[int, bytes]
Chunk = Callable[[list[Record]], Part]
Scan = tuple[Part, list[int], int, int, int, int, int, int]
"""rows, matches per template, lines, 'accept' lines, year, month, where the scan stopped, whether that line has
the envelope."""
LEARN_TRIES = 64
"""Lines the lane tries to learn a template from at most (of each shape, numbers masked, SHAPE_TRIES)."""
SHAPE_TRIES = 3
_MASK = re.compile(rb"[0-9]+")


def _fed(parser: Parser, lines: bytes, chunk: Chunk) -> list[Part]:
    """``lines`` read by the general parser, in pieces (its records are a few kB each)."""
    out = []
    for piece in _cut(lines):
        records = parser.feed(piece)
        if records:
            out.append(chunk(records))
    return out


def _cut(lines: bytes, size: int = 128 << 10) -> list[bytes]:
    out, s = [], 0
    while len(lines) - s > size:
        cut = lines.find(b"\n", s + size) + 1 or len(lines)
        out.append(lines[s:cut])
        s = cut
    return [*out, lines[s:]] if s < len(lines) else out


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
            if m is None:
                continue
            tried = [x for a in grammars.anchors if a in line for x in records if x.anchor == a]
            if any(x.regex is not None and x.regex.match(line, timeout=LINE_SECONDS) for x in tried[: tried.index(g)]):
                return None
        except TimeoutError:
            return None
        return _template(g, m, [a.encode() for a in grammars.anchors])
    return None


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
    """The head as steps: literal text and the grammar's own fields (see :func:`templates.read_head`); a field
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
            shaped = _shaped(text) if re.search(r"[0-9]", text) and not re.search(r"[0-9]\.[0-9]", text) else None
            if shaped is None or not _invariant(conv, text):
                return None
            t.ops += [("lint", -1) if op[0] == "lnumber" else op for op in shaped]  # a group's \d++: digits only
            out.append(_NUMBER.sub("0", text).encode())
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
        return all(conv(_NUMBER.sub(n, text)) == want for n in ("0", "7", "12", "65536"))
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
        if not out or (spec is not None and (spec.kind != "float_list" or not _NUMBER.fullmatch(piece))):
            return None  # a piece that joins a known key's value, which is not a list's
        out[-1] += ", " + piece  # the careful reader joins it to the pair before
    return out


def _shaped(value: str) -> list[tuple[str, Any]] | None:
    """An unknown key's value as steps: its numbers loose, the text between them literal."""
    if any(c in value for c in "\x1b\r\n\t") or value != value.rstrip():
        return None
    ops: list[tuple[str, Any]] = []
    pos = 0
    for m in _NUMBER.finditer(value):
        ops += [("lit", value[pos : m.start()].encode())] if m.start() > pos else []
        ops.append(("lnumber", -1))
        pos = m.end()
    return ops + ([("lit", value[pos:].encode())] if pos < len(value) else [])


def _body(g: Grammar, t: Template, pieces: list[str], anchors: list[bytes]) -> bool:
    """The keys in order as steps: known keys (and their aliases, if each holds every anchor as often) with
    their values; unknown ones literal, their values a number (and unit) where the line has one, else text."""
    found: set[str] = set()
    patterns: list[bytes] = []
    for i, piece in enumerate(pieces):
        key, _, value = piece.partition(": ")
        t.ops += [("lit", b", ")] if i else []
        conv = g.keys.get(key)
        if conv is None:
            shaped = _shaped(value)
            if not (keylike(key) and re.fullmatch(EXTRA_KEY, key.encode())) or shaped is None:
                return False
            t.ops += [("lit", key.encode() + b": "), *shaped]
            patterns.append(re.escape(key.encode() + b": ") + _NUMBER.sub("0", value).encode())
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
        if not (conv.fallback and conv.field in found):
            t.fields[conv.field] = len(t.groups)
            t.values[conv.field] = conv(value)
            found.add(conv.field)
        t.groups.append((conv.field, spec.kind))
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
        out.append(arg if op == "lit" else arg[0] if op == "alt" else b"\0")
    return b"".join(out)


class Yearless:
    """The templates of year-less lines a lane learned, compiled, and their row plans for a parser."""

    def __init__(self, grammars: GrammarSet, fmt: Format, columns: tuple[str, ...], needles: tuple[list[bytes], ...]):
        self.grammars, self.fmt, self.columns = grammars, fmt, columns
        self.counted, self.launch = needles
        self.templates: list[Template] = []
        self.tried: Counter[bytes] = Counter()
        self.program: Any = None
        self.context: tuple[str, int, Any, frozenset[str]] | None = None
        self.plans: list[Any] = []
        self.data = frozenset(k.name for k in KINDS.values() if k.series is not None)
        """Kinds whose lines may say 'accept' without being noise (as :meth:`Parser.feed` counts)."""

    @property
    def full(self) -> bool:
        return len(self.templates) >= LEARN_TEMPLATES

    def _compile(self) -> None:
        self.context, self.plans, self.program = None, [], None
        module = native.load()
        steps = [native.yearless_steps(t) for t in self.templates]
        if module is None or not self.templates or any(s is None for s in steps):
            return
        needles = [*self.counted, *self.launch, ACCEPT]
        compiled = [native.codes(module, s) for s in steps if s is not None]
        self.program = module.Program(b"", b"", compiled, needles, len(self.launch), module.ENV_YEARLESS)
        self.anchor_counts = [[t.literal.count(a) for a in self.counted] for t in self.templates]
        self.exempt = [t.kind in self.data and ACCEPT in t.literal for t in self.templates]
        self.unsure = [
            t.kind in self.data and ACCEPT not in t.literal and any(op in ("lstr", "str") for op, _ in t.ops)
            for t in self.templates
        ]
        """Data templates whose lines may say 'accept' only in a text value (then counted carefully)."""

    def plans_for(self, parser: Parser) -> list[Any]:
        """Per template, what the compiled matcher writes for it (see :func:`native.plans`)."""
        context = (parser.file, parser.run, parser.launch, parser.wanted)
        if context != self.context:
            self.context, self.plans = context, []
            for t in self.templates:
                if t.kind not in parser.wanted:  # a line the parser only counts is not dated: the year state is its
                    self.plans.append(False)
                    continue
                try:
                    plan = Plan(t, list(range(len(t.groups))), self.fmt, self.columns, context[:3], every=True)
                except Unsupported:
                    self.plans.append(False)
                    continue
                ok = plan.recipe is not None and len(plan.dep_slots) <= native.max_deps()
                self.plans.append((plan.recipe, plan.dep_slots, plan.memo) if ok else False)
        return self.plans

    def _scan(self, parser: Parser, buf: Any, s: int, e: int, base: int, stop: bool) -> Scan | Literal[False] | None:
        """``buf[s:e]`` (whole lines) through the compiled matcher: the part it can say, up to the line it
        stopped at (with ``stop``: the first that holds an anchor and matches no template); None if that part
        is not exact (the parser's); False if a line holds a launch anchor."""
        plans = self.plans_for(parser)
        assert parser.year is not None
        try:
            got = self.program.scan(buf, s, e, base, plans, parser.year, parser.month or 0, stop)
        except (ValueError, ArithmeticError, TypeError, KeyError, IndexError):
            return None  # a value its converter refuses (a percentage over 100): the parser's to say
        if got is None:
            return False if stop else None
        nrows, rows, hits, anchors, accepts, lines, year, month, at, enveloped = got
        exact = not any(n and plan is False for n, plan in zip(hits, plans, strict=True))
        for j in range(len(self.counted)):
            exact = exact and anchors[j] == sum(n * self.anchor_counts[i][j] for i, n in enumerate(hits) if n)
        if accepts and any(n and self.unsure[i] for i, n in enumerate(hits)):
            exact = False
        return ((nrows, rows), hits, lines, accepts, year, month, at, enveloped) if exact else None

    def whole(self, parser: Parser, buf: Any, s: int, e: int, base: int, parts: list[Part]) -> bool:
        """Rows and tallies of ``buf[s:e]`` if the compiled matcher says every line of it."""
        if self.program is None or parser.year is None or parser.origin:
            return False
        got = self._scan(parser, buf, s, e, base, False)
        if not got or got[6] < e:
            return False
        self._account(parser, got, base, parts)
        return True

    def segment(self, parser: Parser, buf: bytes, span: tuple[int, int, int], parts: list[Part], chunk: Chunk) -> bool:
        """Rows and tallies of the lines ``buf[s:e]`` of a segment: the compiled matcher's, and the general
        parser's for each line it stops at (which the lane then learns from), in order. False (nothing done)
        where the year is not known yet, a line holds a launch anchor, or the matcher says nothing before a
        line that is not behind its envelope (another server's segment)."""
        s, e, _ = span
        if self.program is None or parser.year is None or parser.origin:
            return False
        got = self._scan(parser, buf, s, e, parser.line, True)
        if got is False or (got is not None and got[6] < e and not got[7] and not any(got[1])):
            return False
        self._lines(parser, buf, (s, e), (parts, chunk), got)
        return True

    def _lines(
        self, parser: Parser, buf: bytes, span: tuple[int, int], out: tuple[list[Part], Chunk], got: Any
    ) -> None:
        """:meth:`segment` from ``got``, the scan of ``span`` (a part that is not exact is read in halves, down to
        the one line the parser reads)."""
        (pos, e), (parts, _) = span, out
        while pos < e:
            got = got if got is not None else self._scan(parser, buf, pos, e, parser.line, True)
            if not got:
                mid = buf.rfind(b"\n", pos, pos + (e - pos) // 2) + 1
                mid = mid if mid > pos else buf.index(b"\n", pos, e) + 1
                if mid >= e:
                    self._feed(parser, buf, pos, e, out)
                else:
                    self._lines(parser, buf, (pos, mid), out, None)
                    self._lines(parser, buf, (mid, e), out, None)
                return
            self._account(parser, got, parser.line, parts)
            if got[6] >= e:
                return
            pos = self._feed(parser, buf, got[6], buf.index(b"\n", got[6], e) + 1, out)
            got = None

    def _feed(self, parser: Parser, buf: bytes, s: int, e: int, out: tuple[list[Part], Chunk]) -> int:
        """The line ``buf[s:e]`` read by the general parser (and learned from); where the next line starts."""
        parts, chunk = out
        records = parser.feed(buf[s:e])
        if records:
            parts.append(chunk(records))
            self._learn_from(parser, buf[s : e - 1].rstrip(b"\r"), records, chunk)
        return e

    def _learn_from(self, parser: Parser, raw: bytes, records: list[Record], chunk: Chunk) -> None:
        """Learn the template of a line the matcher stopped at (a few lines of each shape are tried)."""
        shape = _MASK.sub(b"0", raw)
        if len(records) != 1 or not KINDS[records[0].kind].table or self.tried[shape] >= SHAPE_TRIES:
            return
        if self.tried.total() < LEARN_TRIES:
            self.tried[shape] += 1
            if self.learn(parser, raw, records[0], chunk(records)[1]):
                self.tried[shape] = SHAPE_TRIES

    def _account(self, parser: Parser, got: Scan, base: int, parts: list[Part]) -> None:
        """A scanned part's rows into ``parts``; its tallies, lines and year into the parser."""
        (nrows, rows), counts, lines, accepts, year, month = got[:6]
        if nrows:
            parts.append((nrows, rows))
        kinds = parser.tally.kinds
        for i, n in enumerate(counts):
            if n:
                kinds[self.templates[i].kind] += n
        kinds["other"] += lines - sum(counts)
        if any(n and self.templates[i].kind in parser.stats_kinds for i, n in enumerate(counts)):
            parser.launch_open, parser.closed = None, True
        parser.tally.accept_noise += accepts - sum(n for i, n in enumerate(counts) if self.exempt[i])
        parser.line = base + lines
        parser.year, parser.month = year, month or None

    def learn(self, parser: Parser, raw: bytes, row: Record, want: bytes) -> bool:
        """Add the template of ``raw`` if the compiled matcher then writes ``want`` (the parser's row) for it."""
        stamp = getattr(row, "timestamp", None)
        if self.full or native.load() is None or stamp is None:
            return False
        text = raw.decode("utf-8", "replace")
        t = template_of(self.grammars, ANSI.sub("", text) if "\x1b" in text else text)
        if t is None or any(x.key == t.key and x.ops == t.ops for x in self.templates):
            return False
        self.templates.append(t)
        self._compile()
        got = None
        if self.program is not None:
            plans = self.plans_for(parser)
            try:
                got = self.program.scan(
                    b"\n" + raw + b"\n", 1, len(raw) + 2, row.line - 1, plans, stamp.year, stamp.month
                )
            except (ValueError, ArithmeticError, TypeError, KeyError, IndexError):
                got = None
        if got is not None and got[0] == 1 and got[1] == want and got[2][-1] == 1:
            return True
        self.templates.pop()
        self._compile()
        return False
