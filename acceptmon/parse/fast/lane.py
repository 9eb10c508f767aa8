"""The fast lane itself: a block of lines in, table rows and the parser's tallies out.

A block is cut at its launch lines, which the general parser reads (they set the run and
the launch that derived columns come from). In each segment between them one scan of the
compiled matcher (:mod:`acceptmon.parse.fast.native`) writes the rows. Then the segment's count of
each anchor, and of the word 'accept', is compared with what the fast matches account for: if every
count agrees, no other line holds an anchor, and the tally is exact. If one differs, the segment is
read again carefully from the matcher's matches (:mod:`acceptmon.parse.fast.careful`): every line that
holds an anchor and was not matched (or holds another grammar's anchor too) goes to the general
parser, in order, at its own line number. Where the matcher is not built there is no lane: the general
parser reads everything.

The compiled matcher starts at the server's own envelope, so a line with a stream prefix (``kubectl logs
--prefix``, stern, compose, a CRI head: :mod:`acceptmon.parse.streams`) is never a fast match: its
anchor goes unexplained and the parser reads it, in its source's run. Fast rows are plain lines: their
stream columns are empty and their run is the plain source's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

from acceptmon.parse.fast import native, typed
from acceptmon.parse.fast.careful import Entry, careful_segment
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
from acceptmon.parse.fast.templates import (
    account,
    anchors_held,
    build_templates,
    explained,
    template_from_line,
)
from acceptmon.parse.fast.typed import As
from acceptmon.parse.fast.yearless import Yearless
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, RecordKind, table_columns, table_kinds
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import Record
from acceptmon.parse.state import line_starts

Quick = tuple[tuple[int, bytes], list[int], int, int]
"""A segment every count of which the fast matches explain: rows, matches per template, lines, 'accept' lines."""
NOISE_EXEMPT = "decode"
"""The kind whose lines may say 'accept' without being noise (as :meth:`Parser.feed` counts)."""


CANDIDATES = 4
"""Rows of the general parser per segment whose lines the lane tries to learn from."""

PLANS_KEPT = 256
"""Parser contexts whose row plans a lane keeps (then it starts again): a live lane follows many files."""

COUNTED_LOOKS = 32
"""Lines with a counted anchor that :meth:`FastLane._learn_counted` looks at in a piece the general parser read."""
PIECE = 128 << 10
"""Bytes of lines the general parser reads at a time in a segment without fast lines (its records are
typed objects, a few kB each: a whole block's would be tens of MB)."""


LEARN_PIECE = 8 << 10
"""Bytes of lines the general parser reads first in a segment without fast lines, before the lane
learns from them and reads the rest (a shape no template knows yet is learned within a block)."""


def _head(buf: bytes, s: int, e: int) -> int:
    """Where the segment's first :data:`LEARN_PIECE` bytes of lines end (the newline's index)."""
    cut = buf.find(b"\n", s + LEARN_PIECE, e)
    return e if cut < 0 else cut


def _pieces(buf: bytes, s: int, e: int) -> list[bytes]:
    """``buf[s:e]`` (whole lines) in pieces of about :data:`PIECE` bytes, cut after newlines."""
    out = []
    while e - s > PIECE:
        cut = buf.find(b"\n", s + PIECE, e) + 1 or e
        out.append(buf[s:cut])
        s = cut
    return [*out, buf[s:e]] if e > s else out


class FastLane:
    """Table rows of one output format, for the files of one ``acceptmon parse``; or, ``typed``, records.

    ``written``: the record kinds whose rows are written (default: the table kinds, ``parse`` without ``--kind``).
    ``typed``: the record kinds a job wants as records (:mod:`acceptmon.parse.fast.typed`): every part is then
    a list of records (the parser's, and the lane's rows read back), and ``fmt`` and ``columns`` are the typed
    rows' own."""

    def __init__(
        self,
        grammars: GrammarSet,
        fmt: Format,
        written: Sequence[RecordKind] = (),
        typed: frozenset[str] | None = None,
    ) -> None:
        self.typed = typed is not None
        self.in_place = True
        """Reads regions of a file where they lie (:mod:`acceptmon.pipeline.inplace`)."""
        self.fmt: Format = "jsonl" if self.typed else fmt
        self.columns = () if self.typed else table_columns(written or None)
        """A table's columns (``written``'s, as ``parse`` writes them; a typed lane's rows have their kind's own)."""
        self.learned = False
        self.written = typed if typed is not None else frozenset(k.name for k in written or table_kinds())
        """The kinds whose lines the lane writes (default: the table kinds; the others it only counts)."""
        self.grammars = grammars
        self.from_log: list[Template] = []
        """Templates learned from the log's own lines (:meth:`_learn_lines`)."""
        self.tried: Counter[bytes] = Counter()
        """Tries per line shape (numbers masked): :data:`SHAPE_TRIES` once one proved."""
        shape, templates = build_templates(grammars)
        self.shape = shape
        self.templates: list[Template] = (
            [t for t in templates if native.steps(t, t.kind in self.written) is not None] if shape else []
        )
        """The templates the compiled matcher reads as the grammar's expression does (the others' lines are the
        general parser's)."""
        self.anchors = [a.encode() for a in grammars.anchors]
        runs = {g.anchor for g in grammars.records if KINDS[g.spec.record or ""].starts_run}
        self.launch_anchors = [a.encode() for a in grammars.anchors if a in runs]
        self.counted = [a for a in self.anchors if a not in self.launch_anchors]
        self.yearless = Yearless(grammars, self.fmt, self.columns, (self.counted, self.launch_anchors), self.typed)
        self.hands: As = self.typed
        """How the lane's own rows are handed on (:func:`typed.part`); :meth:`hand_unmade` to change it."""
        self.tuples: frozenset[str] = frozenset()
        """Kinds whose rows are tuples of their varying values (:attr:`Plan.tuples`)."""
        """vLLM's lines (year-less envelope), learned from the log, on the compiled matcher alone."""
        self.sorter: Parser | None = None
        """Says the kind of a line the lane may learn to count (:meth:`_sorter`)."""
        self.yearless_first = False
        """Whether the year-less matcher said the last stretch the two could both say: it is then tried first (a
        vLLM log's blocks are not read twice, once in vain by the envelope of SGLang's lines). Either says a stretch
        only when it says it exactly as the general parser would, so which one goes first changes no output."""
        self._compile()

    @property
    def enabled(self) -> bool:
        return self.native is not None

    def _compile(self) -> None:
        self.native: Any = None
        self.plans: dict[tuple[Any, ...], tuple[Any, list[Plan | bool | None], list[Any], list[int]]] = {}
        """Row plans per parser context (file, run, launch, kinds wanted): a live lane serves many files."""
        if self.shape is None or not self.templates:
            return
        self.anchor_counts = anchors_held(self.templates, self.counted)
        self.accepts = [t.literal.count(ACCEPT) for t in self.templates]
        self.exempt = [t.kind == NOISE_EXEMPT for t in self.templates]
        self.exempt_saying = [bool(a) and e for a, e in zip(self.accepts, self.exempt, strict=True)]
        """Exempt templates whose literal text says 'accept': each match is a line saying it that is no noise."""
        self.unsure = [
            t.kind == NOISE_EXEMPT and not t.literal.count(ACCEPT) and bool(t.extras) for t in self.templates
        ]
        """Exempt templates whose lines may say 'accept' only in an unknown key (counted carefully)."""
        self.native = native.program(self.shape, self.templates, self.counted, self.launch_anchors, self.written)
        self.native_order = native.order(self.templates)

    def hand_unmade(self, kinds: frozenset[str]) -> None:
        """Hand a typed lane's own rows on as records not made yet (:class:`~acceptmon.parse.unmade.Unmade`), those
        of ``kinds`` as tuples of their varying values (a part of one such plan's rows becomes columns at once)."""
        assert self.typed, "only a typed lane's rows are records"
        self.hands = self.yearless.hands = "unmade"
        self.tuples = self.yearless.tuples = kinds

    def learn(self, sample: bytes) -> None:
        """Order the templates by how often they match ``sample`` (the first MiB of the input), most frequent
        first: the compiled matcher tries them in that order (a line stops at the first that matches)."""
        self.learned = True
        if self.native is None:
            return
        hits = [0] * len(self.templates)
        sample = sample[: sample.rfind(b"\n") + 1]  # whole lines
        buf, pos, at = b"\n" + sample, 0, self.native_order
        for start, end in [*self._launch_lines(sample), (len(sample), len(sample))]:
            got = self.native.scan(buf, pos + 1, start + 1, 0, [None] * len(at)) if start > pos else None
            for i, n in zip(at, got[2] if got else [], strict=False):
                hits[i] += n
            pos = end
        heads: dict[bytes, int] = {}
        for t, n in zip(self.templates, hits, strict=True):
            heads[t.head] = heads.get(t.head, 0) + n
        ranked = sorted(zip(self.templates, hits, strict=True), key=lambda th: (-heads[th[0].head], -th[1]))
        self.templates = [t for t, _ in ranked]
        self._compile()

    def feed(self, parser: Parser, block: bytes, chunk: Chunk) -> list[Part]:
        """Rows of a block of complete lines, in order; the parser's line, run and tally advance.

        A file whose path names its pod (:attr:`Parser.origin`) is the parser's (:meth:`_named`), but for a typed
        lane, whose records take the names."""
        if self.native is None or not block.endswith(b"\n") or self._named(parser):
            return [chunk(parser.feed(block))]
        parts: list[Part] = []
        buf = b"\n" + block
        if self._segment(parser, buf, 0, len(block), parts, chunk):
            return parts  # no launch line in the block: one segment
        pos = 0
        for start, end in self._launch_lines(block):
            if start > pos:
                self._segment(parser, buf, pos, start, parts, chunk)
            records = parser.feed(block[start:end])
            if records:
                parts.append(chunk(records))
            pos = end
        if pos < len(block):
            self._segment(parser, buf, pos, len(block), parts, chunk)
        return parts

    def _launch_lines(self, block: bytes) -> list[tuple[int, int]]:
        starts = set().union(*(line_starts(block, a) for a in self.launch_anchors))
        return [(s, block.find(b"\n", s) + 1) for s in sorted(starts)]

    def plans_for(self, parser: Parser) -> list[Plan | bool | None]:
        """Per template: its row plan for the parser's file, run and launch; None for a kind
        that is only counted; False if its rows must come from the general parser."""
        return self._plans(parser)[1]

    def _plans(self, parser: Parser) -> tuple[Any, list[Plan | bool | None], list[Any], list[int]]:
        """(the launch they were made for, :meth:`plans_for`, the same in the compiled matcher's order and form,
        the places in that order of the templates whose rows are the general parser's)."""
        key = (parser.file, parser.run, id(parser.launch), parser.wanted)  # the launch is kept with its plans
        got = self.plans.get(key)
        if got is not None:
            return got
        if len(self.plans) >= PLANS_KEPT:
            self.plans.clear()
        file, run, _, wanted = key
        for (f, r, _, w), (launch, made, ordered, refused) in self.plans.items():
            if (f, r, w) == (file, run, wanted) and launch == parser.launch:  # each range of -j has its own copy
                got = self.plans[key] = (parser.launch, made, ordered, refused)
                return got
        context = (parser.file, parser.run, parser.launch)
        plans: list[Plan | bool | None] = []
        for t in self.templates:
            if t.kind not in self.written or t.kind not in parser.wanted:
                plans.append(None)
                continue
            columns = typed.columns_of(t.kind) if self.typed else self.columns
            try:
                plans.append(Plan(t, self.fmt, columns, context, typed=self.typed, tuples=t.kind in self.tuples))
            except Unsupported:
                plans.append(False)
        ordered = native.plans(plans, self.native_order, self.native)
        got = self.plans[key] = (parser.launch, plans, ordered, [k for k, p in enumerate(ordered) if p is False])
        return got

    def part(self, parser: Parser, nrows: int, rows: Any) -> Part:
        """A part of the lane's own rows: table rows as they are, or (typed) their records, which take the names
        of the parser's file (:meth:`_named`)."""
        return typed.part(self.hands, parser, nrows, rows)

    def _named(self, parser: Parser) -> bool:
        """A file whose path names its pod: its table rows are the parser's (they carry the names, which the lane's
        rows, the plain lines', leave empty); a typed lane's records take them (:meth:`part`)."""
        return bool(parser.origin) and not self.typed

    def _proven(self, parser: Parser, rows: Any, row: Record, chunk: Chunk) -> bool:
        """Whether ``rows``, the lane's output for one line, says what the general parser's ``row`` of it does."""
        return typed.proven(self.typed, parser, rows, row, chunk)

    def _segment(self, parser: Parser, buf: bytes, s: int, e: int, parts: list[Part], chunk: Chunk) -> bool:
        """Rows and tallies of the lines between two launch lines; False (nothing done) if the
        compiled matcher finds a launch line among them."""
        base = parser.line
        first = self.yearless_first
        if first and self.yearless.segment(parser, buf, (s + 1, e + 1, base), parts, chunk):
            return True
        quick = self._quick(parser, buf, s, e, base, True)
        if quick is False:
            return False
        if quick is not None:
            self.yearless_first = False
            self._account(parser, quick, base, parts)
            return True
        if not first and self.yearless.segment(parser, buf, (s + 1, e + 1, base), parts, chunk):
            self.yearless_first = True
            return True
        lines = buf.count(b"\n", s + 1, e + 1)
        slow: list[Record] = []  # the first rows the general parser gives in this segment

        def kept(records: list[Record]) -> Part:
            if len(slow) < CANDIDATES:
                slow.extend(r for r in records[: CANDIDATES * 4] if r.kind in self.written)
            return chunk(records)

        pieces: list[bytes] = []
        undated = parser.year is None
        entries, accepts = self._entries(parser, buf, s, e, base)
        if entries:
            careful_segment(parser, buf, (s, e, lines, accepts), entries, self, (parts, kept))
        else:  # no fast line (another server's log, or a shape not learned yet): the parser reads it
            head = _head(buf, s, e) if self._may_learn() else e
            pieces = _pieces(buf, s + 1, head + 1) + _pieces(buf, head + 1, e + 1)  # not a block's records at once
            records = parser.feed(pieces[0]) if pieces else []
            parts += [kept(records)] if records else []
        learned = (
            bool(slow) and self._may_learn() and self._learn_lines(parser, buf, (s, e, base), slow[:CANDIDATES], chunk)
        )
        if pieces and not learned and self._may_learn():
            learned = self._learn_counted(parser, pieces[0])
        dated = undated and parser.year is not None and self.yearless.program is not None  # year-less lines may go on
        if (learned or dated) and len(pieces) > 1:  # the rest of the segment, with what the first piece taught
            return self._segment(parser, buf, s + len(pieces[0]), e, parts, chunk)
        for piece in pieces[1:]:
            records = parser.feed(piece)
            parts += [chunk(records)] if records else []
        return True

    def _may_learn(self) -> bool:
        tries = self.tried.total()
        return self.shape is not None and len(self.from_log) < LEARN_TEMPLATES and tries < LEARN_TRIES

    def _learn_lines(
        self, parser: Parser, buf: bytes, span: tuple[int, int, int], rows: list[Record], chunk: Chunk
    ) -> bool:
        """Learn templates from the lines of the general parser's ``rows`` in the segment ``span``.

        The first line of a new shape (envelope, head, key order, value spellings) that the general
        parser read gives a template as a sample does; the template joins the lane only if the lane's
        row for that line, through every matcher the lane uses, is byte for byte the parser's row.
        Everything unproven stays with the general parser. Bounded: :data:`LEARN_TEMPLATES` kept,
        :data:`LEARN_TRIES` shapes tried, each shape once. True if a template was learned.
        """
        s, e, base = span
        pos, number, learned = s + 1, base + 1, False
        for r in sorted(rows, key=lambda r: r.line):
            if not self._may_learn():
                break
            while number < r.line:  # to the record's line (rows are in line order: one walk)
                pos = buf.find(b"\n", pos, e + 1) + 1
                if not pos:
                    return learned
                number += 1
            end = buf.find(b"\n", pos, e + 1)
            if end < 0:
                break
            raw = buf[pos:end].rstrip(b"\r")
            shape = shape_of(raw)
            if self.tried[shape] < SHAPE_TRIES:  # a line whose values the lane refuses proves nothing of the next
                self.tried[shape] += 1
                ok = self._try_template(parser, raw, r, chunk)
                self.tried[shape] = SHAPE_TRIES if ok else self.tried[shape]
                learned = ok or learned
        return learned

    def _learn_counted(self, parser: Parser, piece: bytes) -> bool:
        """Learn templates from lines of ``piece`` (which the general parser read) of kinds it counts without building
        them (``parse --kind``'s other kinds): a line's template joins the lane if the compiled matcher then counts
        that line as a line of the kind the parser says, writing nothing. The first :data:`COUNTED_LOOKS` lines with a
        counted anchor are looked at, :data:`CANDIDATES` new shapes tried. True if a template was learned."""
        learned, tries, looks = False, 0, 0
        for raw in piece.split(b"\n"):
            if looks >= COUNTED_LOOKS or tries >= CANDIDATES or not self._may_learn():
                break
            if not any(a in raw for a in self.counted):
                continue
            looks += 1
            raw = raw.rstrip(b"\r")
            shape = shape_of(raw)
            if self.tried[shape] >= SHAPE_TRIES:
                continue
            kind = self._sorter(parser).classify(raw.decode("utf-8", "replace"))[0]
            if kind not in KINDS or kind in parser.wanted:  # a wanted kind's lines are learned from their rows
                continue
            tries += 1
            self.tried[shape] += 1
            if self._try_counted(parser, raw, kind):
                self.tried[shape] = SHAPE_TRIES
                learned = True
        return learned

    def _sorter(self, parser: Parser) -> Parser:
        """A parser of the grammars that builds nothing: it says a line's kind, the reading parser's state untouched."""
        if self.sorter is None:
            self.sorter = Parser(self.grammars, parser.file, records=frozenset())
        return self.sorter

    def _try_counted(self, parser: Parser, raw: bytes, kind: str) -> bool:
        """Add the template of ``raw``, a line of ``kind`` that the parser only counts, if the lane then counts it as
        that kind's line and writes nothing."""
        assert self.shape is not None
        t = template_from_line(self.grammars, self.shape, raw.decode("utf-8", "replace"))
        if t is None:
            return self.yearless.learn_counted(parser, raw, kind)
        if t.kind != kind or native.steps(t, False) is None or any(x.key == t.key for x in self.templates):
            return False

        def counted() -> bool:  # the line counted once, by the new template (the last), and no row written
            quick = self._quick(parser, b"\n" + raw + b"\n", 0, len(raw) + 1, 0)
            if not quick:
                return False
            return quick[0][0] == 0 and quick[1][-1] == 1 and sum(quick[1]) == 1

        return self._kept_if(t, counted)

    def _try_template(self, parser: Parser, raw: bytes, row: Record, chunk: Chunk) -> bool:
        """Add the template of ``raw`` if the lane then writes ``row`` for it exactly as the parser does."""
        assert self.shape is not None
        t = template_from_line(self.grammars, self.shape, raw.decode("utf-8", "replace"))
        if t is None:
            return self.yearless.learn(parser, raw, row, chunk)
        if native.steps(t, t.kind in self.written) is None or any(x.key == t.key for x in self.templates):
            return False
        return self._kept_if(t, lambda: self._proven(parser, self._row_of(parser, raw, row.line - 1), row, chunk))

    def _kept_if(self, t: Template, proven: Callable[[], bool]) -> bool:
        """Add ``t`` to the templates, and keep it as learned from the log if ``proven()`` holds with it compiled in;
        else take it back."""
        self.templates.append(t)
        self._compile()
        if self.native is not None and proven():
            self.from_log.append(t)
            return True
        self.templates.pop()
        self._compile()
        return False

    def _row_of(self, parser: Parser, raw: bytes, base: int) -> Any:
        """The row of one line as the compiled matcher writes it (bytes; typed, :data:`typed.Rows`), or None if it
        writes none."""
        buf = b"\n" + raw + b"\n"
        quick = self._quick(parser, buf, 0, len(raw) + 1, base)
        return quick[0][1] if quick and quick[0][0] == 1 else None

    def _entries(self, parser: Parser, buf: bytes, s: int, e: int, base: int) -> tuple[list[Entry], int]:
        """The compiled matcher's matches in a segment (template indexes the lane's), and its lines saying 'accept'."""
        at, found = self.native_order, list[Entry]()
        got = self.native.scan(buf, s + 1, e + 1, base, self._plans(parser)[2], 0, 0, False, found)
        return [(p, at[i], row) for p, i, row in found], got[4] if got else 0

    def feed_in_place(self, parser: Parser, buf: Any, start: int, end: int) -> list[Part] | None:
        """Rows of ``buf[start:end]`` (complete lines, in any buffer) read in place by the
        compiled matcher; None if it cannot say them all (a launch line, a careful segment: the
        caller gives those bytes to :meth:`feed`)."""
        if self.native is None or self._named(parser):
            return None
        base = parser.line
        parts: list[Part] = []
        if self.yearless_first:  # else :meth:`feed` (:meth:`_segment`) tries both, the year-less matcher first
            return parts if self.yearless.whole(parser, buf, start, end, base, parts) else None
        quick = self._quick(parser, buf, start - 1, end - 1, base, True)
        if quick is None and self.yearless.whole(parser, buf, start, end, base, parts):
            self.yearless_first = True
            return parts
        if not quick:
            return None
        self.yearless_first = False
        self._account(parser, quick, base, parts)
        return parts

    def _account(self, parser: Parser, quick: Quick, base: int, parts: list[Part]) -> None:
        """A quick segment's rows into ``parts``; its tallies and lines into the parser."""
        (nrows, rows), counts, lines, accepts = quick
        if nrows:
            parts.append(self.part(parser, nrows, rows))
        account(parser, self.templates, self.exempt_saying, counts, lines, accepts, base)

    def _quick(
        self, parser: Parser, buf: bytes, s: int, e: int, base: int, part: bool = False
    ) -> Quick | Literal[False] | None:
        """The segment through the compiled matcher (:mod:`acceptmon.parse.fast.native`), or None;
        False if a line holds a launch anchor. ``part``: its rows are a part this lane hands on (records not made
        yet come as columns), not one line's to prove."""
        at = self.native_order
        assert self.native is not None
        _, _, plans, refused = self._plans(parser)
        got = self.native.scan(buf, s + 1, e + 1, base, plans, 0, 0, False, None, part and self.hands == "unmade")
        if got is None:
            return False
        nrows, rows, hits, anchors, accepts, lines = got[:6]
        if any(hits[k] for k in refused):
            return None
        counts = [0] * len(self.templates)
        for i, n in zip(at, hits, strict=True):
            counts[i] = n
        if not self._accounted(anchors, counts, accepts > 0):
            return None
        return (nrows, rows), counts, lines, accepts

    def _accounted(self, found: Sequence[int], counts: list[int], says_accept: bool) -> bool:
        """Every anchor in the segment (``found[j]`` of ``counted[j]``) is one the fast matches'
        literal text holds, and every exempt (decode) match says 'accept' in its literal text if
        its line says it at all (``says_accept``: some line of the segment does)."""
        if not explained(self.anchor_counts, counts, found):
            return False
        return not says_accept or not any(n and u for n, u in zip(counts, self.unsure, strict=True))
