"""The library API: what the commands read and report, as Python objects (``import acceptmon``).

Thin over the code the commands run, never a second implementation: :func:`read` is the reader of
``acceptmon parse``, :func:`runs` the aggregate of ``acceptmon runs`` (objects whose
``model_dump(mode="json")`` is the command's JSON), :func:`to_arrow` the ``parse`` table as a typed
``pyarrow.Table`` (the optional extra ``acceptmon[parquet]``). Paths are files, ``.gz`` files, ``"-"`` for
standard input, or URLs (``s3://``, ``gs://``, ``https://``, globs in them; the extra ``acceptmon[remote]``).

>>> import acceptmon
>>> rows = [r for r in acceptmon.read("sample_logs/seed_eagle3_moe.log", kinds=["decode"])]
>>> len(rows), rows[0].kind, rows[0].accept_len
(384, 'decode', 1.17)
>>> [round(r.accept_len_mean, 2) for r in acceptmon.runs("sample_logs/seed_eagle3_moe.log")]
[1.13, 2.84, 1.81, 2.41, 3.27]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, cast

from acceptmon.diagnose.read import DoctorResult, examine
from acceptmon.diagnose.rules import load_rules, speedup_thresholds
from acceptmon.errors import InputError
from acceptmon.inputs.refs import parse_ref
from acceptmon.inputs.remote import expand
from acceptmon.measure.compare import RESAMPLES, Comparison
from acceptmon.measure.compare import compare as compare_sides
from acceptmon.measure.summary import RunSummary, with_unrecognized
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, table_kinds
from acceptmon.parse.load import load_grammars
from acceptmon.parse.records import Record
from acceptmon.pipeline.batch import records, run
from acceptmon.pipeline.sides import read_side
from acceptmon.pipeline.sweep import Both, RunSides, with_speedups
from acceptmon.sinks.parquet import pyarrow_module, table_schema
from acceptmon.sinks.runs_table import StatsJob

if TYPE_CHECKING:
    import pyarrow

__all__ = ["compare", "doctor", "read", "runs", "to_arrow"]

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
"""One path or several: files, ``.gz`` files, ``"-"`` for standard input, URLs (globs in them too)."""


def _paths(paths: Paths) -> list[str]:
    """The paths as strings, each URL glob replaced by the objects it matches (sorted)."""
    if isinstance(paths, str | os.PathLike):
        return expand([os.fspath(paths)])
    return expand(os.fspath(p) for p in paths)


def _kinds(kinds: Iterable[str] | None) -> frozenset[str] | None:
    if kinds is None:
        return None
    wanted = frozenset(kinds)
    unknown = sorted(wanted - set(KINDS))
    if unknown:
        raise InputError("kinds", f"unknown record kind(s) {unknown}; known: {sorted(KINDS)}")
    return wanted


def read(paths: Paths, kinds: Iterable[str] | None = None, *, grammars: GrammarSet | None = None) -> Iterator[Record]:
    """Every record of ``paths`` in file order (typed, frozen: :mod:`acceptmon.parse.records`), as
    ``acceptmon parse`` reads them; ``kinds`` keeps those kinds (``"decode"``, ``"spec"``, ``"launch"``...)."""
    wanted = _kinds(kinds)
    gset = grammars or load_grammars()
    for path in _paths(paths):
        for r in records(path, gset, wanted):
            if wanted is None or r.kind in wanted:
                yield r


def runs(
    paths: Paths,
    *,
    baseline: str | os.PathLike[str] | bool | None = None,
    grammars: GrammarSet | None = None,
    jobs: int = 1,
) -> list[RunSummary]:
    """One summary per server launch, as ``acceptmon runs`` prints them (same fields as its JSON).

    ``baseline`` (``runs --baseline``): a log or run without speculation (``"base.log#1"``), or True for the
    runs without speculation among ``paths``; each summary is then a
    :class:`~acceptmon.measure.verdicts.SweepRun` with its speedup, interval, verdict and place."""
    gset, files = grammars or load_grammars(), _paths(paths)
    job = StatsJob()
    sides = RunSides() if baseline not in (None, False) else None
    both: Any = job if sides is None else Both(job, sides)
    result = run(files, gset, both, jobs=max(1, jobs))
    summaries = with_unrecognized(job.stats.summaries(), result.tally.unrecognized_runs)
    if sides is None:
        return summaries
    ref = "" if baseline is True else os.fspath(cast("str | os.PathLike[str]", baseline))
    return with_speedups(summaries, sides, ref, gset, max(1, jobs), speedup_thresholds(load_rules()))[0]


def compare(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    grammars: GrammarSet | None = None,
    jobs: int = 1,
) -> Comparison:
    """B against A as ``acceptmon compare A B`` compares them (``model_dump(mode="json")`` is its JSON);
    each side a file (all its batches) or a run of one: ``"server.log#2"``."""
    refs = [parse_ref(os.fspath(x)) for x in (a, b)]
    if refs[0][0] == refs[1][0] == "-":
        raise InputError("-", "stdin can be one side of a comparison, not both")
    gset = grammars or load_grammars()
    sa, sb = (read_side(path, number, gset, max(1, jobs)).side for path, number in refs)
    return compare_sides(sa, sb, resamples=resamples, seed=seed)


def doctor(
    paths: Paths,
    *,
    baseline: str | None = None,
    expected_accept_len: float | None = None,
    rules: Iterable[str | os.PathLike[str]] = (),
    grammars: GrammarSet | None = None,
    jobs: int = 1,
) -> DoctorResult:
    """The findings and runs ``acceptmon doctor`` reports (``model_dump(mode="json")`` is its JSON);
    ``baseline``: a log or run without speculation (``"base.log#1"``); ``rules``: extra rule files."""
    result, _ = examine(
        _paths(paths),
        grammars or load_grammars(),
        load_rules([Path(r) for r in rules]),
        expected_accept_len=expected_accept_len,
        baseline=baseline,
        jobs=max(1, jobs),
    )
    return result


def to_arrow(paths: Paths, kinds: Iterable[str] | None = None, *, grammars: GrammarSet | None = None) -> pyarrow.Table:
    """The rows ``acceptmon parse`` writes, as a ``pyarrow.Table`` with typed columns (pyarrow is the
    optional extra ``acceptmon[parquet]``): ``pip install 'acceptmon[parquet]'``)."""
    pa = pyarrow_module()
    table = {k.name for k in table_kinds()}
    wanted = _kinds(kinds) or frozenset(table)
    schema = table_schema()
    cols = tuple(schema.names)
    rows = [{c: getattr(r, c, None) for c in cols} for r in read(paths, wanted & table, grammars=grammars)]
    return pa.Table.from_pylist(rows, schema=schema)
