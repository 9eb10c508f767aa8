"""Output that cannot be written (a full disk, a special file as -o) and kernel files as input: one line each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from acceptmon.errors import InputError
from acceptmon.source import check_path
from tests.conftest import ROOT, SAMPLES
from tests.test_cli import acceptmon

SEED = SAMPLES / "seed_eagle3_moe.log"
BASE = SAMPLES / "baseline_nospec.log"
FULL = "acceptmon: error: stdout: cannot write: No space left on device"


def _run(*args, stdout, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "acceptmon", *map(str, args)], stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT, **kwargs
    )


def _errors(p: subprocess.CompletedProcess[bytes]) -> list[str]:
    """stderr lines other than parse's summary and notes."""
    return [line for line in p.stderr.decode().splitlines() if "error" in line or not line.startswith("acceptmon: ")]


# --- kernel files as input -----------------------------------------------------------------------

KERNEL = "a kernel interface, not a log file"


@pytest.mark.parametrize("path", ["/proc/self/status", "/proc/self/pagemap", "/proc/self/fd/../status"])
def test_a_proc_file_is_refused(path):
    with pytest.raises(InputError) as caught:
        check_path(path)
    assert str(caught.value) == f"{path}: is under /proc: {KERNEL}"


def test_a_link_into_proc_and_a_live_path_under_sys_are_refused(tmp_path):
    (tmp_path / "server.log").symlink_to("/proc/self/status")
    with pytest.raises(InputError, match=f"server.log: is under /proc: {KERNEL}"):
        check_path(str(tmp_path / "server.log"))
    with pytest.raises(InputError, match=f"is under /sys: {KERNEL}"):
        check_path("/sys/acceptmon-not-there.log", may_be_missing=True)  # a live log waited for


@pytest.mark.parametrize("args", [("parse",), ("runs",), ("doctor",), ("tail", "--plain")], ids=lambda a: a[0])
def test_every_command_refuses_proc_in_one_line(args):
    p = acceptmon(*args, "/proc/self/pagemap")
    assert p.returncode == 2
    assert p.stderr.decode().strip() == f"acceptmon: error: /proc/self/pagemap: is under /proc: {KERNEL}"


def test_dev_stdin_redirected_from_a_log_is_still_read():
    with SEED.open("rb") as log:
        p = _run("parse", "/dev/stdin", stdout=subprocess.PIPE, stdin=log)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 385
