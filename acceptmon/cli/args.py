"""Argument types and option groups shared by several commands."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import zoneinfo
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, TypeAlias

from acceptmon.inputs.remote import is_url, modified
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser, ParseState, Tally
from acceptmon.parse.values import Yearless, year_not_after

Subcommands: TypeAlias = "argparse._SubParsersAction[Any]"
"""What ``add_subparsers`` returns; each command module adds its commands to it."""


def tail_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", type=duration, default=300.0, metavar="DURATION", help="window (log time; default 5m)")
    p.add_argument(
        "--alert-below",
        type=float,
        default=1.5,
        metavar="LEN",
        help="flag a window mean accept len below this (default: 1.5; 0: off)",
    )
    p.add_argument(
        "--stale-after",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="flag no decode line for this long while requests are queued (default: 30s)",
    )
    p.add_argument("--metrics-port", type=int, metavar="PORT", help="also serve Prometheus metrics on this port")
    p.add_argument("--plain", action="store_true", help="one line per record instead of the dashboard")


def live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-start", action="store_true", help="process whole files, not just the current run")
    p.add_argument("--poll", action="store_true", help="poll instead of inotify (network filesystems, containers)")
    p.add_argument("--poll-interval", type=duration, default=0.1, metavar="DURATION", help="default: 100ms")
    p.add_argument("--state-file", type=Path, metavar="FILE", help="persist positions here; resume on restart")
    rules_option(p)
    year_option(p)
    p.add_argument(
        "--timezone",
        type=zone,
        metavar="ZONE",
        help="the servers' time zone, for log times without one: an IANA name (Europe/Berlin) or a UTC offset "
        "(--timezone=-05:00); default: this machine's",
    )


def rules_option(
    p: argparse.ArgumentParser,
    help: str = "extra doctor rule file: change thresholds, disable or add rules (repeatable)",
) -> None:
    p.add_argument("--rules", action="append", default=[], type=Path, metavar="FILE", help=help)


_OFFSET = re.compile(r"(?:UTC|GMT)?([+-])(\d\d?)(?::?(\d\d))?")


def zone(text: str) -> tzinfo:
    """A time zone: an IANA name (``Europe/Berlin``, ``UTC``) or a UTC offset (``+02:00``, ``-0530``, ``UTC+2``)."""
    m = _OFFSET.fullmatch(text.strip())
    if m is not None:
        sign, hours, minutes = m.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes or 0))
        if offset >= timedelta(hours=24) or int(minutes or 0) >= 60:
            raise argparse.ArgumentTypeError(f"not a UTC offset: {text!r} (say +02:00 or -05:30)")
        return timezone(-offset if sign == "-" else offset)
    try:
        return zoneinfo.ZoneInfo(text.strip())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise argparse.ArgumentTypeError(
            f"not a time zone: {text!r} (say an IANA name such as Europe/Berlin, or a UTC offset such as +02:00)"
        ) from None


def year(text: str) -> int:
    """A calendar year a server log can be from (1970-9999)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a year: {text!r}") from None
    if not 1970 <= value <= 9999:
        raise argparse.ArgumentTypeError(f"a year from 1970 to 9999: {text!r}")
    return value


def year_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--year",
        type=year,
        metavar="YYYY",
        help="year of the first year-less timestamp (vLLM logs; default: from the file's modification "
        "time, stdin: this year); later lines roll over at New Year",
    )


