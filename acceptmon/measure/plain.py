"""The runs' fold of plain stats lines, column by column, from their values (records not made). Pure.

The fast lane hands ``runs`` its stats rows as values (:class:`~acceptmon.parse.unmade.Unmade`: SGLang's decode
lines; vLLM's spec and throughput lines, interleaved, as one plan's piece each); made into records, normalized and
folded one by one, they cost several microseconds each. :meth:`~acceptmon.measure.aggregate.Stats.fold_values` folds
a part of them as columns instead, with the interpreter's C loops (``map``, ``min``, ``max``, ``functools.reduce``,
``Counter.update``), where every row is a batch, a unit's load or both, of one run of one stream, that
:meth:`~acceptmon.measure.normalize.Normalizer.plain` would take (each value valid, no draft accept rate derived from
a refused count: :func:`plain_columns`). Each row's unit is named as there (a vLLM line that names no engine takes
the one named last); lines that count since start (vLLM v0) close their intervals in order. It does what that and
:meth:`~acceptmon.measure.aggregate.RunStats.plain` do row by row, in the same order (sums of floats are added one by
one, from the running totals), or nothing and says so: the rows are then made into records and folded one by one.
Tests hold the two ways equal on drawn rows.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import reduce
from itertools import compress, repeat
from operator import add, eq, is_not, itemgetter
from typing import Any, NamedTuple, TypeVar, cast

from acceptmon.measure.mean import Mean
from acceptmon.measure.normalize import Normalizer, plain_kinds, refuses_size, valid_bounds
from acceptmon.measure.positions import weighed
from acceptmon.measure.tokens import CounterKey, SpecTotals, width
from acceptmon.parse.fast import native
from acceptmon.parse.kinds import KINDS, RecordKind
from acceptmon.parse.unmade import Unmade

K = TypeVar("K")
V = TypeVar("V")
Columns = dict[str, Sequence[Any]]
"""By field: each row's value, in order."""
_from_iso = datetime.fromisoformat
_NUMBERS = frozenset({float, int})
_SPEC = ("spec_num_draft_tokens", "spec_num_steps")


class Piece(NamedTuple):
    """One plan's plain rows (of one kind) as columns."""

    kind: RecordKind
    rows: Unmade
    columns: Columns
    """Every :data:`~acceptmon.measure.normalize.VALID` field of the kind's that a row logs, by name."""
    units: Sequence[str]
    """Each row's unit."""
    groups: dict[str, Sequence[int]]
    """A ``load`` kind's: by unit, in order of each one's first row, its rows' places (else empty)."""


class Plain(NamedTuple):
    """Plain rows as columns (:func:`plain_columns`)."""

    key: tuple[str, str, int]
    """Their run: (file, source, run)."""
    pieces: list[Piece]
    """Each plan's rows; a field a figure sums is logged in one piece alone."""
    units: list[str]
    """Every unit a row is of, in order of its first row."""
    named: str | None
    """The last engine a row names (None: none does)."""
    counts: CounterKey | None = None
    """Whose counters the rows that count since start continue (None: none does)."""


def plain_columns(rows: Unmade, named: Mapping[tuple[str, str], str]) -> Plain | None:
    """``rows`` (of kinds among :func:`~acceptmon.measure.normalize.plain_kinds`, in file order) as columns, or None
    where one is not plain, they are not of one run of one stream, or two plans' rows log a field a figure sums
    (its sum would be taken in another order); ``named``: the engine each file and source named last before them.
    Rows that count since server start (vLLM v0) are taken where they are all one unit's."""
    checked = _found(rows, rows.checks) if isinstance(rows.checks, Checks) else _checked(rows, listed=True)
    if checked is None:
        return None
    (file, source, run), kinds, valid, counting = checked
    parts = rows.parts()
    units, last = _units(rows, kinds[0].unit_field, named.get((file, source)))
    counts = None
    if counting is not None:
        counts = (file, source, run, units[0] or next(iter(counting.column("rank"))) or "")  # :meth:`Intervals.key`
    if len(parts) == 1:
        each: list[Sequence[str]] = [units]
    else:
        each = _unwoven(rows.order, units, len(parts))
    pieces = [
        Piece(kind, part, columns, at, _groups(at) if kind.load else {})
        for part, kind, columns, at in zip(parts, kinds, valid, each, strict=True)
    ]
    if len(pieces) == 1 and pieces[0].groups:
        ordered = list(pieces[0].groups)  # (the units in order of their first row, as grouped)
    else:
        ordered = list(dict.fromkeys(units))
    return Plain((file, source, run), pieces, ordered, last, counts)


