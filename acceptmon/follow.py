"""Following live logs: new complete lines as they are written, through rotation and truncation.

:class:`Follower` owns one path. :meth:`Follower.poll_once` reads whatever is new and
hands complete lines (blocks ending in a newline, or OVERSIZED markers) to a callback;
a partial last line is held until its newline arrives. Between polls it notices:

- truncation (copytruncate): the file is shorter than what was read -> read again from 0;
- rotation (rename + create, or delete + recreate): the path names another inode -> the
  old file is drained to its end first, then the new one is read from its start;
- a missing file: it waits, and says so through :attr:`Follower.waiting`.

:class:`LiveSource` is the one live pipeline that ``serve`` and ``tail`` share: it
expands paths and globs (new matches are picked up), chooses where each file starts
(its end after back-filling the current run, ``--from-start``, or a saved position),
feeds every block to that file's :class:`~acceptmon.parse.Parser` and hands the
records to a sink. :func:`watch_loop` wakes it through watchfiles (inotify) with a
short debounce, or by a timer in poll mode (network filesystems, containers).
"""

from __future__ import annotations

import glob
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from acceptmon import statefile
from acceptmon.grammar import GrammarSet
from acceptmon.parse import Parser, ParseState, Tally
from acceptmon.records import Record, ServerLaunch
from acceptmon.source import MAX_LINE, OVERSIZED, LineAssembler, _Oversized, check_path, next_line_start

Sink = Callable[[bytes | _Oversized], None]
READ_SIZE = 1 << 20
HEAD_BYTES = 256
BACKFILL_LIMIT = 64 << 20
"""At most this many bytes before the end are replayed at start (the launch line itself is always read)."""
RESCAN_SECONDS = 1.0
"""How often globs are expanded again for new matches."""
SAVE_SECONDS = 5.0
"""How often positions are written to the state file (and always on exit)."""
FORGET_SECONDS = 30.0
"""A glob match missing this long is deleted for good: it is no longer followed."""
DEBOUNCE_MS = 100
"""inotify mode: changes are grouped for at most this long (watchfiles' default, 1600 ms, is too slow)."""
STEP_MS = 20
"""inotify mode: a group is handed over once no new change came for this long."""
IDLE_TICK_MS = 1000
"""inotify mode: without events, a tick still runs this often (late files, new glob matches)."""


class Follower:
    """Tails one path, surviving rotation and truncation."""

    def __init__(
        self,
        path: str,
        sink: Sink,
        *,
        start: int | None = 0,
        max_line: int = MAX_LINE,
        skipping: bool = False,
    ) -> None:
        """``start``: byte offset to begin at in the current file (None: its end).

        ``skipping``: the start offset lies inside an over-long line (a resumed position).
        """
        self.path = path
        self.sink = sink
        self._start = start
        self._skipping = skipping
        self._file: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self.pos = 0
        self._lines = LineAssembler(max_line)
        self.rotations = 0
        self.truncations = 0
        self.error: str | None = None
        """Why the path cannot be opened (permission denied, a directory...); None when fine or missing."""
        self._head = b""
        """The first bytes read from the file: if they change in place, it was truncated and rewritten."""

    @property
    def waiting(self) -> bool:
        """True while the path does not exist (yet)."""
        return self._file is None

    def position(self) -> tuple[int, int, int, bool] | None:
        """(device, inode, offset of the first unprocessed line, skipping) of the open file."""
        if self._ino is None or self._file is None:
            return None
        held = len(self._lines.carry)
        return self._ino[0], self._ino[1], self.pos - held, self._lines.skipping

    def poll_once(self) -> int:
        """Read what is new; return the number of bytes consumed."""
        if self._file is None and not self._open():
            return 0
        self._check_truncation()
        n = self._drain()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return n  # deleted: keep the old handle until a new file appears
        if (st.st_dev, st.st_ino) != self._ino:
            n += self._drain()
            self._close()
            self.rotations += 1
            self._start = 0
            if self._open():
                n += self._drain()
        return n

    def _check_truncation(self) -> None:
        """Copytruncate: the open file got shorter than our offset, or its start was rewritten."""
        assert self._file is not None
        if os.fstat(self._file.fileno()).st_size < self.pos or self._rewritten():
            self.truncations += 1
            self._file.seek(0)
            self.pos = 0
            self._head = b""
            self._lines.reset()

    def close(self) -> None:
        self._close()

    def _open(self) -> bool:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            self.error = None
            return False
        except OSError as exc:  # permission denied, a directory: keep trying, the caller reports it
            self.error = exc.strerror or str(exc)
            return False
        self.error = None
        st = os.fstat(f.fileno())
        self._file, self._ino = f, (st.st_dev, st.st_ino)
        self.pos = st.st_size if self._start is None else min(self._start, st.st_size)
        f.seek(self.pos)
        self._lines.reset()
        self._lines.skipping, self._skipping = self._skipping, False
        self._head = os.pread(f.fileno(), min(self.pos, HEAD_BYTES), 0)
        return True

    def _rewritten(self) -> bool:
        """The start of the file differs from what was read there (truncated, then grown past our position)."""
        assert self._file is not None
        if not self._head:
            return False
        return os.pread(self._file.fileno(), len(self._head), 0) != self._head

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._ino = None

    def _drain(self) -> int:
        assert self._file is not None
        total = 0
        while True:
            data = self._file.read(READ_SIZE)
            if not data:
                return total
            if len(self._head) < HEAD_BYTES and self.pos < HEAD_BYTES:
                self._head += data[: HEAD_BYTES - self.pos]
            total += len(data)
            self.pos += len(data)
            for block in self._lines.feed(data):
                self.sink(block)


