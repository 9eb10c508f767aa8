"""Reading a file's blocks, and a regular file's lines for the compiled matcher without a bytes object per block.

``acceptmon parse`` of a large plain file spent as much time cutting and copying blocks as the
compiled matcher (:mod:`acceptmon.parse.fast.native`) spends reading them. Here the file is read
into one reused buffer; the matcher reads each region of complete lines (at most the buffer's
size, so shorter than the reader's line limit) where it lies, and the partial last line moves
to the buffer's front. A region the matcher cannot say whole (a launch line, a segment for the
careful path) is copied out and given to the block path. Where a region cannot be cut (a line
longer than the buffer, a last line without its newline, a byte-order mark at offset 0) the
regions stop, and the caller's reader takes over from there. (A memory map was no faster, and a
file truncated under it kills the process with SIGBUS.)
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from acceptmon.inputs.files import OVERSIZED, iter_blocks, open_log
from acceptmon.parse.parser import Parser

BOM = b"\xef\xbb\xbf"


class Lane(Protocol):
    """What is used here of :class:`acceptmon.parse.fast.lane.FastLane` (and of a job's lane,
    `acceptmon.pipeline.lanes.JobLane`)."""

    @property
    def native(self) -> Any: ...

    in_place: bool
    """Reads regions of its own size where they lie; else blocks as the reader cuts them without a lane (a job
    lane: its job aggregates each block, and sums of floats come out the same only in the same blocks)."""

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


@contextmanager
def collected_per_block() -> Iterator[Callable[[], None]]:
    """The cyclic garbage collector off while a file's blocks are read; the call this gives collects the youngest
    generation, once after each block.

    A block's records are many small containers that live until its chunks are aggregated. Left to itself, the
    collector starts collections among them that walk the older objects again and again: 18 % of ``runs``'
    time on a 64 MiB log (3.32 -> 2.74 s with it off, the same peak memory). Records hold no cycles; what a
    block leaves, cycles included, is young when the block ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield _collect_young
    finally:
        if was:
            gc.enable()


FEWER = 50_000
"""Container allocations between two automatic collections of the youngest generation while ``-j`` collects the
workers' results (:func:`fewer_collections`; Python's default is 700)."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The cyclic collector started every :data:`FEWER` allocations, not 700, while this process collects the
    workers' results: they arrive as many small containers (vLLM's per-position rates a list each), and each
    collection walked them and the younger objects again. 256 MiB vLLM 0.10 DP doctor: 744 collections, 0.42 s, and
    unpickling 0.63 s (holding the interpreter) → 1 collection, 0.02 s, and 0.18 s; the same peak memory (100 MB).
    A collection per range instead (:func:`collected_per_block`'s) took 0.15 s on DP-attention Ascend, against
    0.02 s."""
    was = gc.get_threshold()
    gc.set_threshold(FEWER, *was[1:])
    try:
        yield
    finally:
        gc.set_threshold(*was)


def _collect_young() -> None:
    gc.collect(0)


def blocks(
    parser: Parser,
    path: str,
    span: tuple[int, int | None],
    parts_of: Callable[[bytes], list[Any]],
    how: tuple[Lane | None, bool, int],
    *,
    as_read: bool = False,
) -> Iterator[tuple[int, list[Any]]]:
    """(bytes, chunk results) per block of ``limit`` bytes from ``start`` (``span``; a None limit: to
    the end of the stream :func:`open_log` opens), each block's results from ``parts_of``.

    ``how`` = (lane, in place, block size): with the compiled matcher and ``in place`` (a plain file the
    caller checked), blocks are read as :func:`regions`; the rest, or all, by the reader (which skips
    lines over its limit). ``as_read``: a stream's blocks are what came (:func:`open_log`).
    """
    lane, in_place, size = how
    own = lane is not None and lane.in_place  # the lane's own blocks
    start, limit = span
    end = None if limit is None else start + limit
    if in_place and lane is not None and own and end is not None:
        for s, e, parts in regions(parser, path, (start, end), lane, parts_of, size):
            start = e
            yield e - s, parts
        if start >= end:
            return
    with open(path, "rb") if in_place else open_log(path, as_read=as_read) as stream:
        if start:
            stream.seek(start)
        for block in iter_blocks(
            stream, limit=None if end is None else end - start, **({"block_size": size} if own else {})
        ):
            if block is OVERSIZED:
                parser.skip_oversized()
                yield 0, []
                continue
            assert isinstance(block, bytes)
            yield len(block), parts_of(block)
