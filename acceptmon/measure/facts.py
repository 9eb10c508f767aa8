"""Consecutive stats facts of one run as columns: what the doctor folds a part at a time. Pure.

The normalizer (:mod:`acceptmon.measure.normalize`) gives each stats line a :class:`~acceptmon.measure.normalize.Fact`:
its unit, a batch (``acceptance`` role), a load (``load`` role), the unit's load it is judged with, whether it is
steady, whether it is warm-up. The doctor's run state and detectors read a run's lines a stretch at a time, as
:class:`Facts`: made from the facts (:meth:`Facts.of`, records already normalized one by one) or from the lane's
columns, where no record is made (:func:`acceptmon.measure.plain.plain_facts`). Either way the columns hold what the
facts would, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import eq, itemgetter
from typing import Any, cast

from acceptmon.measure.normalize import Fact, Normalizer, RunKey
from acceptmon.measure.plain import Piece, masked, moves_on, plain_columns
from acceptmon.parse.fast import native
from acceptmon.parse.unmade import Unmade

_LOAD = ("gen_throughput", "running_req", "queue_req")


class Values(Mapping[str, Sequence[Any]]):
    """Record fields as columns, by name, each made when first asked (``column(name)``: every line's value, None
    where its record has no such field)."""

    __slots__ = ("_column", "_made", "_size")

    def __init__(self, size: int, column: Callable[[str], Sequence[Any]]) -> None:
        self._size, self._column = size, column
        self._made: dict[str, Sequence[Any]] = {}

    def __getitem__(self, name: str) -> Sequence[Any]:
        found = self._made.get(name)
        if found is None:
            found = self._made[name] = self._column(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._made)

    def __len__(self) -> int:
        return len(self._made)

    def kept(self, keep: Sequence[bool]) -> Values:
        """The same fields of the lines ``keep`` marks."""
        return Values(sum(keep), lambda name: list(compress(self[name], keep)))


def _records(facts: Sequence[Fact]) -> Callable[[str], Sequence[Any]]:
    def column(name: str) -> list[Any]:
        return [f.record.__dict__.get(name) for f in facts]

    return column


@dataclass(slots=True)
class Facts:
    """Stats lines of one run (:attr:`key`), consecutive in their file, as columns: one entry per line, in order."""

    key: RunKey
    kinds: Sequence[str]
    """Each line's record kind."""
    line: Sequence[int]
    unit: Sequence[str]
    batch: Sequence[bool]
    """The line is a batch (its kind has the ``acceptance`` role)."""
    load: Sequence[bool]
    """The line is its unit's load line (``load`` role)."""
    accept_len: Sequence[float | None]
    """The batch's (None where the line is no batch)."""
    gen_throughput: Sequence[float | None]
    """The batch's, else the load's: the unit's load the line is judged with (a load line's own)."""
    running_req: Sequence[int | None]
    steady: Sequence[bool]
    warmup: Sequence[bool]
    """A batch among the first of its run (False where the line is no batch)."""
    invalid: int
    """Values left out as impossible, over the lines."""
    values: Values = field(repr=False)
    """The records' fields, by name (as normalized: an impossible value None, an interval's accept length)."""

    def __len__(self) -> int:
        return len(self.line)

    @classmethod
    def of(cls, facts: Sequence[Fact]) -> Facts:
        """The columns of facts of one run's stats lines, each with a batch or a load."""
        first = facts[0].record
        kinds, lines, units, batch, load, length, tput, running, steady, warmup = ([] for _ in range(10))
        invalid = 0
        for f in facts:
            r, b, ld = f.record, f.batch, f.load
            kinds.append(r.kind)
            lines.append(r.line)
            batch.append(b is not None)
            load.append(ld is not None)
            invalid += f.invalid
            if b is not None:
                units.append(b.unit)
                length.append(b.accept_len)
                tput.append(b.gen_throughput)
                running.append(b.running_req)
                steady.append(b.steady)
                warmup.append(b.warmup)
            elif ld is not None:
                units.append(ld.unit)
                length.append(None)
                tput.append(ld.gen_throughput)
                running.append(ld.running_req)
                steady.append(ld.steady)
                warmup.append(False)
        key = (first.file, first.__dict__.get("source", ""), first.run)
        values = Values(len(facts), _records(facts))
        return cls(key, kinds, lines, units, batch, load, length, tput, running, steady, warmup, invalid, values)


