"""CSV and JSON Lines output of the table record kinds (``acceptmon parse``).

Column order is part of the interface (scripts and spreadsheets depend on it): the
fields of each table kind's model in declaration order (see :mod:`acceptmon.kinds`),
kinds in registration order, each column once. JSON Lines adds ``extra``, the
``key: value`` pairs no grammar knows. Formatting is a pure function of a list of
records, so a parallel worker can format its own chunk.
"""

from __future__ import annotations

import csv
import io
import json
import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import IO, Any, Literal, TypeAlias

from acceptmon.kinds import KINDS, table_kinds
from acceptmon.records import Record

TableFormat: TypeAlias = Literal["csv", "jsonl"]


def columns() -> tuple[str, ...]:
    """Every table kind's columns, in registration and declaration order, each once."""
    return tuple(dict.fromkeys(c for k in table_kinds() for c in k.columns))


def infer_format(output: str | None, given: str | None) -> TableFormat:
    """``--format`` if given, else from the output suffix (``.jsonl``/``.json``), else CSV."""
    if given in ("csv", "jsonl"):
        return given  # type: ignore[return-value]
    if output and output.endswith((".jsonl", ".json", ".jsonl.gz", ".ndjson")):
        return "jsonl"
    return "csv"


def header(fmt: TableFormat) -> bytes:
    if fmt == "csv":
        return (",".join(columns()) + "\r\n").encode()
    return b""


def _iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    return ts.isoformat(timespec="milliseconds" if ts.microsecond else "seconds")


Getter: TypeAlias = Callable[[dict[str, Any]], tuple[Any, ...]]
_GETTERS: dict[tuple[str, tuple[str, ...]], Getter] = {}


def _getter(kind: str, cols: tuple[str, ...]) -> Getter:
    """Values of ``cols`` from a record's ``__dict__`` (None for a column the kind lacks)."""
    key = (kind, cols)
    got = _GETTERS.get(key)
    if got is None:
        fields = KINDS[kind].model.model_fields
        have = [c in fields for c in cols]
        m = have.index(False) if False in have else len(cols)
        if m == len(cols):
            got = operator.itemgetter(*cols)
        elif m > 1 and not any(have[m:]):  # the kind's columns lead (decode): pad the rest
            head, pad = operator.itemgetter(*cols[:m]), (None,) * (len(cols) - m)
            got = lambda d: head(d) + pad  # noqa: E731
        else:
            got = lambda d: tuple(d.get(c) for c in cols)  # noqa: E731
        got = _GETTERS[key] = got
    return got


def row(record: Record, cols: tuple[str, ...] | None = None) -> list[Any]:
    """The record's values in column order (timestamps as ISO text)."""
    cols = cols or columns()
    values = list(_getter(record.kind, cols)(record.__dict__))
    values[cols.index("timestamp")] = _iso(record.timestamp)
    return values


def format_records(records: Sequence[Record], fmt: TableFormat) -> bytes:
    """Format the table kinds' records among ``records``; other kinds are left out."""
    cols = columns()
    rows = [r for r in records if KINDS[r.kind].table]
    if fmt == "csv":
        buf = io.StringIO()
        lists, listing = _list_columns(cols)
        csv.writer(buf).writerows(_joined(row(r, cols), lists) if r.kind in listing else row(r, cols) for r in rows)
        return buf.getvalue().encode()
    lines = []
    for r in rows:
        obj = dict(zip(cols, row(r, cols), strict=True))
        obj["extra"] = getattr(r, "extra", {})
        lines.append(json.dumps(obj, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode() if lines else b""


def _list_columns(cols: tuple[str, ...]) -> tuple[tuple[int, ...], frozenset[str]]:
    """Positions of the columns whose values are lists (written ``;``-separated in CSV), and the kinds having one."""
    listed = {
        (k.name, n) for k in table_kinds() for n, f in k.model.model_fields.items() if "list[" in str(f.annotation)
    }
    names = {n for _, n in listed}
    return tuple(i for i, c in enumerate(cols) if c in names), frozenset(k for k, _ in listed)


def _joined(values: list[Any], lists: tuple[int, ...]) -> list[Any]:
    for i in lists:
        if isinstance(values[i], list):
            values[i] = ";".join("" if v is None else str(v) for v in values[i])
    return values


class TableJob:
    """Format the table kinds' records (in workers too) and write them in order."""

    def __init__(self, fmt: TableFormat, out: IO[bytes]) -> None:
        self.fmt, self.out, self.records = fmt, out, 0
        self.records_wanted = frozenset(k.name for k in table_kinds())

    def chunk(self, records: list[Record]) -> tuple[int, bytes]:
        data = format_records(records, self.fmt)
        return sum(1 for r in records if r.kind in self.records_wanted), data

    def collect(self, part: tuple[int, bytes]) -> None:
        self.records += part[0]
        self.out.write(part[1])
