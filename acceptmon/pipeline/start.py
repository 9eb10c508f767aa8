"""Where the live pipeline starts reading a file: at the current run's launch line, found backwards.

A multi-GB log need not be replayed to know the current run's config: a backwards
literal search for the launch grammars' anchors finds the last launch line, and only
lines holding an anchor are parsed.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from acceptmon.grammar import GrammarSet
from acceptmon.kinds import KINDS
from acceptmon.parse import Parser
from acceptmon.records import Record
from acceptmon.source import MAX_LINE


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
