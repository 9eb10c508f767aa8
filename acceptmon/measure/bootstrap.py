"""The circular block bootstrap of means, as every confidence interval of acceptmon's takes it; no I/O.

Neighbouring decode lines are correlated, so a side is resampled in blocks: ``k = ceil(n / L)`` blocks
of ``L = ceil(n^(1/3))`` consecutive batches (wrapping) start at uniform positions, the last cut so a
replicate has ``n`` batches; block sums come from prefix sums (``k`` look-ups per replicate, not
``n``). Stdlib ``random``, seeded by the caller. Intervals are the percentiles of the replicates.

The look-ups of a replicate are the compiled module's ``block_totals_each`` where it is built (a 1 M-batch side
draws 20 M of them, at random starts: every column's sums at a start are packed side by side, :func:`packed`, so a
start is one cache line read, not one a column), on threads that let go of the GIL while this one draws the next
replicates; else :func:`block_totals` here: the same additions in the same order, so the same replicates to the
last bit either way; so are the prefix and block sums (``prefix_sums``, ``spans``, ``pack_spans``).
"""

from __future__ import annotations

import math
import random
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import reduce
from itertools import accumulate, chain, islice
from operator import add, itemgetter, sub
from typing import Any

from acceptmon.measure.columns import missing
from acceptmon.parse.fast import native

RESAMPLES = 2000
DRAWN_AHEAD = 32
"""Replicates drawn at a time: a thread adds one such chunk's block sums while the next is drawn."""
ADDERS = 2
"""Threads adding chunks' block sums at once, in C without the GIL: the bootstrap runs once the log is read, when
the cores the workers read it on are free. 256 MiB doctor, DP-attention Ascend (2 cores): the time after the last
range is collected, 0.42–0.49 s with one (the adding the longer half), 0.35–0.36 s with two."""
CONFIDENCE = 0.95


def block_length(n: int) -> int:
    """``ceil(n ** (1/3))`` in exact integer arithmetic (at least 1)."""
    length = 1
    while length**3 < n:
        length += 1
    return length


