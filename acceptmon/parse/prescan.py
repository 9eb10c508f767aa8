"""The parallel pre-scan: a byte range of a file read for the parser state at its end, not for records.

``acceptmon parse -j N`` gives each worker a range of the file and the exact state the parser
has where the range starts (line number, run, launch, open launch group): the ranges are first
pre-scanned, each from an empty state, and the states chained (:meth:`ParseState.then`). A
pre-scan parses only launch lines; the lines between them are counted, and the first of them
that is a stats line (as the parser classifies it) ends the launch group, as it would in a
full parse. Lines longer than the reader's limit are skipped as the reader skips them.

A file whose lines come from several sources (stream prefixes: :mod:`acceptmon.parse.streams`)
has a launch group per source, which only that source's stats lines end: once the parser has
met a prefixed line (a launch line, or the first stats line of a gap), the stats lines of a gap
are all looked at, and the first of each source is classified. (A plain file costs what it did;
a gap whose first stats line is plain is taken for a plain file's.)

The range may be any buffer with ``find``/``rfind`` and slicing (bytes, or a memory map of
the file); a :class:`Finder` does the searching: :data:`BYTES` with ``bytes`` methods, or the
compiled matcher's (:func:`acceptmon.parse.fast.native.finder`). A scan also says where the
last run that began in its range began (a live start reads from there: :mod:`acceptmon.pipeline.start`).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from acceptmon.parse.parser import Parser, ParseState

BOM = b"\xef\xbb\xbf"


class RunStart(NamedTuple):
    """Where a run began in a scanned range: the offset (in the buffer) of the launch line that began it,
    and the parser's state just before that line."""

    offset: int
    state: ParseState


class Finder(Protocol):
    def find_any(self, buf: Any, start: int, end: int, words: Sequence[bytes]) -> int:
        """Offset of the first occurrence of any word in ``buf[start:end]``, or -1."""
        ...

    def newlines(self, buf: Any, start: int, end: int) -> int:
        """How many newlines ``buf[start:end]`` holds."""
        ...


class _BytesFinder:
    def find_any(self, buf: Any, start: int, end: int, words: Sequence[bytes]) -> int:
        hits = [p for p in (buf.find(w, start, end) for w in words) if p >= 0]
        return min(hits) if hits else -1

    def newlines(self, buf: Any, start: int, end: int) -> int:
        return int(buf.count(b"\n", start, end))


BYTES: Finder = _BytesFinder()


def scan(
    parser: Parser,
    buf: Any,
    span: tuple[int, int],
    finder: Finder = BYTES,
    max_line: int | None = None,
    *,
    at_start: bool = True,
) -> RunStart | None:
    """Advance ``parser`` over the whole lines of ``buf[start:end]`` (``span``), parsing only launch lines.

    ``at_start``: ``buf`` starts at the file's offset 0 (a byte-order mark there is not part of the first line).
    ``max_line``: lines longer than this are skipped (the reader's limit; None if the caller's
    reader already removed them). A last line without its newline counts as a line.
    Returns where the last run that began in the range began (None: no launch line began one).
    """
    start, end = span
    pos = start
    began: RunStart | None = None
    while pos < end:
        hit = finder.find_any(buf, pos, end, parser.launch_words)
        stop = end if hit < 0 else buf.rfind(b"\n", pos, hit) + 1 or pos
        _gap(parser, buf, (pos, stop), finder, (max_line, at_start))
        if hit < 0:
            break
        pos = buf.find(b"\n", hit, end) + 1 or end
        line = _line(buf, stop, pos, at_start)
        if max_line is not None and len(line) > max_line:
            parser.skip_oversized()
        else:
            before = parser.state
            parser.feed(line + b"\n")
            if parser.run != before.run:
                began = RunStart(stop, before)
    return began


def scan_block(parser: Parser, block: bytes, finder: Finder = BYTES) -> RunStart | None:
    """:func:`scan` of one block of complete lines from the reader (which dropped any byte-order mark
    and skipped the lines over its limit)."""
    return scan(parser, block, (0, len(block)), finder, at_start=False)


def _gap(parser: Parser, buf: Any, span: tuple[int, int], finder: Finder, how: tuple[int | None, bool]) -> None:
    """Lines without a launch line: counted; the first stats line of each source among them ends its launch group."""
    start, end = span
    max_line, at_start = how
    base, pos = parser.line, start
    ended: set[str] = set()  # the sources whose group a stats line of this gap ended
    while True:
        hit = finder.find_any(buf, pos, end, parser.stats_words)
        if hit < 0:
            break
        first = buf.rfind(b"\n", start, hit) + 1 or start
        pos = buf.find(b"\n", hit, end) + 1 or end
        line = _line(buf, first, pos, at_start)
        if max_line is not None and len(line) > max_line:
            continue
        text = line.decode("utf-8", "replace")
        if ended and parser.source_of(text) in ended:
            continue
        parser.line = base + finder.newlines(buf, start, first) + 1
        if parser.classify(text)[0] in parser.stats_kinds:
            parser.end_group()
            if not parser.streamed:
                break
            ended.add(parser.source_of(text))
    tail = 1 if end > start and buf[end - 1 : end] != b"\n" else 0
    parser.line = base + finder.newlines(buf, start, end) + tail


def _line(buf: Any, start: int, end: int, at_start: bool) -> bytes:
    """The line at ``buf[start:end]`` without its newline (nor a byte-order mark at the file's offset 0)."""
    line = bytes(buf[start:end]).rstrip(b"\n")
    return line[len(BOM) :] if at_start and start == 0 and line.startswith(BOM) else line
