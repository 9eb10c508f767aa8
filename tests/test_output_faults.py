"""Output that cannot be written (a full disk, a special file as -o) and kernel files as input: one line each."""

from __future__ import annotations

import errno
import os
import resource
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from acceptmon.errors import InputError
from acceptmon.inputs.files import check_path, kernel_dir
from acceptmon.sinks.atomic import GuardedWriter
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


# --- standard output on a full disk ------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("parse", SEED),
        ("parse", "--format", "jsonl", SEED, "-o", "-"),
        ("runs", "--format", "csv", SEED),
        ("doctor", SEED),
        ("compare", SEED, BASE, "--format", "json"),
        ("grammars",),
    ],
    ids=["parse", "parse-jsonl", "runs-csv", "doctor", "compare-json", "grammars"],
)
def test_a_full_disk_under_stdout_is_one_line_and_exit_2(args):
    with open("/dev/full", "wb") as full:
        p = _run(*args, stdout=full.fileno())
    assert p.returncode == 2
    assert _errors(p) == [FULL]


@pytest.mark.parametrize(
    "args",
    [("demo", "--plain", "--speed", "1000"), ("tail", "--plain", "--from-start", "--poll", SEED)],
    ids=["demo", "tail"],
)
def test_plain_live_lines_on_a_full_disk_say_so_once(args):
    with open("/dev/full", "wb") as full:
        p = _run(*args, stdout=full.fileno(), timeout=60)
    notes = p.stderr.decode().splitlines()
    assert p.returncode == 2 and notes[-1] == FULL
    assert not any("following stopped" in line for line in notes), notes  # the error is said once, as the error


@pytest.mark.parametrize("args", [("parse", SEED), ("runs", "--format", "csv", SEED)], ids=["parse", "runs"])
def test_a_reader_that_went_away_is_not_an_error(args):
    read, write = os.pipe()
    os.close(read)
    try:
        p = _run(*args, stdout=write)
    finally:
        os.close(write)
    assert p.returncode == 0 and _errors(p) == []


@pytest.mark.parametrize("args", [("parse", SEED), ("doctor", SEED)], ids=["parse", "doctor"])
def test_a_closed_stdout_is_one_line_and_exit_2(args):
    p = _run(*args, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    assert p.returncode == 2
    assert _errors(p) == ["acceptmon: error: stdout: cannot write: it is closed"]


def test_a_failed_write_names_where_it_went_and_a_broken_pipe_passes():
    class Failing:
        def __init__(self, exc: OSError) -> None:
            self.exc = exc

        def write(self, data: bytes, /) -> int:
            raise self.exc

    with pytest.raises(InputError) as caught:
        GuardedWriter(Failing(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))), "rows.csv").write(b"x")
    assert str(caught.value) == "rows.csv: cannot write: No space left on device"
    with pytest.raises(BrokenPipeError):
        GuardedWriter(Failing(BrokenPipeError(errno.EPIPE, "Broken pipe")), "rows.csv").write(b"x")


# --- an output file that cannot be written whole -----------------------------------------------


def _small_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # a write past 4 KiB fails (File too large)


@pytest.mark.parametrize("name", ["rows.csv", "rows.jsonl", "rows.jsonl.gz"])
def test_a_failed_write_to_the_output_leaves_no_file(tmp_path, name):
    p = _run("parse", SEED, "-o", tmp_path / name, stdout=subprocess.DEVNULL, preexec_fn=_small_files)
    assert p.returncode == 2
    assert _errors(p) == [f"acceptmon: error: {tmp_path / name}: cannot write: File too large"]
    assert os.listdir(tmp_path) == []  # neither the file nor its temporary


def test_a_failed_write_keeps_the_old_output(tmp_path):
    out = tmp_path / "rows.csv"
    out.write_bytes(b"old\n")
    p = _run("parse", SEED, "-o", out, stdout=subprocess.DEVNULL, preexec_fn=_small_files)
    assert p.returncode == 2 and out.read_bytes() == b"old\n" and os.listdir(tmp_path) == ["rows.csv"]


# --- -o onto what is not a regular file ----------------------------------------------------------


def _refusal(path: Path | str, kind: str) -> str:
    return f"{path}: not a regular file ({kind}); -o names a file, and without -o the rows go to stdout"


def test_a_fifo_as_output_is_refused_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    p = acceptmon("parse", SEED, "-o", fifo, "--format", "csv")
    assert p.returncode == 2 and p.stderr.decode().strip() == f"acceptmon: error: {_refusal(fifo, 'a FIFO')}"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["rows.csv"]


def test_a_device_or_socket_as_output_is_refused(tmp_path):
    p = acceptmon("parse", SEED, "-o", "/dev/null", "--format", "csv")
    assert p.returncode == 2 and p.stderr.decode().strip().endswith(_refusal("/dev/null", "a character device"))
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    path = tmp_path / "s.csv"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        p = acceptmon("parse", SEED, "-o", path)
    assert p.returncode == 2 and p.stderr.decode().strip().endswith(_refusal(path, "a socket"))


def test_an_output_link_stays_a_link_to_the_new_rows(tmp_path):
    (tmp_path / "real.csv").write_bytes(b"old\n")
    link = tmp_path / "rows.csv"
    link.symlink_to("real.csv")
    p = acceptmon("parse", SEED, "-o", link)
    assert p.returncode == 0, p.stderr
    assert os.readlink(link) == "real.csv"
    assert len((tmp_path / "real.csv").read_text().splitlines()) == 385  # header and 384 decode rows
    assert sorted(os.listdir(tmp_path)) == ["real.csv", "rows.csv"]


def test_a_link_to_an_input_is_refused_as_the_input(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(SEED.read_bytes())
    (tmp_path / "rows.csv").symlink_to("server.log")
    p = acceptmon("parse", log, "-o", tmp_path / "rows.csv")
    assert p.returncode == 2 and "is also an input" in p.stderr.decode()
    assert log.read_bytes() == SEED.read_bytes()


def test_output_dash_is_stdout(tmp_path):
    to_file = acceptmon("parse", SEED, "-o", tmp_path / "rows.csv")
    p = acceptmon("parse", SEED, "-o", "-", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == (tmp_path / "rows.csv").read_bytes() and to_file.returncode == 0
    assert os.listdir(tmp_path) == ["rows.csv"]  # no file named '-'
    assert "->" not in p.stderr.decode()


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


def test_kernel_dir_follows_links(tmp_path):
    (tmp_path / "a.log").symlink_to("/sys")
    (tmp_path / "b.log").write_bytes(b"")
    assert [kernel_dir(str(tmp_path / n)) for n in ("a.log", "b.log")] == ["/sys", None]
    assert kernel_dir("/proc") == "/proc" and kernel_dir("/process.log") is None


@pytest.mark.parametrize("args", [("parse",), ("runs",), ("doctor",), ("tail", "--plain")], ids=lambda a: a[0])
def test_every_command_refuses_proc_in_one_line(args):
    p = acceptmon(*args, "/proc/self/pagemap")
    assert p.returncode == 2
    assert p.stderr.decode().strip() == f"acceptmon: error: /proc/self/pagemap: is under /proc: {KERNEL}"


def test_dev_stdin_redirected_from_a_log_is_still_read():
    with SEED.open("rb") as log:
        p = _run("parse", "/dev/stdin", stdout=subprocess.PIPE, stdin=log)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 385
