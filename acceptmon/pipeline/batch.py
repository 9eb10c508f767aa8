"""The batch pipeline: files -> blocks -> parser -> a job's chunk work -> collected in order.

A :class:`Job` says what to do with the records of one chunk (format them, or
aggregate them) and how to collect the chunk results in file order. The same
job runs sequentially (stdin, ``.gz``, small files) or on several processes for a
large regular file. The parallel path first scans each byte range for its line
count and launch lines (cheap: a newline count and a literal search), so every
worker starts its parser in the exact state the file has at its range: same line
numbers, same run index and launch config, hence byte-identical output.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from acceptmon.errors import Interrupt
from acceptmon.inputs.container import is_container_file
from acceptmon.inputs.files import GZIP_MAGIC, check_path, is_stream
from acceptmon.inputs.journal import is_journal
from acceptmon.inputs.ranges import split_ranges
from acceptmon.inputs.remote import is_url
from acceptmon.inputs.remote import size as url_size
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.parser import Parser, Tally
from acceptmon.parse.records import Record
from acceptmon.parse.state import line_starts
from acceptmon.pipeline import inplace

if TYPE_CHECKING:  # imported where used: `parse` on a small file needs none of them (workers: process pools)
    from acceptmon.parse.fast.lane import FastLane
    from acceptmon.parse.fast.pieces import Format
    from acceptmon.parse.kinds import RecordKind
    from acceptmon.pipeline.lanes import JobLane

    Lane = FastLane | JobLane

T = TypeVar("T")
PARALLEL_MIN_BYTES = 8 << 20
"""Files smaller than this are read on one process (a worker's start-up would cost more)."""
RANGE_BYTES = 2 << 20
"""Target size of one parallel work unit: small, so that the processes finish together, and so that what this
process holds (up to :data:`acceptmon.pipeline.workers.AHEAD` ranges' results while it waits for the next) and what
a worker builds before sending it stay small. 4 MiB against 2 MiB on 64 MiB logs, -j 2, summed peak RSS: parse
99-101 against 88-89 MiB, runs 156 against 112-114, doctor 240-243 against 157-162; no slower (1 MiB was)."""
FAST_BLOCK = (1 << 20) - (64 << 10)
"""Bytes the fast lane matches at a time: just under the source's MAX_LINE, which spares the
reader its long-line check (it splits every block longer than MAX_LINE into lines)."""
FAST_MIN_BYTES = 4 << 20
"""Inputs smaller than this skip the fast lane: building its templates and matcher would cost more than it saves."""
SLOW_NOTE = "the fast lane is not compiled (no C compiler at install): parse runs at the general parser's speed"
"""What ``parse`` says once where it would take the fast lane but its compiled matcher is not built."""
LEARN_BYTES = 1 << 20
"""The fast lane orders its templates by how often they match this much of the first file."""


class Job(Protocol[T]):
    """What a pipeline run does with records.

    A job whose class sets ``from_lane = True`` never reads a record's ``extra`` (the ``key: value`` pairs no
    grammar knows): a large input's stats lines then reach it from the fast lane as records
    (:mod:`acceptmon.pipeline.lanes`), a few microseconds each, with ``extra`` left empty; one that also sets
    ``takes_unmade`` (kinds) gets the lane's rows of those kinds as records not made yet
    (:class:`~acceptmon.parse.unmade.Unmade`) among the general parser's records, and its ``chunk`` takes both. One
    that sets ``ahead = N`` has ``-j`` hold at most N ranges' results ahead of the one it collects next (default
    :data:`acceptmon.pipeline.workers.AHEAD`): a job whose results weigh more than CSV bytes holds fewer; one that
    sets ``queued = N`` gives each worker N ranges ahead (default :data:`acceptmon.pipeline.workers.QUEUED`). One that
    defines ``ready(parts) -> bool`` is asked it of each range's parts from a worker before it collects any of them:
    False has the range read again in the main process (:func:`ready`)."""

    records_wanted: frozenset[str]
    """Record kinds the job uses; lines of other kinds are recognised and counted, not built."""

    def chunk(self, records: list[Record]) -> T:
        """Turn one chunk's records into a partial result (may run in a worker process)."""
        ...

    def collect(self, part: T) -> None:
        """Take partial results in file order (main process)."""
        ...


class Table(Job[tuple[int, bytes]], Protocol):
    """A job of ``parse``'s table (:class:`acceptmon.sinks.table.TableJob`): its parts are ``(rows, bytes)``."""

    kinds: tuple[RecordKind, ...]
    """The record kinds whose rows it writes."""


def ready(job: Job[Any], parts: list[Any]) -> bool:
    """Whether ``job`` takes a range's parts as they are (its ``ready``, if it has one: :class:`Job`). A job takes the
    parts the main process parsed: a range read again there is asked again, and must be taken."""
    check = getattr(job, "ready", None)
    return check is None or bool(check(parts))


@dataclass
class Progress:
    """Bytes done so far across all files, for a progress display."""

    total: int = 0
    done: int = 0


@dataclass
class RunResult:
    tally: Tally = field(default_factory=Tally)
    files: int = 0


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def run(
    paths: Sequence[str],
    grammars: GrammarSet,
    job: Job[T],
    *,
    jobs: int = 1,
    on_progress: Callable[[Progress], None] | None = None,
    limit: int | None = None,
    fast: Format | None = None,
    as_read: bool = False,
    note: Callable[[str], None] | None = None,
) -> RunResult:
    """Parse every path in order, feeding ``job``; return the line tally.

    ``limit``: read only the first ``limit`` bytes of each file (a line start: the
    history before a live start); the last line is completed if it is cut.
    ``fast``: the job is a table job of this format (:class:`Table`): rows of its kinds that the fast lane
    can write come from it (:mod:`acceptmon.parse.fast`), same bytes.
    ``as_read``: a stream (stdin, a FIFO) is parsed as its lines come, each block's results handed on at
    once (``parse -``); else in whole blocks.
    ``note``: told :data:`SLOW_NOTE` once, before anything is read, where the fast lane would be taken but
    its compiled matcher is not built (the general parser then reads everything; not where
    ``ACCEPTMON_PURE_PYTHON`` asked for that).
    """
    result = RunResult()
    progress = Progress(total=sum(_size(p, limit) for p in paths))
    lane: Lane | None = None
    big = progress.total >= FAST_MIN_BYTES or any(
        is_stream(p) or _is_gzip(p) for p in paths
    )  # unknown sizes: a pipe, .gz
    if fast is not None and big:
        from acceptmon.parse.fast import built, native
        from acceptmon.parse.fast.lane import FastLane

        if native.load() is None:
            if note is not None and not built.pure_asked():  # asked for: nothing to tell
                note(SLOW_NOTE)
        else:
            lane = FastLane(grammars, fast, written=cast("Table", job).kinds)
            lane = lane if lane.enabled else None
    elif getattr(job, "from_lane", False) and big:
        from acceptmon.pipeline.lanes import job_lane

        lane = job_lane(grammars, job.records_wanted, unmade=getattr(job, "takes_unmade", frozenset()))
    for path in paths:
        if jobs > 1 and not is_stream(path) and _size(path, limit) >= PARALLEL_MIN_BYTES and not _whole(path):
            tally = _run_parallel(path, grammars, job, jobs, progress, on_progress, limit, lane)
        else:
            tally = _run_sequential(path, grammars, job, progress, on_progress, limit, lane, as_read=as_read)
        result.tally.merge(tally)
        result.files += 1
    return result


def _run_sequential(
    path: str,
    grammars: GrammarSet,
    job: Job[T],
    progress: Progress,
    on_progress: Callable[[Progress], None] | None,
    limit: int | None = None,
    lane: Lane | None = None,
    *,
    as_read: bool = False,
) -> Tally:
    parser = Parser(grammars, path, records=job.records_wanted)
    if path != "-":
        check_path(path)
    in_place = lane is not None and not is_stream(path) and not _whole(path)
    size = _size(path, limit) if in_place else limit
    parts_of = partial(_parts, parser, job=job, lane=lane)
    how = (lane, in_place, FAST_BLOCK)
    with inplace.collected_per_block() as collect:
        for nbytes, parts in inplace.blocks(parser, path, (0, size), parts_of, how, as_read=as_read):
            Interrupt.check()
            _take(job, parts)
            progress.done += nbytes
            if on_progress:
                on_progress(progress)
            collect()
    return parser.tally


def _take(job: Job[T], parts: list[T]) -> None:
    """The job collects a block's parts, in order, and the list is emptied: their rows are freed before the block's
    collection (:func:`~acceptmon.pipeline.inplace.collected_per_block`), which would otherwise walk every one of
    them (1.2 s of ``runs -j 1``'s 6.5 s on 256 MiB of vLLM v0)."""
    for part in parts:
        job.collect(part)
    parts.clear()


def records(path: str, grammars: GrammarSet, wanted: frozenset[str] | None = None) -> Iterator[Record]:
    """Every record of ``path`` (a file, ``.gz``, ``-``) in file order, a block at a time: the reader of
    :func:`run` on one process, for a caller that iterates (the library's :func:`acceptmon.read`)."""
    parser = Parser(grammars, path, records=wanted)
    if path != "-":
        check_path(path)
    for _, parts in inplace.blocks(parser, path, (0, None), lambda block: [parser.feed(block)], (None, False, 0)):
        for part in parts:
            yield from part


def _parts(parser: Parser, block: bytes, job: Job[T], lane: Lane | None) -> list[T]:
    """One block's chunk results: through the fast lane if there is one, else one chunk."""
    if lane is None:
        return [job.chunk(parser.feed(block))]
    if not lane.learned:
        lane.learn(block[: block.rfind(b"\n", 0, LEARN_BYTES) + 1])
    return lane.feed(parser, block, job.chunk)  # type: ignore[arg-type, return-value]


def _run_parallel(
    path: str,
    grammars: GrammarSet,
    job: Job[T],
    jobs: int,
    progress: Progress,
    on_progress: Callable[[Progress], None] | None,
    limit: int | None = None,
    lane: Lane | None = None,
) -> Tally:
    """Ranges of the file on ``jobs`` processes (:mod:`acceptmon.pipeline.workers`), in order."""
    size = _size(path, limit)
    ranges = split_ranges(path, max(jobs * 4, size // RANGE_BYTES), size=size, min_size=min(FAST_BLOCK, RANGE_BYTES))
    with open(path, "rb") as f:
        head = f.read(LEARN_BYTES)
    if lane is not None and not lane.learned:
        lane.learn(head[: head.rfind(b"\n") + 1])
    _warm(grammars, path, head)
    from acceptmon.parse.fast.native import finder
    from acceptmon.pipeline import workers

    tally = Tally()
    setup = {"grammars": grammars, "job": job, "lane": lane, "finder": finder(), "parts": _parts, "block": FAST_BLOCK}
    collect = partial(_collect, job=job, tally=tally, progress=(progress, on_progress))
    with inplace.fewer_collections():
        workers.run(path, ranges, jobs, setup, collect)
    return tally


def _warm(grammars: GrammarSet, path: str, head: bytes) -> None:
    """Read the launch lines of the file's head once here, before the workers fork: the patterns of the grammars
    that read them are compiled on first use (tens of milliseconds each, and the launch model's validator is built),
    and a forked worker inherits them instead of compiling them again for the first range."""
    parser = Parser(grammars, path)
    for word in parser.launch_words:
        for start in sorted(line_starts(head, word)):
            end = head.find(b"\n", start)
            if end > 0:
                parser.feed(head[start : end + 1])


def _collect(
    nbytes: int,
    done: tuple[list[Any], Tally],
    *,
    job: Job[Any],
    tally: Tally,
    progress: tuple[Progress, Callable[[Progress], None] | None],
) -> bool:
    Interrupt.check()
    parts, part_tally = done
    if not ready(job, parts):
        return False
    counter, on_progress = progress
    for part in parts:
        job.collect(part)
    tally.merge(part_tally)
    counter.done += nbytes
    if on_progress:
        on_progress(counter)
    return True


def _size(path: str, limit: int | None = None) -> int:
    try:
        size = url_size(path) if is_url(path) else os.path.getsize(path) if path != "-" else 0
    except OSError:
        return 0
    return size if limit is None else min(size, limit)


def whole_file(path: str) -> bool:
    """A file read from its start through :func:`open_log` only: an object by URL (one stream), gzip,
    journalctl output (whose entries become lines there: no byte range of the file is a range of lines),
    or a container log (whose split lines are joined in the reader: a range must not start inside one)."""
    return is_url(path) or _is_gzip(path) or is_journal(path) or is_container_file(path)


_whole = whole_file


def _is_gzip(path: str) -> bool:
    """True for a gzip file (False if it cannot be read: opening it later says why, in one line)."""
    try:
        if not os.path.isfile(path):  # opening a FIFO would wait for a writer
            return False
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False
