"""The follower through appends, partial lines, truncation, rotation and a late file (one case each)."""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

from acceptmon.inputs import follow as follow_module
from acceptmon.inputs.files import OVERSIZED
from acceptmon.inputs.follow import PAUSE_PER_CPU, Follower, watch, watch_loop

PACED = 2.0
"""MAX_PAUSE in the pacing tests: an unpaced wait (a step or two, more on a busy machine) and a paced one
(``MAX_PAUSE`` = 0.5 shipped) must not come near each other, however slow the machine."""


class Lines:
    def __init__(self):
        self.lines: list[bytes] = []
        self.oversized = 0

    def __call__(self, block):
        if block is OVERSIZED:
            self.oversized += 1
        else:
            self.lines.extend(block.splitlines())


def test_append_and_partial_line(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"a\nb")
    got = Lines()
    f = Follower(str(log), got)
    f.poll_once()
    assert got.lines == [b"a"]  # 'b' has no newline yet: held
    with log.open("ab") as w:
        w.write(b"c\nd\n")
    f.poll_once()
    assert got.lines == [b"a", b"bc", b"d"]


def test_start_at_end(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"old\n")
    got = Lines()
    f = Follower(str(log), got, start=None)
    f.poll_once()
    with log.open("ab") as w:
        w.write(b"new\n")
    f.poll_once()
    assert got.lines == [b"new"]


def test_truncation_copytruncate(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"1\n2\n3\n")
    got = Lines()
    f = Follower(str(log), got)
    f.poll_once()
    log.write_bytes(b"4\n")  # truncated and rewritten, shorter than before
    f.poll_once()
    assert got.lines == [b"1", b"2", b"3", b"4"]
    assert f.truncations == 1


def test_rotation_drains_old_file_first(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"1\n")
    got = Lines()
    f = Follower(str(log), got)
    f.poll_once()
    with log.open("ab") as w:
        w.write(b"2\n")  # written just before the rename: must not be lost
    os.rename(log, tmp_path / "s.log.1")
    log.write_bytes(b"3\n")
    f.poll_once()
    assert got.lines == [b"1", b"2", b"3"]
    assert f.rotations == 1


def test_delete_and_recreate(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"1\n")
    got = Lines()
    f = Follower(str(log), got)
    f.poll_once()
    log.unlink()
    f.poll_once()
    log.write_bytes(b"2\n")
    f.poll_once()
    assert got.lines == [b"1", b"2"]


def test_missing_file_waits(tmp_path):
    log = tmp_path / "later.log"
    got = Lines()
    f = Follower(str(log), got)
    assert f.poll_once() == 0 and f.waiting
    log.write_bytes(b"hello\n")
    f.poll_once()
    assert not f.waiting and got.lines == [b"hello"]


def test_oversized_line_is_skipped_not_buffered(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"a\n" + b"x" * 5000 + b"\nb\n")
    got = Lines()
    f = Follower(str(log), got, max_line=1000)
    f.poll_once()
    assert got.lines == [b"a", b"b"] and got.oversized == 1


def _watching(log: Path) -> tuple[Path, Lines, threading.Event, threading.Thread]:
    """An empty log, followed by ``watch`` in a thread until the event is set."""
    log.write_bytes(b"")
    got = Lines()
    stop = threading.Event()
    t = threading.Thread(target=watch, args=([Follower(str(log), got)], stop), daemon=True)
    t.start()
    return log, got, stop, t


def test_watch_wakes_on_append_quickly(tmp_path):
    log, got, stop, t = _watching(tmp_path / "s.log")
    time.sleep(0.3)
    with log.open("ab") as w:
        w.write(b"fresh\n")
    deadline = time.monotonic() + 30  # generous: a busy machine; a line that never comes still fails below
    while not got.lines and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    t.join(timeout=30)
    assert got.lines == [b"fresh"]


