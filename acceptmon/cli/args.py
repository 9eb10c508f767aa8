"""Argument types and option groups shared by several commands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TypeAlias

Subcommands: TypeAlias = "argparse._SubParsersAction[Any]"
"""What ``add_subparsers`` returns; each command module adds its commands to it."""


def tail_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", type=duration, default=300.0, metavar="DURATION", help="window (log time; default 5m)")
    p.add_argument("--alert-below", type=float, default=1.5, metavar="LEN",
                   help="flag a window mean accept len below this (default: 1.5; 0: off)")  # fmt: skip
    p.add_argument("--stale-after", type=duration, default=30.0, metavar="DURATION",
                   help="flag no decode line for this long while requests are queued (default: 30s)")  # fmt: skip
    p.add_argument("--metrics-port", type=int, metavar="PORT", help="also serve Prometheus metrics on this port")
    p.add_argument("--plain", action="store_true", help="one line per record instead of the dashboard")


def live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-start", action="store_true", help="process whole files, not just the current run")
    p.add_argument("--poll", action="store_true", help="poll instead of inotify (network filesystems, containers)")
    p.add_argument("--poll-interval", type=duration, default=0.1, metavar="DURATION", help="default: 100ms")
    p.add_argument("--state-file", type=Path, metavar="FILE", help="persist positions here; resume on restart")
    rules_option(p)


def rules_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", action="append", default=[], type=Path, metavar="FILE",
                   help="extra doctor rule file: change thresholds, disable or add rules (repeatable)")  # fmt: skip


def positive(text: str) -> float:
    """A number above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above zero: {text!r}")
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
