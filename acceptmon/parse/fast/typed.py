"""The fast lane's rows as records: what ``runs``, ``compare``, ``doctor`` and the live state read.

The batch commands and the live state want records, not table text. For them the compiled matcher builds each
fast row as its record's values: a copy of its plan's :attr:`~acceptmon.parse.fast.rows.Plan.shape` (every field,
those the same in every row of the plan set; its file name one string for all of them) with the values that vary
row by row set in it (the line, its time and rank, captured and derived values), each as ``json.loads`` would read
the JSON cell the plan's steps stand for. A scan gives them as (plan, values) pairs (a plan of tuples,
:attr:`~acceptmon.parse.fast.rows.Plan.tuples`, gives only the varying values: :func:`unmade` turns a part of them
into columns, which ``runs`` folds without a record or a dict per row), so a record costs a few
microseconds instead of the general parser's thirty: here only its dict and list fields get their own copies, its
timestamp becomes a datetime and the record is made. A record made so equals the general parser's
record of its line in every field but ``extra``, the ``key: value`` pairs no grammar knows, which it
leaves empty: only a job that never reads ``extra`` takes these records (its ``from_lane`` says so,
:mod:`acceptmon.pipeline.lanes`). A template joins such a lane only once its record for the line it was
learned from is the general parser's, field by field and type by type (:func:`same_record`). Pure: no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from itertools import compress, repeat
from operator import eq, itemgetter
from typing import Any, Literal

from acceptmon.parse.fast.rows import Plan
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import Record
from acceptmon.parse.unmade import Unmade, joined

_from_iso = datetime.fromisoformat
Rows = list[tuple[Plan, dict[str, Any] | tuple[Any, ...]]]
"""A typed scan's rows: each its plan and its record's values, or the varying ones alone (a plan of tuples); b""
where the scan had no typed plan."""


def columns_of(kind: str) -> tuple[str, ...]:
    """The cells of a lane record of ``kind``: its model's fields less ``extra``, in declaration order."""
    return KINDS[kind].columns


def records(rows: Rows | bytes, names: dict[str, str] | None = None) -> list[Record]:
    """The records of a part of lane rows (:data:`Rows`, the compiled matcher's, whose values dicts they take
    over); ``names``: the stream fields the file's path gives its plain lines (a Kubernetes log's namespace, pod
    and container)."""
    out: list[Record] = []
    if isinstance(rows, bytes):  # a scan without a typed plan: no row
        return out
    append = out.append
    for plan, got in rows:
        v = got if isinstance(got, dict) else _values(plan, got)
        for name, fresh in plan.fresh:
            v[name] = fresh()
        stamp = v["timestamp"]
        if stamp is not None:
            v["timestamp"] = _from_iso(stamp)
        if names:
            v.update(names)
        append(plan.make(v, None))
    return out


def _values(plan: Plan, varying: tuple[Any, ...]) -> dict[str, Any]:
    """A row of a plan of tuples (:attr:`Plan.tuples`) as its record's values: the shape with the varying ones in."""
    v = plan.shape.copy()
    v.update(zip(plan.names, varying, strict=True))
    return v


def without_extra(r: Record) -> Record:
    """The record as a lane row gives it: its unknown keys left out."""
    return r.model_copy(update={"extra": {}}) if getattr(r, "extra", None) else r


def same_record(a: Record, b: Record) -> bool:
    """Equal in every field, and of the same type in each (``1``, ``1.0`` and ``True`` are not the same cell)."""
    da, db = a.__dict__, b.__dict__
    return (
        type(a) is type(b)
        and da.keys() == db.keys()
        and all(type(v) is type(db[k]) and v == db[k] for k, v in da.items())
    )


def proves(rows: Rows | bytes | None, want: Record, names: dict[str, str] | None = None) -> bool:
    """Whether ``rows``, the lane's output for one line (of a file whose path gives ``names``), is one record equal
    to ``want`` (the general parser's record of that line) but for its unknown keys."""
    if not rows:
        return False
    got = records(rows, names)
    return len(got) == 1 and same_record(got[0], without_extra(want))


As = bool | Literal["unmade"]
"""How a lane hands on its own rows: table rows (False), records (True), or records not made yet (:class:`Unmade`)."""


def unmade(rows: Rows | Columns | bytes, names: dict[str, str] | None = None) -> list[Unmade] | list[Record]:
    """A part of lane rows as one :class:`~acceptmon.parse.unmade.Unmade` (none for a scan without a typed plan),
    whose records take ``names``: each plan's rows of tuples (:attr:`Plan.tuples`) turned into columns at once, rows
    of several plans (a vLLM log's spec and throughput lines) as pieces in order; or the columns the compiled
    matcher kept them in (:data:`Columns`). A part with a row of a plan of dicts is made into its records here."""
    if isinstance(rows, tuple):
        return from_columns(rows, names)
    if isinstance(rows, bytes) or not rows:
        return []
    plans = list(map(itemgetter(0), rows))
    distinct = list(dict.fromkeys(plans))
    if not all(p.tuples for p in distinct) or len(distinct) > 255:
        return records(rows, names)
    if len(distinct) == 1:
        return [_piece(distinct[0], rows, names)]
    index = {p: i for i, p in enumerate(distinct)}
    order = bytes(map(index.__getitem__, plans))
    pieces = [_piece(p, list(compress(rows, map(eq, order, repeat(i)))), names) for i, p in enumerate(distinct)]
    return [joined(pieces, order, partial(_made, rows, names), (0, len(rows)))]


