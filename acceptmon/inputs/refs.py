"""File references on the command line: ``FILE#N`` (the N-th server launch in it; ``URL#N`` too), and files
named twice."""

from __future__ import annotations

import os
import re
from pathlib import Path

from acceptmon.errors import InputError
from acceptmon.inputs.files import check_path
from acceptmon.inputs.remote import expand, is_url

_RUN = re.compile(r"#([^#/]*)\Z")


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``server.log#2`` -> ('server.log', 2); ``server.log`` -> ('server.log', None). Checks the file.

    A file whose own name ends in ``#...`` and exists is that file.
    """
    m = _RUN.search(ref)
    if m is None or (ref != "-" and not is_url(ref) and Path(ref).is_file()):
        check_path(ref)
        return ref, None
    path, number = ref[: m.start()], m.group(1)
    if not number.isdigit() or not number.isascii():
        raise InputError(ref, f"{number!r} is not a run number: write FILE#N, N as listed by `acceptmon runs`")
    check_path(path)
    return path, int(number)


def unique_paths(paths: list[str]) -> list[str]:
    """``paths`` without repeats of the same file (named twice, or by another name): read once, counted once.
    A glob in a URL is first replaced by the objects it matches (:func:`acceptmon.inputs.remote.expand`)."""
    seen: set[str] = set()
    out = []
    for p in expand(paths):
        key = p if p == "-" or is_url(p) else os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
