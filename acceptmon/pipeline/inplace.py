"""Reading a regular file's lines for the compiled matcher without building a bytes object per block.

``acceptmon parse`` of a large plain file spent as much time cutting and copying blocks as the
compiled matcher (:mod:`acceptmon.fastlane.native`) spends reading them. Here the file is read
into one reused buffer; the matcher reads each region of complete lines (at most the buffer's
size, so shorter than the reader's line limit) where it lies, and the partial last line moves
to the buffer's front. A region the matcher cannot say whole (a launch line, a segment for the
careful path) is copied out and given to the block path. Where a region cannot be cut (a line
longer than the buffer, a last line without its newline, a byte-order mark at offset 0) the
regions stop, and the caller's reader takes over from there. (A memory map was no faster, and a
file truncated under it kills the process with SIGBUS.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from acceptmon.parse import Parser

BOM = b"\xef\xbb\xbf"


class Lane(Protocol):
    """What is used here of :class:`acceptmon.fastlane.lane.FastLane`."""

    native: Any

    def feed_in_place(self, parser: Parser, buf: Any, start: int, end: int) -> list[Any] | None: ...


def regions(
    parser: Parser, path: str, span: tuple[int, int], lane: Lane, feed: Callable[[bytes], list[Any]], size: int
) -> Iterator[tuple[int, int, list[Any]]]:
    """(start, end, chunk results) of each region of ``path[start:end]`` (``span``, ``end`` a line
    start or the file's end), in order, as file offsets; ``feed`` takes a region's bytes where the
    matcher cannot."""
    start, end = span
    if lane.native is None or end <= start:
        return
    buf = bytearray(size)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        held, pos = 0, start  # bytes of a partial line at the buffer's front; the file offset of the buffer
        while pos + held < end:
            got = f.readinto(view[held : min(size, end - pos)])
            if not got:
                return
            filled = held + got
            cut = buf.rfind(b"\n", 0, filled) + 1
            if cut == 0 or (pos == 0 and buf.startswith(BOM)):
                return
            parts = lane.feed_in_place(parser, buf, 0, cut)
            yield pos, pos + cut, parts if parts is not None else feed(bytes(view[:cut]))
            held = filled - cut
            buf[:held] = buf[cut:filled]
            pos += cut