def _spend_cpu(seconds: float) -> None:
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_ticks_that_cost_cpu_are_spaced_out_while_changes_keep_coming(tmp_path, monkeypatch):
    """A tick costing at least MAX_PAUSE / PAUSE_PER_CPU of CPU is followed by a MAX_PAUSE wait, however
    fast the folder changes: busy logs are read in fewer, larger ticks (each wake-up costs the same). The first
    tick's cost is start-up, not a read's: the lines written just after it are read at once."""
    # The first gap (watchfiles' start and a debounce: 0.1 s, over 0.25 s on a busy machine) against the paced
    # ones: with the shipped MAX_PAUSE (0.5 s) the two were only twice apart.
    monkeypatch.setattr(follow_module, "MAX_PAUSE", PACED)
    log = tmp_path / "busy.log"
    log.write_bytes(b"")
    stop = threading.Event()
    ticks: list[tuple[float, float]] = []

    def tick() -> None:
        begun = time.monotonic()
        _spend_cpu(PACED / PAUSE_PER_CPU * 1.2)
        ticks.append((begun, time.monotonic()))

    def write() -> None:
        with log.open("ab") as w:
            while not stop.is_set():
                w.write(b"line\n")
                w.flush()
                time.sleep(0.005)

    writer = threading.Thread(target=write, daemon=True)
    loop = threading.Thread(target=watch_loop, args=(tick, lambda: [str(tmp_path)], stop), daemon=True)
    writer.start()
    loop.start()
    deadline = time.monotonic() + 60
    while len(ticks) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    loop.join(timeout=30)
    writer.join(timeout=30)
    assert len(ticks) >= 5, f"5 ticks awaited, {len(ticks)} came"
    gaps = [later[0] - earlier[1] for earlier, later in itertools.pairwise(ticks)]
    assert gaps[0] < PACED / 2 and min(gaps[1:]) >= PACED - 0.01, gaps


def test_a_cheap_tick_leaves_the_next_change_unpaced(tmp_path, monkeypatch):
    """A tick that costs little (a line now and then) waits next to nothing (PAUSE_PER_CPU times its CPU):
    a line written right after the previous one was read is read within a step or two, not MAX_PAUSE."""
    monkeypatch.setattr(follow_module, "MAX_PAUSE", PACED)  # paced, each line would wait 2 s: far from a step
    log, got, stop, t = _watching(tmp_path / "quiet.log")
    waits = []
    try:
        time.sleep(0.3)
        with log.open("ab") as w:
            for i in range(9):
                w.write(b"x%d\n" % i)
                w.flush()
                written, deadline = time.monotonic(), time.monotonic() + 30
                while len(got.lines) <= i and time.monotonic() < deadline:
                    time.sleep(0.002)
                waits.append(time.monotonic() - written)
    finally:
        stop.set()
        t.join(timeout=30)
    assert got.lines == [b"x%d" % i for i in range(9)]
    assert sorted(waits)[4] < PACED / 2, waits  # paced, the waits would be about PACED


def test_complete_oversized_line_in_one_block_is_counted_by_the_reader_too(tmp_path):
    import io

    from acceptmon.inputs.files import iter_blocks

    data = b"a\n" + b"x" * 5000 + b"\nb\n"
    out = list(iter_blocks(io.BytesIO(data), max_line=1000, block_size=1 << 16))
    assert out == [b"a\n", OVERSIZED, b"b\n"]


def test_truncation_then_growth_past_the_old_position(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"first\n")
    got = Lines()
    f = Follower(str(log), got)
    f.poll_once()
    log.write_bytes(b"rewritten and already longer than before\n")  # truncated, then grew past our offset
    f.poll_once()
    assert got.lines == [b"first", b"rewritten and already longer than before"]
    assert f.truncations == 1


def test_position_excludes_the_held_partial_line(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"done\npart")
    f = Follower(str(log), Lines())
    f.poll_once()
    st = os.stat(log)
    assert f.position() == (st.st_dev, st.st_ino, 5, False)


def test_resume_at_an_offset_reads_the_rest_once(tmp_path):
    log = tmp_path / "s.log"
    log.write_bytes(b"a\nb\nc\n")
    got = Lines()
    f = Follower(str(log), got, start=2)
    f.poll_once()
    with log.open("ab") as w:
        w.write(b"d\n")
    f.poll_once()
    assert got.lines == [b"b", b"c", b"d"] and f.truncations == 0


def test_live_source_reports_an_unreadable_path_and_retries(tmp_path, grammars):
    from acceptmon.pipeline.live import LiveSource

    path = tmp_path / "s.log"
    notes, got = [], []
    source = LiveSource([str(path)], grammars, lambda f, records, tally: got.extend(records), note=notes.append)
    source.discover()
    path.mkdir()  # something that cannot be read as a log appears at the path
    source.tick()
    assert notes[-1] == f"{path}: cannot read: is a directory, not a log file; retrying"
    path.rmdir()
    path.write_text(
        "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, "
        "accept len: 2.85, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\n"
    )
    source.tick()
    assert [r.accept_len for r in got] == [2.85]


