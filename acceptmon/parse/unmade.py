"""Records not made yet: the fast lane's rows of one or more plans as columns, made into records only where a
consumer asks (:meth:`Unmade.made`).

A consumer that reads values alone (the runs' and the doctor's folds, a ``compare`` side) takes them as columns and
spares the records; a worker ships their values alone to the process that collects them (:meth:`Unmade.shipped`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, chain, count
from operator import itemgetter
from typing import Any, cast, final

from acceptmon.parse.fast import built
from acceptmon.parse.records import BaseRecord


@final
class Coded(Sequence[Any]):
    """A column of few distinct objects as those objects and each row's place among them (an ``array('H')``): what a
    worker ships of a list such as the ranks, the timestamps of a second's lines or a launch's algorithm, in a
    fraction of its pickle's time (each item of a list is looked up in the pickle's memo); read back as the list.

    A DP-attention Ascend range's timestamps, ranks, CUDA-graph flags and algorithms (10,301 rows): pickled as lists
    0.50 ms on the worker (the doctor's slower half there) and 0.42 ms to read back; coded 0.22 and 0.23 ms."""

    __slots__ = ("codes", "values")

    def __init__(self, values: tuple[Any, ...], codes: array[int]) -> None:
        self.values, self.codes = values, codes

    @staticmethod
    def of(column: Sequence[Any]) -> Sequence[Any]:
        """The column coded where the compiled module is built and it has at most half as many distinct objects as
        rows (objects told apart as a pickle tells them: by identity); else the column as it is."""
        module = built.module()
        got = module.codes(column) if module is not None else None
        if got is None:
            return column
        codes = array("H")
        codes.frombytes(got[1])
        return Coded(got[0], codes)

    def listed(self) -> list[Any]:
        """The list (the compiled module's ``decoded`` where it is built: a tenth of a Python look-up a row)."""
        module = built.module()
        if module is not None:
            return cast("list[Any]", module.decoded(self.values, self.codes))
        return list(map(self.values.__getitem__, self.codes))

    def __reduce__(self) -> tuple[Any, ...]:
        return Coded, (self.values, self.codes)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, at: Any) -> Any:
        if isinstance(at, slice):
            return Coded(self.values, self.codes[at])
        return self.values[self.codes[at]]

    def __iter__(self) -> Iterator[Any]:
        return map(self.values.__getitem__, self.codes)


