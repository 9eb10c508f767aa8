"""The live loop watches only the folders it needs, each without its subfolders.

A log directly in ``/tmp`` once made ``serve`` watch all of ``/tmp`` recursively (and a link in it into
``/sys`` hung that). Real inotify through watchfiles: a change in a subfolder wakes no tick, a change in
the watched folder does, and a folder a tick adds (a glob's new match) is watched from then on.
"""

from __future__ import annotations

import threading
import time

from acceptmon.inputs import follow
from acceptmon.parse.load import load_grammars
from acceptmon.pipeline.live import LiveSource
from tests.serving import wait_for

WAIT = 20.0


def test_a_subfolder_wakes_no_tick_and_a_folder_a_tick_adds_is_watched(tmp_path, monkeypatch):
    monkeypatch.setattr(follow, "IDLE_TICK_MS", 60_000)  # only events wake a tick here
    sub = tmp_path / "sub"
    sub.mkdir()
    later = tmp_path / "later"
    later.mkdir()
    folders = [str(tmp_path)]
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(time.monotonic())
        if len(ticks) == 3:
            folders.append(str(later))  # as a rescan finding a new match in a new folder

    stop = threading.Event()
    t = threading.Thread(target=follow.watch_loop, args=(tick, lambda: folders, stop), daemon=True)
    t.start()
    try:
        assert wait_for(lambda: len(ticks) == 1, WAIT)
        time.sleep(0.3)  # the watch is set up
        (sub / "deep.log").write_text("x\n")
        time.sleep(0.6)
        (tmp_path / "top.log").write_text("x\n")
        assert wait_for(lambda: len(ticks) >= 2, WAIT)
        time.sleep(0.4)
        assert len(ticks) == 2  # the subfolder's change woke nothing
        (tmp_path / "top.log").write_text("y\n")
        assert wait_for(lambda: len(ticks) >= 3, WAIT)
        time.sleep(0.4)  # the watch starts again, now on `later` too
        (later / "new.log").write_text("x\n")
        assert wait_for(lambda: len(ticks) >= 4, WAIT)
    finally:
        stop.set()
        (tmp_path / "top.log").write_text("z\n")  # wakes the watch so it sees the stop
        t.join(WAIT)
    assert not t.is_alive()


def test_the_folders_of_a_live_source_are_its_files_and_its_globs_heads(tmp_path):
    pod = tmp_path / "pods" / "ns_p_uid" / "c"
    pod.mkdir(parents=True)
    (pod / "0.log").write_text("")
    plain = tmp_path / "server.log"
    source = LiveSource([str(tmp_path / "pods" / "*" / "*" / "*.log"), str(plain), "-"], load_grammars(), print)
    source.discover()
    try:
        assert source.dirs() == sorted([str(tmp_path), str(tmp_path / "pods"), str(pod)])
    finally:
        source.close()
