"""``parse -j N`` when things go wrong: a worker dies, the log is replaced, Ctrl-C, year notes.

A dead worker ends the run with one line (it used to wait for ever); the workers read the file
this process holds, so a log replaced under its name is still read whole; Ctrl-C to the whole
process group exits 130 with one line and leaves no temporary output; the note saying where a
year-less timestamp's year came from is the same with workers as without.
"""

from __future__ import annotations

import fcntl
import gc
import io
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest

from acceptmon.cli import main
from acceptmon.errors import InputError
from acceptmon.pipeline import batch, inplace, workers
from acceptmon.sinks.table import TableJob
from tests.conftest import ROOT, SAMPLES

SEED = SAMPLES / "seed_eagle3_moe.log"


@pytest.fixture
def small_ranges(monkeypatch):
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 8 << 10)
    monkeypatch.setattr(batch, "FAST_BLOCK", 4 << 10)
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)


def _parse(grammars, path: Path, jobs: int) -> bytes:
    out = io.BytesIO()
    batch.run([str(path)], grammars, TableJob("csv", out), jobs=jobs, fast="csv")
    return out.getvalue()


def test_a_dead_worker_ends_the_run_with_one_line(grammars, small_ranges, monkeypatch):
    main, parts = os.getpid(), batch._parts

    def die(*args, **kwargs):  # in a worker: as the kernel's OOM killer would end it
        if os.getpid() != main:
            os.kill(os.getpid(), signal.SIGKILL)
        return parts(*args, **kwargs)

    monkeypatch.setattr(batch, "_parts", die)
    with pytest.raises(InputError, match="a worker process died"):
        _parse(grammars, SEED, 2)


def test_a_log_replaced_under_its_name_is_still_read_whole(grammars, small_ranges, tmp_path, monkeypatch):
    log, other = tmp_path / "server.log", tmp_path / "new.log"
    log.write_bytes(SEED.read_bytes())
    other.write_bytes(SEED.read_bytes()[:5000])
    want = _parse(grammars, log, 1)
    held = workers._reopenable

    def replace_after_opening(path: str, fd: int) -> str:
        os.replace(other, path)  # rotation by rename, as the run starts its workers
        return held(path, fd)

    monkeypatch.setattr(workers, "_reopenable", replace_after_opening)
    assert _parse(grammars, log, 2) == want and want.count(b"\n") > 100


def test_the_year_note_is_the_same_with_workers(small_ranges, tmp_path, capsys):
    log = tmp_path / "vllm.log"
    log.write_bytes((SAMPLES / "vllm_v1_0.8.5.log").read_bytes())
    notes = []
    for jobs in ("1", "2"):
        assert main(["parse", str(log), "-o", str(tmp_path / f"out{jobs}.csv"), "-j", jobs]) == 0
        notes.append([line for line in capsys.readouterr().err.splitlines() if "year of" in line])
    assert notes[0] == notes[1] and "file modification time" in notes[0][0]


def test_ctrl_c_as_the_workers_start_is_one_line_and_exit_130(tmp_path):
    """SIGINT the moment a worker exists, before it could set itself to ignore Ctrl-C: it hung the pool."""
    for _ in range(3):
        proc = _start(tmp_path, settle=0.0)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130 and b"Traceback" not in err, err.decode()
        assert len(err.decode().strip().splitlines()) == 1, err.decode()


@pytest.mark.parametrize("year", [None, "2027"])
def test_a_log_across_two_new_years_dates_every_range_like_one_reader(small_ranges, tmp_path, year):
    """A range after the second New Year: its guessed year (the file's time, or --year and the first
    timestamp) is a year short; the range is read again from the year the ranges before it reached."""
    spec = ("(APIServer pid=7) INFO {} [metrics.py:96] SpecDecoding metrics: Draft acceptance rate: 57.3%, "
            "Accepted: 4125 tokens, Drafted: 7200 tokens\n")  # fmt: skip
    stamp, lines = datetime(2026, 12, 31, 12), []
    while stamp < datetime(2028, 3, 1):
        lines.append(spec.format(stamp.strftime("%m-%d %H:%M:%S")))
        stamp += timedelta(hours=20)
    log = tmp_path / "vllm.log"
    log.write_text("".join(lines))
    os.utime(log, (datetime(2028, 3, 2).timestamp(),) * 2)
    extra = ["--year", year] if year else []
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}.csv"
        assert main(["parse", str(log), "-o", str(out), "-j", jobs, *extra]) == 0
        outs.append(out.read_text().splitlines())
    assert len(log.read_bytes()) > 8 * (8 << 10) and outs[0] == outs[1]  # several ranges, the same rows
    years = [row.split(",")[2][:4] for row in outs[1][1:]]
    first = int(year or years[0])  # with no --year, the file's time dates the first line (here 2027)
    assert years[0] == str(first) and years[-1] == str(first + 2) and years == sorted(years)


