"""Records as the fast lane hands them on unmade (:class:`~acceptmon.parse.unmade.Unmade`), for tests of the folds
that take them."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from acceptmon.measure.normalize import plain_kinds
from acceptmon.parse.unmade import Unmade, joined


def unmade(records: list[Any], fix: bool = True) -> Unmade:
    """Records as the fast lane hands them unmade: columns, the timestamp as ISO text; ``fix``: a field whose value is
    the same in every record is fixed (the lane fixes what its plan's shape holds: the file, the run, ...)."""
    values = []
    for r in records:
        v = dict(r.__dict__)
        v["timestamp"] = None if r.timestamp is None else r.timestamp.isoformat()
        values.append(v)
    columns: dict[str, Any] = {k: [v[k] for v in values] for k in values[0]}
    fixed = {k: c[0] for k, c in columns.items() if fix and all(x is c[0] for x in c)}
    varying = {k: c for k, c in columns.items() if k not in fixed}
    return Unmade(len(records), frozenset({r.kind for r in records}), fixed, varying, lambda a, b: records[a:b])


def part(records: list[Any], fix: bool) -> Unmade:
    """Records of plain kinds as the lane hands a part of several plans: each kind's records a piece, in order."""
    kinds = list(dict.fromkeys(r.kind for r in records))
    order = bytes(kinds.index(r.kind) for r in records)
    pieces = [unmade([r for r in records if r.kind == k], fix) for k in kinds]
    return joined(pieces, order, lambda a, b: records[a:b], (0, len(records)))


def parts(records: list[Any], fix: bool = True) -> list[Any]:
    """Records with each run of plain ones (:func:`~acceptmon.measure.normalize.plain_kinds`) a :func:`part`."""
    items: list[Any] = []
    run: list[Any] = []
    for r in records:
        if r.kind in plain_kinds():
            run.append(r)
            continue
        if run:
            items.append(part(run, fix))
            run = []
        items.append(r)
    if run:
        items.append(part(run, fix))
    return items


def cut(records: list[Any], cuts: Sequence[int]) -> list[Any]:
    """Records with each run of plain ones a :func:`part` (its values fixed where the cut falls at an even place),
    runs also cut where ``cuts`` fall: as the lane hands on a file's parts."""
    items: list[Any] = []
    run: list[Any] = []
    for i, r in enumerate(records):
        if run and (i in cuts or r.kind not in plain_kinds()):
            items.append(part(run, fix=i % 2 == 0))
            run = []
        if r.kind in plain_kinds():
            run.append(r)
        else:
            items.append(r)
    if run:
        items.append(part(run, fix=True))
    return items


def machine(rows: Unmade) -> Unmade:
    """``rows`` with each column of plain floats, or of plain ints within 64 bits, an ``array`` (as the compiled lane
    keeps a column of numbers), in place."""
    for p in rows.parts():
        for name, column in list(p.columns.items()):
            if not column or type(column) is array:
                continue
            if all(type(v) is float for v in column):
                p.columns[name] = array("d", column)
            elif all(type(v) is int and -(2**63) <= v < 2**63 for v in column):
                p.columns[name] = array("q", column)
    return rows
