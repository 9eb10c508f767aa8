"""Writing output: an output file whole or absent, and a failed write reported in one line.

A failed or interrupted ``parse`` leaves no half-written file that looks complete: the
rows go to ``.NAME.acceptmon-PID.tmp`` beside the target, compressed when the target
ends in ``.gz``, and only a run that finished renames it into place (a symbolic link
is followed: the file it points to is replaced, the link stays). A write that fails
(a full disk) is an :class:`InputError` naming the file or ``stdout``; a broken pipe
(the reader, e.g. ``head``, went away) is not an error and passes unchanged.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TextIO

from acceptmon.errors import InputError
from acceptmon.inputs.files import file_kind
from acceptmon.sinks.table import Writer

STDOUT = "stdout"
"""How standard output is named in an error."""


class GuardedWriter:
    """A writer whose failed write is one :class:`InputError` naming ``name``; a broken pipe passes."""

    def __init__(self, out: Writer, name: str, *, flush: bool = False) -> None:
        """``flush``: every write is flushed at once (rows of a stream read as it comes)."""
        self.out, self.name, self.flush = out, name, flush

    def write(self, data: bytes, /) -> int:
        try:
            n = self.out.write(data)
            if self.flush:
                self.out.flush()  # type: ignore[attr-defined]
            return n
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise write_error(self.name, exc) from None


def write_error(name: str, exc: OSError) -> InputError:
    """The error of a failed write to ``name``; for stdout, what it still buffers is dropped (not retried at exit)."""
    if name == STDOUT:
        _discard_stdout()
    return InputError(name, f"cannot write: {exc.strerror or exc}")


def _discard_stdout() -> None:
    """Point standard output at the null device: the interpreter's flush at exit then cannot fail a second time."""
    with contextlib.suppress(OSError, ValueError):  # no file descriptor (replaced or closed stdout): nothing to drop
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@contextmanager
def stdout_writes() -> Iterator[None]:
    """The block prints a command's output (and only that); a failed write is one line naming stdout.

    Standard output is flushed before the block ends (:func:`flush_stdout`). A broken pipe
    passes (the command line keeps it quiet).
    """
    _stdout()
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise write_error(STDOUT, exc) from None
    flush_stdout()


def flush_stdout() -> None:
    """Flush standard output now: a full disk is reported as one line here, not by the interpreter at exit."""
    try:
        _stdout().flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise write_error(STDOUT, exc) from None


def _stdout() -> TextIO:
    """Standard output; an error if it is closed (the interpreter then has none)."""
    if sys.stdout is None:
        raise InputError(STDOUT, "cannot write: it is closed")
    return sys.stdout


@contextmanager
def atomic_output(path: str | None, *, flush: bool = False) -> Iterator[Writer]:
    """Standard output for None; else a temporary file renamed to ``path`` when the block ends without error.

    ``flush``: standard output is flushed after every write (the input is a stream, read as it comes)."""
    if path is None:
        yield GuardedWriter(
            _stdout().buffer, STDOUT, flush=flush
        )  # the block's other errors (reading) are not stdout's
        flush_stdout()
        return
    target = os.path.realpath(path)  # a link stays a link: the file it points to is replaced
    head, name = os.path.split(target)
    tmp = os.path.join(head, f".{name}.acceptmon-{os.getpid()}.tmp")
    try:
        raw = open(tmp, "wb")
    except OSError as exc:
        raise InputError(path, f"cannot write: {exc.strerror}") from None
    out: IO[bytes] | gzip.GzipFile = raw
    if path.endswith(".gz"):
        out = gzip.GzipFile(filename=os.path.basename(path).removesuffix(".gz"), mode="wb", fileobj=raw, mtime=0)
    try:
        yield GuardedWriter(out, path)
        try:
            out.close()
            raw.close()
            os.replace(tmp, target)
        except OSError as exc:
            raise write_error(path, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):  # the write that failed fails again: the file is dropped anyway
            out.close()
        with contextlib.suppress(OSError):
            raw.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def output_path(path: str | None) -> str | None:
    """The ``-o`` value: None (standard output) for ``-`` or none given."""
    return None if path in (None, "-") else path


def check_output(path: str | None, inputs: list[str]) -> None:
    """An output path must be a regular file or absent, and not one of the inputs (it would replace a log).

    A FIFO, device or socket is refused, not replaced by a file (leaving out ``-o`` writes to stdout).
    """
    if path is None:
        return
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise InputError(path, f"cannot write: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputError(path, "is a directory; name an output file")
    if not stat.S_ISREG(mode):
        kind = file_kind(mode)
        raise InputError(path, f"not a regular file ({kind}); -o names a file, and without -o the rows go to stdout")
    for f in inputs:
        if f != "-" and os.path.samefile(f, path):
            raise InputError(path, "is also an input: writing the rows there would replace the log")
