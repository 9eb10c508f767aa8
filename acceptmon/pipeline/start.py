"""Where the live pipeline starts reading a file: at the current run's first launch line, in the state
a parser reading the whole file would have there.

The file before the start is pre-scanned (:mod:`acceptmon.parse.prescan`: only launch lines and the
first stats line after each are parsed), so a live parser numbers runs and lines
as ``acceptmon runs`` does: runs are numbered per file in launch order, and the launch lines of one
server start (vLLM's API server and its engines) are one run, whether the start lands before or
between them. A multi-GB log costs a literal search, not a replay.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from acceptmon.inputs.files import MAX_LINE
from acceptmon.inputs.ranges import line_end, next_line_start
from acceptmon.parse import prescan
from acceptmon.parse.fast.native import finder
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser, ParseState
from acceptmon.parse.records import Record

PREAMBLE_BYTES = 64 << 10
"""How far before the current run's launch line start-up warnings are looked for."""
_WINDOW = 4 << 20
"""Bytes pre-scanned at a time: every search for a word stops at the window's end, so a word the file
never holds costs one pass over the file, not one per launch line. Read, not memory-mapped: a log
truncated while it is scanned must not kill the process (SIGBUS)."""


class _Finder:
    """The pre-scan's searches over one window, remembering each word's next hit: the scan only moves
    forward, so a window with many launch lines is searched once per word, not once per line. ``native``:
    the compiled searches (``memmem``, ``memchr``), or None for ``bytes``' own."""

    def __init__(self, native: prescan.Finder | None) -> None:
        self._native = native
        self._next: dict[tuple[bytes, int], tuple[int, int]] = {}

    def find_any(self, buf: Any, start: int, end: int, words: Sequence[bytes]) -> int:
        best = -1
        for w in words:
            since, hit = self._next.get((w, end), (-1, -1))
            if since < 0 or start < since or (0 <= hit < start):
                hit = self._native.find_any(buf, start, end, (w,)) if self._native else buf.find(w, start, end)
                self._next[w, end] = (start, hit)
            if hit >= 0 and (best < 0 or hit < best):
                best = hit
        return best

    def newlines(self, buf: Any, start: int, end: int) -> int:
        return self._native.newlines(buf, start, end) if self._native else int(buf.count(b"\n", start, end))


def _scan(
    parser: Parser, f: BinaryIO, span: tuple[int, int], native: prescan.Finder | None
) -> tuple[prescan.RunStart | None, int]:
    """:func:`prescan.scan` of the whole lines of ``f`` in ``span``, a window at a time: (where the last run
    that began there began, the end of the last whole line). A line longer than a window is skipped whole."""
    start, end = span
    began = None
    while start < end:
        f.seek(start)
        data = f.read(min(_WINDOW, end - start))
        stop = data.rfind(b"\n") + 1
        if not stop:
            after = line_end(f, start + len(data), end) if len(data) == _WINDOW else None
            if after is None:
                break  # the last line, not complete yet
            parser.skip_oversized()
            start = after
            continue
        got = prescan.scan(parser, data, (0, stop), _Finder(native), MAX_LINE, at_start=start == 0)
        if got is not None:
            began = prescan.RunStart(start + got.offset, got.state)
        start += stop
    return began, start


def scan_to(path: str, grammars: GrammarSet, cut: int) -> tuple[prescan.RunStart | None, ParseState, int]:
    """Pre-scan ``path``'s whole lines: (where its last run began, the parser state at ``cut``, the end
    of the last whole line). ``cut`` is a line start."""
    parser = Parser(grammars, path)
    native = finder()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        began, pos = _scan(parser, f, (0, min(cut, size)), native)
        at_cut = parser.state
        later, end = _scan(parser, f, (pos, size), native)
    return later or began, at_cut, end


def preamble(path: str, grammars: GrammarSet, offset: int, state: ParseState) -> list[Record]:
    """Records of the kinds printed before their launch line (``before_launch``) in the bytes before ``offset``,
    after any launch line there, numbered as a parser in ``state`` at ``offset`` has them: its run, its lines."""
    kinds = frozenset(k.name for k in KINDS.values() if k.before_launch)
    if not kinds or offset <= 0:
        return []
    with open(path, "rb") as f:
        start = max(0, offset - PREAMBLE_BYTES)
        f.seek(start)
        data = f.read(offset - start)
    if start:
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""  # from the first whole line
    parser = Parser(grammars, path, records=kinds)
    records = parser.feed(data)
    return [
        r.model_copy(update={"run": state.run, "line": state.line - (parser.line - r.line)})
        for r in records
        if r.kind in kinds and r.run == parser.run
    ]


def _launch_at(path: str, grammars: GrammarSet, began: prescan.RunStart, launch: Any) -> Record | None:
    """The launch line that began the current run, parsed in its state, with the run's config (``launch``)."""
    with open(path, "rb") as f:
        f.seek(began.offset)
        line = f.readline(MAX_LINE + 1)
    record = Parser(grammars, path, began.state).parse_line(line.decode("utf-8", "replace").rstrip("\n"))
    if record is None or not KINDS[record.kind].starts_run:
        return None
    return record.model_copy(update={"config": launch}) if launch is not None else record


def current_run_start(
    path: str, grammars: GrammarSet, backfill_limit: int, note: Callable[[str], None]
) -> tuple[int, ParseState, list[Record], int | None]:
    """Where a live start reads ``path``: (offset, parser state there, records to pre-feed, history end).

    At the current run's first launch line, with the start-up warnings printed before it; when that
    line is more than ``backfill_limit`` bytes back, the last ``backfill_limit`` bytes, with the
    launch (and those warnings) pre-fed so the run's config is known. The history end is where
    the runs before the live start end (None: there are none).
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            cut = next_line_start(f, size - backfill_limit)
        began, at_cut, end = scan_to(path, grammars, cut)
        cut = min(cut, end)
        warnings = preamble(path, grammars, began.offset, began.state) if began is not None else []
        launch = _launch_at(path, grammars, began, at_cut.launch) if began is not None and began.offset < cut else None
    except (OSError, ValueError):
        return 0, ParseState(), [], None  # unreadable (or emptied) now: the follower reports it and retries
    if began is None:
        if cut:
            note(f"{path}: no launch line found; replaying the last {size - cut:,} bytes")
        return cut, at_cut, [], cut or None
    if began.offset >= cut:
        return began.offset, began.state, warnings, began.offset or None
    note(f"{path}: current run starts {size - began.offset:,} bytes back; replaying the last {size - cut:,}")
    return cut, at_cut, [*warnings, *([launch] if launch is not None else [])], began.offset