def _piece(plan: Plan, rows: Rows, names: dict[str, str] | None) -> Unmade:
    """One plan's rows of tuples as columns."""
    columns: dict[str, Sequence[Any]] = dict(zip(plan.names, zip(*map(itemgetter(1), rows), strict=True), strict=True))
    return Unmade(len(rows), frozenset({plan.kind}), _fixed(plan, names), columns, partial(_made, rows, names))


def _made(rows: Rows, names: dict[str, str] | None, start: int, stop: int) -> list[Record]:
    return records(rows[start:stop] if start or stop < len(rows) else rows, names)


Columns = tuple[bytes, list[tuple[Plan, int, list[Any]] | None], Rows]
"""A typed scan's rows as columns (asked for): a byte per row, its template's index (:data:`RECORD`: a row of a plan
of dicts), per template None (no row) or (its plan of tuples, its rows, a column per varying field in the order of
:attr:`Plan.names`), each a list of values or a (typecode, bytes) pair of machine values that an ``array`` holds
(``'d'``: floats, ``'q'``: ints), and the rows of the plans of dicts, in order."""
RECORD = 255


def from_columns(got: Columns, names: dict[str, str] | None) -> list[Unmade] | list[Record]:
    """The rows of a columnar scan as one :class:`Unmade`: its plans' rows as pieces in the order of their first
    rows, as :func:`unmade` makes of the same rows."""
    order, each, others = got
    if not order:
        return []
    if others:  # a row of a plan of dicts: every row is made into its record (as :func:`unmade` does)
        return unmade(_rows(order, each, others), names)
    firsts = sorted((order.index(i), i) for i, x in enumerate(each) if x is not None)
    made = [(t, each[t]) for _, t in firsts]
    pieces = []
    for _, (plan, n, cols) in made:  # type: ignore[misc]  # each[t] is not None for a template with rows
        columns: dict[str, Sequence[Any]] = dict(zip(plan.names, map(_column, cols), strict=True))
        piece = Unmade(n, frozenset({plan.kind}), _fixed(plan, names), columns, _made_of(plan, columns, names))
        pieces.append(piece)
    if len(pieces) == 1:
        return pieces
    table = bytearray(256)
    for k, (t, _) in enumerate(made):
        table[t] = k
    at = order.translate(table)
    return [joined(pieces, at, partial(_made_joined, pieces, at), (0, len(at)))]


def _rows(order: bytes, each: list[tuple[Plan, int, list[Any]] | None], others: Rows) -> Rows:
    """The rows of a columnar scan as a typed scan gives them, in order."""
    values = [zip(*map(_column, x[2]), strict=True) if x is not None else iter(()) for x in each]
    nexts = [v.__next__ for v in values] + [iter(others).__next__]
    return [(each[t][0], nexts[t]()) if t != RECORD else nexts[-1]() for t in order]  # type: ignore[index]


def _column(c: Any) -> Sequence[Any]:
    """A column as the compiled matcher hands it: a list, or machine values as an ``array``."""
    return array(c[0], c[1]) if type(c) is tuple else c


def _fixed(plan: Plan, names: dict[str, str] | None) -> dict[str, Any]:
    return {k: v for k, v in plan.shape.items() if k not in plan.names} | (names or {})


def _made_of(plan: Plan, columns: dict[str, Sequence[Any]], names: dict[str, str] | None) -> Callable[[int, int], Any]:
    def made(start: int, stop: int) -> list[Record]:
        cols = [columns[name][start:stop] for name in plan.names]
        return records([(plan, v) for v in zip(*cols, strict=True)], names)

    return made


def _made_joined(pieces: list[Unmade], order: bytes, start: int, stop: int) -> list[Record]:
    """The records of rows ``start:stop`` of several pieces whose rows ``order`` interleaves."""
    out: list[Record] = []
    for k, piece in enumerate(pieces):
        first, n = order.count(k, 0, start), order.count(k, start, stop)
        out += piece.split(first)[1].split(n)[0].made() if n else []
    places = [i for k in range(len(pieces)) for i in range(start, stop) if order[i] == k]
    ordered: list[Record] = [None] * len(out)  # type: ignore[list-item]  # each place filled below
    for i, r in zip(places, out, strict=True):
        ordered[i - start] = r
    return ordered


def part(as_records: As, parser: Parser, nrows: int, rows: Any) -> tuple[int, bytes] | list[Record] | list[Unmade]:
    """A part of a lane's own rows: table rows as they are, or (``as_records``, a typed lane) their records, which
    take the names the parser's file gives (a Kubernetes log's namespace, pod and container); ``"unmade"``: the
    records not made yet (:func:`unmade`)."""
    if as_records == "unmade":
        return unmade(rows, parser.origin.values())
    return records(rows, parser.origin.values()) if as_records else (nrows, rows)


def proven(as_records: bool, parser: Parser, rows: Any, row: Record, chunk: Callable[[list[Record]], Any]) -> bool:
    """Whether ``rows``, a lane's output for one line, says what the general parser's ``row`` of it does: its
    record (a typed lane, :func:`proves`), or its table row as ``chunk`` writes it, byte for byte."""
    if as_records:
        return proves(rows, row, parser.origin.values())
    return rows is not None and rows == chunk([row])[1]
