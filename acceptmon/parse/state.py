"""What a parser carries across lines and byte ranges, and what it counts. Pure.

:class:`ParseState` is where a file stands (line, run, launch, the year of year-less
timestamps): parallel workers start from it and state files store it. :class:`Tally`
counts lines by kind.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from acceptmon.parse.records import LaunchConfig

UNRECOGNIZED_KEPT = 20
"""How many unrecognized lines a parser keeps verbatim for the report."""


@dataclass(frozen=True)
class ParseState:
    """Where a file stands: lines consumed so far, the current launch, the year of year-less timestamps."""

    line: int = 0
    run: int = 0
    launch: LaunchConfig | None = None
    year: int | None = None
    """Year of the last year-less timestamp (None before the first): New Year rolls it over."""
    month: int | None = None
    """Month of the last year-less timestamp."""
    launch_open: str | None = None
    """Server of the current launch while no stats line has followed it (a merging launch line continues it)."""
    closed: bool = False
    """A stats line was read (since the state this parser started from)."""
    lead: str | None = None
    """Server of this parser's first launch line if it could continue an open launch ('' if it could not)."""

    def then(self, scan: ParseState) -> ParseState:
        """The state after a byte range, given this state at its start and the range scanned from ``ParseState()``
        (``-j N``: the ranges are scanned at once, then chained in order)."""
        joined = bool(scan.lead) and scan.lead == self.launch_open  # the range opens inside a launch group
        open_ = scan.launch_open if scan.closed or scan.run else self.launch_open
        launch = scan.launch or self.launch
        return ParseState(self.line + scan.line, self.run + scan.run - joined, launch, launch_open=open_)


@dataclass
class Tally:
    """Counts of lines by kind, plus grep-bait: non-decode lines containing 'accept'."""

    kinds: Counter[str] = field(default_factory=Counter)
    accept_noise: int = 0
    unrecognized: list[tuple[str, int, str]] = field(default_factory=list)
    """The first few unrecognized lines: (file, line number, text)."""

    @property
    def lines(self) -> int:
        return sum(self.kinds.values())

    def merge(self, other: Tally) -> None:
        self.kinds.update(other.kinds)
        self.accept_noise += other.accept_noise
        room = UNRECOGNIZED_KEPT - len(self.unrecognized)
        self.unrecognized.extend(other.unrecognized[: max(room, 0)])


def line_starts(block: bytes, word: bytes, start: int = 0, end: int | None = None) -> set[int]:
    """Offsets of the starts of the lines of ``block[start:end]`` (whole lines) that hold ``word``."""
    stop = len(block) if end is None else end
    out: set[int] = set()
    pos = block.find(word, start, stop)
    while pos >= 0:
        out.add(block.rfind(b"\n", 0, pos) + 1)
        nl = block.find(b"\n", pos, stop)
        pos = block.find(word, nl, stop) if nl >= 0 else -1
    return out
