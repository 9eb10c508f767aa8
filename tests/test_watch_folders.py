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


def _recording_watches(monkeypatch) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """The folders of each watch watchfiles started, appended once its inotify watches are in place (an event
    before that is not seen: a fixed wait for it was too short on a busy machine)."""
    import watchfiles.main

    watches: list[list[str]] = []
    real = watchfiles.main.RustNotify

    def recording(paths, *args):  # type: ignore[no-untyped-def]
        notify = real(paths, *args)  # watching from here on
        watches.append(sorted(paths))
        return notify

    monkeypatch.setattr(watchfiles.main, "RustNotify", recording)
    return watches


def test_a_subfolder_wakes_no_tick_and_a_folder_a_tick_adds_is_watched(tmp_path, monkeypatch):
    monkeypatch.setattr(follow, "IDLE_TICK_MS", 60_000)  # only events wake a tick here
    watches = _recording_watches(monkeypatch)
    sub = tmp_path / "sub"
    sub.mkdir()
    later = tmp_path / "later"
    later.mkdir()
    folders = [str(tmp_path)]
    ticks: list[float] = []
    add_later = threading.Event()

    def tick() -> None:
        ticks.append(time.monotonic())
        if add_later.is_set() and str(later) not in folders:
            folders.append(str(later))  # as a rescan finding a new match in a new folder

    stop = threading.Event()
    t = threading.Thread(target=follow.watch_loop, args=(tick, lambda: folders, stop), daemon=True)
    t.start()
    try:
        assert wait_for(lambda: len(ticks) == 1, WAIT), "the first tick"
        assert wait_for(lambda: watches == [[str(tmp_path)]], WAIT), ("the watch of the top folder", watches)
        (sub / "deep.log").write_text("x\n")
        time.sleep(0.6)  # time for a (wrong) tick
        assert len(ticks) == 1  # the subfolder's change woke nothing
        (tmp_path / "top.log").write_text("x\n")
        assert wait_for(lambda: len(ticks) >= 2, WAIT), "a tick for the top folder's change"
        add_later.set()
        seen = len(ticks)
        (tmp_path / "top.log").write_text("y\n")
        assert wait_for(lambda: len(ticks) > seen and str(later) in folders, WAIT), "a tick adding `later`"
        # the watch starts again, now on `later` too
        assert wait_for(lambda: watches[-1] == sorted([str(tmp_path), str(later)]), WAIT), watches
        seen = len(ticks)
        (later / "new.log").write_text("x\n")
        assert wait_for(lambda: len(ticks) > seen, WAIT), "a tick for the change in `later`"
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
