"""Following live logs, bytes only: new complete lines as they are written, through rotation and truncation.

:class:`Follower` owns one path. :meth:`Follower.poll_once` reads whatever is new and
hands complete lines (blocks ending in a newline, or OVERSIZED markers) to a callback;
a partial last line is held until its newline arrives. Between polls it notices:

- truncation (copytruncate): the file is shorter than what was read -> read again from 0;
- rotation (rename + create, or delete + recreate): the path names another inode -> the
  old file is drained to its end first, then the new one is read from its start; the old
  handle stays open and is read too until it has not grown for
  :data:`ROTATE_GRACE_SECONDS` (a writer reopens the path a moment after the rotation);
- a missing file: it waits, and says so through :attr:`Follower.waiting`.
- a file read through another path (its ``claimed`` callback says so: a rotated name of a
  followed file): it is left alone, and asked about again at the next poll.

:func:`watch_loop` wakes a tick through watchfiles (inotify) with a short debounce, or by
a timer in poll mode (network filesystems, containers). Nothing here parses: the live
pipeline (:mod:`acceptmon.pipeline.live`) hands the blocks to a parser. This is the
only module that imports watchfiles.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import BinaryIO

from acceptmon.inputs.files import MAX_LINE, Oversized, not_regular
from acceptmon.inputs.stream import Framer

Sink = Callable[[bytes | Oversized], None]
Claimed = Callable[[os.stat_result], bool]
"""Whether the file a path names now is read through another path already (a rotated name of a followed file)."""
READ_SIZE = 1 << 20
HEAD_BYTES = 256
DEBOUNCE_MS = 100
"""inotify mode: changes are grouped for at most this long (watchfiles' default, 1600 ms, is too slow)."""
STEP_MS = 20
"""inotify mode: a group is handed over once no new change came for this long."""
IDLE_TICK_MS = 1000
"""inotify mode: without events, a tick still runs this often (late files, new glob matches)."""
PAUSE_PER_CPU = 80
"""After a tick, the next one waits this many times the CPU time it took (at most :data:`MAX_PAUSE`).

A lone line is read within a step or two, as before; lines that keep coming are read in fewer, larger
ticks: each wake-up costs the same whatever it reads (30 files written at 1,000 lines/s in total woke
the follower 17 times a second, a few lines per file each time: 13.5 % of a core, against 8.5 % read 4
times a second). While lines keep coming, ticks that cost less than :data:`MAX_PAUSE` / this much come
one pause after another: the reading thread then spends 1 / (1 + this) of its time reading, whatever a
line costs. Under that load a tick's cost is mostly per file, not per line, so the reading thread's CPU
follows this number: 10 gave it 7.4 % of a core, 40 2.6 %, 80 2.1 % (lines are then read every quarter
second or so, about 250 at a time). A tick reading a line now and then still waits a few milliseconds:
the latency of a lone line is the same at 40 and 80 (p99 45-47 ms, ``bench_live.py``)."""
MAX_PAUSE = 0.5
"""Seconds a tick waits at most after the previous one (a line under load shows within about this long
plus a step or two)."""
ROTATE_GRACE_SECONDS = 2.0
"""After a rotation, the old file is still read until it has not grown for this long.

A logger keeps appending to the file it has open until it reopens the path (on a
signal, or at its next write), which may be well after the new file appeared: lines
written to the renamed or deleted file in that time are read, not lost. A tick reads
the old file before the new one."""


class _Draining:
    """A rotated-away file still read until it stays quiet for :data:`ROTATE_GRACE_SECONDS`."""

    def __init__(self, file: BinaryIO, lines: Framer, now: float, ino: tuple[int, int]) -> None:
        self.file, self.lines, self.grew, self.ino = file, lines, now, ino


class Follower:
    """Tails one path, surviving rotation and truncation."""

    def __init__(
        self,
        path: str,
        sink: Sink,
        *,
        start: int | None = 0,
        max_line: int = MAX_LINE,
        skipping: bool = False,
        claimed: Claimed | None = None,
    ) -> None:
        """``start``: byte offset to begin at in the current file (None: its end).

        ``skipping``: the start offset lies inside an over-long line (a resumed position).
        ``claimed``: asked before a file is opened; when it says the file is read elsewhere, it
        is left alone (and asked again at the next poll).
        """
        self.path = path
        self.sink = sink
        self._start = start
        self._skipping = skipping
        self._claimed = claimed
        self.elsewhere = False
        """The path names a file read through another path: not read here, not waited for."""
        self._file: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self.pos = 0
        self._lines = Framer(max_line)
        self.rotations = 0
        self.truncations = 0
        self.error: str | None = None
        """Why the path cannot be opened (permission denied, a directory...); None when fine or missing."""
        self._head = b""
        """The first bytes read from the file: if they change in place, it was truncated and rewritten."""
        self._draining: list[_Draining] = []
        """Files rotated away, still read while their writer may append to them."""
        self.clock: Callable[[], float] = time.monotonic
        """Time source of the rotation grace period."""

    @property
    def waiting(self) -> bool:
        """True while the path does not exist (yet)."""
        return self._file is None and not self.elsewhere

    def inodes(self) -> set[tuple[int, int]]:
        """(device, inode) of every file open here: the current one and those rotated away still read."""
        out = {old.ino for old in self._draining}
        if self._ino is not None:
            out.add(self._ino)
        return out

    def read_rotated(self, file: BinaryIO, ino: tuple[int, int], *, offset: int, skipping: bool) -> None:
        """Read ``file`` (positioned at ``offset``) to its end before the path: it was rotated away while
        nobody followed it (a resumed position). It is read like a file rotated away while following."""
        lines = Framer(self._lines.max_line)
        lines.reset(at_start=offset == 0, head=_head_of(file))
        lines.skipping = skipping
        self._draining.append(_Draining(file, lines, self.clock(), ino))

    def position(self) -> tuple[int, int, int, bool] | None:
        """(device, inode, offset of the first unprocessed line, skipping) of the open file."""
        if self._ino is None or self._file is None:
            return None
        held, skipping = self._lines.resume_point()
        return self._ino[0], self._ino[1], self.pos - held, skipping

    def poll_once(self) -> int:
        """Read what is new; return the number of bytes consumed."""
        n = self._drain_old()
        if self._file is None and not self._open():
            return n
        self._check_truncation()
        n += self._drain()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return n  # deleted: keep the old handle until a new file appears
        if (st.st_dev, st.st_ino) != self._ino:
            n += self._drain()
            assert self._file is not None and self._ino is not None
            self._draining.append(_Draining(self._file, self._lines, self.clock(), self._ino))
            self._lines = Framer(self._lines.max_line)
            self._file = self._ino = None
            self.rotations += 1
            self._start = 0
            if self._open():
                n += self._drain()
        return n

    def _drain_old(self) -> int:
        """Read what was appended to rotated-away files; close those quiet for the grace period."""
        n, now = 0, self.clock()
        for old in list(self._draining):
            got = _read_lines(old.file, old.lines, self.sink)
            if got:
                old.grew = now
                n += got
            elif now - old.grew >= ROTATE_GRACE_SECONDS:
                old.file.close()
                self._draining.remove(old)
        return n

    def _check_truncation(self) -> None:
        """Copytruncate: the open file got shorter than our offset, or its start was rewritten."""
        assert self._file is not None
        if os.fstat(self._file.fileno()).st_size < self.pos or self._rewritten():
            self.truncations += 1
            self._file.seek(0)
            self.pos = 0
            self._head = b""
            self._lines.reset(at_start=True)

    def close(self) -> None:
        self._close()
        for old in self._draining:
            old.file.close()
        self._draining.clear()

    def _open(self) -> bool:
        try:  # non-blocking: a FIFO that appears under the name must not block the follower in open()
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            self.error, self.elsewhere = None, False
            return False
        except OSError as exc:  # permission denied, a directory: keep trying, the caller reports it
            self.error = exc.strerror or str(exc)
            return False
        st = os.fstat(fd)
        self.error = not_regular(st.st_mode)
        if self.error is not None:
            os.close(fd)
            return False
        self.elsewhere = self._claimed is not None and self._claimed(st)
        if self.elsewhere:
            os.close(fd)
            return False
        f = os.fdopen(fd, "rb")
        self._file, self._ino = f, (st.st_dev, st.st_ino)
        self.pos = st.st_size if self._start is None else min(self._start, st.st_size)
        f.seek(self.pos)
        self._head = os.pread(f.fileno(), min(self.pos, HEAD_BYTES), 0)
        self._lines.reset(at_start=self.pos == 0, head=os.pread(f.fileno(), HEAD_BYTES, 0))
        self._lines.skipping, self._skipping = self._skipping, False
        return True

    def _rewritten(self) -> bool:
        """The start of the file differs from what was read there (truncated, then grown past our position)."""
        assert self._file is not None
        if not self._head:
            return False
        return os.pread(self._file.fileno(), len(self._head), 0) != self._head

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._ino = None

    def _drain(self) -> int:
        assert self._file is not None
        total = 0
        while True:
            data = self._file.read(READ_SIZE)
            if not data:
                return total
            if len(self._head) < HEAD_BYTES and self.pos < HEAD_BYTES:
                self._head += data[: HEAD_BYTES - self.pos]
            total += len(data)
            self.pos += len(data)
            for block in self._lines.feed(data):
                self.sink(block)


def _read_lines(f: BinaryIO, lines: Framer, sink: Sink) -> int:
    """Hand the complete lines appended to ``f`` to ``sink``; return the bytes read."""
    total = 0
    while data := f.read(READ_SIZE):
        total += len(data)
        for block in lines.feed(data):
            sink(block)
    return total


def _head_of(file: BinaryIO) -> bytes:
    """The first bytes of an open file (a journal export file is known by them), or nothing (a gzip stream)."""
    try:
        return os.pread(file.fileno(), HEAD_BYTES, 0)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return b""


def watch_loop(
    tick: Callable[[], object],
    dirs: Callable[[], Sequence[str]],
    stop: threading.Event,
    *,
    poll: bool = False,
    interval: float = 0.1,
) -> None:
    """Call ``tick`` whenever something changes in ``dirs`` (or every ``interval`` in poll mode).

    With inotify, ``tick`` also runs every :data:`IDLE_TICK_MS` without events, so late files
    and new glob matches are found even where no event announces them. Only the folders ``dirs``
    names are watched, each without its subfolders (a log directly in ``/tmp`` must not watch all of
    ``/tmp``, and a link in it into ``/sys`` once hung that); when a tick changes them (a glob's new
    match in a new folder), the watch starts again on the new set.
    """
    _timed(tick)
    pause = 0.0  # the first tick's cost is start-up (imports, the first launch line's validation), not a read's:
    # lines written just after a start are read at once, not one long pause later
    if poll:
        while not stop.wait(max(interval, pause)):
            pause = _timed(tick)
        return
    import watchfiles  # the core never imports it; only the live path does

    ready = time.monotonic() + pause  # when the next tick may run: a change after that is read at once
    while not stop.is_set():
        watched = _existing(dirs())
        if not watched:
            if not stop.wait(max(interval, pause)):
                pause = _timed(tick)
                ready = time.monotonic() + pause
            continue
        for _ in watchfiles.watch(
            *watched,
            stop_event=stop,
            debounce=DEBOUNCE_MS,
            step=STEP_MS,
            rust_timeout=IDLE_TICK_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
            recursive=False,
        ):
            # what changes meanwhile stays in watchfiles' set for its next round
            if stop.wait(max(0.0, ready - time.monotonic())):
                break
            pause = _timed(tick)
            ready = time.monotonic() + pause
            if stop.is_set() or _existing(dirs()) != watched:
                break


def _timed(tick: Callable[[], object]) -> float:
    """Run ``tick``; return how long the next one waits (:data:`PAUSE_PER_CPU`)."""
    spent = time.thread_time()
    tick()
    return min(MAX_PAUSE, PAUSE_PER_CPU * (time.thread_time() - spent))


def _existing(dirs: Sequence[str]) -> list[str]:
    return sorted({d for d in dirs if os.path.isdir(d)})


def watch(followers: Sequence[Follower], stop: threading.Event, *, poll: bool = False, interval: float = 0.1) -> None:
    """Poll fixed followers whenever their directories change."""

    def tick() -> None:
        for f in followers:
            f.poll_once()

    watch_loop(
        tick,
        lambda: sorted({os.path.dirname(os.path.abspath(f.path)) for f in followers}),
        stop,
        poll=poll,
        interval=interval,
    )
