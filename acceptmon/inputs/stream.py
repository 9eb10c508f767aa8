"""Live bytes into whole lines: a followed file's or a stream's, as they come. Bytes only: nothing here parses.

:class:`Framer` is what a live reader puts between the bytes it reads and the parser: journalctl's
``-o export`` entries become the ``-o json`` line of each (:class:`~acceptmon.inputs.journal.ExportReader`,
as the batch reader has them), told by the file's first bytes; then lines are cut and a container
runtime's split lines joined (:class:`~acceptmon.inputs.files.LineAssembler`). Its resume point (the
first byte not handed on) is a line start, or an entry's.

:class:`StreamReader` reads a stream (standard input, a FIFO, ``/dev/stdin``) a line at a time: it waits
on the descriptor with ``poll`` (so a stop is seen within :data:`WAIT_MS`), hands on whatever complete
lines came, and at the end of input hands on the last one and says so. A FIFO is opened without
blocking and waited on until a writer comes.

:func:`keys_from_terminal` is for a screen that reads its keys from standard input while the log comes
there (``kubectl logs -f POD | acceptmon tail -``): the log moves to another descriptor and the
terminal takes its place.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable

from acceptmon.inputs.files import MAX_LINE, LineAssembler, Oversized, reads_stdin
from acceptmon.inputs.journal import EXPORT_HEAD, ExportReader

Sink = Callable[[bytes | Oversized], None]
READ_SIZE = 1 << 20
WAIT_MS = 100
"""How long a wait for input lasts before a stop is looked at."""


class Framer:
    """Bytes of one file or stream, from a given offset, into blocks of whole lines (or OVERSIZED markers)."""

    def __init__(self, max_line: int = MAX_LINE, *, at_start: bool = False) -> None:
        self.max_line = max_line
        self.lines = LineAssembler(max_line, at_start=at_start)
        self.export: ExportReader | None = None
        self._head: bytes | None = None
        self.reset(at_start=at_start)

    def reset(self, *, at_start: bool = False, head: bytes = b"") -> None:
        """Start over; ``at_start``: at offset 0. ``head``: the file's first bytes, when known (a start later
        in a journal export file must know it is one); with too few of them at offset 0 the first bytes fed say."""
        self.lines.reset(at_start=at_start)
        self.export = ExportReader() if head.startswith(EXPORT_HEAD) else None
        self._head = b"" if at_start and len(head) < len(EXPORT_HEAD) else None

    @property
    def skipping(self) -> bool:
        return self.lines.skipping

    @skipping.setter
    def skipping(self, value: bool) -> None:
        self.lines.skipping = value

    def resume_point(self) -> tuple[int, bool]:
        """(bytes fed and not handed on yet, whether reading again there starts inside an over-long line)."""
        if self.export is not None:
            return self.export.pending, False  # converted lines come out whole: the entry being read is held
        if self._head:
            return len(self._head), False
        return self.lines.resume_point()

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        if self._head is not None:
            data = self._head + data
            if len(data) < len(EXPORT_HEAD) and EXPORT_HEAD.startswith(data):
                self._head = data
                return []
            self._head = None
            if data.startswith(EXPORT_HEAD):
                self.export = ExportReader()
        if self.export is not None:
            self.export.convert(data)
            data = bytes(self.export.out)
            self.export.out.clear()
        return self.lines.feed(data)

    def finish(self) -> list[bytes | Oversized]:
        """At the end of input: what is held, completed."""
        out: list[bytes | Oversized] = []
        if self._head:
            out = self.lines.feed(self._head)
            self._head = None
        if self.export is not None:
            self.export.finish()
            out += self.lines.feed(bytes(self.export.out))
            self.export.out.clear()
        return out + self.lines.finish()


class StreamReader:
    """Reads one stream until its end or a stop, handing complete lines to ``sink`` as they come."""

    def __init__(self, path: str, sink: Sink, *, max_line: int = MAX_LINE, stdin_fd: int = 0) -> None:
        """``stdin_fd``: where standard input is read (``tail``'s dashboard moves it to keep the terminal's keys)."""
        self.path, self.sink, self.stdin_fd = path, sink, stdin_fd
        self.framer = Framer(max_line, at_start=True)
        self.ended = False
        """The input ended (every line was handed on)."""
        self.error: str | None = None
        """Why the stream could not be opened or read; None while fine."""
        self.bytes = 0

    def run(self, stop: threading.Event) -> None:
        """Read until the input ends (``ended``), it fails (``error``) or ``stop`` is set."""
        own = not reads_stdin(self.path)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK) if own else self.stdin_fd
        except OSError as exc:
            self.error = exc.strerror or str(exc)
            return
        try:
            self._read(fd, stop)
        finally:
            if own:
                os.close(fd)

    def _read(self, fd: int, stop: threading.Event) -> None:
        waiter = select.poll()
        waiter.register(fd, select.POLLIN | select.POLLPRI)
        while not stop.is_set():
            if not waiter.poll(WAIT_MS):  # a FIFO with no writer yet shows nothing: it is waited on
                continue
            try:
                data = os.read(fd, READ_SIZE)
            except BlockingIOError:
                continue
            except OSError as exc:
                self.error = exc.strerror or str(exc)
                return
            if not data:
                self._hand(self.framer.finish())
                self.ended = True
                return
            self.bytes += len(data)
            self._hand(self.framer.feed(data))

    def _hand(self, blocks: list[bytes | Oversized]) -> None:
        for block in blocks:
            self.sink(block)


def keys_from_terminal() -> int | None:
    """Move standard input (the log) to a new descriptor and put the controlling terminal in its place, so a
    screen reading keys from standard input reads the terminal's; the log's new descriptor, or None when
    there is no terminal to open (nothing is moved)."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        return None
    log = os.dup(0)
    os.dup2(tty, 0)
    os.close(tty)
    return log