def watch_loop(
    tick: Callable[[], object],
    dirs: Callable[[], Sequence[str]],
    stop: threading.Event,
    *,
    poll: bool = False,
    interval: float = 0.1,
) -> None:
    """Call ``tick`` whenever something changes in ``dirs`` (or every ``interval`` in poll mode).

    With inotify, ``tick`` also runs every :data:`IDLE_TICK_MS` without events, so late files
    and new glob matches are found even where no event announces them.
    """
    tick()
    watched = [d for d in dirs() if os.path.isdir(d)]
    if poll or not watched:
        while not stop.wait(interval):
            tick()
        return
    import watchfiles  # the core never imports it; only the live path does

    for _ in watchfiles.watch(
        *watched,
        stop_event=stop,
        debounce=DEBOUNCE_MS,
        step=STEP_MS,
        rust_timeout=IDLE_TICK_MS,
        yield_on_timeout=True,
        raise_interrupt=False,
    ):
        tick()
        if stop.is_set():
            return


def watch(followers: Sequence[Follower], stop: threading.Event, *, poll: bool = False, interval: float = 0.1) -> None:
    """Poll fixed followers whenever their directories change."""

    def tick() -> None:
        for f in followers:
            f.poll_once()

    watch_loop(tick, lambda: sorted({os.path.dirname(os.path.abspath(f.path)) for f in followers}), stop,
               poll=poll, interval=interval)  # fmt: skip


def find_last_launch(path: str, grammars: GrammarSet, *, chunk: int = 1 << 20) -> tuple[int, ServerLaunch] | None:
    """The last launch line of a file: its byte offset and record, searching backwards.

    Only lines holding a launch grammar's literal anchor are parsed, so this costs a
    backwards literal search even on a multi-GB log.
    """
    anchors = sorted({g.anchor.encode() for g in grammars.records if g.spec.record == "launch" and g.anchor})
    if not anchors:
        return None
    probe = Parser(grammars, path)
    overlap = max(map(len, anchors))
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        while end > 0:
            start = max(0, end - chunk)
            f.seek(start)
            data = f.read(end - start + overlap)
            hits = sorted({start + i for a in anchors for i in _find_all(data, a)}, reverse=True)
            for pos in hits:
                line_start = _line_start(f, pos)
                f.seek(line_start)
                raw = f.readline(MAX_LINE + 1)
                if len(raw) > MAX_LINE:
                    continue
                kind, record = probe.classify(raw.decode("utf-8", "replace").rstrip("\n"))
                if kind == "launch" and isinstance(record, ServerLaunch):
                    return line_start, record
            end = start
    return None


def _find_all(data: bytes, needle: bytes) -> list[int]:
    out, pos = [], data.find(needle)
    while pos >= 0:
        out.append(pos)
        pos = data.find(needle, pos + 1)
    return out


def _line_start(f: BinaryIO, pos: int) -> int:
    """Offset of the start of the line holding byte ``pos``."""
    end = pos
    while end > 0:
        start = max(0, end - (1 << 16))
        f.seek(start)
        nl = f.read(end - start).rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        end = start
    return 0


LiveSink = Callable[[str, list[Record], Tally], None]
"""Receives (file, records, that file's cumulative tally) after every block."""
Note = Callable[[str], None]


