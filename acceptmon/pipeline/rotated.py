"""Rotated names of a followed file: which file a glob match really is, and where a saved file went.

A rotation gives a followed file another name (``a.log`` -> ``a.log.1``, ``a.log-20260226``), copies it
(copytruncate) or compresses it (``a.log.2.gz``, delaycompress). A glob such as ``d/*.log*`` matches those
names too, and each is the same lines again: a match is *claimed* (not read) when

- its device and inode are open in a follower already (renamed while followed), or
- its name is a rotated name of a followed file's (the same *family*: ``a.log`` once the rotation
  suffixes are cut) and its first line (decompressed for gzip) is one a file of that family had,
  as Vector and Alloy fingerprint files. A rotated name with no complete first line yet (a copy
  being made) waits until it has one.

The fingerprint is :func:`acceptmon.pipeline.statefile.fingerprint`, the state file's: a position saved
for ``a.log`` is found again under its rotated name after a restart (:func:`find_rotated`).
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from collections.abc import Iterable
from typing import BinaryIO, cast

from acceptmon.pipeline import statefile

SUFFIX = re.compile(r"[.\-_](?:\d[\dT:\-_]*|gz|bz2|xz|zst|old)$")
"""One rotation suffix: a number or date (``.1``, ``-20260226``), a compressor's or ``.old``."""
KEPT_PER_FAMILY = 256
"""At most this many first lines are remembered per family (the oldest go first)."""
FAMILIES_KEPT = 4096
"""At most this many paths' families are remembered (past it, they are found again)."""


def family(path: str) -> tuple[str, bool]:
    """(the absolute path with its rotation suffixes cut, whether it had any)."""
    folder, name = os.path.split(os.path.abspath(path))
    base = name
    while (m := SUFFIX.search(base)) is not None and m.start() > 0:
        base = base[: m.start()]
    return os.path.join(folder, base), base != name


class Heads:
    """First lines (fingerprints) each family's files had, to know a copy or a compressed rotation."""

    def __init__(self) -> None:
        self._by_family: dict[str, dict[str, None]] = {}
        self._family_of: dict[str, str] = {}
        """Each path's family, found once: :meth:`add` runs for every followed file at every tick."""

    def add(self, path: str, fingerprint: str | None) -> None:
        if fingerprint is None:
            return
        base = self._family_of.get(path)
        if base is None:
            if len(self._family_of) >= FAMILIES_KEPT:
                self._family_of.clear()
            base = self._family_of[path] = family(path)[0]
        seen = self._by_family.setdefault(base, {})
        seen[fingerprint] = None
        if len(seen) > KEPT_PER_FAMILY:
            del seen[next(iter(seen))]

    def claimed(self, path: str, ino: tuple[int, int], open_inodes: Iterable[tuple[int, int]]) -> bool:
        """Whether the file ``path`` names (``ino``) is read through another path already."""
        if ino in open_inodes:
            return True
        base, rotated = family(path)
        seen = self._by_family.get(base)
        if not rotated or not seen:
            return False
        fp = statefile.content_fingerprint(path)
        return fp is None or fp in seen  # no first line yet: maybe a copy being made, ask again later


def find_rotated(path: str, saved: statefile.FilePosition) -> tuple[str, BinaryIO, tuple[int, int]] | None:
    """The file a position saved for ``path`` belonged to, under a rotated name now, opened at that position.

    Same device and inode (and first line), or a gzip file whose decompressed first line is the saved one
    and that is long enough. Returns (its name, the open file, its device and inode)."""
    base = family(path)[0]
    folder = os.path.dirname(base)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    for name in names:
        candidate = os.path.join(folder, name)
        if candidate == os.path.abspath(path) or family(candidate)[0] != base:
            continue
        found = _open_at(candidate, saved)
        if found is not None:
            return candidate, found[0], found[1]
    return None


def _open_at(candidate: str, saved: statefile.FilePosition) -> tuple[BinaryIO, tuple[int, int]] | None:
    try:
        st = os.stat(candidate)
    except OSError:
        return None
    ino = (st.st_dev, st.st_ino)
    if not stat.S_ISREG(st.st_mode):
        return None
    if ino == (saved.dev, saved.ino) and not statefile.is_gzip(candidate):
        if st.st_size < saved.offset or saved.fingerprint not in (None, statefile.fingerprint(candidate)):
            return None
        if not saved.skipping and not statefile.at_line_start(candidate, saved.offset):
            return None
        f = open(candidate, "rb")  # the follower reads and closes it
        f.seek(saved.offset)
        return f, ino
    if saved.fingerprint is None or not statefile.is_gzip(candidate):
        return None
    if statefile.content_fingerprint(candidate) != saved.fingerprint:
        return None
    z = gzip.open(candidate, "rb")
    try:
        z.seek(saved.offset)
        if z.tell() != saved.offset:
            raise EOFError
    except (OSError, EOFError, zlib.error):
        z.close()
        return None
    return cast(BinaryIO, z), ino