@final
class Unmade:
    """Records not made yet, in file order, as columns: :attr:`fixed`, the fields every one of them has the same
    value of; :attr:`columns`, each one's value of every other field, in order (a timestamp as ISO text, which
    ``datetime.fromisoformat`` reads). A consumer that reads values alone (the runs' fold of plain decode lines)
    spares the records; :meth:`made` makes them. Rows of several plans (a vLLM log's spec and throughput lines) are
    :attr:`pieces`, one plan's each, and :attr:`order` says whose each row is (:func:`joined`)."""

    __slots__ = (
        "_gather",
        "_listed",
        "_make",
        "_span",
        "checks",
        "columns",
        "fixed",
        "kinds",
        "order",
        "pieces",
        "size",
    )

    def __init__(
        self,
        size: int,
        kinds: frozenset[str],
        fixed: dict[str, Any],
        columns: dict[str, Sequence[Any]],
        make: Callable[[int, int], list[BaseRecord]],
        span: tuple[int, int] | None = None,
    ) -> None:
        self.size = size
        self.kinds = kinds
        """The kinds of the records."""
        self.fixed = fixed
        self.columns = columns
        self._make = make
        """``make(start, stop)``: the records of those rows of what :attr:`_span` is a part of."""
        self._span = span or (0, size)
        self.pieces: tuple[Unmade, ...] = ()
        """Rows of several plans: each plan's rows, of one kind, in order (:attr:`fixed` and :attr:`columns` are then
        empty)."""
        self.order = b""
        """With :attr:`pieces`: each row's piece, by its index."""
        self._listed: dict[str, list[Any]] = {}
        """Machine columns (an ``array``) as :meth:`column` gives them, made once; :attr:`columns` keeps the arrays,
        which :meth:`shipped` sends as they are."""
        self.checks: Any = None
        """What a consumer's checks found of these rows where they were read, shipped with them (:meth:`shipped`):
        :func:`acceptmon.measure.plain.plain_columns` takes it (a :class:`acceptmon.measure.plain.Checks`) instead
        of checking the same values again."""
        self._gather: Callable[[Sequence[Any]], Sequence[Any]] | None = None
        """With :attr:`pieces`: the rows in order, from the pieces' columns one after another (:meth:`column`)."""

    def __len__(self) -> int:
        return self.size

    def parts(self) -> tuple[Unmade, ...]:
        """The pieces, or this one: rows of one plan each."""
        return self.pieces or (self,)

    def column(self, name: str) -> Sequence[Any]:
        """Every record's value of a field, in order (None where its kind has no such field)."""
        if self.pieces:
            if all(name not in p.columns for p in self.pieces):  # each piece's is fixed: the same one?
                first, *rest = (p.fixed.get(name) for p in self.pieces)
                if all(type(v) is type(first) and v == first for v in rest):
                    return (first,) * self.size
            return self._woven(name)
        got = self.columns.get(name)
        if type(got) is array or type(got) is Coded:  # machine values (the compiled matcher's column of numbers), or
            listed = self._listed.get(name)  # a shipped column's codes: read as a list
            if listed is None:
                listed = self._listed[name] = got.tolist() if type(got) is array else cast(Coded, got).listed()
            return listed
        return got if got is not None else (self.fixed.get(name),) * self.size

    def _woven(self, name: str) -> Sequence[Any]:
        """The pieces' values of a column, in the rows' order: the compiled module's ``woven`` where it is built."""
        module = built.module()
        if module is not None:
            return cast("list[Any]", module.woven(self.order, [p.column(name) for p in self.pieces]))
        return self._gathered(list(chain.from_iterable(p.column(name) for p in self.pieces)))

    def _gathered(self, values: list[Any]) -> Sequence[Any]:
        """The pieces' values of a column, one piece's after another, in the rows' order: where each row's value is
        among them is worked out once (a step per row), then each column is one ``itemgetter`` call, in C."""
        if self._gather is None:
            starts = accumulate((p.size for p in self.pieces[:-1]), initial=0)
            nexts = [count(start).__next__ for start in starts]
            at = [nexts[i]() for i in self.order]
            self._gather = itemgetter(*at) if len(at) > 1 else itemgetter(slice(at[0] if at else 0, len(at)))
        return self._gather(values)

    def place(self, piece: int, row: int) -> int:
        """Where the ``row`` th row of the ``piece`` th piece is among all the rows."""
        at = -1
        for _ in range(row + 1):
            at = self.order.index(piece, at + 1)
        return at

    def made(self) -> list[BaseRecord]:
        """The records (made once: ask only once)."""
        return self._make(*self._span)

    def shipped(self, checks: Any = None) -> Unmade:
        """The rows' values alone, to send to another process (a worker's part, for its collect), with what was found
        of them (:attr:`checks`): they cannot be made into records there (:meth:`made` raises)."""
        columns = {name: Coded.of(c) if type(c) is list else c for name, c in self.columns.items()}
        out = Unmade(self.size, self.kinds, self.fixed, columns, _unmakeable, self._span)
        out.pieces, out.order, out.checks = tuple(p.shipped() for p in self.pieces), self.order, checks
        return out

    def split(self, at: int) -> tuple[Unmade, Unmade]:
        """The rows before ``at`` and the rest."""
        start, stop = self._span
        if not self.pieces:
            sides = []
            for a, b in ((0, at), (at, self.size)):
                columns = {name: c[a:b] for name, c in self.columns.items()}
                sides.append(Unmade(b - a, self.kinds, self.fixed, columns, self._make, (start + a, start + b)))
            return sides[0], sides[1]
        head, tail = self.order[:at], self.order[at:]
        cut = [p.split(head.count(i)) for i, p in enumerate(self.pieces)]
        made = self._make
        return (
            joined([h for h, _ in cut], head, made, (start, start + at)),
            joined([t for _, t in cut], tail, made, (start + at, stop)),
        )


def _unmakeable(start: int, stop: int) -> list[BaseRecord]:
    raise RuntimeError("records not made in the process that read them cannot be made from their values")


def joined(
    pieces: Sequence[Unmade], order: bytes, make: Callable[[int, int], list[BaseRecord]], span: tuple[int, int]
) -> Unmade:
    """Rows of several plans as one :class:`Unmade`: ``pieces``, each plan's rows, and ``order``, each row's piece by
    its index; ``make(*span)``, their records. A piece without rows is left out; a part of one piece is that piece."""
    kept = [i for i, p in enumerate(pieces) if p.size]
    if len(kept) == 1:
        return pieces[kept[0]]
    if len(kept) != len(pieces):
        table = bytearray(range(256))
        for new, old in enumerate(kept):
            table[old] = new
        order = order.translate(table)
        pieces = [pieces[i] for i in kept]
    whole = Unmade(len(order), frozenset(k for p in pieces for k in p.kinds), {}, {}, make, span)
    whole.pieces, whole.order = tuple(pieces), order
    return whole