def plain_facts(normalizer: Normalizer, rows: Unmade) -> Facts | None:
    """The facts of rows the lane hands on unmade (of :func:`~acceptmon.measure.normalize.plain_kinds` kinds, in file
    order) as columns, the normalizer moved on as after them (:func:`~acceptmon.measure.plain.moves_on`); None, and
    nothing done, where :func:`~acceptmon.measure.plain.plain_columns` does not take them (their records are then
    normalized one by one)."""
    plain = plain_columns(rows, normalizer.last_named)
    if plain is None:
        return None
    key, n = plain.key, rows.size
    before = {u: normalizer.unit_now(key, u) for u in plain.units}
    pieces = plain.pieces
    if len(pieces) == 1:
        units, loads = _one_plan(pieces[0], before)
        kinds: Sequence[str] = (pieces[0].kind.name,) * n
        batch: Sequence[bool] = (pieces[0].kind.acceptance,) * n
        load: Sequence[bool] = (pieces[0].kind.load,) * n
    else:
        units, loads = _interleaved(pieces, rows.order, before)
        kinds = _spread(rows.order, [p.kind.name for p in pieces])
        batch = _spread(rows.order, [p.kind.acceptance for p in pieces])
        load = _spread(rows.order, [p.kind.load for p in pieces])
    tput, running, steady = loads
    earlier = normalizer.batches(key)
    closed = moves_on(normalizer, plain)
    values = Values(n, rows.column)
    if closed is not None:  # the rows that count since start: their intervals' accept length and rate
        lengths, rates = list(map(itemgetter(0), closed)), list(map(itemgetter(1), closed))
        values = _closed(values, rows, batch, lengths, rates)
    accept = values["accept_len"]
    if not all(batch):
        accept = masked(accept, batch)
    left = max(0, normalizer.warmup - earlier)  # batches still warming up
    if all(batch) or not left:
        warmup: Sequence[bool] = [True] * min(left, n) + [False] * max(0, n - left)
    else:
        counted = list(accumulate(batch))
        warmup = [b and c <= left for b, c in zip(batch, counted, strict=True)]
    return Facts(key, kinds, rows.column("line"), units, batch, load, accept, tput, running, steady, warmup, 0, values)


def _one_plan(piece: Piece, before: Mapping[str, tuple[bool, tuple[Any, ...]]]) -> tuple[Sequence[str], Any]:
    """Rows of one plan: each one's unit, and the load it is judged with (throughput, running) and whether it is
    steady."""
    units = piece.units
    if piece.kind.load:
        tput, running, queue = (piece.rows.column(name) for name in _LOAD)
    else:  # each unit's carried load, the same on each of its rows
        tput, running, queue = ([before[u][1][i] for u in units] for i in range(3))
    steady = list(map(eq, queue, repeat(0)))
    groups = piece.groups or _first_rows(units)
    for unit, at in groups.items():
        if before[unit][0] and len(at):  # a unit's first line after a prefill line (or its first) is not steady
            steady[at[0]] = False
    return units, (tput, running, steady)


def _first_rows(units: Sequence[str]) -> Mapping[str, Sequence[int]]:
    first: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        if u not in first:
            first[u] = [i]
    return first


def _interleaved(
    pieces: Sequence[Piece], order: bytes, before: Mapping[str, tuple[bool, tuple[Any, ...]]]
) -> tuple[list[str], Any]:
    """Rows of several plans, in order: each one's unit and the load it is judged with, as the normalizer gives them
    one by one (a load line's own, fields it lacks kept from the unit's last; a batch without one its unit's)."""
    state = {u: [after, *load] for u, (after, load) in before.items()}
    module = native.load()
    if module is not None:  # the same loop in C, where every value is of the lane's types
        units = module.woven(order, [p.units for p in pieces])
        loads = [tuple(p.rows.column(name) for name in _LOAD) if p.kind.load else None for p in pieces]
        got = module.interleaved(order, units, loads, state)
        if got is not None:
            return units, got
    rows = [
        zip(p.units, *(p.rows.column(name) for name in _LOAD), strict=True) if p.kind.load else zip(p.units)
        for p in pieces
    ]
    loaded = [p.kind.load for p in pieces]
    nexts = [it.__next__ for it in rows]
    units, tput, running, steady = [], [], [], []
    for i in order:
        row = nexts[i]()
        unit = row[0]
        now = state[unit]
        if loaded[i]:
            t, r, q = row[1], row[2], row[3]
            now[1] = now[1] if t is None else t
            now[2] = now[2] if r is None else r
            now[3] = now[3] if q is None else q
        else:
            t, r, q = now[1], now[2], now[3]
        units.append(unit)
        tput.append(t)
        running.append(r)
        steady.append(q == 0 and not now[0])
        now[0] = False
    return units, (tput, running, steady)


def _spread(order: bytes, values: Sequence[Any]) -> Sequence[Any]:
    """Each row's piece's value (``order``: each row's piece, by its index)."""
    module = native.load()
    return [values[i] for i in order] if module is None else module.spread(order, values)


def _filled(batch: Sequence[bool], closed: list[Any], values: Sequence[Any]) -> list[Any]:
    """``values``, a batch's replaced by the next of ``closed``: the compiled module's ``filled`` where it is built."""
    module = native.load()
    got = None if module is None else module.filled(batch, closed, values)
    if got is not None:
        return cast("list[Any]", got)
    taken = iter(closed).__next__
    return [taken() if b else v for b, v in zip(batch, values, strict=True)]


def _closed(values: Values, rows: Unmade, batch: Sequence[bool], lengths: list[Any], rates: list[Any]) -> Values:
    """The rows' fields, with the accept length and rates of the intervals the rows counting since start close."""
    if all(batch):
        swapped = {"accept_len": lengths, "accept_rate": rates, "draft_accept_rate": rates}
    else:
        swapped = {}
        for name, closed in (("accept_len", lengths), ("accept_rate", rates), ("draft_accept_rate", rates)):
            swapped[name] = _filled(batch, closed, values[name])

    def column(name: str) -> Sequence[Any]:
        found = swapped.get(name)
        return found if found is not None else rows.column(name)

    return Values(rows.size, column)
