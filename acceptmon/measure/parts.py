"""Where a part of a file (a block, a range of ``-j``) can be aggregated on its own, and merged. Pure.

Most lines need no line before them (every SGLang record). A vLLM spec line that names no engine takes the one its
file last named; a line that counts since server start closes an interval on the counters before it; a
per-position line belongs to the request line before it. :func:`order_free` says where a part's records start to
give the same figures whatever came before them; what comes before is fed in file order
(:meth:`~acceptmon.measure.aggregate.Stats.part`). Records not made yet (the fast lane's,
:class:`~acceptmon.parse.unmade.Unmade`) are judged as columns once :func:`judged` has cut them where a line
needs one before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from acceptmon.measure.plain import naming
from acceptmon.measure.tokens import CounterKey, Intervals
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import Record
from acceptmon.parse.unmade import Unmade

Where = tuple[str, str]
"""A file and source: whose lines name engines for each other."""


def made(items: Iterable[Record | Unmade]) -> list[Record]:
    """``items`` with the records not made yet made."""
    out: list[Record] = []
    for r in items:
        if type(r) is Unmade:
            out.extend(r.made())
        else:
            out.append(r)
    return out


def judged(items: Iterable[Record | Unmade]) -> list[Record | Unmade]:
    """``items`` as :func:`order_free` judges them: records not made yet of :func:`self_contained` kinds as they
    are, of kinds whose unit is their engine cut before their first line that names one and after their first line
    that counts since start (:func:`~acceptmon.measure.plain.naming`), any other made."""
    alone = self_contained()
    out: list[Record | Unmade] = []
    for r in items:
        if type(r) is not Unmade or r.kinds <= alone:
            out.append(r)
            continue
        named = naming(r)
        if named is None:
            out.extend(r.made())
        elif named.first > 0:
            out.extend(r.split(named.first))
        elif named.counts is not None and named.counts[0] < r.size - 1:
            out.extend(r.split(named.counts[0] + 1))
        else:
            out.append(r)
    return out


def self_contained() -> frozenset[str]:
    """The kinds whose records need no line before them (:func:`order_free`): their unit is their rank, they
    count nothing since server start and weigh no earlier request (every SGLang record). Asked of the registry at
    each call: a kind registered later is judged too."""
    return frozenset(
        k.name
        for k in KINDS.values()
        if k.unit_field == "rank" and not k.positions and "cumulative" not in k.model.model_fields
    )


class Free(NamedTuple):
    """Where a part of a file is order-free (:func:`order_free`)."""

    start: int
    """The records before it are fed in file order; the part's normalizer sees them first."""
    assumed: frozenset[Where]
    """Files and sources whose lines the part reads as naming no engine, none having been named before it."""
    named: frozenset[Where] = frozenset()
    """Files and sources a line of the part names an engine for."""


class _Scan:
    """What :func:`order_free` has seen of a part so far."""

    def __init__(self) -> None:
        self.start = 0
        self.last: dict[Where, str] = {}
        self.waiting: dict[Where, int] = {}
        """By file and source never named yet in the part: its last line that needs a name from before."""
        self.counted: set[CounterKey] = set()

    def names(self, where: Where, unit: str) -> None:
        """A line names an engine: the lines before it that waited for one need the line before the part."""
        self.last[where] = unit
        if where in self.waiting:
            self.start = max(self.start, self.waiting.pop(where) + 1)

    def takes(self, where: Where, i: int) -> str | None:
        """The engine a line (the ``i`` th) that names none takes: the one named last in the part, or none yet (it
        waits)."""
        unit = self.last.get(where)
        if unit is None:
            self.waiting[where] = i
        return unit

    def counts(self, key: CounterKey, i: int) -> None:
        """A line (the ``i`` th) counts since start: the first of its counters in the part needs the ones before."""
        if key not in self.counted:
            self.counted.add(key)
            self.start = i + 1


def order_free(records: Sequence[Record | Unmade]) -> Free | None:
    """Where these records start to give the same figures whatever came before them, given the normalizer has
    seen the records before (:meth:`~acceptmon.measure.aggregate.Stats.part`): after the last record that needs an
    earlier line outside them (a vLLM spec line that takes the engine its file's last throughput line named, where a
    later line in the part names one; the first cumulative line of its counters: vLLM v0, llama.cpp's statistics);
    None if one belongs to a request line before it (per-position rates), or records not made yet were not
    :func:`judged`. What comes before is fed in file order.

    Lines of a file and source that no line in the part names an engine for (vLLM v0 names none) take none:
    the part assumes none was named before it either, which :meth:`Normalizer.named_any` checks where the part
    is merged (if one was, the whole part is fed in file order).

    A part's normalizer starts each unit's load and warm-up afresh: a batch's carried load and warm-up flag
    may differ from the whole file's, and a run's figures read neither."""
    scan = _Scan()
    alone = self_contained()
    for i, r in enumerate(records):
        if type(r) is Unmade:
            if not (r.kinds <= alone or _unmade(scan, r, i)):
                return None
            continue
        if r.kind in alone:
            continue
        kind = KINDS[r.kind]
        if kind.positions:
            return None
        values = r.__dict__
        field = kind.unit_field
        unit = values.get(field)
        if field != "rank":
            where = (r.file, values.get("source", ""))
            if unit:
                scan.names(where, unit)
            else:
                unit = scan.takes(where, i)
        if values.get("cumulative"):
            scan.counts(Intervals.key(r, unit if field == "engine" else values.get("engine")), i)
    return Free(scan.start, frozenset(scan.waiting), frozenset(scan.last))


def _unmade(scan: _Scan, rows: Unmade, i: int) -> bool:
    """:func:`order_free` of the ``i`` th records, not made yet, of kinds whose unit is their engine: what the
    records would be (their first line naming an engine its first, their first line counting since start its last,
    where it is the first of its counters); False where they were not :func:`judged`."""
    named = naming(rows)
    if named is None or named.first > 0:
        return False
    if named.last is not None:
        scan.names(named.where, named.last)
    else:
        scan.takes(named.where, i)
    if named.counts is not None:
        at, run, rank = named.counts
        key = (*named.where, run, scan.last.get(named.where) or rank)
        if key not in scan.counted and at != rows.size - 1:
            return False
        scan.counts(key, i)
    return True
