"""``-j N``: byte ranges of one file parsed on N - 1 worker processes and this one, collected in order.

Each range is first pre-scanned (:mod:`acceptmon.parse.prescan`) for the parser state at its end; the
states, chained, are where every worker's parser starts, so the output is what one reader writes.
The workers read the file through a descriptor this process holds: a log renamed, replaced or
deleted meanwhile is still read whole. They ignore Ctrl-C (this process answers it), and a worker
that dies ends the run with one line instead of a wait without end.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar, cast

from acceptmon.errors import InputError
from acceptmon.inputs.files import OVERSIZED, iter_blocks
from acceptmon.measure.columns import Packed, pack, unpack
from acceptmon.measure.plain import checks
from acceptmon.parse import prescan
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.parser import Parser, ParseState, Tally
from acceptmon.parse.records import Record
from acceptmon.parse.unmade import Unmade
from acceptmon.pipeline import inplace

T = TypeVar("T")

_WORKER: dict[str, Any] = {}
"""Worker-side globals, inherited through fork (grammars, job and lane are not re-sent per task)."""
AHEAD = 4
"""Results this process holds while the one it must collect next is not ready: it waits for that one
rather than parse further ahead (a faster main process piled up a whole file's rows). A job may hold fewer
(its ``ahead``: :class:`acceptmon.pipeline.batch.Job`)."""
QUEUED = 2
"""Ranges given to each worker ahead of its results being collected. A job whose collecting takes as long as reading
(the doctor's detectors) queues more (its ``queued``): this process, busy collecting, gives out ranges only between
two collects, and a worker that finished its queue meanwhile waits."""
PIPE_BYTES = 1 << 20
"""What the pipe of the workers' results is made to hold (:func:`widen`)."""
Collect = Callable[[int, tuple[list[Any], Tally]], bool]
"""Takes a range's results in order; False (nothing taken) if the job needs the range read again in this process
(:meth:`acceptmon.pipeline.batch.Job.ready`)."""
Result = tuple[list[Any], Tally, dict[str, int], tuple[int, int] | None, tuple[int | None, int | None]]
"""A range's chunk results, its tally, the years its year-less timestamps got, the (month, year) its
first one was given with no year to go on (:attr:`Parser.guess`), and its (year, month) at the end."""


def in_worker() -> bool:
    """Whether this is a worker process of ``-j`` (whose chunk results are pickled to the main process)."""
    return multiprocessing.parent_process() is not None


def handed_on(records: list[Record]) -> list[Record] | Packed:
    """Records a job's chunk hands on for its collect to read in file order: packed in a worker (a quarter of a
    record object's pickle: :func:`~acceptmon.measure.columns.pack`), as they are in this process."""
    return pack(records) if in_worker() else records


def taken(part: Sequence[T] | Packed) -> Iterator[T | Record]:
    """The records of :func:`handed_on`, one at a time (in this process, as they were handed on)."""
    if part and isinstance(part[0], tuple):
        return unpack(cast("Packed", part))
    return iter(cast("Sequence[T]", part))


class Shipped(list[Packed | Unmade]):
    """A worker's chunk of a job that takes the lane's rows unmade (:func:`ship`): in order, records packed, and rows
    as their values."""


def ship(records: Sequence[Record | Unmade], only: frozenset[str] | None = None) -> Shipped:
    """A worker's records for the main process: the rows :func:`~acceptmon.measure.plain.plain_columns` takes as
    their values alone (:meth:`~acceptmon.parse.unmade.Unmade.shipped`), the rest as records packed (``only``: these
    fields of them; what the names the engines had before the rows change is no verdict of theirs)."""
    out, held = Shipped(), list[Record]()
    for r in records:
        if type(r) is not Unmade:
            held.append(r)
        elif (found := checks(r)) is None:
            held.extend(r.made())
        else:
            if held:
                out.append(pack(held, only))
                held = []
            out.append(r.shipped(found))
    if held:
        out.append(pack(held, only))
    return out


def landed(part: Shipped, only: frozenset[str] | None = None) -> Iterator[list[Record] | Unmade]:
    """The pieces of a :func:`ship` part, in order: records (``only`` as :func:`ship` was given it), or rows."""
    for each in part:
        yield each if isinstance(each, Unmade) else list(unpack(each, only))


def run(path: str, ranges: list[tuple[int, int]], jobs: int, setup: dict[str, Any], collect: Collect) -> None:
    """Parse ``ranges`` of ``path`` on ``jobs - 1`` workers and this process; ``collect(bytes, (parts,
    tally))`` each in order.

    ``setup``: grammars, job, lane, finder, parts (``(parser, block, job, lane) -> parts``), block size.
    """
    with open(path, "rb") as held:
        _WORKER.update(setup, source=_reopenable(path, held.fileno()))
        pool = ProcessPoolExecutor(max(1, jobs - 1), mp_context=multiprocessing.get_context("fork"), initializer=_quiet)
        try:
            widen(getattr(getattr(getattr(pool, "_result_queue", None), "_reader", None), "fileno", None))
            _start(pool)
            _run(path, ranges, jobs, pool, collect)
        except BrokenProcessPool:
            raise InputError(
                path, "a worker process died (out of memory, or killed); try again, or with -j 1"
            ) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            _WORKER.clear()


def widen(fileno: Callable[[], int] | None) -> int | None:
    """The pipe the workers' results come through, made to hold :data:`PIPE_BYTES` (Linux; as much as the system lets
    a user have): its size after, or None where it cannot be sized (another system, or another executor's inside).

    A range's results are about 1 MB; through the 64 KiB a pipe holds by default, a worker wrote one in some 16
    pieces, each waiting for this process to read the one before. 256 MiB ``doctor``, ``-j 2``, alternating, 6 runs
    each, median (fastest): DP-attention Ascend 3.31 (3.07) → 2.99 (2.94) s, vLLM 0.10 DP 2.99 (2.81) → 2.90
    (2.84) s."""
    size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if fileno is None or size is None:
        return None
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            most = int(f.read())
        return fcntl.fcntl(fileno(), size, min(PIPE_BYTES, most))
    except (OSError, ValueError):
        return None


def _start(pool: ProcessPoolExecutor) -> None:
    """Fork the workers now, with Ctrl-C held until each ignores it (see :func:`_quiet`); one that
    came meanwhile interrupts this process when it is let through."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        pool.submit(int)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _run(path: str, ranges: list[tuple[int, int]], jobs: int, pool: ProcessPoolExecutor, collect: Collect) -> None:
    """``jobs - 1`` workers and this process: this one takes a range whenever the next result it
    must collect is not ready yet (so the workers never wait for it to take their results)."""
    scans = _scan_all(pool, [(path, s, e) for s, e in ranges], jobs)
    states, state = [], ParseState()
    for scan in scans:  # each range scanned from ParseState(): chained, they number runs like one reader
        states.append(state)
        state = state.then(scan)
    tasks = [(path, s, e, st) for (s, e), st in zip(ranges, states, strict=True)]
    pending: dict[int, Future[Result]] = {}
    known: tuple[int | None, int | None] = (None, None)  # (year, month) of the last year-less timestamp so far
    done: dict[int, Result] = {}
    given = 0  # tasks given out so far (to a worker or taken here)
    ahead = getattr(_WORKER["job"], "ahead", AHEAD)
    queued = getattr(_WORKER["job"], "queued", QUEUED) * (jobs - 1)
    for k, task in enumerate(tasks):
        while k not in done:
            while given < len(tasks) and len(pending) < queued:
                pending[given] = pool.submit(_parse_range, tasks[given])
                given += 1
            if k in pending and (pending[k].done() or given == len(tasks) or len(done) >= ahead):
                done[k] = pending.pop(k).result()
            else:
                done[given] = _parse_range(tasks[given])
                given += 1
        result = done.pop(k)
        here = (*task[:3], replace(task[3], year=known[0], month=known[1]))  # the range, its year known
        if not year_holds(result[3], known):  # the range's first year was guessed wrong: read it again, knowing
            result = _parse_range(here)
        parts, tally, years, _, end = result
        known = end if end[0] is not None else known
        _note_years(years)
        if not collect(task[2] - task[1], (parts, tally)):  # a worker's parts the job cannot take: read it here
            if not collect(task[2] - task[1], _parse_range(here)[:2]):
                raise AssertionError("a job refused the parts of a range read in the main process")


def _scan_all(pool: ProcessPoolExecutor, tasks: list[tuple[str, int, int]], jobs: int) -> list[ParseState]:
    """Every range pre-scanned, on the workers and this process (every ``jobs``-th range here)."""
    theirs = [pool.submit(_scan_range, t) if k % jobs else None for k, t in enumerate(tasks)]
    here = {k: _scan_range(t) for k, t in enumerate(tasks) if k % jobs == 0}
    return [here[k] if f is None else f.result() for k, f in enumerate(theirs)]


def year_holds(guess: tuple[int, int] | None, known: tuple[int | None, int | None]) -> bool:
    """Whether a range whose first year-less timestamp got ``guess`` (month, year) with no year to go
    on got what one reader gives it after (year, month) ``known`` (:meth:`Parser._dated`'s rules).

    ``-j N`` ranges start with no year; after New Year the guess (the file's time, or ``--year`` and
    the file's first timestamp) can be a year off, and such a range is read again."""
    year, month = known
    if guess is None or year is None or month is None:
        return True
    first, got = guess
    if first > month + 6:
        return False  # a late line from before New Year: its month does not count (read it again)
    return got == (year + 1 if first < month - 6 else year)


def _quiet() -> None:
    """A worker leaves Ctrl-C to this process (a worker interrupted mid-result hung the pool), and
    ends when this process does, however it ends (Linux: else it waits for tasks for ever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # forked with it blocked: a Ctrl-C before
    try:  # this line would have interrupted the worker's start and hung the pool
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _reopenable(path: str, fd: int) -> str:
    """A name under which a worker opens the file this process holds (its own offset, same file)."""
    alias = f"/proc/self/fd/{fd}"
    return alias if os.path.exists(alias) else path


def _note_years(years: dict[str, int]) -> None:
    """The years a worker gave year-less timestamps, kept where this process reports them (first range first)."""
    used = getattr(_WORKER["grammars"].year_for, "used", None)
    if isinstance(used, dict):
        for file, year in years.items():
            used.setdefault(file, year)


def _scan_range(task: tuple[str, int, int]) -> ParseState:
    return scan_range(_WORKER["grammars"], task, _WORKER["source"], _WORKER.get("finder"))


def scan_range(
    grammars: GrammarSet, task: tuple[str, int, int], source: str | None = None, finder: prescan.Finder | None = None
) -> ParseState:
    """The parser state at the end of ``path[start:end]`` (``task``), pre-scanned from ``ParseState()``;
    read from ``source`` (a name of the same file) if given. Also what a Ray task runs
    (:mod:`acceptmon.pipeline.distributed`)."""
    path, start, end = task
    parser = Parser(grammars, path)
    finder = finder or prescan.BYTES
    with open(source or path, "rb") as f:
        f.seek(start)
        for block in iter_blocks(f, limit=end - start):
            if block is OVERSIZED:
                parser.skip_oversized()
            else:
                assert isinstance(block, bytes)
                prescan.scan_block(parser, block, finder)
    return parser.state


def _parse_range(task: tuple[str, int, int, ParseState]) -> Result:
    path, start, end, state = task
    job, lane = _WORKER["job"], _WORKER["lane"]
    parser = Parser(_WORKER["grammars"], path, state, records=job.records_wanted)
    parts: list[Any] = []
    parts_of = partial(_WORKER["parts"], parser, job=job, lane=lane)
    how = (lane, True, _WORKER["block"])
    with inplace.collected_per_block() as collect:
        for _, got in inplace.blocks(parser, _WORKER["source"], (start, end - start), parts_of, how):
            parts += got
            collect()
    years = dict(getattr(_WORKER["grammars"].year_for, "used", {}))
    return parts, parser.tally, years, parser.guess, (parser.year, parser.month)
