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
from datetime import datetime
from functools import reduce
from operator import add, itemgetter
from typing import Any, NamedTuple

from acceptmon.measure.mean import Mean
from acceptmon.measure.normalize import Normalizer, refuses_size, valid_bounds
from acceptmon.parse.kinds import KINDS

Values = list[dict[str, Any]]
Columns = dict[str, list[Any]]
"""By field: each row's value, in order."""
_from_iso = datetime.fromisoformat
_NUMBERS = frozenset({float, int})
_SPEC = ("spec_num_draft_tokens", "spec_num_steps")


class Plain(NamedTuple):
    """Plain rows as columns (:func:`plain_columns`)."""

    columns: Columns
    """Every :data:`~acceptmon.measure.normalize.VALID` field of the kind's, by name."""
    groups: dict[str, list[int]]
    """By unit (rank), in order of each one's first row: its rows' places."""


def plain_columns(values: Values, kinds: frozenset[str]) -> Plain | None:
    """``values`` (rows of one kind among :func:`~acceptmon.measure.normalize.plain_kinds`, in file order) as
    columns, or None where a row is not plain or the rows are not of one run of one stream."""
    if len(kinds) != 1 or not values:
        return None
    model = KINDS[next(iter(kinds))].model
    fields = model.model_fields
    if any(_varies(values, name) for name in ("file", "source", "run")):
        return None
    columns = _valid_columns(values, model)
    if columns is None or _derived_from_refused(values, fields):
        return None
    if "drafted_tokens" in fields and any(map(_not_none, map(itemgetter("drafted_tokens"), values))):
        return None  # token counts: the record path's
    groups: dict[str, list[int]] = {}
    for i, unit in enumerate(u or "" for u in map(itemgetter("rank"), values)):
        at = groups.get(unit)
        if at is None:
            groups[unit] = [i]
        else:
            at.append(i)
    return Plain(columns, groups)


def _varies(values: Values, name: str) -> bool:
    return len(set(map(itemgetter(name), values))) != 1


def _not_none(v: Any) -> bool:
    return v is not None


def _valid_columns(values: Values, model: type) -> Columns | None:
    """Every :data:`~acceptmon.measure.normalize.VALID` field's column, if each value in it is None or a plain
    number within its bounds (as the record path's test: finite, no bool), else None."""
    columns: Columns = {}
    for name, low, high in valid_bounds(model):
        column = list(map(itemgetter(name), values))
        present = column if None not in column else [v for v in column if v is not None]
        if present and not (
            set(map(type, present)) <= _NUMBERS
            and not any(map(math.isnan, present))
            and low <= min(present)
            and (max(present) < math.inf if high == math.inf else max(present) <= high)
        ):
            return None
        columns[name] = column
    return columns


def _derived_from_refused(values: Values, fields: Any) -> bool:
    """Whether a row's draft accept rate may have been derived from a draft-token count the limits refuse (the
    record path then leaves it out): asked of the distinct counts, not row by row."""
    if "draft_accept_rate" not in fields or not all(name in fields for name in _SPEC):
        return "draft_accept_rate" in fields  # a kind without the counts: let the record path judge
    if not any(refuses_size(name, v) for name in _SPEC for v in set(map(itemgetter(name), values))):
        return False  # the common case: no count refused, asked of each column's distinct values
    for tokens, steps in set(map(itemgetter(*_SPEC), values)):
        name, value = (_SPEC[0], tokens) if tokens is not None else (_SPEC[1], steps)
        if refuses_size(name, value):
            return True
    return False


def moves_on(normalizer: Normalizer, first: dict[str, Any], rows: Plain) -> None:
    """The normalizer's state as after these rows one by one (:meth:`~acceptmon.measure.normalize.Normalizer.plain`:
    :meth:`~acceptmon.measure.normalize.Normalizer.moved_on`)."""
    key = first["file"], first["source"], first["run"]
    loads = [rows.columns.get(name) for name in ("gen_throughput", "running_req", "queue_req")]
    normalizer.moved_on(key, rows.groups, loads)


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


def stamps(values: Values) -> list[datetime]:
    """The rows' log times."""
    return [_from_iso(s) for s in map(itemgetter("timestamp"), values) if s is not None]


def present(column: list[Any] | None) -> list[Any]:
    if column is None:
        return []
    return column if None not in column else [v for v in column if v is not None]


def summed(mean: Mean, present: list[Any]) -> None:
    """``mean.add`` of each value, in order."""
    mean.count += len(present)
    mean.total = reduce(add, present, mean.total)
