"""Replaying a log into a file as if a server were writing it (``acceptmon demo``).

Lines are written with the gaps their own timestamps give, divided by ``speed``;
lines without a timestamp follow at once. The bundled sample logs live in
``sample_logs/`` (installed as package data).
"""

from __future__ import annotations

import re
import threading
from datetime import datetime
from pathlib import Path

from acceptmon.data import shipped_dir
from acceptmon.errors import InputError

_TS = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_MD = re.compile(
    rb"^(?:\x1b\[[\d;]*m)?(?:\([\w.-]+ pid=\d+\)(?:\x1b\[[\d;]*m)? )?[A-Z]{4,8} (\d\d-\d\d \d\d:\d\d:\d\d) "
)
"""vLLM's year-less prefix; its gaps are what matter (a leap year takes 02-29; New Year only skips the wait)."""
MAX_GAP = 5.0
"""Longest pause between two lines, in replay seconds (restarts in a log can be far apart)."""


def sample_dir() -> Path:
    """The sample logs shipped with acceptmon."""
    return shipped_dir("sample_logs")


def sample_names() -> list[str]:
    """The bundled sample logs, by file name."""
    return sorted(p.name for p in sample_dir().glob("*.log"))


def sample_path(name: str) -> Path:
    """A bundled sample by its file name, or by the start of one (``vllm`` when only one name starts so)."""
    names = sample_names()
    found = [n for n in names if n == name] or [n for n in names if n.startswith(name)]
    if len(found) != 1:
        what = "names several" if found else "names no"
        raise InputError(name, f"{what} bundled sample log (there are: {', '.join(found or names)})")
    return sample_dir() / found[0]


def replay(source: Path, target: Path, speed: float, stop: threading.Event) -> int:
    """Copy ``source`` to ``target`` line by line in (scaled) log time; return lines written."""
    speed = max(speed, 1e-3)
    written = 0
    prev: datetime | None = None
    with source.open("rb") as src, target.open("ab") as out:
        for line in src:
            m = _TS.match(line)
            md = None if m else _MD.match(line)
            if m or md:
                ts = datetime.strptime(m.group(1).decode(), "%Y-%m-%d %H:%M:%S") if m else _monthday(md)
                if prev is not None and ts > prev:
                    out.flush()
                    if stop.wait(min((ts - prev).total_seconds() / speed, MAX_GAP)):
                        return written
                prev = ts
            out.write(line)
            written += 1
        out.flush()
    return written


def _monthday(m: re.Match[bytes] | None) -> datetime:
    assert m is not None
    return datetime.strptime("2000-" + m.group(1).decode(), "%Y-%m-%d %H:%M:%S")