def _unwoven(order: bytes, values: Sequence[K], n: int) -> list[Sequence[K]]:
    """Each of the ``n`` pieces' values, in order (``order``: each value's piece, by its index)."""
    module = native.load()
    if module is not None:
        return cast("list[Sequence[K]]", module.unwoven(order, values, n))
    return [list(compress(values, map(eq, order, repeat(i)))) for i in range(n)]


class Checks(NamedTuple):
    """What :func:`plain_columns`' checks found of rows it takes (:func:`checks`): a worker ships them with the rows
    (:attr:`~acceptmon.parse.unmade.Unmade.checks`), so that the process that folds them does not check them again."""

    valid: tuple[tuple[str, ...], ...]
    """Each piece's fields with a value logged, each one valid."""
    counting: int | None
    """The piece whose rows count since start (None: none)."""


def checks(rows: Unmade) -> Checks | None:
    """What :func:`plain_columns`' checks find of ``rows``, or None where it does not take them (whatever engine was
    named before them): its checks alone, no column made (a worker's test of what it ships as values)."""
    checked = _checked(rows, listed=False)
    if checked is None:
        return None
    _, _, valid, counting = checked
    parts = rows.parts()
    at = None if counting is None else next(i for i, p in enumerate(parts) if p is counting)
    return Checks(tuple(tuple(columns) for columns in valid), at)


def _found(
    rows: Unmade, found: Checks
) -> tuple[tuple[str, str, int], list[RecordKind], list[Columns], Unmade | None] | None:
    """:func:`_checked`'s answer (the valid columns as lists) from what :func:`checks` found of the same rows."""
    parts = rows.parts()
    key = _one_run(parts)
    if key is None:
        return None
    kinds = [KINDS[next(iter(p.kinds))] for p in parts]
    valid: list[Columns] = [
        {name: p.column(name) for name in names} for p, names in zip(parts, found.valid, strict=True)
    ]
    counting = None if found.counting is None else parts[found.counting]
    return (key[0], key[1], key[2]), kinds, valid, counting


def _checked(
    rows: Unmade, listed: bool
) -> tuple[tuple[str, str, int], list[RecordKind], list[Columns], Unmade | None] | None:
    """What :func:`plain_columns` asks of rows before it names their units: their run, each piece's kind and valid
    columns (as lists, or as the lane keeps them where not ``listed``), and the piece that counts since start; None
    where it does not take them."""
    parts = rows.parts()
    kinds = [KINDS[next(iter(p.kinds))] for p in parts]
    if not rows.size or not rows.kinds <= plain_kinds() or len({k.unit_field for k in kinds}) != 1:
        return None
    key = _one_run(parts)
    if key is None:
        return None
    summed_fields: set[str] = set()
    valid = []
    counting = None
    for part, kind in zip(parts, kinds, strict=True):
        columns = _valid_columns(part, kind.model, listed)
        if columns is None or summed_fields & columns.keys() or _derived_from_refused(part, kind.model.model_fields):
            return None
        if _since_start(part, kind):
            counting = part
        summed_fields |= columns.keys()
        valid.append(columns)
    if counting is not None:
        field = kinds[0].unit_field
        named_one = field != "rank" and any(rows.column(field))
        if not all(counting.column("cumulative")) or named_one or len(set(counting.column("rank"))) != 1:
            return None  # lines counting since start among others, or of several units: the record path's
    return (key[0], key[1], key[2]), kinds, valid, counting


class Named(NamedTuple):
    """What :func:`~acceptmon.measure.parts.order_free` asks of rows whose unit is their engine
    (:func:`naming`)."""

    where: tuple[str, str]
    """Their file and source."""
    first: int
    """Their first row that names an engine (-1: none does)."""
    last: str | None
    """The last engine a row names."""
    counts: tuple[int, int, str] | None = None
    """Rows that count since start (none naming an engine): the first one's place, and their run and rank."""


