"""Per-batch numbers kept as columns of machine numbers, for comparisons over whole logs. Pure.

A comparison keeps every batch of both sides (the block bootstrap resamples them in order). As one
object per batch with its float objects, and the lists built from them, that was about 540 bytes a
batch; as :class:`Batches` it is 33: one 8-byte array slot per number (``array('d')``, NaN for a value
not logged: the normalize step lets no NaN through as a value) and a byte for the ``steady`` mark.
:class:`Floats` is one such column alone (vLLM's load lines). Both keep the latest ``keep`` values
when given one (the dashboard's run against run), trimming in bulk so an append stays O(1).

Records a worker process sends back for the main process to feed in order (the doctor's) are
:func:`pack` ed as plain tuples: a parsed record object is about 2.4 KB, its tuple a quarter of it.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import filterfalse, islice
from operator import itemgetter
from typing import Any, TypeVar, overload

from acceptmon.parse.fast import native
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import Record, prepare

T = TypeVar("T")
NONE_INT = -(2**63)
"""``running_req`` not logged, in its integer column (a logged count is never negative)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One decode line, reduced to what a comparison uses."""

    accept_len: float | None
    accept_rate: float | None
    """The normalized (draft) accept rate."""
    gen_throughput: float | None
    running_req: int | None
    steady: bool
    """``#queue-req`` 0 and no prefill line since this rank's previous decode line."""


def _f(value: float | None) -> float:
    return math.nan if value is None else value


def _none(value: float) -> float | None:
    return None if value != value else value  # NaN: not logged


def present(column: Sequence[float]) -> Iterator[float]:
    """The values of a float column that were logged (NaN left out), in order."""
    return filterfalse(math.isnan, column)


def missing(column: Sequence[float]) -> int:
    """How many values of a float column were not logged (NaN): the compiled module's ``nans`` for an
    ``array('d')`` where it is built."""
    module = native.load()
    counted = None if module is None else module.nans(column)
    return counted if counted is not None else sum(map(math.isnan, column))


def extend_floats(column: array[float], values: Sequence[float | None]) -> None:
    """``column.extend`` of the values, NaN for one not logged (None): as the compiled module's ``doubles`` gives their
    bytes where it is built (a list of a million floats: one copy, not a conversion each)."""
    module = native.load()
    got = module.doubles(values) if module is not None and not isinstance(values, array) else None
    if got is not None:
        column.frombytes(got)
    else:
        column.extend(values if isinstance(values, array) else map(_f, values))


class Floats(Sequence[float]):
    """One float column, the latest ``keep`` values if given."""

    def __init__(self, keep: int | None = None, values: Iterable[float] = ()) -> None:
        self.keep = keep
        self._values = array("d", values)

    def append(self, value: float) -> None:
        self._values.append(value)
        if self.keep is not None and len(self._values) >= 2 * self.keep:
            del self._values[: len(self._values) - self.keep]

    def extend(self, values: Iterable[float]) -> None:
        """:meth:`append` of each value, in order."""
        if self.keep is not None:
            for value in values:
                self.append(value)
        else:
            self._values.extend(values)

    def array(self) -> array[float]:
        """The kept values as an array of their own (a copy)."""
        v = self._values
        return v[len(v) - self.keep :] if self.keep is not None and len(v) > self.keep else v[:]

    def __len__(self) -> int:
        n = len(self._values)
        return n if self.keep is None else min(n, self.keep)

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[float]: ...
    def __getitem__(self, i: int | slice) -> float | Sequence[float]:
        return self.array()[i]

    def __iter__(self) -> Iterator[float]:
        return iter(self.array())


def _extended(column: array[int] | list[int], more: array[int] | list[int]) -> array[int] | list[int]:
    """An integer column extended (a plain list once one of them is: a count beyond 64 bits)."""
    if isinstance(column, array) and isinstance(more, array):
        column.extend(more)
        return column
    return [*column, *more]


