"""Live-following faults: a crash between saves, a damaged or shared state file, secrets in it, a writer
still appending to a rotated file, hostile label values and a noisy file hogging the series cap."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time

import pytest

from acceptmon.errors import InputError
from acceptmon.exporter.metrics import MetricsPage
from acceptmon.inputs.files import OVERSIZED
from acceptmon.inputs.follow import Follower
from acceptmon.live.state import LiveStats
from acceptmon.parse.load import load_grammars
from acceptmon.pipeline import live as live_module
from acceptmon.pipeline import statefile
from acceptmon.pipeline.live import LiveSource
from tests.serving import Clock, decode_line, feed, free_port, launch_line, parse_metrics, value


class Decodes:
    """A live sink counting decode records."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, file, records, tally) -> None:
        self.n += sum(r.kind == "decode" for r in records)


class FakeTime:
    """Stands in for the ``time`` module of the live pipeline: its clock moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def append(path, first: int, n: int) -> None:
    with path.open("a") as f:
        f.write("".join(decode_line(first + i) + "\n" for i in range(n)))


# -- 1. a crash re-reads at most the last fraction of a second ------------------------------------


def test_crash_rereads_only_the_lines_since_the_last_save(tmp_path, grammars, monkeypatch):
    rate, tick = 3000, 0.05  # lines per second of log, seconds between ticks
    clock = FakeTime()
    monkeypatch.setattr(live_module, "time", clock)
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_text(launch_line() + "\n")
    first_count = Decodes()
    first = LiveSource([str(log)], grammars, first_count, state_file=state, from_start=True)
    first.discover()
    written = 0
    for _ in range(98):  # 4.9 s of log
        append(log, written, int(rate * tick))
        written += int(rate * tick)
        clock.now += tick
        first.tick()
    first.close()  # killed: no save on the way out, only the lock goes with the process
    second_count = Decodes()
    second = LiveSource([str(log)], grammars, second_count, state_file=state)
    second.discover()
    second.tick()
    second.close()
    recounted = first_count.n + second_count.n - written
    assert first_count.n == written == 14_700
    assert 0 <= recounted <= rate * (live_module.SAVE_SECONDS + tick) == 750


# -- 2. a damaged state file: one warning, read as new, never a crash ---------------------------------


def _entry(log, **over) -> dict:
    st = os.stat(log)
    entry = {"dev": st.st_dev, "ino": st.st_ino, "fingerprint": statefile.fingerprint(str(log)), "offset": 0}
    return {**entry, **over}


DAMAGE = {
    "empty": lambda log: b"",
    "random bytes": lambda log: bytes(range(256)) * 4,
    "invalid UTF-8": lambda log: b'{"version": 1, "files": {"\xff\xfe": {}}}',
    "truncated JSON": lambda log: b'{"version": 1, "files": {',
    "not an object": lambda log: b"[1, 2, 3]",
    "nested too deeply": lambda log: b"[" * 100_000 + b"]" * 100_000,
    "unknown version": lambda log: json.dumps({"version": 7, "files": {str(log): _entry(log)}}).encode(),
    "negative offset": lambda log: json.dumps({"version": 1, "files": {str(log): _entry(log, offset=-5)}}).encode(),
    "offset as text": lambda log: json.dumps({"version": 1, "files": {str(log): _entry(log, offset="120")}}).encode(),
    "boolean line": lambda log: json.dumps({"version": 1, "files": {str(log): _entry(log, line=True)}}).encode(),
    "mid-line offset": lambda log: json.dumps({"version": 1, "files": {str(log): _entry(log, offset=250)}}).encode(),
    "negative run": lambda log: json.dumps({"version": 1, "files": {str(log): _entry(log, run=-1)}}).encode(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_state_file_is_one_warning_and_read_as_new(tmp_path, grammars, damage):
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_text(launch_line() + "\n")
    append(log, 0, 10)
    state.write_bytes(DAMAGE[damage](log))
    (tmp_path / "state.json.lock").write_text("")  # acceptmon used this state file before
    for restart in range(2):  # the damage is not saved back: the second start is a clean resume
        notes, got = [], Decodes()
        source = LiveSource([str(log)], grammars, got, state_file=state, from_start=True, note=notes.append)
        source.discover()
        source.tick()
        source.save_state()
        source.close()
        warnings = [n for n in notes if "read as new" in n]
        if restart == 0:
            assert len(warnings) == 1, notes
            assert got.n == 10 and not any("resuming" in n for n in notes)
        else:
            assert (
                warnings == []
                and got.n == 0
                and f"{log}: resuming at byte {log.stat().st_size:,} (state file)" in notes
            )
    saved = statefile.load(state, notes.append)
    assert saved.files[str(log)].offset == log.stat().st_size
    foreign = damage in ("random bytes", "invalid UTF-8", "truncated JSON", "not an object", "nested too deeply")
    assert (tmp_path / "state.json.bad").exists() == foreign  # kept aside, not destroyed
    assert not foreign or (tmp_path / "state.json.bad").read_bytes() == DAMAGE[damage](log)


def test_a_file_that_is_no_state_file_is_refused_and_left_alone(tmp_path, grammars):
    log, notes = tmp_path / "server.log", tmp_path / "notes.toml"
    notes.write_text('title = "not a state file"\n')
    for _ in range(2):  # no lock file left behind that would make the second attempt take it
        with pytest.raises(InputError) as err:
            LiveSource([str(log)], grammars, Decodes(), state_file=notes)
        assert str(err.value).startswith(f"{notes}: not an acceptmon state file (")
    assert notes.read_text() == 'title = "not a state file"\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.toml"]


def test_offset_inside_a_skipped_over_long_line_still_resumes(tmp_path, grammars):
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_bytes(b"x" * 5000 + b"\n" + decode_line(1).encode() + b"\n")
    state.write_text(json.dumps({"version": 1, "files": {str(log): _entry(log, offset=2000, skipping=True)}}))
    notes, got = [], Decodes()
    source = LiveSource([str(log)], grammars, got, state_file=state, note=notes.append)
    source.discover()
    source.tick()
    source.close()
    assert got.n == 1 and f"{log}: resuming at byte 2,000 (state file)" in notes


def test_a_position_just_after_a_leading_bom_is_a_line_start(tmp_path, grammars):
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_bytes(b"\xef\xbb\xbf" + decode_line(0).encode()[:40])  # the first line is not complete yet
    first = LiveSource([str(log)], grammars, Decodes(), state_file=state, from_start=True)
    first.discover()
    first.tick()
    first.save_state()
    first.close()
    assert statefile.load(state).files[str(log)].offset == 3
    with log.open("ab") as f:
        f.write(decode_line(0).encode()[40:] + b"\n")
    notes, got = [], Decodes()
    second = LiveSource([str(log)], grammars, got, state_file=state, note=notes.append)
    second.discover()
    second.tick()
    second.close()
    assert got.n == 1 and notes == [f"{log}: resuming at byte 3 (state file)"]


# -- 3. no secrets, mode 0600 ---------------------------------------------------------------------------


def test_state_file_keeps_no_server_arguments_and_is_private(tmp_path, grammars):
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_text(launch_line().replace(")", ", api_key='sk-live-123')") + "\n" + decode_line(0) + "\n")
    old = _entry(log, launch={"model_path": "m", "extra": {"api_key": "sk-old-456"}})  # as written before
    state.write_text(json.dumps({"version": 1, "files": {str(log): old}}))
    os.chmod(state, 0o644)
    (tmp_path / "state.json.tmp").write_text("stale")
    os.chmod(tmp_path / "state.json.tmp", 0o644)
    first = LiveSource([str(log)], grammars, Decodes(), state_file=state, from_start=True)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600 and "sk-old-456" not in state.read_text()
    first.discover()
    first.tick()
    first.save_state()
    first.close()
    text = state.read_text()
    assert "sk-live-123" not in text and "api_key" not in text and '"extra"' not in text
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    second = LiveSource([str(log)], grammars, Decodes(), state_file=state)
    second.discover()
    launch = second.files[str(log)].parser.state.launch
    second.close()
    assert launch is not None and (launch.model_path, launch.spec_num_steps, launch.extra) == ("Qwen/Qwen3-8B", 3, {})


# -- 4. one process per state file ---------------------------------------------------------------------


def test_second_user_of_a_state_file_is_refused_in_one_line(tmp_path, grammars):
    log, state = tmp_path / "server.log", tmp_path / "state.json"
    log.write_text(decode_line(0) + "\n")
    first = LiveSource([str(log)], grammars, Decodes(), state_file=state)
    try:
        with pytest.raises(InputError) as err:
            LiveSource([str(log)], grammars, Decodes(), state_file=state)
        assert str(err.value) == f"{state}: in use by another acceptmon process (pid {os.getpid()})"
        cmd = [sys.executable, "-m", "acceptmon", "serve", "--port", str(free_port()), "--state-file", str(state),
               str(log)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            f"acceptmon: error: {state}: in use by another acceptmon process (pid {os.getpid()})"
        ]
    finally:
        first.close()
    LiveSource([str(log)], grammars, Decodes(), state_file=state).close()  # free again once the first is gone


# -- 5. a writer still appending to the rotated file ----------------------------------------------------


class Ids:
    def __init__(self) -> None:
        self.ids: list[int] = []

    def __call__(self, block) -> None:
        assert block is not OVERSIZED
        self.ids.extend(int(line.split()[1]) for line in block.splitlines())


def test_lines_written_to_the_renamed_file_after_the_new_one_appeared_are_read(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    got = Ids()
    follower = Follower(str(log), got)
    written = [0]

    def write(f, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            f.write("".join(f"line {written[0] + i}\n" for i in range(20)))
            f.flush()
            written[0] += 20
            time.sleep(0.01)

    def writer() -> None:
        with log.open("a") as f:
            write(f, 0.3)
            os.rename(log, tmp_path / "server.log.1")
            log.write_text("")  # the rotator creates the new file at once
            write(f, 0.4)  # the server goes on with the file it has open
        with log.open("a") as f:  # and reopens the path later
            write(f, 0.3)

    thread = threading.Thread(target=writer)
    thread.start()
    while thread.is_alive():
        follower.poll_once()
        time.sleep(0.02)
    thread.join()
    for _ in range(50):
        follower.poll_once()
        if len(got.ids) >= written[0]:
            break
        time.sleep(0.02)
    follower.close()
    assert follower.rotations == 1
    assert sorted(got.ids) == list(range(written[0])) and len(got.ids) == written[0]


def test_the_old_file_is_let_go_once_quiet_for_the_grace_period(tmp_path):
    log = tmp_path / "server.log"
    got = Ids()
    clock = Clock(0.0)
    with log.open("a") as old:
        old.write("line 0\n")
        old.flush()
        follower = Follower(str(log), got)
        follower.clock = clock
        follower.poll_once()
        os.rename(log, tmp_path / "server.log.1")
        log.write_text("line 1\n")
        follower.poll_once()
        clock.now += 1.9
        old.write("line 2\n")
        old.flush()
        follower.poll_once()  # still within the grace period: read, and the quiet time starts again
        clock.now += 2.0
        follower.poll_once()  # quiet for the whole grace period: closed
        old.write("line 3\n")
        old.flush()
        follower.poll_once()
    follower.close()
    assert got.ids == [0, 1, 2]


# -- 6./7. label values: valid UTF-8, cut, and a fair share of the series cap per file -------------------


def scrape(live: LiveStats) -> tuple[bytes, dict]:
    body = MetricsPage(live).render()
    return body, parse_metrics(body.decode("utf-8"))


def test_a_file_name_that_is_not_utf8_still_scrapes(grammars):
    from acceptmon.parse.parser import Parser

    live = LiveStats()
    name = os.fsdecode(b"/var/log/srv-\xff\xfe.log")
    feed(live.update, Parser(grammars, name), launch_line(), decode_line(0))
    _, m = scrape(live)
    assert value(m, "acceptmon_decode_batches_total", file="/var/log/srv-\ufffd\ufffd.log") == 1
    assert value(m, "acceptmon_server_launches_total", file="/var/log/srv-\ufffd\ufffd.log") == 1


def test_long_ranks_and_file_names_are_cut_in_every_label(grammars):
    from acceptmon.parse.parser import Parser

    live = LiveStats()
    parser = Parser(grammars, "/logs/" + "f" * 5000 + ".log")
    feed(live.update, parser, *(decode_line(i, rank=f"DP{i} " + "A" * 20_000 + "0") for i in range(20)))
    body, m = scrape(live)
    assert len(m["acceptmon_accept_length"]) == 20
    assert max(len(v) for sample in m.values() for key in sample for _, v in key) == 200
    assert len(body) < 400_000


def test_a_noisy_file_leaves_every_other_file_its_share(grammars):
    from acceptmon.parse.parser import Parser

    live = LiveStats(max_series=64, clock=Clock())
    noisy, quiet = Parser(grammars, "noisy.log"), Parser(grammars, "quiet.log")
    feed(live.update, noisy, *(decode_line(i, rank=f"DP{i} TP0") for i in range(100)))  # alone: the whole cap
    feed(live.update, quiet, *(decode_line(i, rank=f"DP{i} TP0") for i in range(40)))  # share: 64 // 2
    feed(live.update, noisy, decode_line(0, rank="DP999 TP0"))  # above its share now: no new series
    _, m = scrape(live)
    held = {
        f: sum(dict(k)["file"] == f for k in m["acceptmon_decode_batches_total"]) for f in ("noisy.log", "quiet.log")
    }
    assert held == {"noisy.log": 32, "quiet.log": 32}
    assert value(m, "acceptmon_series_overflow_total") == 36 + 8 + 1
    assert value(m, "acceptmon_decode_batches_total", file="noisy.log", rank="DP63 TP0") == 1  # newest kept
    assert value(m, "acceptmon_decode_batches_total", file="noisy.log", rank="DP0 TP0") is None  # oldest evicted


def test_files_found_together_share_the_cap_from_the_first_line(tmp_path):
    grammars = load_grammars()
    (tmp_path / "a.log").write_text("".join(decode_line(i, rank=f"DP{i} TP0") + "\n" for i in range(50)))
    (tmp_path / "b.log").write_text("".join(decode_line(i, rank=f"DP{i} TP0") + "\n" for i in range(5)))
    live = LiveStats(max_series=32)
    source = LiveSource([str(tmp_path / "*.log")], grammars, live.update, from_start=True,
                        on_waiting=live.set_waiting)  # fmt: skip
    source.discover()
    source.tick()
    source.close()
    _, m = scrape(live)
    held = [dict(k)["file"].rsplit("/", 1)[-1] for k in m["acceptmon_decode_batches_total"]]
    assert (held.count("a.log"), held.count("b.log")) == (16, 5)
    assert value(m, "acceptmon_series_overflow_total") == 34


def test_a_resumed_follower_keeps_the_decode_log_interval_its_counters_are_estimated_from(tmp_path, grammars):
    """Of the server arguments beside the config fields, the state file keeps ``decode_log_interval`` alone: after a
    restart SGLang's verify-step estimate still uses the run's 10, not the default 40 (and no API key is written)."""
    from acceptmon.measure.verify import decode_log_interval

    log, state = tmp_path / "server.log", tmp_path / "state.json"
    args = ", decode_log_interval=10, api_key='sk-live-123')"
    log.write_text(launch_line().replace(")", args) + "\n" + decode_line(0) + "\n")
    first = LiveSource([str(log)], grammars, Decodes(), state_file=state, from_start=True)
    first.discover()
    first.tick()
    first.save_state()
    first.close()
    text = state.read_text()
    assert "sk-live-123" not in text and "api_key" not in text and '"decode_log_interval": 10' in text
    second = LiveSource([str(log)], grammars, Decodes(), state_file=state)
    second.discover()
    launch = second.files[str(log)].parser.state.launch
    second.close()
    assert launch is not None and launch.extra == {"decode_log_interval": 10} and decode_log_interval(launch) == 10