def naming(rows: Unmade) -> Named | None:
    """Where rows of :func:`~acceptmon.measure.normalize.plain_kinds` kinds whose unit is their engine, of one file
    and source, name an engine, and where they start to count since start (all of one run and rank, naming none);
    None for any other rows."""
    parts = rows.parts()
    kinds = [KINDS[next(iter(p.kinds))] for p in parts]
    if not rows.kinds <= plain_kinds() or any(k.unit_field != "engine" for k in kinds):
        return None
    where = _one_run(parts, ("file", "source"))
    if where is None:
        return None
    engines = rows.column("engine")
    first = next((i for i, e in enumerate(engines) if e), -1)
    last = None if first < 0 else next(filter(None, reversed(engines)))
    if not any(map(_since_start, parts, kinds)):
        return Named((where[0], where[1]), first, last)
    whose = _one_run(parts, ("run", "rank"))
    if first >= 0 or whose is None:
        return None
    counting = [i for i, k in enumerate(kinds) if "cumulative" in k.model.model_fields]
    at = min(_first(rows, i, parts[i].column("cumulative")) for i in counting)
    return Named((where[0], where[1]), first, last, (at, whose[0], whose[1] or ""))


def _first(rows: Unmade, piece: int, column: Sequence[Any]) -> int:
    """Where the first row of a piece (the ``piece`` th of ``rows``) with a true value in ``column`` is among all the
    rows (past the end: none has one)."""
    row = next((i for i, v in enumerate(column) if v), None)
    if row is None:
        return rows.size
    return rows.place(piece, row) if rows.pieces else row


def _since_start(rows: Unmade, kind: RecordKind) -> bool:
    """Whether one of the rows counts since server start (vLLM v0)."""
    return "cumulative" in kind.model.model_fields and any(rows.column("cumulative"))


def _one_run(parts: Sequence[Unmade], names: Sequence[str] = ("file", "source", "run")) -> tuple[Any, ...] | None:
    """The (file, source, run) of every row (``names``), or None where they are not one."""
    key = []
    for name in names:
        seen: set[Any] = set()
        for part in parts:
            seen.update((part.fixed[name],) if name in part.fixed else set(part.column(name)))
        if len(seen) != 1:
            return None
        key.append(seen.pop())
    return tuple(key)


def _units(rows: Unmade, field: str, named: str | None) -> tuple[list[str], str | None]:
    """Each row's unit, as :meth:`~acceptmon.measure.normalize.Normalizer._unit_of` names it (a row that names no
    engine takes the one named last, ``named`` before the rows), and the last engine a row names."""
    if field == "rank":
        ranks = rows.column("rank")
        return (list(ranks) if not has_none(ranks) else [u or "" for u in ranks]), None
    engines = rows.column(field)
    if not any(engines):
        return [named or ""] * rows.size, None
    units = []
    now = named or ""
    for engine in engines:
        if engine:
            now = engine
        units.append(now)
    return units, next(filter(None, reversed(engines)))


def _groups(units: Sequence[str]) -> dict[str, Sequence[int]]:
    """By unit, in order of its first row: its rows' places."""
    if units and units.count(units[0]) == len(units):  # one unit (a vLLM engine, a rank): asked in C
        return {units[0]: range(len(units))}
    return dict(grouped(units, range(len(units))))


def _not_none(v: Any) -> bool:
    return v is not None


def _valid_columns(rows: Unmade, model: type, listed: bool = True) -> Columns | None:
    """The column of every :data:`~acceptmon.measure.normalize.VALID` field with a value logged, if each value in it
    is None or a plain number within its bounds (as the record path's test: finite, no bool), else None; a column of
    machine values (an ``array``) as a list where ``listed``, else as it is."""
    columns: Columns = {}
    module = native.load()
    bounded = _bounded if module is None else module.bounded
    for name, low, high in valid_bounds(model):
        if name not in rows.columns and rows.fixed.get(name) is None:
            continue  # none logged: the plan's shape has None
        column = rows.column(name) if listed or type(rows.columns.get(name)) is not array else rows.columns[name]
        logged = bounded(column, low, high)
        if logged < 0:
            return None
        if logged:
            columns[name] = column
    return columns


def _bounded(column: Sequence[Any], low: float, high: float) -> int:
    """The number of values logged in ``column`` (not None), or -1 where one is not an int or a float (a bool, a
    subclass, text), is NaN, or is outside ``low <= v <= high`` (``v < high`` where ``high`` is infinite): the
    compiled module's ``bounded`` where it is built, the same answers."""
    logged = present(column)
    if not logged:
        return 0
    types = set(map(type, logged))
    if not types <= _NUMBERS:
        return -1
    if float in types and _has_nan(logged):
        return -1
    if not (low <= min(logged) and (max(logged) < math.inf if high == math.inf else max(logged) <= high)):
        return -1
    return len(logged)


