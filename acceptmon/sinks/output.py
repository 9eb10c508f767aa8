"""Writing an output file so that it is whole or absent: a temporary name, renamed at the end.

A failed or interrupted ``parse`` leaves no half-written file that looks complete: the
rows go to ``.NAME.acceptmon-PID.tmp`` beside the target, compressed when the target
ends in ``.gz``, and only a run that finished renames it into place (a symbolic link
is followed: the file it points to is replaced, the link stays).
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from acceptmon.errors import InputError
from acceptmon.sinks.table import Writer
from acceptmon.source import file_kind


@contextmanager
def atomic_output(path: str | None) -> Iterator[Writer]:
    """Standard output for None; else a temporary file renamed to ``path`` when the block ends without error."""
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
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
        yield out
        out.close()
        raw.close()
        os.replace(tmp, target)
    except BaseException:
        out.close()
        raw.close()
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
