"""The ``parse`` table and the ``runs`` summaries as Parquet (pyarrow: the optional extra ``acceptmon[parquet]``).

Columns and rows are the CSV's (:mod:`acceptmon.sinks.table`), typed from the record models: timestamps
as timestamps, counts as integers, per-position rates as lists. pyarrow is imported only here, when a
``.parquet`` output is asked for; without it, one line says how to install it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, get_args, get_origin

from pydantic import BaseModel

from acceptmon.errors import InputError
from acceptmon.parse.kinds import RecordKind, table_kinds
from acceptmon.parse.records import Record
from acceptmon.parse.unmade import Unmade
from acceptmon.sinks.atomic import atomic_output
from acceptmon.sinks.table import Writer, columns

if TYPE_CHECKING:
    import pyarrow

__all__ = [
    "INSTALL",
    "ArrowJob",
    "ParquetJob",
    "model_schema",
    "pyarrow_module",
    "table_schema",
    "write_models",
    "write_part",
]

INSTALL = "pip install 'acceptmon[parquet]'"


def pyarrow_module() -> Any:
    """``pyarrow``, or one clear error naming the extra to install."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise InputError("pyarrow", f"Parquet needs pyarrow, which is not installed: {INSTALL}") from None
    return pyarrow


def arrow_type(annotation: Any) -> Any:
    """The arrow type of a model field's annotation (its optional part: every column may be empty)."""
    pa = pyarrow_module()
    origin, args = get_origin(annotation), [a for a in get_args(annotation) if a is not type(None)]
    if origin is list:
        return pa.list_(arrow_type(args[0]) if args else pa.string())
    if origin is not None and args:  # X | None, Literal[...] (text)
        return arrow_type(args[0]) if isinstance(args[0], type) or get_origin(args[0]) else pa.string()
    types = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), datetime: pa.timestamp("ms")}
    return types.get(annotation, pa.string())


def table_schema(kinds: Sequence[RecordKind] | None = None) -> pyarrow.Schema:
    """The ``parse`` table's columns (of ``kinds``, default the table kinds) with their types."""
    pa = pyarrow_module()
    fields: dict[str, Any] = {}
    for kind in kinds or table_kinds():
        for name, info in kind.model.model_fields.items():
            fields.setdefault(name, info.annotation)
    return pa.schema([(c, arrow_type(fields.get(c, str))) for c in columns(kinds)])


def model_schema(model: type[BaseModel]) -> pyarrow.Schema:
    pa = pyarrow_module()
    return pa.schema([(n, arrow_type(f.annotation)) for n, f in model.model_fields.items()])


class _Out:
    """A forward-only binary stream over acceptmon's output writer, as pyarrow writes to one."""

    def __init__(self, out: Writer) -> None:
        self.out, self.pos, self.closed = out, 0, False

    def write(self, data: Any) -> int:
        self.out.write(bytes(data))
        self.pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


class ArrowJob:
    """The table kinds' rows (built in workers too) as Arrow tables of :func:`table_schema`'s columns, in order."""

    from_lane = True
    """Reads no record's ``extra``: the fast lane's records do (:class:`acceptmon.pipeline.batch.Job`)."""

    def __init__(self, kinds: Sequence[RecordKind] | None = None) -> None:
        self.kinds = tuple(kinds or table_kinds())
        self.records_wanted = frozenset(k.name for k in self.kinds)
        self.schema = table_schema(self.kinds)
        self.columns = tuple(self.schema.names)
        self.records = 0
        self.tables: list[pyarrow.Table] = []

    @property
    def takes_unmade(self) -> frozenset[str]:
        """Takes the lane's rows of the kinds it writes as records not made yet
        (:class:`~acceptmon.parse.unmade.Unmade`): their columns are the table's, no record made."""
        return self.records_wanted

    def chunk(self, records: Sequence[Record | Unmade]) -> pyarrow.Table | None:
        """The chunk's rows of the kinds written, in order, as a table (made where the chunk is read, a worker's
        sent as Arrow buffers): the lane's rows not made yet from their columns (a timestamp read from its ISO
        text, as a record reads it), the records from their fields; None for no row."""
        cols, wanted = self.columns, self.records_wanted
        out: list[list[Any]] = [[] for _ in cols]
        held: list[Record] = []
        for item in records:
            if type(item) is not Unmade:
                if item.kind in wanted:
                    held.append(item)
                continue
            _records_into(out, cols, held)
            held = []
            if not item.kinds <= wanted:
                _records_into(out, cols, [r for r in item.made() if r.kind in wanted])
                continue
            for column, name in zip(out, cols, strict=True):
                values = item.column(name)
                column += _stamps(values) if name == "timestamp" else values
        _records_into(out, cols, held)
        if not out[0]:
            return None
        pa = pyarrow_module()
        arrays = [pa.array(col, type=f.type) for col, f in zip(out, self.schema, strict=True)]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def collect(self, part: pyarrow.Table | None) -> None:
        if part is None:
            return
        self.records += part.num_rows
        self.write(part)

    def write(self, table: pyarrow.Table) -> None:
        self.tables.append(table)

    def table(self) -> pyarrow.Table:
        """Every row collected, one table (the schema's, empty if there were none)."""
        pa = pyarrow_module()
        return pa.concat_tables(self.tables) if self.tables else self.schema.empty_table()


def _records_into(out: list[list[Any]], cols: Sequence[str], records: Sequence[Record]) -> None:
    """Each record's value of each column added to the columns: None where its kind has no such field (asked of
    its fields, not of the model: a missing attribute of a pydantic model raises inside, a few microseconds)."""
    fields = [r.__dict__ for r in records]
    for column, name in zip(out, cols, strict=True):
        column += [f.get(name) for f in fields]


def _stamps(values: Sequence[str | None]) -> list[datetime | None]:
    return [None if v is None else _from_iso(v) for v in values]


_from_iso = datetime.fromisoformat


class ParquetJob(ArrowJob):
    """The table kinds' rows (built in workers too) written as Parquet row groups, in order."""

    def __init__(self, out: Writer, kinds: Sequence[RecordKind] | None = None) -> None:
        pa = pyarrow_module()
        super().__init__(kinds)
        self._writer = pa.parquet.ParquetWriter(pa.PythonFile(_Out(out), mode="w"), self.schema)

    def write(self, table: pyarrow.Table) -> None:
        self._writer.write_table(table)

    def finish(self) -> None:
        self._writer.close()


def write_part(
    directory: str, kinds: Sequence[RecordKind] | None, name: str, fill: Callable[[ArrowJob], None]
) -> tuple[str, int]:
    """One file of a Parquet dataset, ``DIRECTORY/NAME.parquet`` (whole or absent: :func:`atomic_output`), of
    the rows ``fill`` gives the job; returns its path and row count (``parse --ray``: a Ray task writes it)."""
    dest = os.path.join(directory, f"{name}.parquet")
    with atomic_output(dest) as out:
        job = ParquetJob(out, kinds)
        fill(job)
        job.finish()
    return dest, job.records


def write_models(out: Writer, rows: Sequence[BaseModel], model: type[BaseModel]) -> None:
    """Pydantic objects (``runs``' summaries) as one Parquet table, a column per field."""
    pa = pyarrow_module()
    schema = model_schema(model)
    table = pa.Table.from_pylist([r.model_dump() for r in rows], schema=schema)
    pa.parquet.write_table(table, pa.PythonFile(_Out(out), mode="w"))
