"""Writing an output file so that it is whole or absent: a temporary name, renamed at the end.

A failed or interrupted ``parse`` leaves no half-written file that looks complete: the
rows go to ``.NAME.acceptmon-PID.tmp`` beside the target, compressed when the target
ends in ``.gz``, and only a run that finished renames it into place.
"""

from __future__ import annotations

import gzip
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from acceptmon.errors import InputError
from acceptmon.sinks.table import Writer


@contextmanager
def atomic_output(path: str | None) -> Iterator[Writer]:
    """Standard output for None; else a temporary file renamed to ``path`` when the block ends without error."""
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.acceptmon-{os.getpid()}.tmp")
    try:
        raw = open(tmp, "wb")
    except OSError as exc:
        raise InputError(path, f"cannot write: {exc.strerror}") from None
    out: IO[bytes] | gzip.GzipFile = raw
    if path.endswith(".gz"):
        out = gzip.GzipFile(filename=name.removesuffix(".gz"), mode="wb", fileobj=raw, mtime=0)
    try:
        yield out
        out.close()
        raw.close()
        os.replace(tmp, path)
    except BaseException:
        out.close()
        raw.close()
        os.unlink(tmp)
        raise


def check_output(path: str | None, inputs: list[str]) -> None:
    """An output path must not be a directory or one of the inputs (it would replace a log with its rows)."""
    if path is None:
        return
    if os.path.isdir(path):
        raise InputError(path, "is a directory; name an output file")
    for f in inputs:
        if f != "-" and os.path.exists(path) and os.path.samefile(f, path):
            raise InputError(path, "is also an input: writing the rows there would replace the log")
