"""vLLM's lines on the compiled matcher: its logging prefix, with year-less timestamps, and its values.

vLLM prints ``[(PROCESS pid=N) ]LEVEL MM-DD HH:MM:SS [file.py:N] message`` (``vllm_envelope.toml``). The
compiled matcher reads that envelope itself (``cm_yearless`` in ``cmatch_match.c``: ANSI colour skipped
where the parser strips it, ASCII names only) and dates each matched line from the scan's year state,
the year and month of the last dated line, exactly as :meth:`Parser._dated` rolls it over at New Year
and dates a late line from before it; a 29 February is the parser's. The message is a template of one
grammar (:mod:`acceptmon.parse.fast.yearless_templates`), built from a line of the log the general
parser read; it joins only once the compiled matcher writes the parser's row for that line
(:meth:`Yearless.learn`). A scan stops at a line it cannot say, which the parser reads; everything
unproven stays with the parser. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from acceptmon.parse.fast import native, typed
from acceptmon.parse.fast.model import (
    ACCEPT,
    LEARN_TEMPLATES,
    LEARN_TRIES,
    SHAPE_TRIES,
    Chunk,
    Part,
    Template,
    shape_of,
)
from acceptmon.parse.fast.pieces import Format
from acceptmon.parse.fast.rows import Plan, Unsupported
from acceptmon.parse.fast.templates import account, anchors_held, explained
from acceptmon.parse.fast.typed import As
from acceptmon.parse.fast.yearless_templates import template_of
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import ANSI, Parser
from acceptmon.parse.records import Record

Scan = tuple[tuple[int, bytes], list[int], int, int, int, int, int, int]
"""rows, matches per template, lines, 'accept' lines, year, month, where the scan stopped, whether that line has
the envelope."""


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


class Yearless:
    """The templates of year-less lines a lane learned, compiled, and their row plans for a parser."""

    def __init__(
        self,
        grammars: GrammarSet,
        fmt: Format,
        columns: tuple[str, ...],
        needles: tuple[list[bytes], ...],
        typed: bool = False,
    ):
        """``typed``: rows are records (:mod:`acceptmon.parse.fast.typed`), as the lane's are."""
        self.grammars, self.fmt, self.columns, self.typed = grammars, fmt, columns, typed
        self.hands: As = typed
        self.tuples: frozenset[str] = frozenset()
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
        steps = [native.steps(t) for t in self.templates]
        if module is None or not self.templates or any(s is None for s in steps):
            return
        needles = [*self.counted, *self.launch, ACCEPT]
        compiled = [native.codes(module, s) for s in steps if s is not None]
        self.program = module.Program(b"", b"", compiled, needles, len(self.launch), module.ENV_YEARLESS)
        self.anchor_counts = anchors_held(self.templates, self.counted)
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
            self.context = context
            self.plans = [self._compiled(k, t, context) for k, t in enumerate(self.templates)]
        return self.plans

    def _compiled(self, k: int, t: Template, context: tuple[Any, ...]) -> Any:
        """Template ``k``'s plan for a parser ``context`` as the compiled matcher takes it, or False (its rows are
        the parser's)."""
        if t.kind not in context[3]:  # a line the parser only counts: counted here too, not dated (nor by the parser)
            return None
        columns = typed.columns_of(t.kind) if self.typed else self.columns
        try:
            plan = Plan(t, self.fmt, columns, context[:3], every=True, typed=self.typed, tuples=t.kind in self.tuples)
        except Unsupported:
            return False
        return native.compiled(self.program, k, plan) if len(plan.dep_slots) <= native.max_deps() else False

    def _scan(self, parser: Parser, buf: Any, s: int, e: int, base: int, stop: bool) -> Scan | Literal[False] | None:
        """``buf[s:e]`` (whole lines) through the compiled matcher: the part it can say, up to the line it
        stopped at (with ``stop``: the first that holds an anchor and matches no template); None if that part
        is not exact (the parser's); False if a line holds a launch anchor."""
        plans = self.plans_for(parser)
        try:
            got = self.program.scan(
                buf, s, e, base, plans, parser.year or 0, parser.month or 0, stop, None, self.hands == "unmade"
            )
        except (ValueError, ArithmeticError, TypeError, KeyError, IndexError):
            return None  # a value its converter refuses (a percentage over 100): the parser's to say
        if got is None:
            return False if stop else None
        nrows, rows, hits, anchors, accepts, lines, year, month, at, enveloped = got
        exact = not any(n and plan is False for n, plan in zip(hits, plans, strict=True))
        exact = exact and explained(self.anchor_counts, hits, anchors)
        if accepts and any(n and self.unsure[i] for i, n in enumerate(hits)):
            exact = False
        return ((nrows, rows), hits, lines, accepts, year, month, at, enveloped) if exact else None

    def whole(self, parser: Parser, buf: Any, s: int, e: int, base: int, parts: list[Part]) -> bool:
        """Rows and tallies of ``buf[s:e]`` if the compiled matcher says every line of it."""
        if self.program is None or (parser.origin and not self.typed) or parser.year is None:
            return False  # no year yet: the first dated line is the parser's (:meth:`segment` reads it)
        got = self._scan(parser, buf, s, e, base, False)
        if not got or got[6] < e:
            return False
        self._account(parser, got, base, parts)
        return True

    def segment(self, parser: Parser, buf: bytes, span: tuple[int, int, int], parts: list[Part], chunk: Chunk) -> bool:
        """Rows and tallies of the lines ``buf[s:e]`` of a segment: the compiled matcher's, and the general
        parser's for each line it stops at (which the lane then learns from), in order. False (nothing done)
        where a line holds a launch anchor, or the matcher says nothing before a
        line that is not behind its envelope (another server's segment)."""
        s, e, _ = span
        if self.program is None or (parser.origin and not self.typed):
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
        before = dict(parser.tally.kinds)
        records = parser.feed(buf[s:e])
        if records:
            parts.append(chunk(records))
        raw = buf[s : e - 1].rstrip(b"\r")
        if len(records) == 1 and KINDS[records[0].kind].table:
            self._learn_from(parser, raw, partial(self.learn, parser, raw, records[0], chunk))
        elif not records:  # a line the parser counted without building it: what kind
            kind = next((k for k, n in parser.tally.kinds.items() if n != before.get(k)), None)
            if kind in KINDS and kind not in parser.wanted:
                self._learn_from(parser, raw, partial(self.learn_counted, parser, raw, kind))
        return e

    def _learn_from(self, parser: Parser, raw: bytes, learn: Callable[[], bool]) -> None:
        """Learn the template of a line the matcher stopped at (a few lines of each shape are tried)."""
        shape = shape_of(raw)
        if self.tried[shape] < SHAPE_TRIES and self.tried.total() < LEARN_TRIES:
            self.tried[shape] += 1
            if learn():
                self.tried[shape] = SHAPE_TRIES

    def _account(self, parser: Parser, got: Scan, base: int, parts: list[Part]) -> None:
        """A scanned part's rows into ``parts``; its tallies, lines and year into the parser."""
        (nrows, rows), counts, lines, accepts, year, month = got[:6]
        if nrows:
            parts.append(typed.part(self.hands, parser, nrows, rows))
        account(parser, self.templates, self.exempt, counts, lines, accepts, base)
        parser.year, parser.month = year or None, month or None

    def learn(self, parser: Parser, raw: bytes, row: Record, chunk: Chunk) -> bool:
        """Add the template of ``raw`` if the compiled matcher then writes the parser's row for it (the row of
        ``row`` as ``chunk`` gives it; typed, ``row`` itself)."""
        stamp = getattr(row, "timestamp", None)
        t = self._template(raw)
        if t is None or (stamp is None) != t.bare:
            return False
        year, month = (stamp.year, stamp.month) if stamp is not None else (parser.year or 0, parser.month or 0)
        got = self._tried(parser, raw, t, (row.line - 1, year, month))
        if got is not None and got[0] == 1 and got[2][-1] == 1 and typed.proven(self.typed, parser, got[1], row, chunk):
            return True
        self._drop()
        return False

    def learn_counted(self, parser: Parser, raw: bytes, kind: str) -> bool:
        """Add the template of ``raw``, a line of ``kind`` that the parser counts without building (nor dating)
        it, if the compiled matcher then counts it as that kind's line, writing nothing."""
        t = self._template(raw)
        if t is None or t.kind != kind:
            return False
        got = self._tried(parser, raw, t, (0, parser.year or 0, parser.month or 0))
        if got is not None and got[0] == 0 and got[2][-1] == 1 and self.plans[-1] is None:
            return True
        self._drop()
        return False

    def _template(self, raw: bytes) -> Template | None:
        """The template of a line, if there is room for one and it is not known yet."""
        if self.full or native.load() is None:
            return None
        text = raw.decode("utf-8", "replace")
        t = template_of(self.grammars, ANSI.sub("", text) if "\x1b" in text else text)
        return None if t is None or any(x.key == t.key and x.ops == t.ops for x in self.templates) else t

    def _tried(self, parser: Parser, raw: bytes, t: Template, at: tuple[int, int, int]) -> Any:
        """The scan of the line ``raw`` (line ``at[0] + 1``, in year and month ``at[1:]``) with ``t`` added to
        the templates (None if the matcher refuses it); :meth:`_drop` takes ``t`` back."""
        self.templates.append(t)
        self._compile()
        if self.program is None:
            return None
        try:
            return self.program.scan(b"\n" + raw + b"\n", 1, len(raw) + 2, at[0], self.plans_for(parser), *at[1:])
        except (ValueError, ArithmeticError, TypeError, KeyError, IndexError):
            return None

    def _drop(self) -> None:
        """The template :meth:`_tried` added, taken back."""
        self.templates.pop()
        self._compile()
