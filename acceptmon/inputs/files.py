"""Reading logs: files, ``.gz`` files, stdin and objects by URL, as blocks of complete lines.

The reader never holds more than one block plus one line: a line longer than
``max_line`` is skipped (and reported as :data:`OVERSIZED`) instead of buffered.
A UTF-8 byte-order mark at the very start of a file or stream is dropped (it would
glue onto the first line's envelope). Only regular files (and ``-``, stdin) are
accepted: a FIFO or a device would block or never end; so would some files under /proc
and /sys, which stat as regular and empty, so those are refused too.
It does no parsing; :class:`acceptmon.parse.parser.Parser` consumes what it yields.
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, Final, cast

from acceptmon.errors import InputError
from acceptmon.inputs.container import Joiner
from acceptmon.inputs.journal import wrap
from acceptmon.inputs.remote import check_url, file_path, is_url, open_url

BLOCK_SIZE: Final = 1 << 22
"""Bytes read at a time (4 MiB)."""
MAX_LINE: Final = 1 << 20
"""Longest line parsed (1 MiB); server_args dumps are 2-13 kB."""
WINDOW: Final = 1 << 16
"""Bytes read at a time when looking for the next line start."""
GZIP_MAGIC: Final = b"\x1f\x8b"
BOM: Final = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark, dropped at offset 0."""
KERNEL_DIRS: Final = ("/proc", "/sys")
"""Where the kernel's own files live: never read as logs."""


class Oversized:
    """Marker: the reader skipped one line longer than ``max_line``; :data:`OVERSIZED` is its one instance."""

    _instance: Oversized | None = None

    def __new__(cls) -> Oversized:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "OVERSIZED"

    def __reduce__(self) -> str:
        return "OVERSIZED"  # unpickles as the module's one instance


OVERSIZED: Final = Oversized()
"""Old name, kept while other modules still import it."""

_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_path(path: str, *, may_be_missing: bool = False) -> None:
    """Raise InputError with a one-line reason if ``path`` cannot be read as a log.

    ``may_be_missing``: a live log that does not exist yet is fine (it is waited for).
    Only ``os.stat`` looks at the path: opening a FIFO would block until a writer comes.
    A stream (:func:`is_stream`: ``-``, a FIFO, this process's standard input by a name) is fine.
    A URL (:mod:`acceptmon.inputs.remote`) must name an object that is there; it is never followed live.
    """
    if path == "-":
        return
    if is_url(path):
        if may_be_missing:
            raise InputError(
                path,
                "a URL is not followed live: tail and serve read local files and streams "
                "(parse, runs, compare and doctor read URLs)",
            )
        local = file_path(path)
        if local is not None:  # a file:// URL: a device or a kernel file is refused as by its path
            try:
                check_path(local)
            except InputError as exc:
                raise InputError(path, exc.reason) from None
        check_url(path)
        return
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if may_be_missing:
            _check_not_kernel(path)
            return
        raise InputError(path, "no such file") from None
    except OSError as exc:
        raise InputError(path, (exc.strerror or str(exc)).lower()) from None
    if stat.S_ISFIFO(st.st_mode) or is_stdin(st):
        return  # a stream: a pipe's name under /proc/self/fd is no kernel file
    problem = not_regular(st.st_mode)
    if problem is not None:
        raise InputError(path, problem)
    _check_not_kernel(path)
    if not os.access(path, os.R_OK):
        raise InputError(path, "permission denied")


def is_stdin(st: os.stat_result) -> bool:
    """Whether ``st`` is this process's standard input as a pipe, a socket or a terminal (``/dev/stdin`` there);
    not a regular file, and not another device (``/dev/null`` stays refused)."""
    if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        return False
    try:
        own = os.fstat(0)
        if stat.S_ISCHR(st.st_mode) and not os.isatty(0):
            return False
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def is_stream(path: str) -> bool:
    """Whether ``path`` is read as a stream, a line at a time as it comes: ``-``, a FIFO, or standard input by
    another name (``/dev/stdin`` on a pipe or a terminal). Only ``os.stat`` looks at it."""
    if path == "-":
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISFIFO(st.st_mode) or is_stdin(st)


def reads_stdin(path: str) -> bool:
    """Whether ``path`` is standard input itself (``-``, or its other names), not a FIFO opened by its name."""
    if path == "-":
        return True
    try:
        return is_stdin(os.stat(path))
    except OSError:
        return False


def _check_not_kernel(path: str) -> None:
    """Refuse a path under /proc or /sys: its files stat as regular and empty, yet some never end."""
    top = kernel_dir(path)
    if top is not None:
        raise InputError(path, f"is under {top}: a kernel interface, not a log file")


