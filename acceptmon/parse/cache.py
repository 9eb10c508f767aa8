"""Remembering the grammar sets that passed their load-time checks, so that every command need not re-run them.

The loader's ReDoS probe and sample checks (:mod:`acceptmon.parse.load`) take longer than the
rest of a small ``parse``, and they give the same answer every time for the same grammar
files: their outcome depends only on the grammar set's content, on the code that checks it
and on the ``regex`` and ``pydantic`` it runs on. A digest of all of these is written to a
small file in the user's cache folder once a set passes; a set whose digest is listed there
passed before and is not checked again. Only passes are recorded, so a set that fails is
checked, and refused, every time.

The grammar files' TOML tables are kept there too, under a digest of the files' bytes (as
JSON, which gives them back exactly or is not written): parsing the TOML is the other half of
a small ``parse``'s work before its first line.

The cache is only a shortcut: a cache file or folder that cannot be read, written or
understood is treated as empty, never as an error, and the file is replaced whole (a
temporary file renamed over it), so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import pydantic
import regex

from acceptmon import __version__

FORMAT = "acceptmon checked grammar sets 1"
"""First line of the cache file, and part of every digest: a new layout starts afresh."""
KEEP = 64
"""Digests kept, newest last: enough for a few grammar sets under a few acceptmon versions."""
TABLES_FILE = "grammar-tables"
"""Beside the cache file: the TOML tables of the grammar files read last (one set), as JSON."""
TABLES = "acceptmon grammar tables 1"
"""First line of the tables file; the second is the digest of the files whose tables follow."""
_TOML_TIME = "\x00toml"
"""The key of a TOML date or time in the tables file: ``{"\\x00toml": "date", "iso": "2026-01-31"}``."""
_TIMES: dict[str, type[date | time]] = {"datetime": datetime, "date": date, "time": time}
CODE = Path(__file__).resolve().parent
"""The package whose modules (the checks, the parser, the record models) are digested."""


def cache_file() -> Path | None:
    """``$XDG_CACHE_HOME/acceptmon/checked-grammars`` (default ``~/.cache``); None without a home folder."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative path is ignored
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no password entry: nowhere to cache
            return None
    return Path(base) / "acceptmon" / "checked-grammars"


def set_digest(grammars: Iterable[bytes]) -> str:
    """The digest a grammar set is remembered by: its grammars (each as the loader describes it, in
    load order), acceptmon's version and code, and the versions of Python, ``regex`` and ``pydantic``."""
    h = hashlib.sha256()
    for part in (FORMAT, __version__, sys.version, regex.__version__, pydantic.VERSION):
        h.update(_framed(part.encode()))
    for path in sorted(CODE.glob("*.py")):
        h.update(_framed(path.name.encode()))
        try:
            h.update(_framed(path.read_bytes()))
        except OSError:
            h.update(_framed(b"(unreadable)"))
    for grammar in grammars:
        h.update(_framed(grammar))
    return h.hexdigest()


def covers(*code: object) -> bool:
    """Whether the digest covers the code of these functions and classes: it is in acceptmon's
    parse package, or built into Python. Record and value kinds registered at run time by
    other code may change the checks' outcome, so a set loaded beside them is not looked up."""
    for c in code:
        module = str(getattr(c, "__module__", ""))
        package, _, name = module.rpartition(".")
        if module != "builtins" and not (package == f"acceptmon.{CODE.name}" and name):
            return False
    return True


def _framed(part: bytes) -> bytes:
    """The part after its length, so that two parts cannot run into each other."""
    return len(part).to_bytes(8, "big") + part


def passed(digest: str) -> bool:
    """Whether a set with this digest passed its checks before."""
    path = cache_file()
    return path is not None and digest in _read(path)


def remember(digest: str) -> None:
    """Record that a set with this digest passed; any failure to write is ignored."""
    path = cache_file()
    if path is None:
        return
    known = [d for d in _read(path) if d != digest][-(KEEP - 1) :]
    text = "\n".join([FORMAT, *known, digest]) + "\n"
    try:
        _write(path, text)
    except OSError:  # read-only home, full disk, a file where the folder should be: run uncached
        return


def _read(path: Path) -> list[str]:
    """The digests listed in the cache file, oldest first; none when it is missing or not one."""
    try:
        lines = path.read_bytes().decode("ascii", "replace").splitlines()
    except OSError:
        return []
    if not lines or lines[0] != FORMAT:
        return []
    return [line for line in lines[1:] if len(line) == 64 and all(c in "0123456789abcdef" for c in line)]


def tables_digest(files: Iterable[bytes]) -> str:
    """The digest the TOML tables of these files (their bytes, in order) are kept under."""
    h = hashlib.sha256()
    for part in (TABLES.encode(), sys.version.encode(), *files):
        h.update(_framed(part))
    return h.hexdigest()


def known_tables(digest: str) -> list[dict[str, Any]] | None:
    """The TOML tables kept under ``digest``; None when they are not the ones kept (or cannot be read)."""
    path = cache_file()
    if path is None:
        return None
    try:
        head, kept, body = path.with_name(TABLES_FILE).read_bytes().split(b"\n", 2)
        if (head, kept) != (TABLES.encode(), digest.encode()):
            return None
        tables = json.loads(body, object_hook=_from_json)
    except (OSError, ValueError, RecursionError):  # no file, not three lines, not (sane) JSON
        return None
    return tables if isinstance(tables, list) and all(isinstance(t, dict) for t in tables) else None


def keep_tables(digest: str, tables: list[dict[str, Any]]) -> None:
    """Keep ``tables`` under ``digest`` in place of the tables kept before, if JSON gives them back exactly."""
    path = cache_file()
    try:
        body = json.dumps(tables, default=_to_json)
        if path is not None and repr(json.loads(body, object_hook=_from_json)) == repr(tables):
            _write(path.with_name(TABLES_FILE), f"{TABLES}\n{digest}\n{body}\n")
    except (TypeError, ValueError, OSError):  # a value JSON cannot hold; an unwritable folder: not kept
        return


def _to_json(value: object) -> dict[str, str]:
    if isinstance(value, date | time):  # datetime is a date
        return {_TOML_TIME: type(value).__name__, "iso": value.isoformat()}
    raise TypeError(f"not a TOML value: {type(value).__name__}")


def _from_json(table: dict[str, Any]) -> Any:
    name, iso = table.get(_TOML_TIME), table.get("iso")
    if len(table) != 2 or not isinstance(name, str) or not isinstance(iso, str) or name not in _TIMES:
        return table
    return _TIMES[name].fromisoformat(iso)  # ValueError for a damaged file: known_tables says None


def _write(path: Path, text: str) -> None:
    """Replace the file whole: write a temporary file beside it, then rename it over the old one."""
    import tempfile  # only when a set was checked: not on the quick path

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        os.replace(temp, path)
    except OSError:
        Path(temp).unlink(missing_ok=True)
        raise
