"""The fast lane as the batch commands and the live reader take it: records, not table rows.

``parse`` writes the lane's table rows (:mod:`acceptmon.parse.fast.lane`). ``runs``, ``compare``, ``doctor``
and the live state want records: a job whose class sets ``from_lane = True`` (it reads no record's
``extra``) gets, through a :class:`JobLane`, each block's records, the lane's stats lines read back as
records (:mod:`acceptmon.parse.fast.typed`) and the general parser's for every other line, in file order,
as one chunk. Its blocks are the reader's, as without the lane: a job aggregates each chunk, and sums of
floats come out the same, to the last digit, only over the same blocks. Without the compiled matcher there
is no lane and the general parser reads everything, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, cast

from acceptmon.parse.fast.lane import FastLane
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import Record

Chunk = Callable[[list[Record]], Any]
Read = Callable[[Parser, bytes], list[Record]]
"""How a live source reads a block of complete lines: the records, the parser's line, run and tally advanced."""


def _as_list(records: list[Record]) -> list[Record]:
    return records


def parsed(parser: Parser, block: bytes) -> list[Record]:
    """A block read by the general parser alone."""
    return parser.feed(block)


class JobLane:
    """A typed lane as a job reads through it: each block's records, the lane's and the general parser's in file
    order, as one chunk of the job's."""

    in_place = False
    """Its blocks are the reader's, as without a lane: the job aggregates each, and sums of floats come out the
    same only over the same blocks."""

    def __init__(self, lane: FastLane) -> None:
        assert lane.typed, "a job lane reads records: its lane is typed"
        self.lane = lane

    @property
    def native(self) -> Any:
        return self.lane.native

    @property
    def learned(self) -> bool:
        return self.lane.learned

    def learn(self, sample: bytes) -> None:
        self.lane.learn(sample)

    def records(self, parser: Parser, block: bytes) -> list[Record]:
        """The records of a block of complete lines, in order; the parser's line, run and tally advance. (A lane
        that hands its rows on unmade gives them so, among the records: :func:`job_lane`.)"""
        parts = cast("list[list[Record]]", self.lane.feed(parser, block, _as_list))
        return parts[0] if len(parts) == 1 else [r for part in parts for r in part]

    def feed(self, parser: Parser, block: bytes, chunk: Chunk) -> list[Any]:
        """The block's records as one chunk of ``chunk`` (none for a block without records)."""
        got = self.records(parser, block)
        return [chunk(got)] if got else []

    def feed_in_place(self, parser: Parser, buf: Any, start: int, end: int) -> None:
        """Nothing: a job lane reads the reader's blocks (:attr:`in_place`), never regions of a buffer."""
        return None


def job_lane(grammars: GrammarSet, kinds: frozenset[str], *, unmade: frozenset[str] = frozenset()) -> JobLane | None:
    """A lane that hands a job records of ``kinds``, or None without the compiled matcher; ``unmade``: its own
    rows as records not made yet (:class:`~acceptmon.parse.unmade.Unmade`), among the general parser's."""
    lane = FastLane(grammars, "jsonl", typed=kinds)
    if unmade and lane.enabled:
        lane.hand_unmade(unmade)
    return JobLane(lane) if lane.enabled else None


def live_reader(grammars: GrammarSet, kinds: frozenset[str] | None) -> Read:
    """How the live sources of one ``serve`` or ``tail`` read their blocks: through one lane for every file and
    stream (streams are read on threads of their own: one block at a time), or the general parser alone."""
    lane = job_lane(grammars, frozenset(KINDS) if kinds is None else kinds)
    if lane is None:
        return parsed
    lock = threading.Lock()
    records = lane.records

    def read(parser: Parser, block: bytes) -> list[Record]:
        with lock:
            return records(parser, block)

    return read