class YearSource:
    """The year of year-less timestamps: with ``--year``, the year of the file's first one; else the
    latest year in which the timestamp is not after the file's modification time (stdin: now).

    A parser asks only for its first timestamp: a file's first, or (``-j``) the first of a byte
    range, which with ``--year`` is a year later when it falls before the file's first timestamp
    (the log crossed New Year before the range began)."""

    def __init__(self, year: int | None = None, grammars: GrammarSet | None = None) -> None:
        self.year = year
        self.grammars = grammars
        self.used: dict[str, int] = {}
        """Files that needed a year, and the year their first year-less timestamp got."""
        self._first: dict[str, tuple[int, ...] | None] = {}

    def __call__(self, file: str, stamp: Yearless) -> int:
        if self.year is None:
            year = year_not_after(stamp, self.reference(file))
        else:
            first = self.first_stamp(file)
            year = self.year + (1 if first is not None and _clock(stamp) < first else 0)
        self.used.setdefault(file, year)
        return year

    def reference(self, file: str) -> datetime:
        if is_url(file):  # the object's modification time, as the store gives it
            return modified(file) or datetime.now()
        try:
            return datetime.fromtimestamp(os.path.getmtime(file)) if file != "-" else datetime.now()
        except OSError:
            return datetime.now()

    def first_stamp(self, file: str) -> tuple[int, ...] | None:
        """(month, day, h, m, s) of the file's first record with a timestamp, from its first MiB."""
        if file == "-" or self.grammars is None:
            return None
        if file not in self._first:
            try:
                with open(file, "rb") as f:
                    head = f.read(1 << 20)
            except OSError:
                head = b""
            head = head[: head.rfind(b"\n") + 1]
            parser = Parser(self.grammars, file, ParseState(year=self.year))
            stamps = [r.timestamp for r in parser.feed(head) if r.timestamp is not None]
            self._first[file] = _clock(stamps[0]) if stamps else None
        return self._first[file]

    def describe(self) -> str:
        """Which source was used, for a command's summary line: each year with the files it came from."""
        if self.year is not None:
            return f"year of year-less timestamps: {self.year} (--year)"
        origins: dict[tuple[int, bool], list[str]] = {}
        for f, y in self.used.items():
            origins.setdefault((y, f == "-"), []).append(f)
        parts = [
            f"{y} (stdin: the current date)" if stdin else f"{y} (file modification time of {', '.join(files)})"
            for (y, stdin), files in sorted(origins.items())
        ]
        return f"year of year-less timestamps: {', '.join(parts) or 'none needed'}; --year sets it"


def say_year(grammars: GrammarSet, tally: Tally | None = None) -> None:
    """Say on stderr where the year of year-less (vLLM) timestamps came from, naming the files, when a file
    had them (``tally``: the lines read, whose vLLM lines say so too)."""
    years = grammars.year_for
    seen = tally is not None and (tally.kinds["spec"] or tally.kinds["throughput"])
    # spec and throughput lines without a year dated (llama.cpp's, or vLLM's without a timestamp): nothing to say
    if isinstance(years, YearSource) and (years.used or (seen and years.year is not None)):
        print(f"acceptmon: {years.describe()}", file=sys.stderr)


def _clock(t: Yearless | datetime) -> tuple[int, ...]:
    return (t.month, t.day, t.hour, t.minute, t.second)


def grammars_for(args: argparse.Namespace) -> GrammarSet:
    """The grammars a command asked for (``--grammar``), dating year-less timestamps as ``--year`` says."""
    grammars = load_grammars(getattr(args, "grammar", []))
    grammars.year_for = YearSource(getattr(args, "year", None), grammars)
    return grammars


def positive(text: str) -> float:
    """A number above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number above zero: {text!r}")
    return value


def duration(text: str) -> float:
    """``250ms``, ``30s``, ``5m``, ``1h`` or plain seconds, as seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    t = text.strip().lower()
    for suffix in ("ms", "s", "m", "h"):
        if t.endswith(suffix):
            number, scale = t[: -len(suffix)], units[suffix]
            break
    else:
        number, scale = t, 1.0
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 250ms, 30s, 5m or 1h)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a duration must be positive: {text!r}")
    return value


def grammar_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--grammar",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="extra grammar file (repeatable)",
    )


_SIZES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text: str) -> int:
    """``4096``, ``64K``, ``1M``, ``2G`` (binary units; a trailing ``B``/``iB`` is fine) as bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _SIZES else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (say 4096, 64K, 1M or 2G)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a size cannot be negative: {text!r}")
    return int(value * _SIZES[unit])


def files_argument(p: argparse.ArgumentParser, nargs: str = "+") -> None:
    """The batch commands' inputs: files, .gz files, stdin, URLs."""
    p.add_argument(
        "files",
        nargs=nargs,
        metavar="FILE",
        help="log files, .gz files, - for stdin, or URLs (s3://, gs://, https://; quote a glob in one)",
    )


def jobs_option(p: argparse.ArgumentParser) -> None:
    from acceptmon.pipeline.batch import default_jobs

    p.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