def _start(tmp_path: Path, settle: float = 0.3) -> subprocess.Popen[bytes]:
    """A parse -j 2 of a 48 MiB log (pure-Python lane: still going when a signal comes), its workers up
    (``settle`` seconds after the first appears)."""
    log = tmp_path / "big.log"
    if not log.exists():
        block = SEED.read_bytes()
        with log.open("wb") as f:
            for _ in range((48 << 20) // len(block)):
                f.write(block)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ACCEPTMON_PURE_PYTHON": "1"}
    cmd = [sys.executable, "-m", "acceptmon", "parse", str(log), "-o", str(tmp_path / "out.csv"), "-j", "2"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 20
    while not _children(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05 if settle else 0.001)
    time.sleep(settle)
    return proc


def test_workers_end_with_the_main_process_however_it_ends(tmp_path):
    proc = _start(tmp_path)
    children = _children(proc.pid)
    assert children
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{c}").exists() for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [c for c in children if Path(f"/proc/{c}/status").exists() and "zombie" not in _state(c)]


def _state(pid: str) -> str:
    try:
        return next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State"))
    except (OSError, StopIteration):
        return "zombie"


def test_ctrl_c_during_a_parallel_parse_is_one_line_and_exit_130(tmp_path):
    """SIGINT to the process group, as a terminal sends it, while the workers parse."""
    proc = _start(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err and len(err.decode().strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.log"]


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def test_a_gzip_log_takes_the_fast_lane_whatever_its_compressed_size(grammars, tmp_path, monkeypatch):
    """A .gz's size on disk says little about its lines (a 3 MB archive held 32 MiB of log)."""
    import gzip

    from acceptmon.parse.fast import lane as fastlane

    made: list[object] = []
    real = fastlane.FastLane

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(fastlane, "FastLane", spy)
    log = tmp_path / "small.log.gz"
    log.write_bytes(gzip.compress(SEED.read_bytes()))
    out = io.BytesIO()
    batch.run([str(log)], grammars, TableJob("csv", out), jobs=1, fast="csv")
    want = _parse(grammars, SEED, 1).replace(str(SEED).encode(), b"LOG")
    assert len(made) == 1 and out.getvalue().replace(str(log).encode(), b"LOG") == want


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the lost KeyboardInterrupt
def test_a_ctrl_c_lost_inside_a_destructor_still_ends_the_command(tmp_path):
    """Python prints a KeyboardInterrupt raised inside a ``__del__`` (run by the garbage collector) as "Exception
    ignored" and goes on: the pipeline still ends at its next block, as ``parse`` does on Ctrl-C (exit 130)."""
    from acceptmon.errors import Interrupt
    from acceptmon.parse.load import load_grammars

    class Lost:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs here, inside __del__: its KeyboardInterrupt is lost
                pass

    old = signal.signal(signal.SIGINT, Interrupt.handler)
    try:
        Interrupt.happened = False
        Lost()
        assert Interrupt.happened
        with pytest.raises(KeyboardInterrupt):
            batch.run([str(SEED)], load_grammars(), TableJob("csv", io.BytesIO()))
        assert main(["parse", str(SEED), "-o", str(tmp_path / "out.csv")]) == 0  # a new command starts afresh
    finally:
        signal.signal(signal.SIGINT, old)
        Interrupt.happened = False


LOST_IN_DESTRUCTORS = """
import os, signal, sys
from acceptmon.cli import main
from acceptmon.errors import Interrupt

class Lost:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs here, inside __del__
            pass

class Broken:
    def __del__(self):
        raise ValueError("a destructor's own error")

main(["grammars"])  # installs the command's Ctrl-C handling, as every command does
Lost()
assert Interrupt.happened
Broken()
"""


def test_a_ctrl_c_lost_inside_a_destructor_prints_no_traceback():
    """A Ctrl-C that lands in a ``__del__`` (regex's, during a lazy compile) is remembered, and ends the command as
    one line and exit 130; Python's "Exception ignored" traceback of it is not printed. A destructor's other
    errors still are."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", LOST_IN_DESTRUCTORS], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert b"KeyboardInterrupt" not in done.stderr
    assert b"ValueError: a destructor's own error" in done.stderr


_PARSE_RANGE = workers._parse_range
_HERE: list[str] = []
"""What this process did, in order: parsed a range itself ("here"), or collected one ("collect")."""
_HERE_PID = [0]


def _slow_range(task):  # top level: the pool sends it to a worker by name
    if os.getpid() != _HERE_PID[0]:
        time.sleep(0.5)  # a slow worker: the first range to collect is its
    else:
        _HERE.append("here")
    return _PARSE_RANGE(task)


@pytest.mark.parametrize("ahead", [None, 1, 2])
def test_this_process_holds_at_most_its_jobs_ahead_results_while_a_worker_is_slow(
    grammars, small_ranges, monkeypatch, ahead
):
    """While the range it must collect next is still in a worker, this process parses further ranges itself, at
    most the job's ``ahead`` of them (``AHEAD`` for a job that sets none), then waits: the same output."""

    class Job(TableJob):
        def collect(self, part):
            _HERE.append("collect")
            super().collect(part)

    if ahead is not None:
        Job.ahead = ahead  # type: ignore[attr-defined]
    _HERE.clear()
    _HERE_PID[0] = os.getpid()
    monkeypatch.setattr(workers, "_parse_range", _slow_range)
    out = io.BytesIO()
    batch.run([str(SEED)], grammars, Job("csv", out), jobs=2, fast="csv")
    assert _HERE.index("collect") == (workers.AHEAD if ahead is None else ahead)
    assert out.getvalue() == _parse(grammars, SEED, 1)


@pytest.mark.parametrize("name", ["vllm_v0_0.6.log", "seed_eagle3_moe.log"])
def test_the_launch_grammars_are_compiled_before_the_workers_fork(name, monkeypatch):
    """The grammars that read the head's launch lines (and the warnings whose words a launch line holds) are compiled
    in this process before the pool forks, so that the worker reading the first range inherits them (each is tens
    of milliseconds to compile); the stats lines' grammars are left to be compiled on first use."""
    from acceptmon.parse.load import load_grammars

    grammars = load_grammars()
    compiled: list[list[str]] = []

    def started(*args, **kwargs):
        compiled.append(sorted(g.name for g in grammars.records if "regex" in g.__dict__))
        raise SystemExit(0)

    monkeypatch.setattr(workers, "run", started)
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    with pytest.raises(SystemExit):
        batch.run([str(SAMPLES / name)], grammars, TableJob("csv", io.BytesIO()), jobs=2)
    [names] = compiled
    assert any("launch" in n for n in names) and not any(n.startswith(STATS) for n in names), names
    assert len(names) < len(grammars.records) // 2


STATS = ("sglang_decode", "sglang_prefill", "vllm_spec", "vllm_throughput")


def test_the_results_pipe_holds_a_whole_range(small_ranges, tmp_path):
    """``widen`` sizes a pipe to 1 MiB, or to as much as the system lets a user have; ``-j`` sizes the pipe of the
    workers' results so (a range's results are about 1 MB)."""

    most = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    read, write = os.pipe()
    try:
        assert fcntl.fcntl(read, fcntl.F_GETPIPE_SZ) == 65536
        assert workers.widen(lambda: read) == min(workers.PIPE_BYTES, most)
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) == min(workers.PIPE_BYTES, most)
    finally:
        os.close(read), os.close(write)
    assert workers.widen(None) is None
    sizes: list[int | None] = []
    real = workers.widen
    with mock.patch.object(workers, "widen", lambda fileno: sizes.append(real(fileno)) or sizes[-1]):
        assert main(["parse", str(SEED), "-o", str(tmp_path / "out.csv"), "-j", "2"]) == 0
    assert sizes == [min(workers.PIPE_BYTES, most)]


def test_this_process_collects_a_workers_results_with_fewer_collections(grammars, small_ranges):
    """While ``-j`` collects the workers' results, the collector starts every ``FEWER`` allocations (not 700): their
    many small containers were walked again and again. The threshold is put back after, even when a collect fails."""
    seen: list[int] = []

    class Job(TableJob):
        def collect(self, part):
            seen.append(gc.get_threshold()[0])
            super().collect(part)

    before = gc.get_threshold()
    out = io.BytesIO()
    batch.run([str(SEED)], grammars, Job("csv", out), jobs=2, fast="csv")
    assert len(seen) > 4 and set(seen) == {inplace.FEWER} and gc.get_threshold() == before
    assert out.getvalue() == _parse(grammars, SEED, 1)

    class Failing(TableJob):
        def collect(self, part):
            raise RuntimeError("no room")

    with pytest.raises(RuntimeError):
        batch.run([str(SEED)], grammars, Failing("csv", io.BytesIO()), jobs=2, fast="csv")
    assert gc.get_threshold() == before
