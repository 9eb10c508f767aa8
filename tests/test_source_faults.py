"""The reader on awkward input: a byte-order mark, special files, corrupt gzip, NUL-filled files."""

from __future__ import annotations

import gzip
import io
import itertools
import os
import pickle
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.errors import InputError
from acceptmon.inputs import files as source
from acceptmon.inputs.files import (
    OVERSIZED,
    LineAssembler,
    Oversized,
    check_path,
    is_stream,
    iter_blocks,
    not_regular,
    open_log,
)
from acceptmon.inputs.ranges import next_line_start, split_ranges
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.records import Record
from acceptmon.pipeline import batch as pipeline
from acceptmon.pipeline.batch import run

BOM = b"\xef\xbb\xbf"
DECODE = (
    b"[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, accept len: 2.85, "
    b"accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\n"
)
NOT_REGULAR = "not a regular file ({}); acceptmon reads regular files, FIFOs or - for stdin"


class DecodeLines:
    """A pipeline job that keeps the line number and accept length of every decode record."""

    records_wanted = frozenset({"decode"})

    def __init__(self) -> None:
        self.got: list[tuple[int, float]] = []

    def chunk(self, records: list[Record]) -> list[tuple[int, float]]:
        return [(r.line, r.accept_len) for r in records if r.kind == "decode"]

    def collect(self, part: list[tuple[int, float]]) -> None:
        self.got.extend(part)


# --- byte-order mark ---------------------------------------------------------------------------


def test_bom_first_line_is_parsed(tmp_path: Path, grammars: GrammarSet) -> None:
    log = tmp_path / "bom.log"
    log.write_bytes(BOM + DECODE * 2)
    job = DecodeLines()
    result = run([str(log)], grammars, job)
    assert job.got == [(1, 2.85), (2, 2.85)]
    assert result.tally.kinds["decode"] == 2 and result.tally.kinds["other"] == 0


def test_bom_in_gz_and_in_parallel_run(tmp_path: Path, grammars: GrammarSet, monkeypatch: Any) -> None:
    gz = tmp_path / "bom.log.gz"
    gz.write_bytes(gzip.compress(BOM + DECODE))
    job = DecodeLines()
    run([str(gz)], grammars, job)
    assert job.got == [(1, 2.85)]

    big = tmp_path / "big.log"
    big.write_bytes(BOM + DECODE * 400)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(pipeline, "RANGE_BYTES", 1 << 12)
    par = DecodeLines()
    run([str(big)], grammars, par, jobs=2)
    assert len(split_ranges(str(big), 8, min_size=1 << 12)) > 1
    assert par.got == [(n, 2.85) for n in range(1, 401)]


def test_bom_is_stripped_only_at_offset_zero() -> None:
    assert list(iter_blocks(io.BytesIO(BOM + b"a\nb\n"))) == [b"a\nb\n"]
    assert list(iter_blocks(io.BytesIO(b"a\n" + BOM + b"b\n"))) == [b"a\n" + BOM + b"b\n"]
    seeked = io.BytesIO(b"x" + BOM + b"a\n")
    seeked.seek(1)
    assert list(iter_blocks(seeked)) == [BOM + b"a\n"]  # a range that starts mid-file keeps its bytes
    assert list(iter_blocks(io.BytesIO(BOM))) == []
    assert list(iter_blocks(io.BytesIO(b"\xef\xbb"))) == [b"\xef\xbb\n"]  # not a BOM: a line like any other


def test_bom_counts_as_consumed_bytes() -> None:
    # limit counts raw bytes: the 3 BOM bytes + "a\n" are the first 5
    assert list(iter_blocks(io.BytesIO(BOM + b"a\nb\n"), limit=5)) == [b"a\n"]
    lines = LineAssembler(at_start=True)
    out = [*lines.feed(b"\xef"), *lines.feed(b"\xbb")]
    assert out == [] and lines.carry == b"\xef\xbb"  # held: the first line still starts at byte 0
    assert lines.feed(b"\xbfa\nb") == [b"a\n"]
    assert lines.carry == b"b"  # byte 5 of the file: 6 read - 1 held
    lines.reset(at_start=True)
    assert lines.feed(BOM + b"c\n") == [b"c\n"]
    assert LineAssembler().feed(BOM + b"d\n") == [BOM + b"d\n"]  # fed from a later offset: untouched


def test_bom_on_a_pipe() -> None:
    r, w = os.pipe()
    os.write(w, BOM + b"a\n")
    os.close(w)
    with open(r, "rb") as stream:
        assert list(iter_blocks(stream)) == [b"a\n"]


# --- special files -----------------------------------------------------------------------------


def _never_open(monkeypatch: Any) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("check_path must not open the path")

    monkeypatch.setattr("builtins.open", refuse)
    monkeypatch.setattr(os, "open", refuse)


@pytest.mark.parametrize("may_be_missing", [False, True])
def test_a_fifo_is_a_stream_checked_without_opening_it(tmp_path: Path, monkeypatch: Any, may_be_missing: bool) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    _never_open(monkeypatch)
    check_path(str(fifo), may_be_missing=may_be_missing)  # read as it comes (tests/test_stdin_streams.py)
    assert is_stream(str(fifo)) and not is_stream(str(tmp_path))


