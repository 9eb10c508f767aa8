"""Rotated names: a glob that matches them counts each line once, and a rotation while serve is down loses none.

Real files, real renames, copies and gzip on disk, and a real `serve` scraped for its decode batch counter.
"""

from __future__ import annotations

import gzip
import os
import shutil

import pytest

from tests.serving import Serve, decode_line, launch_line, wait_for

pytestmark = pytest.mark.integration

SETTLE = 2.5
"""Long enough for two glob rescans (RESCAN_SECONDS = 1): a rotated name would be counted by then."""


def write(path, first: int, n: int, *, launch: bool = False, ts: str = "2026-02-26 14:00:00") -> None:
    with path.open("a") as f:
        if launch:
            f.write(launch_line(ts=ts) + "\n")
        f.write("".join(decode_line(first + i) + "\n" for i in range(n)))


def decoded(serve: Serve) -> float:
    """Decode batches counted over every file."""
    return sum(serve.metrics().get("acceptmon_decode_batches_total", {}).values())


def settle(serve: Serve, want: int) -> float:
    """The count once it reached ``want`` and then had time to go past it (it should not)."""
    assert wait_for(lambda: decoded(serve) >= want), (want, decoded(serve))
    wait_for(lambda: decoded(serve) > want, timeout=SETTLE)
    return decoded(serve)


@pytest.mark.parametrize("pattern", ["*.log*", "*"])
def test_a_renamed_file_matched_again_by_the_glob_is_counted_once(tmp_path, pattern):
    log = tmp_path / "a.log"
    serve = Serve(str(tmp_path / pattern))
    try:
        serve.wait_listening()
        write(log, 0, 100, launch=True)
        assert settle(serve, 100) == 100
        log.rename(tmp_path / "a.log.1")
        write(log, 100, 50, launch=True, ts="2026-02-26 15:00:00")
        assert settle(serve, 150) == 150  # 250 before: a.log.1 was read again from its start
    finally:
        serve.stop()


def test_a_copytruncate_copy_is_counted_once(tmp_path):
    log = tmp_path / "a.log"
    serve = Serve(str(tmp_path / "*.log*"))
    try:
        serve.wait_listening()
        write(log, 0, 100, launch=True)
        assert settle(serve, 100) == 100
        shutil.copyfile(log, tmp_path / "a.log.1")
        os.truncate(log, 0)
        write(log, 100, 50, launch=True, ts="2026-02-26 15:00:00")
        assert settle(serve, 150) == 150
    finally:
        serve.stop()


def test_delaycompress_rotations_are_counted_once(tmp_path):
    log, one = tmp_path / "a.log", tmp_path / "a.log.1"
    serve = Serve(str(tmp_path / "*"))
    try:
        serve.wait_listening()
        write(log, 0, 100, launch=True)
        assert settle(serve, 100) == 100
        log.rename(one)  # first rotation: renamed, not compressed yet
        write(log, 100, 50, launch=True, ts="2026-02-26 15:00:00")
        assert settle(serve, 150) == 150
        with one.open("rb") as src, gzip.open(tmp_path / "a.log.2.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)  # second rotation: the first compressed, the second renamed
        one.unlink()
        log.rename(one)
        write(log, 150, 30, launch=True, ts="2026-02-26 16:00:00")
        assert settle(serve, 180) == 180
    finally:
        serve.stop()


@pytest.mark.parametrize(
    ("compressed", "pattern"),
    [(False, "a.log"), (True, "a.log"), (False, "*.log*")],
    ids=["renamed", "renamed-and-gzipped", "renamed-under-a-glob"],
)
def test_a_rotation_while_stopped_reads_the_rest_of_the_old_file_first(tmp_path, compressed, pattern):
    log, state = tmp_path / "a.log", tmp_path / "state.json"
    write(log, 0, 20, launch=True)
    first = Serve(str(tmp_path / pattern), "--state-file", str(state))
    try:
        first.wait_listening()
        assert wait_for(lambda: decoded(first) == 20)
    finally:
        assert first.stop() == 0
    write(log, 20, 100)  # while nobody follows
    log.rename(tmp_path / "a.log.1")
    if compressed:
        with (tmp_path / "a.log.1").open("rb") as src, gzip.open(tmp_path / "a.log.1.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        (tmp_path / "a.log.1").unlink()
    write(log, 120, 10)
    second = Serve(str(tmp_path / pattern), "--state-file", str(state))
    try:
        second.wait_listening()
        assert settle(second, 110) == 110  # 10 before: the 100 appended before the rotation were lost
    finally:
        second.stop()
    assert "rotated while stopped" in second.stderr
