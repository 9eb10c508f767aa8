"""Byte ranges of a regular file, for the parallel readers of ``acceptmon parse -j N``.

The file is cut into ranges that each start a line (:func:`split_ranges`), found without
reading it twice.
Bytes only: nothing here parses.
"""

from __future__ import annotations

import itertools
import os
from typing import BinaryIO

from acceptmon.inputs.files import BLOCK_SIZE, WINDOW


def next_line_start(f: BinaryIO, offset: int) -> int:
    """Offset of the first line that starts at or after ``offset`` (the file's end if none does)."""
    if offset <= 0:
        return 0
    found = _line_start_before(f, offset, None)
    return f.tell() if found is None else found


def line_end(f: BinaryIO, pos: int, end: int) -> int | None:
    """The offset after the first newline in ``[pos, end)``, or None (reads at most ``end - pos`` bytes)."""
    return _line_start_before(f, pos + 1, end + 1)


def _line_start_before(f: BinaryIO, offset: int, stop: int | None) -> int | None:
    """The first line start in ``[offset, stop)``, or None; reads at most ``stop - offset`` bytes."""
    f.seek(offset - 1)
    pos = offset - 1
    while stop is None or pos < stop - 1:
        want = WINDOW if stop is None else min(WINDOW, stop - 1 - pos)
        window = f.read(want)
        if not window:
            return None
        nl = window.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(window)
    return None


def split_ranges(
    path: str, parts: int, *, min_size: int = BLOCK_SIZE, size: int | None = None
) -> list[tuple[int, int]]:
    """Cut a regular file (or its first ``size`` bytes) into about ``parts`` ranges that each start a line.

    A cut is the first line start at or after a multiple of the step. Its search stops
    at the next multiple (where the next search begins), so the file is read at most
    once whatever its content; a stretch without a newline (NULs, a sparse file) just
    joins the range before it.
    """
    size = os.path.getsize(path) if size is None else size
    if parts <= 1 or size < 2 * min_size:
        return [(0, size)]
    step = max(size // parts, min_size)
    cuts = [0]
    with open(path, "rb") as f:
        for guess in range(step, size, step):
            pos = _line_start_before(f, guess, min(guess + step, size))
            if pos is not None and cuts[-1] < pos < size:
                cuts.append(pos)
    cuts.append(size)
    return list(itertools.pairwise(cuts))
