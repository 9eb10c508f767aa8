"""Following a live log: new complete lines as they are written, through rotation and truncation.

:class:`Follower` owns one path. :meth:`Follower.poll_once` reads whatever is new and
hands complete lines (blocks ending in a newline, or OVERSIZED markers) to a callback;
a partial last line is held until its newline arrives. Between polls it notices:

- truncation (copytruncate): the file is shorter than what was read -> read again from 0;
- rotation (rename + create, or delete + recreate): the path names another inode -> the
  old file is drained to its end first, then the new one is read from its start;
- a missing file: it waits, and says so through :attr:`Follower.waiting`.

:func:`watch` runs followers until stopped, woken by watchfiles (inotify) with a short
debounce, or by a timer in ``poll`` mode (network filesystems, containers). The
follower does no parsing: the caller feeds the blocks to a :class:`~acceptmon.parse.Parser`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import BinaryIO

from acceptmon.source import MAX_LINE, LineAssembler, _Oversized

Sink = Callable[[bytes | _Oversized], None]
READ_SIZE = 1 << 20


class Follower:
    """Tails one path, surviving rotation and truncation."""

    def __init__(self, path: str, sink: Sink, *, start: int | None = 0, max_line: int = MAX_LINE) -> None:
        """``start``: byte offset to begin at in the current file (None: its end)."""
        self.path = path
        self.sink = sink
        self._start = start
        self._file: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self.pos = 0
        self._lines = LineAssembler(max_line)
        self.rotations = 0
        self.truncations = 0

    @property
    def waiting(self) -> bool:
        """True while the path does not exist (yet)."""
        return self._file is None

    def poll_once(self) -> int:
        """Read what is new; return the number of bytes consumed."""
        if self._file is None and not self._open():
            return 0
        n = self._drain()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return n  # deleted: keep the old handle until a new file appears
        assert self._file is not None
        if (st.st_dev, st.st_ino) != self._ino:
            n += self._drain()
            self._close()
            self.rotations += 1
            self._start = 0
            if self._open():
                n += self._drain()
        elif st.st_size < self.pos:
            self.truncations += 1
            self._file.seek(0)
            self.pos = 0
            self._lines.reset()
            n += self._drain()
        return n

    def close(self) -> None:
        self._close()

    def _open(self) -> bool:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return False
        st = os.fstat(f.fileno())
        self._file, self._ino = f, (st.st_dev, st.st_ino)
        self.pos = st.st_size if self._start is None else min(self._start, st.st_size)
        f.seek(self.pos)
        self._lines.reset()
        return True

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None

    def _drain(self) -> int:
        assert self._file is not None
        total = 0
        while True:
            data = self._file.read(READ_SIZE)
            if not data:
                return total
            total += len(data)
            self.pos += len(data)
            self._take(data)

    def _take(self, data: bytes) -> None:
        for block in self._lines.feed(data):
            self.sink(block)


def watch(followers: Sequence[Follower], stop: threading.Event, *, poll: bool = False, interval: float = 0.1) -> None:
    """Poll the followers whenever their directories change (or every ``interval`` in poll mode)."""
    for f in followers:
        f.poll_once()
    if poll:
        while not stop.wait(interval):
            for f in followers:
                f.poll_once()
        return
    import watchfiles  # the core never imports it; only the live path does

    dirs = sorted({os.path.dirname(os.path.abspath(f.path)) for f in followers})
    for _ in watchfiles.watch(
        *dirs, stop_event=stop, debounce=50, step=10, rust_timeout=int(interval * 1000), yield_on_timeout=True
    ):
        for f in followers:
            f.poll_once()
