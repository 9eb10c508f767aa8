"""Log archives on Ray: :func:`read_logs`, the rows of ``acceptmon parse`` as a ``ray.data.Dataset``.

The same tasks as ``acceptmon parse --ray`` (:mod:`acceptmon.pipeline.distributed`: the byte ranges and
carried parser state of ``-j``), each range's rows an Arrow table in Ray's object store, with the columns
and types of ``parse -o rows.parquet``. Ray is the optional extra ``pip install 'acceptmon[ray]'``.

This module is ``acceptmon.ray``; ``import ray`` in it (absolute, as every import here) is Ray itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Union

from acceptmon.errors import InputError
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, RecordKind
from acceptmon.parse.load import load_grammars
from acceptmon.pipeline import distributed
from acceptmon.sinks.parquet import ArrowJob, pyarrow_module

if TYPE_CHECKING:
    import pyarrow

__all__ = ["read_logs"]

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


def read_logs(
    uris: Paths,
    kinds: Iterable[str] | None = None,
    *,
    grammars: GrammarSet | None = None,
    range_bytes: int | None = None,
) -> Any:
    """The ``parse`` rows of ``uris`` (log files, ``.gz`` files) as a ``ray.data.Dataset``: one block per byte
    range (or per ``.gz``/small file), in file order, rows and column types as ``parse -o rows.parquet``.

    ``kinds``: the record kinds to keep (default: the ``parse`` table's, ``decode``, ``spec``, ``throughput``).
    The ranges are parsed when this is called (connecting to Ray if this process has not: ``ray.init()``),
    their tables left in Ray's object store; for an archive larger than that, write the dataset with
    ``acceptmon parse --ray -o DIR`` and read it with ``ray.data.read_parquet(DIR)``.
    """
    distributed.ray_module()
    pyarrow_module()
    import ray.data

    paths = [os.fspath(uris)] if isinstance(uris, str | os.PathLike) else [os.fspath(u) for u in uris]
    sink: Callable[[str, Callable[[Any], None]], Any] = partial(_table_part, _kinds(kinds))
    done = distributed.run(paths, grammars or load_grammars(), sink, range_bytes=range_bytes, fetch=False)
    return ray.data.from_arrow_refs(done.outputs)


def _kinds(kinds: Iterable[str] | None) -> tuple[RecordKind, ...] | None:
    """The record kinds asked for (as ``parse --kind``: any kind but a launch), None for the ``parse`` table's."""
    if kinds is None:
        return None
    rows = {k: v for k, v in KINDS.items() if not v.starts_run}
    wanted = list(dict.fromkeys(kinds))
    unknown = [k for k in wanted if k not in rows]
    if unknown:
        raise InputError("kinds", f"unknown row kind(s) {unknown}; known: {sorted(rows)}")
    return tuple(rows[k] for k in wanted)


def _table_part(kinds: tuple[RecordKind, ...] | None, name: str, fill: Callable[[ArrowJob], None]) -> pyarrow.Table:
    """A Ray task's sink: the piece's rows as one Arrow table."""
    job = ArrowJob(kinds)
    fill(job)
    return job.table()
