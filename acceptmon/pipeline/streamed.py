"""Live streams: standard input, a FIFO or ``/dev/stdin``, read a line at a time into the live pipeline.

``kubectl logs -f POD | acceptmon serve -``: a :class:`Streamed` reads the stream on its own thread
(:class:`~acceptmon.inputs.stream.StreamReader`), so a line reaches its parser, and the records the
sink, as soon as it is written, whatever the followed files' wake-ups are. A stream has no start
position to choose and none to save: it is read from its first line. Its sources (``kubectl logs
--prefix``, stern: :mod:`acceptmon.parse.streams`) are its parser's, as in a file. At the end of
input it says so once; its last state stays (``serve`` keeps serving it, ``tail`` showing it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from acceptmon.inputs.files import OVERSIZED, Oversized
from acceptmon.inputs.stream import StreamReader
from acceptmon.parse.parser import Parser, Tally
from acceptmon.parse.records import Record
from acceptmon.pipeline.lanes import Read, parsed

LiveSink = Callable[[str, list[Record], Tally], object]


def hand(path: str, parser: Parser, sink: LiveSink, block: bytes | Oversized, read: Read = parsed) -> None:
    """One block of complete lines (or one skipped line) of ``path``: read (``read``: the live sources' lane, or
    the general parser), its records to ``sink``."""
    if block is OVERSIZED:
        parser.skip_oversized()
        sink(path, [], parser.tally)
    else:
        assert isinstance(block, bytes)
        sink(path, read(parser, block), parser.tally)


class Streamed:
    """One stream, read on its own thread until it ends or the live run stops."""

    def __init__(
        self,
        path: str,
        parser: Parser,
        sink: LiveSink,
        note: Callable[[str], None],
        on_ended: Callable[[str], None] | None = None,
        *,
        stdin_fd: int = 0,
        read: Read = parsed,
    ) -> None:
        self.path, self.parser, self.sink, self.note, self.on_ended = path, parser, sink, note, on_ended
        self.read = read
        self.reader = StreamReader(path, self._take, stdin_fd=stdin_fd)
        self._thread: threading.Thread | None = None

    def _take(self, block: bytes | Oversized) -> None:
        hand(self.path, self.parser, self.sink, block, self.read)

    def start(self, stop: threading.Event) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(stop,), name=f"stream {self.path}", daemon=True)
            self._thread.start()

    def _run(self, stop: threading.Event) -> None:
        self.reader.run(stop)
        if self.reader.error is not None:
            self.note(f"{self.path}: cannot read: {self.reader.error}")
        elif self.reader.ended:
            lines = self.parser.tally.lines
            self.note(f"{self.path}: input ended after {lines:,} lines; keeping the last state until stopped")
            if self.on_ended is not None:
                self.on_ended(self.path)

    def join(self, timeout: float = 2.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
