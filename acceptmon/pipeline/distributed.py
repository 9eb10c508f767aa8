"""``parse --ray``: the byte ranges and carried parser state of ``-j N``, as tasks on a Ray cluster.

An input is one *piece* read whole through the reader (a ``.gz`` file, a journal or container log, a file
under :data:`~acceptmon.pipeline.batch.PARALLEL_MIN_BYTES`: as the sequential path reads it), or the byte
ranges :func:`~acceptmon.inputs.ranges.split_ranges` cuts. The ranges are pre-scanned as Ray tasks (the
pre-scan of ``-j``: :func:`acceptmon.pipeline.workers.scan_range`), the states chained here, and every piece
is parsed as a Ray task from the exact state the file has at its start: same line numbers, runs, launch
config. A range whose first year-less timestamp got a year one reader would not have given it is parsed
again, knowing (as ``-j`` does). What a task does with its rows is the caller's *sink*: ``sink(name,
fill)`` makes a job, lets ``fill(job)`` parse the piece into it and returns what the task returns (a Parquet
file's path and row count, or an Arrow table left in Ray's object store). Pieces have deterministic names,
``<file stem>-<index>`` (a stem met before gets ``.<k>``, the k-th input of that stem).

Ray is imported here, when asked for: the optional extra ``acceptmon[ray]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from acceptmon.errors import AcceptmonError, InputError
from acceptmon.inputs.files import check_path, is_stream
from acceptmon.inputs.ranges import split_ranges
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.parser import Parser, ParseState, Tally
from acceptmon.pipeline import batch, inplace
from acceptmon.pipeline.workers import scan_range, year_holds

INSTALL = "pip install 'acceptmon[ray]'"
Sink = Callable[[str, Callable[[Any], None]], Any]
"""``(piece name, fill) -> output``: runs in the task; ``fill(job)`` parses the piece into ``job``."""


@dataclass(frozen=True)
class Piece:
    """One Ray task's work: ``path[start:end]`` (``span``; None: the whole file through the reader), its
    parser starting in ``state``."""

    path: str
    name: str
    span: tuple[int, int] | None
    state: ParseState = field(default_factory=ParseState)


@dataclass(frozen=True)
class Parsed:
    """A piece's lines by kind, the years its year-less timestamps got, the (month, year) its first one got
    with no year to go on, and its (year, month) at the end (see :mod:`acceptmon.pipeline.workers`)."""

    tally: Tally
    years: dict[str, int]
    guess: tuple[int, int] | None
    end: tuple[int | None, int | None]


@dataclass
class Outcome:
    pieces: list[Piece]
    outputs: list[Any]
    """Each piece's sink output, or its Ray object reference (``fetch=False``)."""
    tally: Tally


