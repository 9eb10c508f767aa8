"""Where ``tail`` hands what it reads: the dashboard (over its live state), or plain lines, and the exporter."""

from __future__ import annotations

import argparse
import glob
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from acceptmon.display import number, plural
from acceptmon.measure.normalize import Fact, Normalizer
from acceptmon.parse.parser import Tally
from acceptmon.parse.records import Record

if TYPE_CHECKING:
    from acceptmon.diagnose.engine import Doctor
    from acceptmon.live.state import LiveStats
    from acceptmon.tui.model import DashboardState


def say(message: str) -> None:
    print(f"acceptmon: {message}", file=sys.stderr, flush=True)


def say_left_out(values: int, configs: int, where: str = "") -> None:
    """The summary line of what the normalize step refused (:mod:`acceptmon.measure.normalize`); none if nothing."""
    parts = []
    if values:
        parts.append(
            f"{values:,} impossible value{'s' if values != 1 else ''} left out (accept len outside 1..1000, "
            "a rate outside 0..1, a negative count or throughput, or not finite)"
        )
    if configs:
        parts.append(
            f"{configs:,} launch config{'s' if configs != 1 else ''} refused (speculative or parallel sizes no "
            "server runs: read as unknown)"
        )
    if parts:
        say(f"{where}{'; '.join(parts)}")


def say_unrecognized(tally: Tally, *, count: bool = True) -> None:
    """The lines no grammar reads (a format change), as ``parse`` shows them: their count (``count``:
    where no summary line gave it) and the first few, file and line number."""
    n = tally.kinds["unrecognized"]
    if count and n:
        say(f"{plural(n, 'unrecognized line')}: {'it starts' if n == 1 else 'they start'} like a stats line "
            "but no grammar reads it (a format change?)")  # fmt: skip
    for file, line, text in tally.unrecognized[:3]:
        say(f"unrecognized {file}:{line}: {text[:160]}")


def plain_line(fact: Fact, with_file: bool = False) -> str:
    """One compact, grep-friendly line per batch (a decode line, a vLLM spec line), from its normalized fact.

    ``[FILE] DATE TIME UNIT key=value...``: the unit is the rank or the engine (a vLLM spec line's is its
    engine's), ``run`` is numbered as ``acceptmon runs`` numbers it, and ``gen_throughput`` is the unit's
    rate for the interval (a vLLM spec line: its engine's latest throughput line)."""
    r, b = fact.record, fact.batch
    assert b is not None
    ts = r.timestamp.isoformat(sep=" ", timespec="seconds") if r.timestamp else "-"
    where = f"{r.file} " if with_file else ""
    return (
        f"{where}{ts} {b.unit or '-'} run={r.run} accept_len={number(b.accept_len)} "
        f"accept_rate={number(getattr(r, 'accept_rate', None))} draft_accept_rate={number(b.accept_rate)} "
        f"gen_throughput={number(b.gen_throughput)}"
    )


Before = Callable[[threading.Event, Callable[[str], None], Callable[[str], None]], None]
"""Runs before following starts: (stop, note, ended); ``ended(file)`` says a file will not grow again."""


def ignore(file: str) -> None:
    """No dashboard to tell that an input ended."""


@dataclass
class Wiring:
    """Where a ``tail`` hands what it reads: the dashboard (with its live state) or plain lines."""

    sink: Callable[[str, list[Record], Tally], None]
    note: Callable[[str], None]
    on_waiting: Callable[[str, bool], None] | None = None
    live: LiveStats | None = None
    """The live state the exporter reads (``--metrics-port``), else None."""
    state: DashboardState | None = None


def wire(args: argparse.Namespace, files: Sequence[str], plain: bool) -> Wiring:
    from acceptmon.live.state import LiveStats

    if not plain:
        from acceptmon.tui.model import DashboardState

        shared = LiveStats(clock=time.time, doctor=make_doctor(args))
        state = DashboardState(
            window=args.window, alert_below=args.alert_below or None, stale_after=args.stale_after, live=shared
        )
        return Wiring(state.add, state.note, state.set_waiting, state.live if args.metrics_port else None, state)
    live = LiveStats(doctor=make_doctor(args)) if args.metrics_port else None
    normalizer = Normalizer()  # without the exporter's live state, the lines' own one
    multi = len(files) > 1 or any(glob.has_magic(f) for f in files)

    def show(file: str, records: list[Record], tally: Tally) -> None:
        facts = live.update(file, records, tally) if live is not None else normalizer.feed(records)
        out = [plain_line(f, multi) for f in facts if f.batch is not None]
        if out:
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.flush()

    return Wiring(show, say, live.set_waiting if live is not None else None, live)


def make_doctor(args: argparse.Namespace) -> Doctor:
    """The doctor that judges live records: built-in rules plus ``--rules`` files."""
    from acceptmon.diagnose.engine import Doctor
    from acceptmon.diagnose.rules import load_rules

    return Doctor(load_rules(getattr(args, "rules", [])))