def _has_nan(values: Sequence[float]) -> bool:
    """Whether a NaN is among ints and floats: a finite sum has none (one pass in C, not a call per value)."""
    try:
        finite = math.isfinite(sum(values))
    except OverflowError:  # an int past any float, among floats: each value is looked at
        finite = False
    return not finite and any(v != v for v in values)


def _derived_from_refused(rows: Unmade, fields: Any) -> bool:
    """Whether a row's draft accept rate may have been derived from a draft-token count the limits refuse (the
    record path then leaves it out): asked of the distinct counts, not row by row."""
    if "draft_accept_rate" not in fields or not all(name in fields for name in _SPEC):
        return "draft_accept_rate" in fields  # a kind without the counts: let the record path judge
    if not any(refuses_size(name, v) for name in _SPEC for v in _distinct(rows, name)):
        return False  # the common case: no count refused, asked of each column's distinct values
    for tokens, steps in set(zip(*map(rows.column, _SPEC), strict=True)):
        name, value = (_SPEC[0], tokens) if tokens is not None else (_SPEC[1], steps)
        if refuses_size(name, value):
            return True
    return False


def _distinct(rows: Unmade, name: str) -> Iterable[Any]:
    """The values of a column that :func:`~acceptmon.measure.normalize.refuses_size` needs to see: its distinct ones,
    or of machine values (an ``array``: all ints, or all floats) the least and the largest, which refuse where any
    does."""
    raw = rows.columns.get(name)
    if type(raw) is array and raw:
        module = native.load()
        got = None if module is None else module.int_extremes(raw)  # (an int column's, read in C)
        return got if got is not None else (min(raw), max(raw))
    if raw is None:  # the same on every row (or None on every one)
        return (rows.fixed.get(name),) if rows.size else ()
    return set(raw)


def moves_on(normalizer: Normalizer, rows: Plain) -> list[tuple[Any, Any]] | None:
    """The normalizer's state as after these rows one by one (:meth:`~acceptmon.measure.normalize.Normalizer.plain`:
    :meth:`~acceptmon.measure.normalize.Normalizer.moved_on`), and the (accept_len, rate) of the interval each row
    that counts since start closes (None where none does)."""
    loads = [
        (p.groups, [p.columns.get(name) for name in ("gen_throughput", "running_req", "queue_req")])
        for p in rows.pieces
        if p.kind.load
    ]
    batches = sum(p.rows.size for p in rows.pieces if p.kind.acceptance)
    normalizer.moved_on(rows.key, rows.units, loads, batches, rows.named)
    if rows.counts is None:
        return None
    counting = next(p.rows for p in rows.pieces if p.kind.acceptance)
    accepted, drafted = ([v or 0 for v in counting.column(name)] for name in ("accepted_tokens", "drafted_tokens"))
    widths = list(map(width, *map(counting.column, ("num_spec_tokens", "position_accept_rates", "spec_num_steps"))))
    emitted = counting.column("emitted_tokens")
    return normalizer.intervals.close_columns(rows.counts, (accepted, drafted, emitted, widths))


def logged_rates(rows: Piece) -> list[tuple[str, Sequence[Any]]]:
    """Each unit's logged throughputs, in order, the units in order of their first (where a run's figures make
    their means)."""
    tputs = rows.columns.get("gen_throughput")
    if tputs is None:
        return []
    if len(rows.groups) == 1:
        return [(unit, present(tputs)) for unit in rows.groups]
    logged = []
    for unit, at in rows.groups.items():
        kept = [i for i in at if tputs[i] is not None]
        if kept:
            logged.append((kept[0], unit, [tputs[i] for i in kept]))
    return [(unit, rates) for _, unit, rates in sorted(logged, key=itemgetter(0))]


def stamps(rows: Plain) -> list[datetime]:
    """The rows' log times."""
    return [_from_iso(s) for p in rows.pieces for s in p.rows.column("timestamp") if s is not None]


