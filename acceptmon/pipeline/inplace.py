"""Reading a regular file's lines in place: the compiled matcher scans a memory map of the file.

``acceptmon parse`` of a large plain file spends its time reading and copying blocks before
the compiled matcher (:mod:`acceptmon.fastlane.native`) looks at them. Here the matcher reads
each region of complete lines (at most ``FAST_BLOCK`` bytes, so shorter than the reader's line
limit) straight from the map; a region it cannot say whole (a launch line, a segment for the
careful path) is copied out and given to the block path. Where a region cannot be cut (a line
longer than a region, a last line without its newline, a byte-order mark at offset 0) the
regions stop, and the caller's reader takes over from there.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from acceptmon.parse import Parser
from acceptmon.ranges import mapped, populate, release


class Lane(Protocol):
    """What is used here of :class:`acceptmon.fastlane.lane.FastLane`."""

    native: Any

    def feed_mapped(self, parser: Parser, buf: Any, start: int, end: int) -> list[Any] | None: ...


BOM = b"\xef\xbb\xbf"


def regions(
    parser: Parser, path: str, span: tuple[int, int], lane: Lane, feed: Callable[[bytes], list[Any]], size: int
) -> Iterator[tuple[int, int, list[Any]]]:
    """(start, end, chunk results) of each region of ``path[start:end]`` (``span``, ``end`` a line
    start or the file's end), in order; ``feed`` takes a region's bytes where the matcher cannot."""
    start, end = span
    if lane.native is None or end <= start:
        return
    with mapped(path) as m:
        if start == 0 and m[: len(BOM)] == BOM:
            return
        pos = start
        while pos < end:
            populate(m, pos, min(end, pos + size))
            stop = end if end - pos <= size else m.rfind(b"\n", pos, pos + size) + 1
            if stop <= pos or m[stop - 1 : stop] != b"\n":
                return
            parts = lane.feed_mapped(parser, m, pos, stop)
            yield pos, stop, parts if parts is not None else feed(m[pos:stop])
            release(m, pos - pos % mmap.PAGESIZE, stop)  # the pages read so far leave this process's memory
            pos = stop