def kernel_dir(path: str) -> str | None:
    """``/proc`` or ``/sys`` if ``path`` (links followed) is under it, else None."""
    real = os.path.realpath(path)
    return next((t for t in KERNEL_DIRS if real == t or real.startswith(t + "/")), None)


def not_regular(mode: int) -> str | None:
    """Why a file of this ``st_mode`` is not read as a log; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a log file"
    return f"not a regular file ({file_kind(mode)}); acceptmon reads regular files, FIFOs or - for stdin"


def file_kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, when not a regular file or a directory: "a FIFO", "a socket", ..."""
    return next((name for test, name in _KINDS if test(mode)), "an unknown kind")


@contextmanager
def open_log(path: str, *, as_read: bool = False) -> Iterator[BinaryIO]:
    """Open a log for binary reading: ``-`` is stdin, ``*.gz`` is decompressed, journalctl's
    ``-o export`` and ``-o json`` come as one JSON line per entry (:mod:`acceptmon.inputs.journal`).
    A FIFO's opening waits for a writer. ``as_read``: a stream (:func:`is_stream`) is read as it comes
    (:class:`Pipe`: ``parse -`` writes a line's row when the line is written); else in whole blocks
    (what is summed over blocks then does not depend on how a pipe delivered its bytes).

    Errors of the caller's own work inside the ``with`` (e.g. a closed stdout) pass
    through unchanged; only opening the log and decompressing it are blamed on it.
    """
    check_path(path)
    if reads_stdin(path):
        yield wrap(cast(BinaryIO, Pipe(sys.stdin.buffer)) if as_read else sys.stdin.buffer)
        return
    if is_url(path):
        with _open_url(path) as stream:
            yield stream
        return
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    with raw:
        if stat.S_ISFIFO(os.fstat(raw.fileno()).st_mode):
            yield wrap(cast(BinaryIO, Pipe(raw)) if as_read else raw)
            return
        try:
            gzipped = raw.read(2) == GZIP_MAGIC
            raw.seek(0)
            stream = raw if gzipped else wrap(raw)
        except OSError as exc:
            raise InputError(path, exc.strerror or str(exc)) from None
        if not gzipped:
            yield stream
            return
        with gzip.GzipFile(fileobj=raw) as gz:
            try:
                yield wrap(gz)  # type: ignore[arg-type]
            except (zlib.error, EOFError, gzip.BadGzipFile) as exc:
                raise InputError(path, f"corrupt gzip data ({_gzip_reason(exc)})") from None


@contextmanager
def _open_url(url: str) -> Iterator[BinaryIO]:
    """An object by URL, from its start: gzip told by its first bytes (``peek``), as for a local file."""
    with open_url(url) as raw:
        if raw.peek(2)[:2] != GZIP_MAGIC:  # type: ignore[attr-defined]
            yield wrap(raw)
            return
        with gzip.GzipFile(fileobj=raw) as gz:
            try:
                yield wrap(gz)  # type: ignore[arg-type]
            except (zlib.error, EOFError, gzip.BadGzipFile) as exc:
                raise InputError(url, f"corrupt gzip data ({_gzip_reason(exc)})") from None