class Batches(Sequence[Batch]):
    """Batches as five columns; reads as a sequence of :class:`Batch` (each made when asked for)."""

    def __init__(self, keep: int | None = None) -> None:
        self.keep = keep
        self.accept_len = array("d")
        self.accept_rate = array("d")
        self.gen_throughput = array("d")
        self.running_req: array[int] | list[int] = array("q")
        """NONE_INT where not logged; a plain list once a logged count does not fit 64 bits."""
        self.steady = bytearray()

    @classmethod
    def of(cls, batches: Iterable[Batch]) -> Batches:
        """Columns of these batches (a :class:`Batches` is returned as it is)."""
        if isinstance(batches, Batches):
            return batches
        out = cls()
        for b in batches:
            out.add(b.accept_len, b.accept_rate, b.gen_throughput, b.running_req, b.steady)
        return out

    def add(
        self,
        accept_len: float | None,
        accept_rate: float | None,
        gen_throughput: float | None,
        running_req: int | None,
        steady: bool,
    ) -> None:
        self.accept_len.append(_f(accept_len))
        self.accept_rate.append(_f(accept_rate))
        self.gen_throughput.append(_f(gen_throughput))
        running = NONE_INT if running_req is None else running_req
        try:
            self.running_req.append(running)
        except OverflowError:  # a count no server logs, kept exactly all the same
            self.running_req = [*self.running_req, running]
        self.steady.append(1 if steady else 0)
        if self.keep is not None and len(self.steady) >= 2 * self.keep:
            cut = len(self.steady) - self.keep
            for column in self._columns():
                del column[:cut]

    def extend(
        self,
        accept_len: Sequence[float | None],
        accept_rate: Sequence[float | None],
        gen_throughput: Sequence[float | None],
        running_req: Sequence[int | None],
        steady: Sequence[bool],
    ) -> None:
        """:meth:`add` of each batch of these columns, in order."""
        if self.keep is not None:
            for batch in zip(accept_len, accept_rate, gen_throughput, running_req, steady, strict=True):
                self.add(*batch)
            return
        for column, values in zip(self._columns()[:3], (accept_len, accept_rate, gen_throughput), strict=True):
            column.extend(values if None not in values else map(_f, values))  # type: ignore[arg-type]  # None: none
        counts = [NONE_INT if r is None else r for r in running_req]
        try:
            more: array[int] | list[int] = array("q", counts)
        except OverflowError:  # a count no server logs, kept exactly all the same
            more = counts
        self.running_req = _extended(self.running_req, more)
        self.steady.extend(map(bool, steady))

    def _columns(self) -> tuple[array[float], array[float], array[float], array[int] | list[int], bytearray]:
        return self.accept_len, self.accept_rate, self.gen_throughput, self.running_req, self.steady

    @classmethod
    def joined(cls, parts: Iterable[Batches]) -> Batches:
        """The kept batches of ``parts``, one after another, as columns of their own."""
        out = cls()
        for part in map(Batches.copy, parts):
            out.accept_len.extend(part.accept_len)
            out.accept_rate.extend(part.accept_rate)
            out.gen_throughput.extend(part.gen_throughput)
            out.running_req = _extended(out.running_req, part.running_req)
            out.steady.extend(part.steady)
        return out

    def copy(self) -> Batches:
        """The kept batches as columns of their own (later adds to this one do not change them)."""
        out, start = Batches(), self._start()
        out.accept_len, out.accept_rate = self.accept_len[start:], self.accept_rate[start:]
        out.gen_throughput, out.running_req = self.gen_throughput[start:], self.running_req[start:]
        out.steady = self.steady[start:]
        return out

    def __eq__(self, other: object) -> bool:
        """The same batches, compared as :class:`Batch` es (a value not logged equals one not logged)."""
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(x == y for x, y in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __len__(self) -> int:
        n = len(self.steady)
        return n if self.keep is None else min(n, self.keep)

    def _start(self) -> int:
        return len(self.steady) - len(self)

    @overload
    def __getitem__(self, i: int) -> Batch: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Batch]: ...
    def __getitem__(self, i: int | slice) -> Batch | Sequence[Batch]:
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("batch index out of range")
        j = self._start() + (i % n)
        running = self.running_req[j]
        return Batch(
            _none(self.accept_len[j]),
            _none(self.accept_rate[j]),
            _none(self.gen_throughput[j]),
            None if running == NONE_INT else running,
            bool(self.steady[j]),
        )

    def _kept(self, column: Sequence[T]) -> Iterable[T]:
        """The kept part of a column, without a copy."""
        start = self._start()
        return column if start == 0 else islice(column, start, None)

    def __iter__(self) -> Iterator[Batch]:
        columns = (self._kept(c) for c in self._columns())
        for length, rate, tput, running, steady in zip(*columns, strict=True):
            yield Batch(_none(length), _none(rate), _none(tput), None if running == NONE_INT else running, bool(steady))

    def steady_loads(self) -> Iterator[tuple[int, float]]:
        """(``running_req``, ``gen_throughput``) of the steady batches that log both, a count other than 0."""
        return (load for load in self.loads() if load is not None)

    def loads(self) -> Iterator[tuple[int, float] | None]:
        """Per kept batch, in order: (``running_req``, ``gen_throughput``) where it is steady and logs both,
        a count other than 0; else None."""
        columns = self._kept(self.running_req), self._kept(self.gen_throughput), self._kept(self.steady)
        for running, tput, steady in zip(*columns, strict=True):
            yield (running, tput) if steady and running and running != NONE_INT and tput == tput else None

    def column(self, name: str) -> array[float]:
        """A float column's kept values (``accept_len``, ``accept_rate``, ``gen_throughput``): the array itself
        when all are kept, else a copy of the kept part."""
        values: array[float] = getattr(self, name)
        start = self._start()
        return values if start == 0 else values[start:]


