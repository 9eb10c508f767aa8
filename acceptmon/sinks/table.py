"""CSV, JSON Lines and JSON output of the table record kinds (``acceptmon parse``).

Column order is part of the interface (scripts and spreadsheets depend on it): the
fields of each table kind's model in declaration order (see :mod:`acceptmon.parse.kinds`),
kinds in registration order, each column once, and last the stream fields every record has
(``source``, ``namespace``, ``pod``, ``container``: added after the others, they moved
none of them). JSON Lines adds ``extra``, the
``key: value`` pairs no grammar knows; JSON is the same objects as one array, one per line.
Formatting is a pure function of a list of records, so a parallel worker can format its own chunk.
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
from acceptmon.parse.kinds import KINDS, RecordKind, table_columns, table_kinds
from acceptmon.parse.records import Record

TableFormat: TypeAlias = Literal["csv", "jsonl", "json", "parquet"]
RowFormat: TypeAlias = Literal["csv", "jsonl"]
"""How one chunk's rows are formatted: a JSON array's rows are JSON Lines, joined when written."""
FORMATS: tuple[TableFormat, ...] = ("csv", "jsonl", "json", "parquet")
"""Parquet is written by :mod:`acceptmon.sinks.parquet` (pyarrow, an optional extra), to a file only."""


class Writer(Protocol):
    """Where rows go: a binary file, standard output or a gzip stream."""

    def write(self, data: bytes, /) -> int: ...


columns = table_columns
"""The columns of ``kinds`` (default: every table kind): :func:`acceptmon.parse.kinds.table_columns`."""


SUFFIXES: dict[str, TableFormat] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
}
"""Output suffixes and their formats; each may be followed by ``.gz`` (compressed)."""


def infer_format(output: str | None, given: str | None) -> TableFormat:
    """``--format`` if given, else from the output file's suffix (``.gz`` aside); stdout: CSV.

    Raises:
        InputError: the suffix says no format and none was given, or it names another format than
            ``--format`` (``-o out.json --format jsonl``: which one was meant cannot be told).
    """
    fmt = _suffix_format(output) if output else None
    if given in FORMATS:
        if fmt is not None and fmt != given:
            raise InputError(
                output or "-o",
                f"--format {given}, but the suffix {_suffix(output or '')} means {fmt} ({_MEANS[fmt]}): "
                f"name the file {_renamed(output or '', given)}, or leave out --format",
            )
        return given
    if not output:
        return "csv"
    if fmt is None:
        suffix = _suffix(output)
        known = ", ".join(SUFFIXES)
        what = repr(suffix) if suffix else "'.gz' alone" if output.endswith(".gz") else "no suffix"
        raise InputError(output, f"cannot tell the format from {what}: use {known} (+ .gz) or --format")
    return fmt


_MEANS: dict[TableFormat, str] = {"csv": "CSV", "jsonl": "JSON Lines", "json": "one JSON array", "parquet": "Parquet"}
_EXTENSION: dict[TableFormat, str] = {"csv": ".csv", "jsonl": ".jsonl", "json": ".json", "parquet": ".parquet"}


def _suffix(output: str) -> str:
    """The output name's format suffix, ``.gz`` aside (``''`` for none)."""
    name = output.removesuffix(".gz")
    return name[name.rfind(".") :] if "." in name.rsplit("/", 1)[-1] else ""


def _suffix_format(output: str) -> TableFormat | None:
    return SUFFIXES.get(_suffix(output).lower())


def _renamed(output: str, fmt: TableFormat) -> str:
    """``output`` with the suffix of ``fmt`` (``.gz`` kept)."""
    gz = ".gz" if output.endswith(".gz") else ""
    name = output.removesuffix(".gz")
    return name[: len(name) - len(_suffix(output))] + _EXTENSION[fmt] + gz


def check_parquet(output: str | None) -> None:
    """A Parquet table goes to a file (it is written with a footer at the end, not as a stream) without ``.gz``."""
    if output is None:
        raise InputError("-o", "Parquet is written to a file: -o rows.parquet")
    if output.endswith(".gz"):
        raise InputError(output, "Parquet compresses its own columns: name the file without .gz")


def row_format(fmt: TableFormat) -> RowFormat:
    """How a chunk of a ``fmt`` table is formatted (a JSON array's rows: JSON Lines)."""
    return "csv" if fmt == "csv" else "jsonl"


def header(fmt: TableFormat, kinds: Sequence[RecordKind] | None = None) -> bytes:
    if fmt == "csv":
        return (",".join(columns(kinds)) + "\r\n").encode()
    return b"[" if fmt == "json" else b""


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


def format_records(records: Sequence[Record], fmt: RowFormat, kinds: Sequence[RecordKind] | None = None) -> bytes:
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
    before reading anything writes nothing at all. A JSON array is ``[``, one row object per
    line (``,``-separated), and ``]``: ``json.load`` reads it, and each row is still one line.
    """

    def __init__(self, fmt: TableFormat, out: Writer, kinds: Sequence[RecordKind] | None = None) -> None:
        """``kinds``: the record kinds written (default: the table kinds, one row per decode batch)."""
        self.fmt, self.out, self.records = fmt, out, 0
        self.rows: RowFormat = row_format(fmt)
        self.kinds = tuple(kinds or table_kinds())
        self.records_wanted = frozenset(k.name for k in self.kinds)
        self._header = self._rows = False

    def chunk(self, records: list[Record]) -> tuple[int, bytes]:
        data = format_records(records, self.rows, self.kinds)
        return sum(1 for r in records if r.kind in self.records_wanted), data

    def collect(self, part: tuple[int, bytes]) -> None:
        self.records += part[0]
        data = part[1]
        if not data:
            return
        self._start()
        if self.fmt == "json":  # JSON Lines (no newline inside a row) joined into the array
            data = (b",\n" if self._rows else b"\n") + data.rstrip(b"\n").replace(b"\n", b",\n")
        self._rows = True
        self.out.write(data)

    def _start(self) -> None:
        if not self._header:
            self._header = True
            self.out.write(header(self.fmt, self.kinds))

    def finish(self) -> None:
        """Write the header if no row has (an empty table still has its header), and a JSON array's end."""
        self._start()
        if self.fmt == "json":
            self.out.write(b"\n]\n" if self._rows else b"]\n")
