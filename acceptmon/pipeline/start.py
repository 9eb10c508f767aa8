"""Where the live pipeline starts reading a file: at the current run's launch line, found backwards.

A multi-GB log need not be replayed to know the current run's config: a backwards
literal search for the launch grammars' anchors finds the last launch line, and only
lines holding an anchor are parsed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO

from acceptmon.inputs.files import MAX_LINE
from acceptmon.inputs.ranges import next_line_start
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser, ParseState
from acceptmon.parse.records import Record
from acceptmon.parse.state import StreamState


def find_last_launch(path: str, grammars: GrammarSet, *, chunk: int = 1 << 20) -> tuple[int, Record] | None:
    """The last launch line of a file: its byte offset and record, searching backwards.

    Only lines holding a launch grammar's literal anchor are parsed, so this costs a
    backwards literal search even on a multi-GB log.
    """
    runs = {k.name for k in KINDS.values() if k.starts_run}
    anchors = sorted({g.anchor.encode() for g in grammars.records if g.spec.record in runs and g.anchor})
    if not anchors:
        return None
    probe = Parser(grammars, path)
    overlap = max(map(len, anchors))
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        while end > 0:
            start = max(0, end - chunk)
            f.seek(start)
            data = f.read(end - start + overlap)
            hits = sorted({start + i for a in anchors for i in _find_all(data, a)}, reverse=True)
            for pos in hits:
                line_start = _line_start(f, pos)
                f.seek(line_start)
                raw = f.readline(MAX_LINE + 1)
                if len(raw) > MAX_LINE:
                    continue
                kind, record = probe.classify(raw.decode("utf-8", "replace").rstrip("\n"))
                if kind in runs and record is not None:
                    return line_start, record
            end = start
    return None


def _find_all(data: bytes, needle: bytes) -> list[int]:
    out, pos = [], data.find(needle)
    while pos >= 0:
        out.append(pos)
        pos = data.find(needle, pos + 1)
    return out


def _line_start(f: BinaryIO, pos: int) -> int:
    """Offset of the start of the line holding byte ``pos``."""
    end = pos
    while end > 0:
        start = max(0, end - (1 << 16))
        f.seek(start)
        nl = f.read(end - start).rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        end = start
    return 0


PREAMBLE_BYTES = 64 << 10
"""How far before the current run's launch line start-up warnings are looked for."""


def preamble(path: str, grammars: GrammarSet, offset: int, *, span: int = PREAMBLE_BYTES) -> list[Record]:
    """Records of the kinds printed before their launch line (``before_launch``) in the bytes before ``offset``.

    They are numbered as a live parser starting at ``offset`` would number them: before its first launch.
    """
    kinds = frozenset(k.name for k in KINDS.values() if k.before_launch)
    if not kinds or offset <= 0:
        return []
    with open(path, "rb") as f:
        start = max(0, offset - span)
        f.seek(start)
        data = f.read(offset - start)
    if start:
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""  # from the first whole line
    records = Parser(grammars, path, records=kinds).feed(data)
    return [r for r in records if r.kind in kinds]


def current_run_start(
    path: str, grammars: GrammarSet, backfill_limit: int, note: Callable[[str], None]
) -> tuple[int, ParseState, list[Record], int | None]:
    """Where a live start reads ``path``: (offset, parser state there, records to pre-feed, history end).

    At the current run's launch line, with the start-up warnings printed before it; when that
    line is more than ``backfill_limit`` bytes back, the last ``backfill_limit`` bytes, with the
    launch (and those warnings) pre-fed so the run's config is known. The history end is where
    the runs before the live start end (None: there are none).
    """
    try:
        size = os.path.getsize(path)
        last = find_last_launch(path, grammars)
        with open(path, "rb") as f:
            cut = next_line_start(f, size - backfill_limit)
        warnings = preamble(path, grammars, last[0]) if last is not None else []
    except OSError:
        return 0, ParseState(), [], None  # unreadable now: the follower reports it and retries
    if last is None:
        if cut:
            note(f"{path}: no launch line found; replaying the last {size - cut:,} bytes")
        return cut, ParseState(), [], cut or None
    offset, launch = last
    if offset >= cut:
        return offset, ParseState(), warnings, offset or None
    note(f"{path}: current run starts {size - offset:,} bytes back; replaying the last {size - cut:,}")
    config = getattr(launch, "config", None)
    if launch.source:  # a stream's launch (a prefixed line): that source's run, not the plain lines'
        state = ParseState(streams={launch.source: StreamState(launch.run, config)})
    else:
        state = ParseState(line=0, run=launch.run, launch=config)
    return cut, state, [*warnings, launch], offset
