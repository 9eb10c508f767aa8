"""The fast lane's rows as records: what ``runs``, ``compare``, ``doctor`` and the live state read.

The batch commands and the live state want records, not table text. For them the lane writes each
fast row as a JSON object of its kind's own fields (the model's columns, then ``"extra":{}``): the
captured bytes are already the cells (see :mod:`acceptmon.parse.fast.pieces`), and one
``json.loads`` per part turns a whole part's rows into their values, so a record costs a few
microseconds instead of the general parser's thirty. A record made so equals the general parser's
record of its line in every field but ``extra``, the ``key: value`` pairs no grammar knows, which it
leaves empty: only a job that never reads ``extra`` takes these records (its ``from_lane`` says so,
:mod:`acceptmon.pipeline.lanes`). A template joins such a lane only once its record for the line it was
learned from is the general parser's, field by field and type by type (:func:`same_record`). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import Record, prepare

_from_iso = datetime.fromisoformat


def columns_of(kind: str) -> tuple[str, ...]:
    """The cells of a lane record of ``kind``: its model's fields less ``extra``, in declaration order."""
    return KINDS[kind].columns


def records(rows: bytes, names: dict[str, str] | None = None) -> list[Record]:
    """The records of a part of lane rows (JSON objects, one a line, each ending in a newline); ``names``: the
    stream fields the file's path gives its plain lines (a Kubernetes log's namespace, pod and container)."""
    if not rows:
        return []
    values: list[dict[str, Any]] = json.loads(b"[" + rows[:-1].replace(b"\n", b",") + b"]")
    makers = {name: prepare(kind.model).make for name, kind in KINDS.items()}
    out: list[Record] = []
    append = out.append
    file = values[0]["file"] if values else ""
    for v in values:  # each a whole __dict__: every field of its kind, in the model's order
        if v["file"] == file:  # one string for the part's file name, not one a record (and a pickle's memo of it)
            v["file"] = file
        stamp = v["timestamp"]
        if stamp is not None:
            v["timestamp"] = _from_iso(stamp)
        if names:
            v.update(names)
        append(makers[v["kind"]](v, None))
    return out


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


def proves(rows: bytes | None, want: Record, names: dict[str, str] | None = None) -> bool:
    """Whether ``rows``, the lane's output for one line (of a file whose path gives ``names``), is one record equal
    to ``want`` (the general parser's record of that line) but for its unknown keys."""
    if not rows:
        return False
    got = records(rows, names)
    return len(got) == 1 and same_record(got[0], without_extra(want))


def part(as_records: bool, parser: Parser, nrows: int, rows: bytes) -> tuple[int, bytes] | list[Record]:
    """A part of a lane's own rows: table rows as they are, or (``as_records``, a typed lane) their records, which
    take the names the parser's file gives (a Kubernetes log's namespace, pod and container)."""
    return records(rows, parser.origin.values()) if as_records else (nrows, rows)


def proven(
    as_records: bool, parser: Parser, rows: bytes | None, row: Record, chunk: Callable[[list[Record]], Any]
) -> bool:
    """Whether ``rows``, a lane's output for one line, says what the general parser's ``row`` of it does: its
    record (a typed lane, :func:`proves`), or its table row as ``chunk`` writes it, byte for byte."""
    if as_records:
        return proves(rows, row, parser.origin.values())
    return rows is not None and rows == chunk([row])[1]