def token_totals(spec: SpecTotals, rows: Unmade) -> None:
    """What :meth:`~acceptmon.measure.tokens.SpecTotals.add` does with each row that counts drafted tokens, in order:
    counts per interval summed, drafts and per-position rates weighted by drafts added one by one; counters since
    start (every row's, or none's: :func:`plain_columns`) the first and the last."""
    keep = list(map(_not_none, rows.column("drafted_tokens")))
    every = all(keep)

    def column(name: str) -> Sequence[Any]:
        values = rows.column(name)
        return values if every else list(compress(values, keep))

    drafted, emitted, rates = column("drafted_tokens"), column("emitted_tokens"), column("position_accept_rates")
    accepted = [a or 0 for a in column("accepted_tokens")]
    widths = map(width, column("num_spec_tokens"), rates, column("spec_num_steps"))
    if any(column("cumulative")):  # every row counts since start (:func:`plain_columns`): the first and the last
        k = list(widths)
        first, last = ((accepted[i], drafted[i], -1 if emitted[i] is None else emitted[i], k[i] or 0) for i in (0, -1))
        spec.first = spec.first or first
        spec.last = last
        return
    drafts = [d / k if k else 0.0 for d, k in zip(drafted, widths, strict=True)]
    spec.accepted += sum(accepted)
    spec.drafted += sum(drafted)
    if None in emitted:
        spec.emitted += sum(
            e if e is not None else round(a + n) for e, a, n in zip(emitted, accepted, drafts, strict=True)
        )
    else:
        spec.emitted += sum(emitted)
    spec.drafts = added(drafts, spec.drafts)
    weighed(spec.positions, rates, drafts)


def present(column: Sequence[Any] | None) -> Sequence[Any]:
    """The values logged in a column (None: a field the kind lacks), in order."""
    if column is None:
        return ()
    return column if not has_none(column) else list(compress(column, map(is_not, column, repeat(None))))


def grouped(keys: Sequence[K], values: Sequence[V | None]) -> dict[K, list[V]]:
    """Each value that is not None under its line's key, in order, the keys in the order of their first value kept:
    the compiled module's ``grouped`` where it is built and the keys are texts, the same dict."""
    module = native.load()
    got = None if module is None else module.grouped(keys, values)
    if got is not None:
        return cast("dict[K, list[V]]", got)
    groups: dict[K, list[V]] = {}
    for key, value in zip(keys, values, strict=True):
        if value is not None:
            at = groups.get(key)
            if at is None:
                groups[key] = [value]
            else:
                at.append(value)
    return groups


def masked(values: Sequence[V], mask: Sequence[Any]) -> list[V | None]:
    """``[v if m else None for v, m in zip(values, mask, strict=True)]``: the compiled module's ``masked`` where it is
    built and every mask entry is of the lane's types."""
    module = native.load()
    got = None if module is None else module.masked(values, mask)
    if got is not None:
        return cast("list[V | None]", got)
    return [v if m else None for v, m in zip(values, mask, strict=True)]


def has_none(values: Sequence[Any]) -> bool:
    """``None in values``: the compiled module's ``has_none`` where it is built, which looks for None by identity in
    a list or a tuple (only None equals None among the lane's values) instead of comparing each value with it."""
    module = native.load()
    return None in values if module is None else bool(module.has_none(values))


def summed(mean: Mean, present: Sequence[Any]) -> None:
    """``mean.add`` of each value, in order."""
    mean.count += len(present)
    mean.total = added(present, mean.total)


def added(values: Iterable[Any], start: Any) -> Any:
    """``functools.reduce(add, values, start)``: the values added one by one, in order. The compiled module's
    ``added`` where it is built and the start is a float and the values floats (or ints within 2**53): the same
    additions, without a float object for each."""
    module = native.load()
    if module is None or type(start) is not float:
        return reduce(add, values, start)
    values = values if isinstance(values, list | tuple) else list(values)
    got = module.added(values, start)
    return got if got is not None else reduce(add, values, start)


def where_each(keys: list[int]) -> Iterator[tuple[int, Sequence[int]]]:
    """Each distinct key, in the order first seen, with where it is: 1 at its places, 0 elsewhere. Keys that fit a
    byte (every log2 bucket of a sequence length below 2**255) are marked by ``bytes.translate``, a pass in C far
    cheaper than a comparison per entry."""
    if max(keys, default=0) < 256:
        packed = bytes(keys)
        for key in dict.fromkeys(packed):
            table = bytearray(256)
            table[key] = 1
            yield key, packed.translate(table)
        return
    for key in dict.fromkeys(keys):
        yield key, list(map(eq, keys, repeat(key)))