def bootstrap_means(
    columns: Sequence[Sequence[float | None]], rng: random.Random, resamples: int
) -> list[list[float | None]]:
    """Circular block bootstrap of each column's mean; all columns share the drawn blocks.

    Columns have one value per batch (None, or NaN in an ``array('d')``: not logged). Returns, per
    column, one mean per replicate (None when a replicate drew no value of that column). A replicate's
    last block (cut short) is added once all are drawn: only the prefix sums at its start are needed,
    so no table of every start's tail is kept.
    """
    n = len(columns[0]) if columns else 0
    if n == 0:
        return [[None] * resamples for _ in columns]
    length = block_length(n)
    blocks = -(-n // length)
    tail = n - (blocks - 1) * length
    floats = [_floats(col) for col in columns]
    module = native.load()
    tables = [] if module is not None else [_block_sums(col, length) for col in floats]
    lasts: list[int] = []
    parts: list[list[tuple[float, int]]] = [[] for _ in columns]

    def drawn(k: int) -> list[bytes]:
        """The next ``k`` replicates' draws, each one's last (cut-short) block's start noted."""
        chunk = random_bytes(rng, k, 8 * blocks)
        lasts.extend(int.from_bytes(draws[-8:], "little") % n for draws in chunk)
        return chunk

    def added(chunk: list[bytes]) -> list[list[tuple[float, int | None]]]:
        return [[block_totals(draws, n, sums, counts) for sums, counts in tables] for draws in chunk]

    sizes = [min(DRAWN_AHEAD, resamples - i) for i in range(0, resamples, DRAWN_AHEAD)]
    if module is None:
        sums_of: Iterator[list[list[tuple[float, int | None]]]] = map(added, map(drawn, sizes))
    else:
        rows, counted = packed(floats, length)
        sums_of = _overlapped(sizes, drawn, lambda chunk: module.block_totals_each(chunk, n, rows, counted))
    for chunk_sums in sums_of:
        for replicate in chunk_sums:
            for (total, count), part in zip(replicate, parts, strict=True):
                part.append((total, n if count is None else count))
    tables.clear()  # (the block sums: no longer needed)
    out: list[list[float | None]] = []
    for col, part in zip(floats, parts, strict=True):
        prefix, cprefix = _prefixes(col, n - 1 + tail)
        means: list[float | None] = []
        for (total, count), last in zip(part, lasts, strict=True):
            total += prefix[last + tail] - prefix[last]
            if cprefix is not None:
                count += cprefix[last + tail] - cprefix[last]
            means.append(total / count if count else None)
        out.append(means)
    return out


def packed(columns: Sequence[array[float]], length: int) -> tuple[bytearray, tuple[bool, ...]]:
    """The columns' block sums (:func:`_block_sums`) as the compiled ``block_totals_each`` reads them, and which
    columns have counts: row by row (a start), each column's sum and, where some of its values are missing, its count,
    8 bytes each, made in place from the column's prefix sums (``pack_spans``): no column's tables are made."""
    module = native.load()
    assert module is not None
    n = len(columns[0])
    counted = tuple(missing(col) > 0 for col in columns)
    width = len(columns) + sum(counted)
    rows = bytearray(8 * n * width)
    cell = 0
    for col, has in zip(columns, counted, strict=True):
        prefix, counts = _prefixes(col, n + length)  # (counts: None where none is missing, as counted says)
        module.pack_spans(rows, width, cell, prefix, counts, n, length)
        cell += 1 + has
        del prefix, counts
    return rows, counted


def _overlapped(
    sizes: list[int], drawn: Callable[[int], list[bytes]], added: Callable[[list[bytes]], Any]
) -> Iterator[Any]:
    """``added(drawn(k))`` for each of ``sizes`` in order, :data:`ADDERS` threads adding chunks' blocks while this one
    draws the next (the compiled ``block_totals_each`` lets go of the GIL; the draws, and so the replicates, are the
    same, and so is the order the sums are given in)."""
    with ThreadPoolExecutor(ADDERS) as pool:
        pending: deque[Future[Any]] = deque()
        for k in sizes:
            pending.append(pool.submit(added, drawn(k)))
            if len(pending) > ADDERS:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def random_bytes(rng: random.Random, k: int, size: int) -> list[bytes]:
    """``[rng.randbytes(size) for _ in range(k)]``, ``size`` a multiple of 4: of a ``random.Random`` itself, made by the
    compiled module's ``random_bytes`` where it is built (its Mersenne Twister on the generator's state, without the
    interpreter's big integers), the same bytes and the generator moved on alike."""
    module = native.load()
    if module is None or type(rng) is not random.Random or size % 4:
        return [rng.randbytes(size) for _ in range(k)]
    version, internal, gauss = rng.getstate()
    chunk: list[bytes]
    chunk, after = module.random_bytes(internal, k, size)
    rng.setstate((version, after, gauss))
    return chunk


def draw_starts(rng: random.Random, n: int, k: int) -> list[int]:
    """``k`` uniform positions in ``range(n)``: 64 random bits each, reduced mod n (bias below 1e-14)."""
    return _starts(rng.randbytes(8 * k), n)


def _starts(draws: bytes, n: int) -> list[int]:
    """The positions of ``draws``, 8 bytes each (little-endian), in ``range(n)``."""
    values = array("Q", draws)
    if sys.byteorder == "big":
        values.byteswap()
    return list(map(n.__rmod__, values))


def block_totals(draws: bytes, n: int, sums: array[float], counts: array[int] | None) -> tuple[float, int | None]:
    """A replicate's full blocks: the sum of ``sums`` (and of ``counts``, None without) at the first ``k - 1`` of
    its ``k`` starts ``draws``, added one by one from 0.0 in the order drawn (``sum`` of floats adds with
    compensation since Python 3.12: not the compiled module's additions)."""
    full = itemgetter(n, n, *_starts(draws, n)[:-1])  # index n is a 0 pad: always >= 2 items, so a tuple comes back
    return reduce(add, full(sums), 0.0), None if counts is None else sum(full(counts))


def _floats(column: Sequence[float | None]) -> array[float]:
    """A column as an ``array('d')`` with NaN for a value not logged (an array of floats as it is)."""
    if isinstance(column, array) and column.typecode == "d":
        return column
    return array("d", (math.nan if v is None else v for v in column))


def _prefixes(column: array[float], upto: int) -> tuple[array[float], array[int] | None]:
    """Prefix sums of the column wrapped around (a block may run past its end), to index ``upto``; and of
    its count of logged values, where some are missing (None where none is). The compiled module's ``prefix_sums``
    where it is built: the same additions in the same order."""
    gaps = missing(column)
    module = native.load()
    if module is not None and column:
        prefix = array("d", bytes(8 * (upto + 1)))
        counts = array("q", bytes(8 * (upto + 1))) if gaps else None
        module.prefix_sums(column, upto, prefix, counts)
        return prefix, counts
    values = array("d", (0.0 if v != v else v for v in column)) if gaps else column
    prefix = array("d", accumulate(islice(chain(values, values), upto), initial=0.0))
    if not gaps:
        return prefix, None
    del values
    marks = bytes(v == v for v in column)
    return prefix, array("q", accumulate(islice(chain(marks, marks), upto), initial=0))


def _block_sums(column: array[float], length: int) -> tuple[array[float], array[int] | None]:
    """Sum (and count, if values are missing) of the block of ``length`` from each start, and a 0 pad.

    Arrays of machine numbers (8 bytes a start), from prefix sums over the column and its first
    ``length`` values again: the same additions, in the same order, as over the column twice."""
    n = len(column)
    prefix, cprefix = _prefixes(column, n + length)
    sums = _spans(prefix, n, length)
    sums.append(0.0)
    del prefix
    if cprefix is None:
        return sums, None
    counts = _spans(cprefix, n, length)
    counts.append(0)
    return sums, counts


def _spans(prefix: array[Any], n: int, width: int) -> array[Any]:
    """``prefix[i + width] - prefix[i]`` for each start ``i`` in ``range(n)`` (in the compiled module where built)."""
    module = native.load()
    if module is not None:
        out = array(prefix.typecode, bytes(8 * n))
        module.spans(prefix, n, width, out)
        return out
    view = memoryview(prefix)
    return array(prefix.typecode, map(sub, view[width : width + n], view[:n]))


def interval(replicates: Sequence[float | None], confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Percentile interval (linear interpolation between ranks) of the replicates that have a value."""
    s = sorted(v for v in replicates if v is not None)
    if not s:
        return None, None
    positions = ((1 - confidence) / 2 * (len(s) - 1), (1 + confidence) / 2 * (len(s) - 1))
    lo, hi = (s[int(p)] + (s[min(int(p) + 1, len(s) - 1)] - s[int(p)]) * (p - int(p)) for p in positions)
    return lo, hi
