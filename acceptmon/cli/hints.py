"""What the batch commands say about their inputs and outputs on stderr: progress, files without rows, -o checks."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from acceptmon.display import requests_only
from acceptmon.errors import InputError
from acceptmon.inputs.files import open_log
from acceptmon.inputs.remote import is_url
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Tally
from acceptmon.pipeline.batch import Progress


def progress_printer() -> Callable[[Progress], None] | None:
    if not sys.stderr.isatty():
        return None
    started = time.monotonic()

    def show(p: Progress) -> None:
        if p.total:
            rate = p.done / max(time.monotonic() - started, 1e-6) / 1e6
            sys.stderr.write(f"\racceptmon: {100 * p.done // p.total:3d}%  {rate:6.0f} MB/s")
            sys.stderr.flush()

    return show


def checked_io(files: list[str], output: str | None) -> tuple[list[str], str | None]:
    """A batch command's inputs (each named once, each readable) and its ``-o`` (local, not one of them)."""
    from acceptmon.inputs.files import check_path
    from acceptmon.inputs.refs import unique_paths
    from acceptmon.inputs.remote import local_names
    from acceptmon.sinks.atomic import check_output, output_path

    files = unique_paths(files)
    for f in files:
        check_path(f)
    output = output_path(output)
    local_output(output)
    check_output(output, local_names(files))
    return files, output


def local_output(output: str | None) -> None:
    """``-o`` names a local file: a URL is read, never written."""
    if output is not None and is_url(output):
        raise InputError(output, "-o writes a local file; URLs are read, not written (copy the file up afterwards)")


def no_rows_hint(files: list[str], kind: str | None = None, tally: Tally | None = None) -> None:
    what = f"{kind} lines" if kind else "decode or spec lines"
    requests = tally.kinds.get("request", 0) if tally is not None and kind is None else 0
    if requests:  # a server log, of finished requests only: say what it lacks, not "is this a server log?"
        named = ", ".join(files)
        print(f"acceptmon: {named}: {requests_only(requests)}; --kind request writes them as rows", file=sys.stderr)
        return
    held = _other_rows(tally, kind)
    if held:  # --kind of a kind the log has none of, among lines of others: say which it has
        named, ranked = ", ".join(files), sorted(held.items(), key=lambda kn: -kn[1])
        lines = ", ".join(f"{n:,} {k}" for k, n in ranked)
        which = f"--kind {ranked[0][0]} writes them" if len(ranked) == 1 else "--kind writes any one of them"
        print(f"acceptmon: no {what} found in {named}; it has {lines} lines ({which})", file=sys.stderr)
        return
    for f in files:
        why = looks_binary(f)
        if why:
            print(f"acceptmon: {f} looks binary ({why}), not a text log: no {what} found", file=sys.stderr)
        else:
            print(f"acceptmon: no {what} found in {f}: is this an SGLang or vLLM server log?", file=sys.stderr)


def _other_rows(tally: Tally | None, kind: str | None) -> dict[str, int]:
    """With ``--kind``: the lines of the other kinds ``parse`` writes as rows that the reading counted."""
    if tally is None or kind is None:
        return {}
    return {k: n for k, n in tally.kinds.items() if n and k != kind and k in KINDS and not KINDS[k].starts_run}


SNIFF_BYTES = 64 << 10
"""How much of a file's (decompressed) start :func:`looks_binary` reads."""


def looks_binary(path: str) -> str | None:
    """Why the start of ``path`` looks like no text log (NUL bytes, mostly non-text), else None (stdin: None)."""
    if path == "-":
        return None
    try:
        with open_log(path) as f:
            head = f.read(SNIFF_BYTES)
    except (OSError, InputError):
        return None
    if not head:
        return None
    if b"\0" in head:
        return f"NUL bytes in its first {_kib(len(head))}"
    text = head.decode("utf-8", errors="replace")
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r\x1b\f\v") or c == "\x7f")
    if odd * 10 > len(text):
        return f"{100 * odd // len(text)} % non-text characters in its first {_kib(len(head))}"
    return None


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"