def test_deleted_glob_match_is_read_to_its_end_then_forgotten(tmp_path, grammars, monkeypatch):
    from acceptmon.pipeline import live as follow
    from acceptmon.pipeline.live import LiveSource

    monkeypatch.setattr(follow, "FORGET_SECONDS", 0.2)

    line = (
        "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, "
        "accept len: {}, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\n"
    )
    day1 = tmp_path / "server-day1.log"
    day1.write_text(line.format("2.10"))
    notes, got = [], []
    source = LiveSource([str(tmp_path / "*.log")], grammars, lambda f, rs, t: got.extend(rs), note=notes.append)
    source.discover()
    source.tick()
    with day1.open("a") as f:
        f.write(line.format("2.20"))  # written just before the file is removed
    os.unlink(day1)
    (tmp_path / "server-day2.log").write_text(line.format("2.30"))
    source.discover()
    source.tick()
    assert str(day1) in source.files  # missing for less than FORGET_SECONDS: maybe it comes back
    time.sleep(0.25)
    source.discover()
    assert [r.accept_len for r in got] == [2.10, 2.20, 2.30]
    assert list(source.files) == [str(tmp_path / "server-day2.log")]
    assert f"{day1}: deleted; no longer followed" in notes


def test_state_file_drops_positions_of_files_that_are_gone(tmp_path, grammars):
    from acceptmon.pipeline import statefile
    from acceptmon.pipeline.live import LiveSource

    old, live, state = tmp_path / "old.log", tmp_path / "live.log", tmp_path / "state.json"
    old.write_text("a\n")
    live.write_text("b\n")
    first = LiveSource([str(old), str(live)], grammars, lambda *a: None, state_file=state, from_start=True)
    first.discover()
    first.tick()
    first.save_state()
    assert set(statefile.load(state).files) == {str(old), str(live)}
    first.close()  # the first process is gone (it holds the state file's lock while it lives)
    old.unlink()
    second = LiveSource([str(live)], grammars, lambda *a: None, state_file=state)
    second.discover()
    second.save_state()
    assert set(statefile.load(state).files) == {str(live)}


def test_one_file_named_twice_is_read_once(tmp_path, grammars, monkeypatch):
    from acceptmon.pipeline.live import LiveSource

    (tmp_path / "s.log").write_text(
        "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, "
        "accept len: 2.85, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\n"
    )
    monkeypatch.chdir(tmp_path)
    got = []
    source = LiveSource(["s.log", str(tmp_path / "s.log"), "*.log"], grammars, lambda f, rs, t: got.extend(rs),
                        from_start=True)  # fmt: skip
    source.discover()
    source.tick()
    assert list(source.files) == ["s.log"] and len(got) == 1


def test_a_resumed_vllm_log_dates_and_numbers_runs_like_one_reader(tmp_path, grammars):
    """The state file keeps the year (New Year rollover) and an open launch group across a restart: a cut
    between two launch lines of one server start must not make two runs of it."""
    from acceptmon.pipeline.live import LiveSource
    from tests.conftest import SAMPLES

    text = (SAMPLES / "vllm_v1_0.10.2_dp.log").read_text()
    lines = text.splitlines(keepends=True)
    log, state = tmp_path / "v.log", tmp_path / "state.json"
    whole: list = []
    one = LiveSource([str(log)], grammars, lambda f, rs, t: whole.extend(rs), from_start=True)
    log.write_text(text)
    one.discover()
    one.tick()
    one.close()
    launches = [i for i, line in enumerate(lines) if "Initializing a V1 LLM engine" in line]
    for cut in (launches[0] + 1, len(lines) // 2, next(i for i, line in enumerate(lines) if " 01-01 00:0" in line)):
        log.write_text("".join(lines[:cut]))
        got: list = []
        take = got.extend
        first = LiveSource([str(log)], grammars, lambda f, rs, t, take=take: take(rs), from_start=True,
                           state_file=state)  # fmt: skip
        first.discover()
        first.tick()
        first.save_state()
        first.close()
        with log.open("a") as f:
            f.write("".join(lines[cut:]))
        second = LiveSource([str(log)], grammars, lambda f, rs, t, take=take: take(rs), from_start=True,
                            state_file=state)  # fmt: skip
        second.discover()
        second.tick()
        second.close()
        state.unlink()
        assert [(r.line, r.timestamp, r.run) for r in got] == [(r.line, r.timestamp, r.run) for r in whole]
    assert any(r.timestamp and r.timestamp.month == 1 for r in whole)  # the log does cross New Year
