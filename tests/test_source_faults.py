"""The reader on awkward input: a byte-order mark, special files, corrupt gzip, NUL-filled files."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from acceptmon import source
from acceptmon.records import Record
from acceptmon.source import (
    next_line_start,
    split_ranges,
)

BOM = b"\xef\xbb\xbf"
DECODE = (
    b"[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, accept len: 2.85, "
    b"accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\n"
)
NOT_REGULAR = "not a regular file ({}); acceptmon reads regular files or - for stdin"


class DecodeLines:
    """A pipeline job that keeps the line number and accept length of every decode record."""

    records_wanted = frozenset({"decode"})

    def __init__(self) -> None:
        self.got: list[tuple[int, float]] = []

    def chunk(self, records: list[Record]) -> list[tuple[int, float]]:
        return [(r.line, r.accept_len) for r in records if r.kind == "decode"]

    def collect(self, part: list[tuple[int, float]]) -> None:
        self.got.extend(part)


# --- splitting NUL-filled and sparse files -----------------------------------------------------


class CountingFile:
    """A file that counts the bytes read through it."""

    def __init__(self, f: Any, counter: list[int]) -> None:
        self.f, self.counter = f, counter

    def __enter__(self) -> CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.f.read(n)
        self.counter[0] += len(data)
        return data

    def seek(self, pos: int, whence: int = 0) -> int:
        return int(self.f.seek(pos, whence))

    def tell(self) -> int:
        return int(self.f.tell())


def _count_reads(monkeypatch: Any) -> list[int]:
    counter = [0]
    real_open = open

    def counting_open(path: str, mode: str = "r") -> CountingFile:
        return CountingFile(real_open(path, mode), counter)

    monkeypatch.setattr(source, "open", counting_open, raising=False)
    return counter


def _assert_cover(ranges: list[tuple[int, int]], size: int) -> None:
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(ranges))


def test_split_of_a_sparse_gigabyte_reads_it_at_most_once(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "sparse.log"
    size = 1 << 30
    with path.open("wb") as f:
        os.truncate(f.fileno(), size)
        for at in (5 << 20, 20 << 20, 700 << 20):  # three newlines in a gigabyte of NULs
            f.seek(at)
            f.write(b"\n")
    counter = _count_reads(monkeypatch)
    ranges = split_ranges(str(path), 64, min_size=1 << 22)
    assert counter[0] <= size + 64 * (1 << 16)
    # the step is 16 MiB: the newline at 5 MiB lies before the first cut, inside range one
    assert ranges == [(0, (20 << 20) + 1), ((20 << 20) + 1, (700 << 20) + 1), ((700 << 20) + 1, size)]
    _assert_cover(ranges, size)


def test_split_of_an_all_nul_file_is_one_range(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "nul.log"
    with path.open("wb") as f:
        os.truncate(f.fileno(), 64 << 20)
    counter = _count_reads(monkeypatch)
    assert split_ranges(str(path), 128, min_size=1 << 16) == [(0, 64 << 20)]
    assert counter[0] <= (64 << 20) + 128 * (1 << 16)


def _reference_split(data: bytes, parts: int, min_size: int) -> list[tuple[int, int]]:
    """Each cut is the first line start at or after a multiple of the step, counted once."""
    size = len(data)
    if parts <= 1 or size < 2 * min_size:
        return [(0, size)]
    step = max(size // parts, min_size)
    cuts = [0]
    for guess in range(step, size, step):
        pos = data.find(b"\n", guess - 1) + 1 or size
        if cuts[-1] < pos < size:
            cuts.append(pos)
    return list(zip(cuts, [*cuts[1:], size], strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_split_of_ordinary_text_is_unchanged(tmp_path: Path, seed: int) -> None:
    import random

    rng = random.Random(seed)
    lines = [b"x" * rng.choice([0, 1, 5, 80, 300, 5000, 70000]) + b"\n" for _ in range(300)]
    data = b"".join(lines) + (b"tail without newline" if seed % 2 else b"")
    path = tmp_path / "t.log"
    path.write_bytes(data)
    for parts, min_size in ((2, 1 << 10), (7, 1 << 12), (40, 1 << 10), (300, 1)):
        ranges = split_ranges(str(path), parts, min_size=min_size)
        assert ranges == _reference_split(data, parts, min_size)
        _assert_cover(ranges, len(data))
        assert all(data[s - 1 : s] == b"\n" for s, _ in ranges[1:])


def test_next_line_start_without_a_bound_runs_to_the_end(tmp_path: Path) -> None:
    path = tmp_path / "t.log"
    path.write_bytes(b"ab\ncd" + bytes(200_000))
    with path.open("rb") as f:
        assert [next_line_start(f, n) for n in (0, 1, 3, 4)] == [0, 3, 3, 200_005]
