"""CSV and JSON Lines output of the table record kinds (``acceptmon parse``).

Column order is part of the interface (scripts and spreadsheets depend on it): the
fields of each table kind's model in declaration order (see :mod:`acceptmon.parse.kinds`),
kinds in registration order, each column once, and last the stream fields every record has
(``source``, ``namespace``, ``pod``, ``container``: added after the others, they moved
none of them). JSON Lines adds ``extra``, the
``key: value`` pairs no grammar knows. Formatting is a pure function of a list of
records, so a parallel worker can format its own chunk.
"""

from __future__ import annotations

import csv
import functools
import io
import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, TypeAlias

from acceptmon.display import strict_json
from acceptmon.errors import InputError
from acceptmon.parse.kinds import KINDS, RecordKind, table_kinds
from acceptmon.parse.records import Record
from acceptmon.parse.streams import STREAM_FIELDS

TableFormat: TypeAlias = Literal["csv", "jsonl"]


class Writer(Protocol):
    """Where rows go: a binary file, standard output or a gzip stream."""

    def write(self, data: bytes, /) -> int: ...


def columns(kinds: Sequence[RecordKind] | None = None) -> tuple[str, ...]:
    """The columns of ``kinds`` (default: every table kind), in registration and declaration order, each once;
    the stream fields last."""
    own = dict.fromkeys(c for k in (kinds or table_kinds()) for c in k.columns if c not in STREAM_FIELDS)
    return (*own, *(c for c in STREAM_FIELDS if any(c in k.columns for k in (kinds or table_kinds()))))


SUFFIXES: dict[str, TableFormat] = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}
"""Output suffixes and their formats; each may be followed by ``.gz`` (compressed)."""


def infer_format(output: str | None, given: str | None) -> TableFormat:
    """``--format`` if given, else from the output file's suffix (``.gz`` aside); stdout: CSV.

    Raises:
        InputError: the suffix says no format and none was given.
    """
    if given in ("csv", "jsonl"):
        return given  # type: ignore[return-value]
    if not output:
        return "csv"
    name = output.removesuffix(".gz")
    suffix = name[name.rfind(".") :] if "." in name.rsplit("/", 1)[-1] else ""
    fmt = SUFFIXES.get(suffix.lower())
    if fmt is None:
        known = ", ".join(SUFFIXES)
        what = repr(suffix) if suffix else "'.gz' alone" if output.endswith(".gz") else "no suffix"
        raise InputError(output, f"cannot tell the format from {what}: use {known} (+ .gz) or --format")
    return fmt


def header(fmt: TableFormat, kinds: Sequence[RecordKind] | None = None) -> bytes:
    if fmt == "csv":
        return (",".join(columns(kinds)) + "\r\n").encode()
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
        t = len(cols) - (have[::-1].index(False) if False in have else 0)  # the stream columns end every row
        if m == len(cols):
            got = operator.itemgetter(*cols)
        elif m > 1 and len(cols) - t > 1 and not any(have[m:t]):  # the kind's columns lead (decode): pad the middle
            head, pad, tail = operator.itemgetter(*cols[:m]), (None,) * (t - m), operator.itemgetter(*cols[t:])
            got = lambda d: head(d) + pad + tail(d)  # noqa: E731
        elif m > 1 and not any(have[m:]):  # no stream columns (a table of other fields)
            head, pad = operator.itemgetter(*cols[:m]), (None,) * (len(cols) - m)
            got = lambda d: head(d) + pad  # noqa: E731
        else:
            got = lambda d: tuple(map(d.get, cols))  # noqa: E731
        got = _GETTERS[key] = got
    return got


def row(record: Record, cols: tuple[str, ...] | None = None) -> list[Any]:
    """The record's values in column order (timestamps as ISO text)."""
    cols = cols or columns()
    values = list(_getter(record.kind, cols)(record.__dict__))
    values[cols.index("timestamp")] = _iso(record.timestamp)
    return values


def format_records(records: Sequence[Record], fmt: TableFormat, kinds: Sequence[RecordKind] | None = None) -> bytes:
    """Format the records of ``kinds`` (default: the table kinds) among ``records``; others are left out."""
    cols, wanted, (lists, listing) = _layout(tuple(kinds or table_kinds()))
    rows = [r for r in records if r.kind in wanted]
    if fmt == "csv":
        buf = io.StringIO()
        csv.writer(buf).writerows(_joined(row(r, cols), lists) if r.kind in listing else row(r, cols) for r in rows)
        return buf.getvalue().encode()
    lines = []
    for r in rows:
        obj = dict(zip(cols, row(r, cols), strict=True))
        obj["extra"] = getattr(r, "extra", {})
        lines.append(strict_json(obj, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode() if lines else b""


@functools.cache
def _layout(
    kinds: tuple[RecordKind, ...],
) -> tuple[tuple[str, ...], frozenset[str], tuple[tuple[int, ...], frozenset[str]]]:
    """Columns, kind names and list columns of a table of ``kinds``: once per set of kinds, not per chunk.

    Kinds are hashed by identity, so a kind registered later (a test's toy kind) is a new key."""
    cols = columns(kinds)
    return cols, frozenset(k.name for k in kinds), _list_columns(cols, kinds)


def _list_columns(cols: tuple[str, ...], kinds: Sequence[RecordKind]) -> tuple[tuple[int, ...], frozenset[str]]:
    """Positions of the columns whose values are lists (written ``;``-separated in CSV), and the kinds having one."""
    listed = {(k.name, n) for k in kinds for n, f in k.model.model_fields.items() if "list[" in str(f.annotation)}
    names = {n for _, n in listed}
    return tuple(i for i, c in enumerate(cols) if c in names), frozenset(k for k, _ in listed)


def _joined(values: list[Any], lists: tuple[int, ...]) -> list[Any]:
    for i in lists:
        if isinstance(values[i], list):
            values[i] = ";".join("" if v is None else str(v) for v in values[i])
    return values


class TableJob:
    """Format the table kinds' records (in workers too) and write them in order, header first.

    The header is written with the first rows (or by :meth:`finish`), so a run that fails
    before reading anything writes nothing at all.
    """

    def __init__(self, fmt: TableFormat, out: Writer, kinds: Sequence[RecordKind] | None = None) -> None:
        """``kinds``: the record kinds written (default: the table kinds, one row per decode batch)."""
        self.fmt, self.out, self.records = fmt, out, 0
        self.kinds = tuple(kinds or table_kinds())
        self.records_wanted = frozenset(k.name for k in self.kinds)
        self._header = False

    def chunk(self, records: list[Record]) -> tuple[int, bytes]:
        data = format_records(records, self.fmt, self.kinds)
        return sum(1 for r in records if r.kind in self.records_wanted), data

    def collect(self, part: tuple[int, bytes]) -> None:
        self.records += part[0]
        if part[1]:
            self.finish()
            self.out.write(part[1])

    def finish(self) -> None:
        """Write the header if no row has (an empty table still has its header)."""
        if not self._header:
            self._header = True
            self.out.write(header(self.fmt, self.kinds))