class Pipe:
    """A stream read as it comes: ``read(n)`` returns what is there (waiting only for the first byte), not n bytes.

    So a line reaches the parser when it is written, not when a block fills. It cannot ``tell``."""

    live = True
    """Readers that convert what they read hand on what they have, rather than read on to fill a block."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def read(self, n: int = -1) -> bytes:
        read1 = getattr(self.raw, "read1", None)
        return bytes(read1(n if n > 0 else BLOCK_SIZE)) if read1 is not None else self.raw.read(n)

    def peek(self, n: int = 0) -> bytes:
        peek = getattr(self.raw, "peek", None)
        return bytes(peek(n)) if peek is not None else b""

    def tell(self) -> int:
        raise OSError("a stream cannot tell")


def _gzip_reason(exc: Exception) -> str:
    if isinstance(exc, EOFError):
        return f"truncated: {exc}"
    return str(exc)


class LineAssembler:
    """Cuts a byte stream into blocks of complete lines.

    A partial last line is held until its newline; a line longer than ``max_line``
    is skipped (one OVERSIZED marker) without ever being buffered whole.
    ``at_start``: the first byte fed is the file's offset 0, so a byte-order mark
    there is dropped. It is consumed input: ``carry`` holds only bytes of the first
    line (or, while fewer than three bytes came, a possible mark).
    A container runtime's pieces of a split line are joined back (:class:`~acceptmon.inputs.container.Joiner`):
    a joined line too is at most ``max_line`` long.
    """

    def __init__(self, max_line: int = MAX_LINE, *, at_start: bool = False) -> None:
        self.max_line = max_line
        self.joiner = Joiner(max_line)
        self.reset(at_start=at_start)

    def reset(self, *, at_start: bool = False) -> None:
        """Forget any held partial line (the stream starts over; ``at_start``: at its offset 0)."""
        self.carry = b""
        self.skipping = False
        self.at_start = at_start
        self.joiner.reset()

    def resume_point(self) -> tuple[int, bool]:
        """(bytes fed and not handed on yet, whether reading again there starts inside an over-long line).

        Held are a partial last line, or the pieces of a line being joined and what followed them
        (reading again from that line start skips an over-long line after them anew)."""
        joined = self.joiner.held
        return len(self.carry) + joined, self.skipping and not joined

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        return self._joined(self._cut(data))

    def _joined(self, blocks: list[bytes | Oversized]) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        for block in blocks:
            if isinstance(block, bytes):
                out.extend(OVERSIZED if b is None else b for b in self.joiner.feed(block))
            else:
                out.append(block)
        return out

    def _cut(self, data: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        if self.at_start:
            data = self._drop_bom(data)
            if self.at_start:
                return out
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return out
            self.skipping = False
            out.append(OVERSIZED)
            data = data[nl + 1 :]
        buf = self.carry + data if self.carry else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self.carry = buf
        else:
            self.carry = buf[cut + 1 :]
            out.extend(split_oversized(buf[: cut + 1], self.max_line))
        if len(self.carry) > self.max_line:
            self.carry, self.skipping = b"", True
        return out

    def _drop_bom(self, data: bytes) -> bytes:
        """Bytes fed at the start, without a leading BOM; ``at_start`` stays True while undecided."""
        if self.skipping:  # resumed inside an over-long line: not the start of a line
            self.at_start = False
            return data
        head = self.carry + data
        if len(head) < len(BOM) and BOM.startswith(head):
            self.carry = head
            return b""
        self.carry, self.at_start = b"", False
        return head.removeprefix(BOM)

    def finish(self) -> list[bytes | Oversized]:
        """At end of input: the last line, completed with a newline."""
        if self.skipping:
            out: list[bytes | Oversized] = [OVERSIZED]
        elif self.carry:
            out = split_oversized(self.carry + b"\n", self.max_line)
        else:
            out = []
        out = self._joined(out)
        out.extend(OVERSIZED if b is None else b for b in self.joiner.finish())
        self.reset(at_start=False)
        return out


def iter_blocks(
    stream: BinaryIO, *, limit: int | None = None, block_size: int = BLOCK_SIZE, max_line: int = MAX_LINE
) -> Iterator[bytes | Oversized]:
    """Yield blocks of complete lines, or OVERSIZED for each skipped long line.

    A last line without a newline is completed with one. ``limit`` stops after
    that many bytes (used by parallel readers on a byte range that ends at a line start).
    A byte-order mark is dropped if the stream is at its offset 0 (it counts in ``limit``).
    """
    lines = LineAssembler(max_line, at_start=_at_offset_zero(stream))
    remaining = limit
    while remaining is None or remaining > 0:
        data = stream.read(block_size if remaining is None else min(block_size, remaining))
        if not data:
            break
        if remaining is not None:
            remaining -= len(data)
        yield from lines.feed(data)
    yield from lines.finish()


def _at_offset_zero(stream: BinaryIO) -> bool:
    """True unless the stream tells a later position (a pipe cannot tell: it is read from its start)."""
    try:
        return stream.tell() == 0
    except (OSError, ValueError):
        return True


def split_oversized(block: bytes, max_line: int = MAX_LINE) -> list[bytes | Oversized]:
    """Replace each complete line longer than ``max_line`` in ``block`` by OVERSIZED."""
    half = max(max_line // 2, 1)  # a newline in every aligned window of `half` bytes: no line is longer
    if len(block) <= max_line or all(block.find(b"\n", k, k + half) + 1 for k in range(0, len(block) - half + 1, half)):
        return [block]
    lines = block.split(b"\n")
    if max(map(len, lines)) <= max_line:
        return [block]
    out: list[bytes | Oversized] = []
    keep: list[bytes] = []
    for line in lines[:-1]:
        if len(line) > max_line:
            if keep:
                out.append(b"\n".join(keep) + b"\n")
                keep = []
            out.append(OVERSIZED)
        else:
            keep.append(line)
    if keep:
        out.append(b"\n".join(keep) + b"\n")
    return out
