"""`serve --state-file` as a real process when the state file's disk is full, or the file is nested too deeply.

The full disk is a real one: a 64 KiB tmpfs, mounted in a mount namespace of the serve process's
own (``unshare``), so nothing is mounted outside it and the mount goes with the process. As root
(CI) that is ``unshare --mount``; otherwise ``unshare --map-root-user --mount`` where user
namespaces are allowed. The test reaches the disk through ``/proc/PID/root``.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.serving import Serve, decode_line, launch_line, value, wait_for

pytestmark = pytest.mark.integration

SmallDisk = Callable[..., list[str]]


def write(path: Path, *lines: str) -> None:
    with path.open("a") as f:
        f.write("".join(line + "\n" for line in lines))


def decoded(serve: Serve) -> float:
    return value(serve.metrics(), "acceptmon_decode_batches_total") or 0.0


def saved_offset(state: Path, log: Path) -> int:
    """The offset the state file holds for ``log`` (-1 while it holds none)."""
    try:
        return int(json.loads(state.read_bytes())["files"][str(log)]["offset"])
    except (OSError, ValueError, KeyError):
        return -1


def fill(path: Path) -> None:
    """Write ``path`` until its disk has no room left."""
    with path.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    assert os.statvfs(path.parent).f_bavail == 0


def _small_disk_prefix(disk: Path, setup: str = "") -> list[str]:
    """A command prefix: a 64 KiB tmpfs at ``disk`` in a mount namespace of its own, then ``setup`` (sh)."""
    ns = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--mount"]
    script = f'mount -t tmpfs -o size=64k tmpfs {shlex.quote(str(disk))} || exit 97\n{setup}\nexec "$@"'
    return [*ns, "sh", "-c", script, "sh"]


@pytest.fixture
def small_disk(tmp_path: Path) -> SmallDisk:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        done = subprocess.run([*_small_disk_prefix(probe), "true"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("cannot make a full disk: no unshare command (util-linux) to mount a small tmpfs")
    if done.returncode != 0:
        pytest.skip(
            "cannot make a full disk: mounting a small tmpfs needs root (as CI runs) or user namespaces "
            f"({done.stderr.strip()[:200]}); /dev/full cannot stand in, as the state file is written "
            "beside itself and renamed over"
        )
    return _small_disk_prefix


def inside(serve: Serve, path: Path) -> Path:
    """``path`` as the serve process sees it (in its mount namespace)."""
    return Path(f"/proc/{serve.proc.pid}/root") / path.relative_to("/")


def test_a_state_disk_that_fills_costs_one_warning_and_serve_keeps_serving(tmp_path, small_disk):
    log, disk = tmp_path / "s.log", tmp_path / "disk"
    disk.mkdir()
    state = disk / "state.json"
    write(log, launch_line(), *(decode_line(i) for i in range(10)))
    serve = Serve(str(log), "--state-file", str(state), prefix=small_disk(disk))
    try:
        serve.wait_listening()
        assert wait_for(lambda: saved_offset(inside(serve, state), log) == log.stat().st_size)
        before = log.stat().st_size
        fill(inside(serve, disk / "fill"))
        for i in range(10, 30):  # every line is a save that finds no room
            write(log, decode_line(i))
            time.sleep(0.03)
        assert wait_for(lambda: decoded(serve) == 30)
        time.sleep(0.5)  # more saves fail
        assert serve.proc.poll() is None and decoded(serve) == 30
        assert saved_offset(inside(serve, state), log) == before  # what was saved before the disk filled
        assert not inside(serve, disk / "state.json.tmp").exists()  # no half-written copy keeps it full
        inside(serve, disk / "fill").unlink()
        write(log, decode_line(30))
        assert wait_for(lambda: saved_offset(inside(serve, state), log) == log.stat().st_size)
        assert decoded(serve) == 31
    finally:
        code = serve.stop()
    lines = serve.stderr.splitlines()
    assert code == 0 and "Traceback" not in serve.stderr, serve.stderr
    assert [line for line in lines if "cannot save" in line] == [
        f"acceptmon: {state}: cannot save positions (No space left on device); keeping them in memory and trying again"
    ]
    assert f"acceptmon: {state}: positions saved again" in lines
    assert lines[-1] == f"acceptmon: positions saved to {state}"


@pytest.mark.parametrize("used", [False, True], ids=["new state file", "state file used before"])
def test_serve_starts_on_a_full_state_disk(tmp_path, small_disk, used):
    log, disk, kept = tmp_path / "s.log", tmp_path / "disk", tmp_path / "kept"
    disk.mkdir()
    kept.mkdir()
    state = disk / "state.json"
    write(log, launch_line(), *(decode_line(i) for i in range(10)))
    setup = f"cat /dev/zero > {shlex.quote(str(disk / 'fill'))} 2>/dev/null"
    if used:  # a first lifetime, on a disk with room
        first = Serve(str(log), "--state-file", str(kept / "state.json"))
        first.wait_listening()
        assert wait_for(lambda: saved_offset(kept / "state.json", log) == log.stat().st_size)
        assert first.stop() == 0
        copy = " ".join(shlex.quote(str(kept / n)) for n in ("state.json", "state.json.lock"))
        setup = f"cp -p {copy} {shlex.quote(str(disk))}\n{setup}"
    write(log, *(decode_line(i) for i in range(10, 15)))
    serve = Serve(str(log), "--state-file", str(state), prefix=small_disk(disk, setup))
    try:
        serve.wait_listening()
        assert os.statvfs(inside(serve, disk)).f_bavail == 0
        assert wait_for(lambda: decoded(serve) == (5 if used else 15))
        write(log, decode_line(15))
        assert wait_for(lambda: decoded(serve) == (6 if used else 16))
    finally:
        code = serve.stop()
    lines = serve.stderr.splitlines()
    assert code == 0 and "Traceback" not in serve.stderr, serve.stderr
    assert [line for line in lines if "cannot save" in line] == [
        f"acceptmon: {state}: cannot save positions (No space left on device); keeping them in memory and trying again"
    ]
    assert (f"acceptmon: {log}: resuming at byte " in serve.stderr) == used
    assert lines[-1] == f"acceptmon: positions not saved to {state}: its disk is full"


# -- a state file nested too deeply for json ------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000


def test_a_deeply_nested_state_file_is_kept_aside_and_read_as_new(tmp_path):
    log, state = tmp_path / "s.log", tmp_path / "state.json"
    write(log, launch_line(), *(decode_line(i) for i in range(10)))
    state.write_bytes(DEEP)
    (tmp_path / "state.json.lock").write_text("")  # acceptmon used this state file before
    for restart, expected in enumerate((10, 3)):
        serve = Serve(str(log), "--state-file", str(state))
        try:
            serve.wait_listening()
            assert wait_for(lambda s=serve, n=expected: decoded(s) == n)
        finally:
            code = serve.stop()
        assert code == 0 and "Traceback" not in serve.stderr, serve.stderr
        warned = [line for line in serve.stderr.splitlines() if "not an acceptmon state file" in line]
        if restart == 0:
            assert warned == [
                f"acceptmon: {state}: not an acceptmon state file (nested too deeply to read); "
                "kept as state.json.bad; every file is read as new"
            ]
            write(log, *(decode_line(i) for i in range(10, 13)))
        else:  # the damage was not saved back: a clean resume
            assert warned == [] and "resuming at byte" in serve.stderr
    assert (tmp_path / "state.json.bad").read_bytes() == DEEP


def test_a_deeply_nested_file_acceptmon_never_used_is_refused_in_one_line(tmp_path):
    log, state = tmp_path / "s.log", tmp_path / "state.json"
    write(log, launch_line())
    state.write_bytes(DEEP)
    cmd = [sys.executable, "-m", "acceptmon", "serve", str(log), "--port", "0", "--state-file", str(state)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"acceptmon: error: {state}: not an acceptmon state file (nested too deeply to read); "
        "delete it or name another file"
    ]
    assert state.read_bytes() == DEEP