def test_not_regular_names_the_kind(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.log").write_bytes(DECODE)
    assert not_regular(os.stat(tmp_path / "a.log").st_mode) is None
    assert not_regular(os.stat(tmp_path).st_mode) == "is a directory, not a log file"
    assert not_regular(os.stat(tmp_path / "pipe").st_mode) == NOT_REGULAR.format("a FIFO")
    assert not_regular(os.stat("/dev/null").st_mode) == NOT_REGULAR.format("a character device")


def test_symlink_to_fifo_is_a_stream(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link.log").symlink_to(tmp_path / "pipe")
    check_path(str(tmp_path / "link.log"))
    assert is_stream(str(tmp_path / "link.log"))


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/null"])
def test_character_device_is_refused(dev: str) -> None:
    with pytest.raises(InputError) as err:
        check_path(dev, may_be_missing=True)
    assert str(err.value) == f"{dev}: " + NOT_REGULAR.format("a character device")


def test_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(InputError) as err:
            check_path(str(path))
    assert str(err.value) == f"{path}: " + NOT_REGULAR.format("a socket")


def test_regular_files_dirs_missing_and_stdin(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(DECODE)
    (tmp_path / "link.log").symlink_to(log)
    for ok in (str(log), str(tmp_path / "link.log"), "-"):
        assert check_path(ok) is None
    assert check_path(str(tmp_path / "later.log"), may_be_missing=True) is None
    with pytest.raises(InputError, match=r"a\.log/x: no such file$"):
        check_path(str(log / "x"))
    with pytest.raises(InputError, match=r"missing\.log: no such file$"):
        check_path(str(tmp_path / "missing.log"))
    with pytest.raises(InputError, match=r"is a directory, not a log file$"):
        check_path(str(tmp_path), may_be_missing=True)


# --- corrupt gzip ------------------------------------------------------------------------------


def _gz(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "broken.log.gz"
    path.write_bytes(data)
    return path


def _read_all(path: Path) -> list[bytes | Oversized]:
    with open_log(str(path)) as stream:
        return list(iter_blocks(stream, block_size=1 << 12))


def test_corrupt_deflate_stream(tmp_path: Path) -> None:
    good = gzip.compress(DECODE * 100)
    path = _gz(tmp_path, good[:10] + b"\xff" + good[11:])  # block type 3 does not exist
    with pytest.raises(InputError) as err:
        _read_all(path)
    assert str(err.value).startswith(f"{path}: corrupt gzip data (")
    assert "invalid block type" in str(err.value)


def test_truncated_gzip(tmp_path: Path) -> None:
    path = _gz(tmp_path, gzip.compress(DECODE * 1000)[:200])
    with pytest.raises(InputError) as err:
        _read_all(path)
    assert str(err.value).startswith(f"{path}: corrupt gzip data (") and "truncated" in str(err.value)


@pytest.mark.parametrize(
    ("mangle", "words"),
    [
        (lambda g: g[:-8] + bytes(4) + g[-4:], "CRC check failed"),
        (lambda g: g[:2] + b"\x07" + g[3:], "Unknown compression method"),
    ],
)
def test_bad_gzip_file(tmp_path: Path, mangle: Any, words: str) -> None:
    path = _gz(tmp_path, mangle(gzip.compress(DECODE)))
    with pytest.raises(InputError) as err:
        _read_all(path)
    assert str(err.value).startswith(f"{path}: corrupt gzip data (") and words in str(err.value)


def test_errors_of_the_caller_are_not_blamed_on_the_log(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(DECODE)
    for path in (log, _gz(tmp_path, gzip.compress(DECODE))):
        with pytest.raises(BrokenPipeError), open_log(str(path)):
            raise BrokenPipeError(32, "Broken pipe")  # e.g. stdout closed by `head`


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


# --- the OVERSIZED marker ----------------------------------------------------------------------


def test_oversized_is_public_and_single() -> None:
    assert isinstance(OVERSIZED, Oversized) and repr(OVERSIZED) == "OVERSIZED"
    assert Oversized() is OVERSIZED
    assert pickle.loads(pickle.dumps(OVERSIZED)) is OVERSIZED
    data = b"a\n" + b"x" * 50 + b"\nb\n"
    assert list(iter_blocks(io.BytesIO(data), max_line=10, block_size=8)) == [b"a\n", OVERSIZED, b"b\n"]


@given(st.lists(st.integers(0, 20), min_size=1, max_size=30), st.integers(1, 9))
@settings(max_examples=300, deadline=None)
def test_long_lines_are_found_whatever_the_block(lengths, max_line):
    """The quick check (a newline in every window of max_line // 2 bytes) never misses a long line."""
    from acceptmon.inputs.files import OVERSIZED, split_oversized

    block = b"".join(b"x" * n + b"\n" for n in lengths)
    got: list[Any] = []
    for part in split_oversized(block, max_line):
        got += ["long"] if part is OVERSIZED else part.split(b"\n")[:-1]  # type: ignore[union-attr]
    assert got == ["long" if n > max_line else b"x" * n for n in lengths]
