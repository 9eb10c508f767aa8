"""The runs' fold of plain decode lines, column by column, from their values (records not made). Pure.

The fast lane hands ``runs`` its decode rows as values (:class:`~acceptmon.parse.records.Unmade`); made into
records, normalized and folded one by one, they cost several microseconds each.
:meth:`~acceptmon.measure.aggregate.Stats.fold_values` folds a part of them as columns instead, with the
interpreter's C loops (``map``, ``min``, ``max``, ``functools.reduce``, ``Counter.update``), where every row is one
batch of one run of one stream that :meth:`~acceptmon.measure.normalize.Normalizer.plain` would take (each value
valid, no draft accept rate derived from a refused count, no token counts: :func:`plain_columns`). It does what
that and :meth:`~acceptmon.measure.aggregate.RunStats.plain` do row by row, in the same order (sums of floats are
added one by one, from the running totals), or nothing and says so: the rows are then made into records and folded
one by one. A test holds the two ways equal on drawn rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from functools import reduce
from operator import add, itemgetter
from typing import Any, NamedTuple

from acceptmon.measure.mean import Mean
from acceptmon.measure.normalize import Normalizer, column_kinds, refuses_size, valid_bounds
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import Unmade

Columns = dict[str, Sequence[Any]]
"""By field: each row's value, in order."""
_from_iso = datetime.fromisoformat
_NUMBERS = frozenset({float, int})
_SPEC = ("spec_num_draft_tokens", "spec_num_steps")


class Plain(NamedTuple):
    """Plain rows as columns (:func:`plain_columns`)."""

    key: tuple[str, str, int]
    """Their run: (file, source, run)."""
    columns: Columns
    """Every :data:`~acceptmon.measure.normalize.VALID` field of the kind's, by name."""
    groups: dict[str, list[int]]
    """By unit (rank), in order of each one's first row: its rows' places."""
    timestamps: Sequence[str | None]
    """Each row's log time, ISO text."""


def plain_columns(rows: Unmade) -> Plain | None:
    """``rows`` (of one kind among :func:`~acceptmon.measure.normalize.column_kinds`, in file order) as columns, or
    None where one is not plain or they are not of one run of one stream."""
    if len(rows.kinds) != 1 or not rows.size or not rows.kinds <= column_kinds():
        return None
    model = KINDS[next(iter(rows.kinds))].model
    fields = model.model_fields
    key = []
    for name in ("file", "source", "run"):
        if name in rows.fixed:
            key.append(rows.fixed[name])
            continue
        column = rows.column(name)
        if len(set(column)) != 1:
            return None
        key.append(column[0])
    columns = _valid_columns(rows, model)
    if columns is None or _derived_from_refused(rows, fields):
        return None
    if "drafted_tokens" in fields and any(map(_not_none, rows.column("drafted_tokens"))):
        return None  # token counts: the record path's
    groups: dict[str, list[int]] = {}
    for i, unit in enumerate(u or "" for u in rows.column("rank")):
        at = groups.get(unit)
        if at is None:
            groups[unit] = [i]
        else:
            at.append(i)
    return Plain((key[0], key[1], key[2]), columns, groups, rows.column("timestamp"))


def _not_none(v: Any) -> bool:
    return v is not None


def _valid_columns(rows: Unmade, model: type) -> Columns | None:
    """Every :data:`~acceptmon.measure.normalize.VALID` field's column, if each value in it is None or a plain
    number within its bounds (as the record path's test: finite, no bool), else None."""
    columns: Columns = {}
    for name, low, high in valid_bounds(model):
        column = rows.column(name)
        logged = present(column)
        if logged and not (
            set(map(type, logged)) <= _NUMBERS
            and not any(map(math.isnan, logged))
            and low <= min(logged)
            and (max(logged) < math.inf if high == math.inf else max(logged) <= high)
        ):
            return None
        columns[name] = column
    return columns


def _derived_from_refused(rows: Unmade, fields: Any) -> bool:
    """Whether a row's draft accept rate may have been derived from a draft-token count the limits refuse (the
    record path then leaves it out): asked of the distinct counts, not row by row."""
    if "draft_accept_rate" not in fields or not all(name in fields for name in _SPEC):
        return "draft_accept_rate" in fields  # a kind without the counts: let the record path judge
    if not any(refuses_size(name, v) for name in _SPEC for v in set(rows.column(name))):
        return False  # the common case: no count refused, asked of each column's distinct values
    for tokens, steps in set(zip(*map(rows.column, _SPEC), strict=True)):
        name, value = (_SPEC[0], tokens) if tokens is not None else (_SPEC[1], steps)
        if refuses_size(name, value):
            return True
    return False


def moves_on(normalizer: Normalizer, rows: Plain) -> None:
    """The normalizer's state as after these rows one by one (:meth:`~acceptmon.measure.normalize.Normalizer.plain`:
    :meth:`~acceptmon.measure.normalize.Normalizer.moved_on`)."""
    loads = [rows.columns.get(name) for name in ("gen_throughput", "running_req", "queue_req")]
    normalizer.moved_on(rows.key, rows.groups, loads)


def logged_rates(rows: Plain) -> list[tuple[str, list[Any]]]:
    """Each unit's logged throughputs, in order, the units in order of their first (where a run's figures make
    their means)."""
    tputs = rows.columns.get("gen_throughput")
    if tputs is None:
        return []
    logged = []
    for unit, at in rows.groups.items():
        kept = [i for i in at if tputs[i] is not None]
        if kept:
            logged.append((kept[0], unit, [tputs[i] for i in kept]))
    return [(unit, rates) for _, unit, rates in sorted(logged, key=itemgetter(0))]


def stamps(rows: Plain) -> list[datetime]:
    """The rows' log times."""
    return [_from_iso(s) for s in rows.timestamps if s is not None]


def present(column: Sequence[Any] | None) -> Sequence[Any]:
    """The values logged in a column (None: a field the kind lacks), in order."""
    if column is None:
        return ()
    return column if None not in column else [v for v in column if v is not None]


def summed(mean: Mean, present: Sequence[Any]) -> None:
    """``mean.add`` of each value, in order."""
    mean.count += len(present)
    mean.total = reduce(add, present, mean.total)