def ray_module() -> Any:
    """``ray``, or one clear error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray", f"needs Ray, which is not installed: {INSTALL}") from None
    return ray


def connect(address: str | None) -> bool:
    """Join the Ray cluster at ``address`` (None or empty: Ray's default, ``RAY_ADDRESS`` or a new local one)
    unless this process already has; True if this call connected (the caller then disconnects)."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    import logging

    ray.init(address=address or None, logging_level=logging.WARNING, include_dashboard=False)
    return True


def run(
    paths: Sequence[str],
    grammars: GrammarSet,
    sink: Sink,
    *,
    range_bytes: int | None = None,
    min_bytes: int | None = None,
    fetch: bool = True,
    before: Callable[[list[Piece]], None] | None = None,
) -> Outcome:
    """Parse every path as Ray tasks, each task's rows to ``sink``: pieces of about ``range_bytes`` (default
    ``-j``'s), files under ``min_bytes`` whole (default ``-j``'s, or twice ``range_bytes`` if that is less);
    ``before(pieces)`` is called once the pieces are known, before any is parsed."""
    ray = ray_module()
    shared = ray.put(grammars)
    step = range_bytes or batch.RANGE_BYTES
    sizes = (step, min_bytes or (min(batch.PARALLEL_MIN_BYTES, 2 * step) if range_bytes else batch.PARALLEL_MIN_BYTES))
    pieces = plan(paths, grammars, shared, range_bytes=sizes[0], min_bytes=sizes[1])
    if before is not None:
        before(pieces)
    task = ray.remote(parse_piece).options(num_returns=2)
    refs = [task.remote(p, shared, sink) for p in pieces]
    done: list[Parsed] = _get([r[0] for r in refs])
    outputs = [r[1] for r in refs]
    tally, last = Tally(), ""
    known: tuple[int | None, int | None] = (None, None)
    for k, piece in enumerate(pieces):
        if piece.path != last:  # each file's year-less timestamps are dated from its own start
            known, last = (None, None), piece.path
        if not year_holds(done[k].guess, known):  # its first year was guessed wrong: read it again, knowing
            again = replace(piece, state=replace(piece.state, year=known[0], month=known[1]))
            ref = task.remote(again, shared, sink)
            done[k], outputs[k] = _get(ref[0]), ref[1]
        known = done[k].end if done[k].end[0] is not None else known
        tally.merge(done[k].tally)
        _note_years(grammars, done[k].years)
    return Outcome(pieces, _get(outputs) if fetch else outputs, tally)


def check_inputs(paths: Sequence[str]) -> None:
    """Every input a file the tasks can read (a stream cannot be cut into tasks), before a cluster is joined."""
    for path in paths:
        if is_stream(path):
            raise InputError(path, "--ray reads files: a stream cannot be cut into tasks (save it to a file first)")
        check_path(path)


def prepare_directory(directory: str, pieces: list[Piece]) -> None:
    """Make ``directory`` for the pieces' Parquet files; refuse a file there, or ``.parquet`` files the pieces
    would not replace (an earlier run's: a reader would take them for part of this dataset)."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise InputError(directory, "is not a directory: --ray writes a Parquet dataset, one file per byte range")
    try:
        os.makedirs(directory, exist_ok=True)
        there = {n for n in os.listdir(directory) if n.endswith(".parquet")}
    except OSError as exc:
        raise InputError(directory, f"cannot write: {exc.strerror or exc}") from None
    stale = sorted(there - {f"{p.name}.parquet" for p in pieces})
    if stale:
        raise InputError(
            directory, f"holds {len(stale)} .parquet file(s) this run would not write ({stale[0]}, ...): empty it first"
        )


def plan(paths: Sequence[str], grammars: GrammarSet, shared: Any, *, range_bytes: int, min_bytes: int) -> list[Piece]:
    """The pieces of every path, in order, each with the parser state its file has at its start (the ranges
    pre-scanned as Ray tasks on ``shared``, the grammars in the object store)."""
    ray = ray_module()
    scan = ray.remote(scan_piece)
    stems: dict[str, int] = {}
    cut: list[tuple[str, str, list[tuple[int, int]] | None]] = []
    check_inputs(paths)
    for path in paths:
        stem = Path(path).stem or "input"
        stems[stem] = stems.get(stem, 0) + 1
        name = stem if stems[stem] == 1 else f"{stem}.{stems[stem]}"
        size = os.path.getsize(path)
        whole = size < min_bytes or batch.whole_file(path)
        parts = -(-size // max(1, range_bytes))
        cut.append((path, name, None if whole else split_ranges(path, parts, size=size, min_size=range_bytes)))
    scans = [[scan.remote(shared, (path, s, e)) for s, e in ranges] if ranges else [] for path, _, ranges in cut]
    pieces = []
    for (path, name, ranges), refs in zip(cut, scans, strict=True):
        if ranges is None:
            pieces.append(Piece(path, f"{name}-0", None))
            continue
        state = ParseState()
        for k, (span, scanned) in enumerate(zip(ranges, _get(refs), strict=True)):
            pieces.append(Piece(path, f"{name}-{k}", span, state))
            state = state.then(scanned)
    return pieces


def scan_piece(grammars: GrammarSet, task: tuple[str, int, int]) -> ParseState:
    """A Ray task: the pre-scan of ``-j`` over ``path[start:end]`` (``task``), with the compiled finder if built."""
    from acceptmon.parse.fast.native import finder

    return scan_range(grammars, task, finder=finder())


def parse_piece(piece: Piece, grammars: GrammarSet, sink: Sink) -> tuple[Parsed, Any]:
    """A Ray task: ``piece`` parsed into the job ``sink`` makes; (what was read, the sink's output)."""
    box: list[Parsed] = []
    output = sink(piece.name, lambda job: box.append(parse_into(piece, grammars, job)))
    return box[0], output


def parse_into(piece: Piece, grammars: GrammarSet, job: batch.Job[Any]) -> Parsed:
    """The records of ``piece`` to ``job`` (its ``chunk`` and ``collect``), read as ``-j`` reads a range
    (:func:`acceptmon.pipeline.workers.run`) or the sequential path a whole file."""
    parser = Parser(grammars, piece.path, piece.state, records=job.records_wanted)
    if piece.span is None:
        check_path(piece.path)
        span: tuple[int, int | None] = (0, None)
        how: tuple[Any, bool, int] = (None, False, 0)
    else:
        span, how = (piece.span[0], piece.span[1] - piece.span[0]), (None, True, batch.FAST_BLOCK)
    for _, parts in inplace.blocks(parser, piece.path, span, lambda block: [job.chunk(parser.feed(block))], how):
        for part in parts:
            job.collect(part)
    years = dict(getattr(grammars.year_for, "used", {}))
    return Parsed(parser.tally, years, parser.guess, (parser.year, parser.month))


def _note_years(grammars: GrammarSet, years: dict[str, int]) -> None:
    """The years a task gave year-less timestamps, kept where this process reports them (first piece first)."""
    used = getattr(grammars.year_for, "used", None)
    if isinstance(used, dict):
        for file, year in years.items():
            used.setdefault(file, year)


def _get(refs: Any) -> Any:
    """``ray.get``; a task's own error (a bad input) is raised as itself, any other failure as one line."""
    ray = ray_module()
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, AcceptmonError):
            raise cause from None
        raise InputError("--ray", f"a Ray task failed: {str(cause or exc).strip().splitlines()[-1]}") from None
    except ray.exceptions.RayError as exc:
        raise InputError("--ray", f"Ray failed: {str(exc).strip().splitlines()[0]}") from None