class Watched:
    """One followed file: its parser, and the follower that feeds it."""

    def __init__(self, path: str, parser: Parser, sink: LiveSink, *, start: int | None, skipping: bool) -> None:
        self.path, self.parser, self.sink = path, parser, sink
        self.follower = Follower(path, self.take, start=start, skipping=skipping)
        self.error: str | None = None
        """The read error last reported for this file."""
        self.waiting: bool | None = None
        """Whether the file was missing at the last tick (None before the first)."""

    def take(self, block: bytes | _Oversized) -> None:
        """A block of complete lines (or one skipped line) from the follower."""
        if block is OVERSIZED:
            self.parser.skip_oversized()
            self.sink(self.path, [], self.parser.tally)
        else:
            assert isinstance(block, bytes)
            self.sink(self.path, self.parser.feed(block), self.parser.tally)


class LiveSource:
    """Follows paths and globs, parses what they append and hands records to a sink."""

    def __init__(
        self,
        patterns: Sequence[str],
        grammars: GrammarSet,
        sink: LiveSink,
        *,
        from_start: bool = False,
        state_file: Path | None = None,
        records: frozenset[str] = frozenset({"decode", "launch"}),
        backfill_limit: int = BACKFILL_LIMIT,
        note: Note = lambda _msg: None,
        on_waiting: Callable[[str, bool], None] | None = None,
        on_forget: Callable[[str], None] | None = None,
    ) -> None:
        self.patterns = list(patterns)
        self.grammars = grammars
        self.sink = sink
        self.from_start = from_start
        self.state_file = state_file
        self.records = records
        self.backfill_limit = backfill_limit
        self.note = note
        self.on_waiting = on_waiting
        self.on_forget = on_forget
        self.files: dict[str, Watched] = {}
        self.history_end: dict[str, int] = {}
        """Per path started mid-file: where the current run starts (what came before is history)."""
        self._backfill: dict[str, tuple[int, int]] = {}
        self._saved = statefile.load(state_file) if state_file else statefile.FollowState()
        if state_file is not None:
            statefile.save(state_file, self._saved)  # an unwritable state file is an error now, not at exit
        self._first_scan = True
        self._last_scan = 0.0
        self._last_save = time.monotonic()
        self._missing: dict[str, float] = {}
        self._real: dict[str, str] = {}
        """Real path -> the name it is followed under."""

    # -- discovery and start positions -------------------------------------------------

    def discover(self) -> None:
        """Expand the patterns; start following paths not seen before, forget deleted glob matches."""
        first, self._first_scan = self._first_scan, False
        explicit: set[str] = set()
        for pattern in self.patterns:
            if glob.has_magic(pattern):
                paths = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
            else:
                check_path(pattern, may_be_missing=True)
                paths = [pattern]
                explicit.add(pattern)
            for path in paths:
                real = os.path.realpath(path)
                if path not in self.files and real not in self._real:  # one file named twice is read once
                    self._real[real] = path
                    self._add(path, existed_at_start=first and os.path.exists(path))
        now = time.monotonic()
        for path in [p for p in self.files if p not in explicit]:
            if os.path.exists(path):
                self._missing.pop(path, None)
                continue
            since = self._missing.setdefault(path, now)
            if now - since < FORGET_SECONDS:
                continue  # maybe delete + recreate: the follower drains the old file and switches
            del self._missing[path]
            self._forget(path)
        self._last_scan = time.monotonic()

    def _forget(self, path: str) -> None:
        """A glob match deleted for good (daily files): read its end, then let it go."""
        w = self.files.pop(path)
        self._real = {r: p for r, p in self._real.items() if p != path}
        w.follower.poll_once()
        w.follower.close()
        self._backfill.pop(path, None)
        self.note(f"{path}: deleted; no longer followed")
        if self.on_forget is not None:
            self.on_forget(path)

    def _add(self, path: str, *, existed_at_start: bool) -> None:
        start, skipping, state, preface = self._start(path, existed_at_start)
        parser = Parser(self.grammars, path, state, records=self.records)
        if preface is not None:
            parser.tally.kinds["launch"] += 1
            self.sink(path, [preface], parser.tally)
        self.files[path] = Watched(path, parser, self.sink, start=start, skipping=skipping)
        size = os.path.getsize(path) if os.path.isfile(path) else 0
        if start < size:
            self._backfill[path] = (start, size)
        if not os.path.exists(path):
            self.note(f"{path}: does not exist yet; waiting for it")

    def _start(self, path: str, existed_at_start: bool) -> tuple[int, bool, ParseState, ServerLaunch | None]:
        """Where to begin reading ``path``: (offset, skipping, parser state, launch record to pre-feed)."""
        saved = self._saved.files.get(os.path.abspath(path))
        if saved is not None:
            try:
                st = os.stat(path)
            except OSError:
                st = None
            if st is not None:
                same_inode = (st.st_dev, st.st_ino) == (saved.dev, saved.ino)
                fp = saved.fingerprint
                same = same_inode and (fp is None or fp == statefile.fingerprint(path))
                if same and saved.offset <= st.st_size:
                    self.note(f"{path}: resuming at byte {saved.offset:,} (state file)")
                    return saved.offset, saved.skipping, saved.parse_state, None
                self.note(f"{path}: replaced since the state file was written; reading it from the start")
                return 0, False, ParseState(), None
        if self.from_start or not existed_at_start:
            return 0, False, ParseState(), None
        try:
            size = os.path.getsize(path)
            last = find_last_launch(path, self.grammars)
            with open(path, "rb") as f:
                cut = next_line_start(f, size - self.backfill_limit)
        except OSError:
            return 0, False, ParseState(), None  # unreadable now: the follower reports it and retries
        if last is None:
            if cut:
                self.note(f"{path}: no launch line found; replaying the last {size - cut:,} bytes")
                self.history_end[path] = cut
            return cut, False, ParseState(), None
        offset, launch = last
        if offset:
            self.history_end[path] = offset
        if offset >= cut:
            return offset, False, ParseState(), None
        self.note(f"{path}: current run starts {size - offset:,} bytes back; replaying the last {size - cut:,}")
        state = ParseState(line=0, run=launch.run, launch=launch.config)
        return cut, False, state, launch

    # -- the loop ---------------------------------------------------------------------

    def tick(self) -> None:
        """Find new files, read what is new in every file, save positions now and then."""
        now = time.monotonic()
        if now - self._last_scan >= RESCAN_SECONDS:
            self.discover()
        for w in list(self.files.values()):
            w.follower.poll_once()
            if w.follower.error != w.error:
                w.error = w.follower.error
                if w.error:
                    self.note(f"{w.path}: cannot read: {w.error}; retrying")
            if w.follower.waiting != w.waiting:
                w.waiting = w.follower.waiting
                if self.on_waiting is not None:
                    self.on_waiting(w.path, w.waiting)
        if self.state_file is not None and now - self._last_save >= SAVE_SECONDS:
            self.save_state()

    def backfill_progress(self) -> float | None:
        """Fraction of the start-up replay read so far; None once every file has caught up."""
        done = total = 0
        for path, (start, end) in list(self._backfill.items()):  # read from the UI thread: never mutated here
            w = self.files.get(path)
            pos = w.follower.pos if w is not None else end
            if pos < end:
                done += max(0, pos - start)
                total += end - start
        return done / total if total else None

    def dirs(self) -> list[str]:
        out = set()
        for pattern in self.patterns:
            head = os.path.abspath(pattern)
            while glob.has_magic(head):
                head = os.path.dirname(head)
            out.add(head if glob.has_magic(pattern) else os.path.dirname(head))
        return sorted(out)

    def run(self, stop: threading.Event, *, poll: bool = False, interval: float = 0.1) -> None:
        """Follow until ``stop`` is set; positions are saved on the way out."""
        self.discover()
        try:
            watch_loop(self.tick, self.dirs, stop, poll=poll, interval=interval)
        finally:
            if self.state_file is not None:
                self.save_state()

    def save_state(self) -> None:
        assert self.state_file is not None
        # Positions of files that are gone cannot be resumed: drop them, or the file grows forever.
        files = {path: pos for path, pos in self._saved.files.items() if os.path.exists(path)}
        for w in self.files.values():
            pos = w.follower.position()
            if pos is None:
                continue
            dev, ino, offset, skipping = pos
            st = w.parser.state
            files[os.path.abspath(w.path)] = statefile.FilePosition(
                dev=dev,
                ino=ino,
                fingerprint=statefile.fingerprint(w.path),
                offset=offset,
                skipping=skipping,
                line=st.line,
                run=st.run,
                launch=st.launch,
            )
        self._saved = statefile.FollowState(files=files)
        statefile.save(self.state_file, self._saved)
        self._last_save = time.monotonic()

    def close(self) -> None:
        for w in self.files.values():
            w.follower.close()
