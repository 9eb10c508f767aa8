"""What a parser carries across lines and byte ranges, and what it counts. Pure.

:class:`ParseState` is where a file stands (line, the run and launch of each source, the year of
year-less timestamps): parallel workers start from it and state files store it. :class:`Tally`
counts lines by kind.

A file's lines belong to *sources*: the file itself (its plain lines) and each stream a prefix names
(:mod:`acceptmon.parse.streams`: two pods in one ``kubectl logs --prefix`` file). Each source has its
own current run and launch group, so a launch in one never ends another's run; runs are numbered per
file, in the order their launch lines come. The plain source's state is :class:`ParseState`'s own
fields (as it was before there were sources); the others' are :attr:`ParseState.streams`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acceptmon.parse.records import LaunchConfig
from acceptmon.parse.vllm_method import infer_launch_method

UNRECOGNIZED_KEPT = 20
"""How many unrecognized lines a parser keeps verbatim for the report."""


@dataclass(frozen=True)
class StreamState:
    """Where one source stands: its current run and launch, and its launch group."""

    run: int = 0
    launch: LaunchConfig | None = None
    launch_open: str | None = None
    """Server of the current launch while no stats line of this source has followed it."""
    closed: bool = False
    """A stats line of this source was read (since the state this parser started from)."""
    lead: str | None = None
    """Server of this parser's first launch line of this source if it could continue an open launch ('' if not)."""
    lead_run: int = 0
    """The run of that first launch line (a range scanned from ``ParseState()``: the one a chained state maps)."""


EMPTY = StreamState()


@dataclass(frozen=True)
class ParseState:
    """Where a file stands: lines consumed so far, each source's current launch, the year of year-less
    timestamps. The fields ``run`` to ``lead_run`` are the plain source's (a :class:`StreamState`'s)."""

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
    lead_run: int = 0
    """The run of that first launch line."""
    streams: Mapping[str, StreamState] = field(default_factory=dict, hash=False)
    """The other sources, by their ``source`` (the stream prefix's name), in order of appearance."""

    @property
    def plain(self) -> StreamState:
        return StreamState(self.run, self.launch, self.launch_open, self.closed, self.lead, self.lead_run)

    @property
    def last_run(self) -> int:
        """The highest run number given so far: the newest run is always some source's current one."""
        return max([self.run, *(s.run for s in self.streams.values())])

    def then(self, scan: ParseState) -> ParseState:
        """The state after a byte range, given this state at its start and the range scanned from ``ParseState()``
        (``-j N``: the ranges are scanned at once, then chained in order).

        The scan numbered its runs from 1; each becomes this state's :attr:`last_run` plus its number, less
        the runs before it that did not start: a source whose first launch line in the range continues that
        source's open launch group here (one server start logging several launch lines) takes the run open here.
        """
        mine = {"": self.plain, **self.streams}
        theirs = {"": scan.plain, **scan.streams}
        joined = {k: s.lead_run for k, s in theirs.items() if s.lead and s.lead == mine.get(k, EMPTY).launch_open}
        skipped = sorted(joined.values())
        base = self.last_run

        def real(key: str, run: int) -> int:
            if joined.get(key) == run:
                return mine[key].run
            return base + run - bisect_left(skipped, run)

        out: dict[str, StreamState] = {}
        for key in {**mine, **theirs}:
            before, scanned = mine.get(key, EMPTY), theirs.get(key, EMPTY)
            run, launch = before.run, before.launch
            if scanned.run:
                run, launch = real(key, scanned.run), scanned.launch
                if joined.get(key) == scanned.run and before.launch is not None and launch is not None:
                    launch = continued(before.launch, _as_logged(launch), launch.extra, before.launch_open or "")
            open_ = scanned.launch_open if scanned.closed or scanned.run else before.launch_open
            out[key] = StreamState(run, launch, open_)
        plain = out.pop("")
        return ParseState(self.line + scan.line, plain.run, plain.launch, launch_open=plain.launch_open, streams=out)


def launch_config(config: dict[str, Any], extra: Mapping[str, Any], server: str) -> LaunchConfig:
    """A launch's config from what its launch lines give (vLLM: with the method it ran, inferred where no
    line prints it, :func:`acceptmon.parse.vllm_method.infer_launch_method`)."""
    if server == "vllm":
        infer_launch_method(config)  # from the merged lines: the engine line's version, its resolved method
    return LaunchConfig.model_validate({**config, "extra": dict(extra)})


def continued(previous: LaunchConfig, config: Mapping[str, Any], extra: Mapping[str, Any], server: str) -> LaunchConfig:
    """The launch after a launch line that continues ``previous`` (one server start, several launch lines):
    its values where it gives them, the earlier ones elsewhere."""
    kept = {k: v for k, v in previous.__dict__.items() if v is not None and k != "extra"}
    given = {k: v for k, v in config.items() if v is not None and k != "extra"}
    return launch_config({**kept, **given}, {**previous.extra, **extra}, server)


def _as_logged(launch: LaunchConfig) -> dict[str, Any]:
    """A launch's config less the method inferred from it (inferred again from the merged config)."""
    given = dict(launch.__dict__)
    if given.get("spec_algorithm_source") == "inferred":
        del given["spec_algorithm"], given["spec_algorithm_source"]
    return given


@dataclass
class Tally:
    """Counts of lines by kind, plus grep-bait: non-decode lines containing 'accept'."""

    kinds: Counter[str] = field(default_factory=Counter)
    accept_noise: int = 0
    unrecognized: list[tuple[str, int, str]] = field(default_factory=list)
    """The first few unrecognized lines: (file, line number, text)."""
    unrecognized_runs: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    """Unrecognized lines per (file, source, run): the run they came in (0 before any launch)."""

    @property
    def lines(self) -> int:
        return sum(self.kinds.values())

    def merge(self, other: Tally) -> None:
        self.kinds.update(other.kinds)
        self.accept_noise += other.accept_noise
        self.unrecognized_runs.update(other.unrecognized_runs)
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