Packed = list[tuple[str, tuple[Any, ...]]]
"""Records as (kind, field values in the kind's field order): what a worker process sends."""


class _Way:
    """How records of one kind are packed with ``only`` (None: every field) and made again."""

    def __init__(self, kind: str, only: frozenset[str] | None) -> None:
        prepared = prepare(KINDS[kind].model)
        self.names = tuple(f for f in prepared.names if only is None or f in only)
        """The fields packed, in the model's order."""
        names = self.names
        self.get: Callable[[dict[str, Any]], tuple[Any, ...]] = itemgetter(*names) if len(names) > 1 else _one(names[0])
        self.make = prepared.make
        self.rest = dict(prepared.defaults)
        """The ``__dict__`` before the packed values go in: every field's default, in the model's order."""
        self.fresh_extra = "extra" in prepared.defaults and "extra" not in names
        """``extra`` is not packed: each record takes an empty dict of its own, as :func:`build` gives it."""


def _one(name: str) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    return lambda d: (d[name],)


_WAYS: dict[tuple[str, frozenset[str] | None], _Way] = {}


def _way(kind: str, only: frozenset[str] | None) -> _Way:
    got = _WAYS.get((kind, only))
    if got is None:
        got = _WAYS[kind, only] = _Way(kind, only)
    return got


def pack(records: Iterable[Record], only: frozenset[str] | None = None) -> Packed:
    """Records as tuples of their values (``only``: of these fields): about a quarter of a record object's
    memory, and of its pickle."""
    ways: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
    out: Packed = []
    append = out.append
    for r in records:
        d = r.__dict__
        kind = d["kind"]
        get = ways.get(kind)
        if get is None:
            get = ways[kind] = _way(kind, only).get
        append((kind, get(d)))
    return out


def unpack(packed: Iterable[tuple[str, tuple[Any, ...]]], only: frozenset[str] | None = None) -> Iterator[Record]:
    """The records of :func:`pack` again, one at a time: every field as it was; with ``only``, those fields
    as they were (a field that holds None has the default None), and every other field its default.

    Each record's ``__dict__`` is a copy of the defaults (in the model's order) updated with the packed values,
    which costs less than a dict made from them (that grows as it fills), and the record is made by the
    model's prepared constructor, which gives all of them one fields set
    (:func:`acceptmon.parse.records.prepare`)."""
    ways: dict[str, _Way] = {}
    for kind, values in packed:
        way = ways.get(kind)
        if way is None:
            way = ways[kind] = _way(kind, only)
        data = way.rest.copy()  # a copy of a whole dict, then values over its keys: no key added, no resize
        data.update(zip(way.names, values, strict=True))
        if way.fresh_extra:
            data["extra"] = {}
        yield way.make(data, None)
