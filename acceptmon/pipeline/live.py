"""The live pipeline: followed files -> a parser per file -> records handed to sinks.

:class:`LiveSource` is the one live pipeline that ``serve`` and ``tail`` share: it
expands paths and globs (new matches are picked up), chooses where each file starts
(its end after back-filling the current run, ``--from-start``, or a saved position),
feeds every block a :class:`~acceptmon.inputs.follow.Follower` reads to that file's
:class:`~acceptmon.parse.parser.Parser`, and hands the records to a sink. Positions persist
through :mod:`acceptmon.pipeline.statefile`, after every tick that moved one (at most
every :data:`SAVE_SECONDS`) and on exit.

A glob match that is a followed file under a rotated name (renamed, copied or compressed) is
not read again, and a saved file rotated while nobody followed it is found under its new name
and its rest read first (:mod:`acceptmon.pipeline.rotated`).
"""

from __future__ import annotations

import glob
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from acceptmon.inputs.files import Oversized, check_path, is_stream, kernel_dir
from acceptmon.inputs.follow import Follower, watch_loop
from acceptmon.inputs.journal import is_export
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.parser import Parser, ParseState, Tally
from acceptmon.parse.records import Record
from acceptmon.pipeline import rotated, statefile
from acceptmon.pipeline.lanes import Read, live_reader, parsed
from acceptmon.pipeline.start import current_run_start
from acceptmon.pipeline.streamed import Streamed, hand

FORGET_SECONDS = 30.0
"""A glob match missing this long is deleted for good: it is no longer followed."""
SAVE_SECONDS = 0.2
"""Positions are written after a tick that moved one, at most this often, and always on exit: a process
killed without saving (kill -9, OOM) re-reads on restart only what it read since, this long plus a tick."""
RESCAN_SECONDS = 1.0
"""How often globs are expanded again for new matches."""
BACKFILL_LIMIT = 64 << 20
"""At most this many bytes before the end are replayed at start (the launch line itself is always read)."""
CLAIMS_KEPT = 4096
"""At most this many claimed glob matches are remembered (past it, they are asked again)."""
LiveSink = Callable[[str, list[Record], Tally], object]
"""Receives (file, records, that file's cumulative tally) after every block."""
Note = Callable[[str], None]


class Watched:
    """One followed file: its parser, and the follower that feeds it."""

    def __init__(
        self,
        path: str,
        parser: Parser,
        sink: LiveSink,
        *,
        start: int | None,
        skipping: bool,
        claimed: Callable[[str, os.stat_result], bool] = lambda _path, _st: False,
        read: Read = parsed,
        on_waiting: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.path, self.parser, self.sink, self.read = path, parser, sink, read
        self.on_waiting = on_waiting
        self.follower = Follower(path, self.take, start=start, skipping=skipping, claimed=self._claimed)
        self._is_claimed = claimed
        self._last_claim: tuple[int, int, int, int] | None = None
        """(device, inode, size, mtime) of the file last found claimed: not fingerprinted again until it changes."""
        self.error: str | None = None
        """The read error last reported for this file."""
        self.waiting: bool | None = None
        """Whether the file was missing when ``on_waiting`` was last told (None before that)."""
        self._fingerprint: tuple[tuple[int, int, int], str | None] = ((-1, -1, -1), None)

    def fingerprint(self, dev: int, ino: int) -> str | None:
        """The state file's fingerprint of the open file, hashed again only after a rotation or truncation."""
        key = (dev, ino, self.follower.truncations)
        if self._fingerprint[0] != key or self._fingerprint[1] is None:
            self._fingerprint = key, statefile.fingerprint(self.path)
        return self._fingerprint[1]

    def _claimed(self, st: os.stat_result) -> bool:
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key == self._last_claim:
            return True
        self._last_claim = key if self._is_claimed(self.path, st) else None
        return self._last_claim is not None

    def take(self, block: bytes | Oversized) -> None:
        """A block of complete lines (or one skipped line) from the follower."""
        self.say_waiting()  # a file that just appeared is there before its lines are: no scrape sees them missing
        hand(self.path, self.parser, self.sink, block, self.read)

    def say_waiting(self) -> None:
        """Tell ``on_waiting`` whether the file is missing, once that changed since it was last told."""
        if self.follower.waiting != self.waiting:
            self.waiting = self.follower.waiting
            if self.on_waiting is not None:
                self.on_waiting(self.path, self.waiting)


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
        records: frozenset[str] | None = None,
        backfill_limit: int = BACKFILL_LIMIT,
        note: Note = lambda _msg: None,
        on_waiting: Callable[[str, bool], None] | None = None,
        on_forget: Callable[[str], None] | None = None,
        on_ended: Callable[[str], None] | None = None,
        stdin_fd: int = 0,
    ) -> None:
        """``on_ended(path)``: a stream's input ended (its last state stays). ``stdin_fd``: where standard
        input is read (:func:`acceptmon.inputs.stream.keys_from_terminal` moves it)."""
        self.patterns = list(patterns)
        self.grammars = grammars
        lock = threading.Lock()

        def locked(path: str, records: list[Record], tally: Tally) -> object:
            with lock:  # streams are read on threads of their own
                return sink(path, records, tally)

        self.sink: LiveSink = locked
        self.from_start = from_start
        self.state_file = state_file
        self.records = records
        self.read = live_reader(grammars, records)
        """How every file and stream is read: the fast lane's records, a few microseconds a stats line."""
        self.backfill_limit = backfill_limit
        self.note = note
        self.on_waiting = on_waiting
        self.on_forget = on_forget
        self.on_ended = on_ended
        self.stdin_fd = stdin_fd
        self.files: dict[str, Watched] = {}
        self.streams: dict[str, Streamed] = {}
        """Standard input and FIFOs (:mod:`acceptmon.pipeline.streamed`), read as they come."""
        self.history_end: dict[str, int] = {}
        """Per path started mid-file: where the current run starts (what came before is history)."""
        self._backfill: dict[str, tuple[int, int]] = {}
        self._saved = statefile.FollowState()
        self._saved_at: dict[str, tuple[int, int, int, bool] | None] = {}
        """The positions last written, to tell whether anything moved since."""
        self._lock: int | None = None
        """The state file's lock, held until :meth:`close`: one process per state file."""
        if state_file is not None:
            self._lock, self._saved = statefile.open_state(state_file, note)
        self._heads = rotated.Heads()
        """First lines of the files followed (and saved), to know their copies and compressed rotations."""
        for saved_path, saved in self._saved.files.items():
            if not _same_file(saved_path, saved):  # it moved while stopped: it may be under a rotated name now
                self._heads.add(saved_path, saved.fingerprint)
        self._tails: dict[str, tuple[BinaryIO, tuple[int, int], int, bool]] = {}
        """Per path resumed: its saved file, rotated away while stopped, open where reading stopped."""
        self._first_scan = True
        self._last_scan = 0.0
        self._last_save = time.monotonic()
        self._missing: dict[str, float] = {}
        self._real: dict[str, str] = {}
        """Real path -> the name it is followed under."""
        self._claims: dict[str, tuple[int, int, int, int]] = {}
        """Glob matches found claimed: (device, inode, size, mtime) then, not fingerprinted again while it holds."""

    # -- discovery and start positions -------------------------------------------------

    def discover(self) -> None:
        """Expand the patterns; start following paths not seen before, forget deleted glob matches."""
        first, self._first_scan = self._first_scan, False
        explicit: set[str] = set()
        for pattern in self.patterns:
            if pattern in self.streams or is_stream(pattern):  # (a FIFO removed while read stays a stream)
                self._add_stream(pattern)
                continue
            if glob.has_magic(pattern):
                paths = sorted(p for p in glob.glob(pattern) if os.path.isfile(p) and kernel_dir(p) is None)
                if first and not paths:
                    self.note(f"{pattern}: no file matches yet; waiting for one")
            else:
                check_path(pattern, may_be_missing=True)
                paths = [pattern]
                explicit.add(pattern)
            for path in paths:
                real = os.path.realpath(path)
                if path not in self.files and real not in self._real:  # one file named twice is read once
                    if path not in explicit and self._claimed_now(path):
                        continue  # a rotated name of a followed file: asked again at the next scan
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

    def _add_stream(self, path: str) -> None:
        if path in self.streams:
            return
        parser = Parser(self.grammars, path, ParseState(), records=self.records)
        self.streams[path] = Streamed(
            path, parser, self.sink, self.note, self.on_ended, stdin_fd=self.stdin_fd, read=self.read
        )
        if self.on_waiting is not None:
            self.on_waiting(path, False)

    def _claimed_now(self, path: str) -> bool:
        """Whether a new glob match is read through another path; a yes holds while the file is unchanged."""
        try:
            st = os.stat(path)
        except OSError:
            return False
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if self._claims.get(path) == key:
            return True
        self._claims.pop(path, None)
        if not self._claimed(path, st):
            return False
        if len(self._claims) >= CLAIMS_KEPT:
            self._claims.clear()
        self._claims[path] = key
        return True

    def _claimed(self, path: str, st: os.stat_result) -> bool:
        """Whether the file ``path`` names is read through another path (:mod:`acceptmon.pipeline.rotated`)."""
        open_inodes = {ino for p, w in self.files.items() if p != path for ino in w.follower.inodes()}
        return self._heads.claimed(path, (st.st_dev, st.st_ino), open_inodes)

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
        if preface:
            for r in preface:
                parser.tally.kinds[r.kind] += 1
            self.sink(path, preface, parser.tally)
        w = self.files[path] = Watched(
            path,
            parser,
            self.sink,
            start=start,
            skipping=skipping,
            claimed=self._claimed,
            read=self.read,
            on_waiting=self.on_waiting,
        )
        tail = self._tails.pop(path, None)
        if tail is not None:  # read before the path, as a file rotated away while following is
            file, ino, offset, tail_skipping = tail
            w.follower.read_rotated(file, ino, offset=offset, skipping=tail_skipping)
        if self.on_waiting is not None:  # sinks learn of every file at once (its share of the series cap)
            w.waiting = not os.path.exists(path)
            self.on_waiting(path, w.waiting)
        size = os.path.getsize(path) if os.path.isfile(path) else 0
        if start < size:
            self._backfill[path] = (start, size)
        if not os.path.exists(path):
            self.note(f"{path}: does not exist yet; waiting for it")

    def _start(self, path: str, existed_at_start: bool) -> tuple[int, bool, ParseState, list[Record]]:
        """Where to begin reading ``path``: (offset, skipping, parser state, records to pre-feed)."""
        resumed = self._resume(path)
        if resumed is not None:
            return resumed
        if self.from_start or not existed_at_start or is_export(path):  # an export file's entries: from its start
            return 0, False, ParseState(), []
        offset, state, preface, history_end = current_run_start(path, self.grammars, self.backfill_limit, self.note)
        if history_end:
            self.history_end[path] = history_end
        return offset, False, state, preface

    def _resume(self, path: str) -> tuple[int, bool, ParseState, list[Record]] | None:
        """The saved position of ``path`` if the state file has a valid one for it."""
        saved = self._saved.files.get(os.path.abspath(path))
        try:
            st = os.stat(path) if saved is not None else None
        except OSError:
            st = None
        if saved is None or st is None:
            return None
        fp = saved.fingerprint
        if (
            (st.st_dev, st.st_ino) != (saved.dev, saved.ino)
            or fp not in (None, statefile.fingerprint(path))
            or (saved.offset > st.st_size)
        ):
            found = rotated.find_rotated(path, saved)
            if found is None:
                self.note(f"{path}: replaced since the state file was written; reading it from the start")
                return 0, False, ParseState(), []
            name, file, ino = found
            self._tails[path] = file, ino, saved.offset, saved.skipping
            self.note(
                f"{path}: rotated while stopped; reading {name} from byte {saved.offset:,}, then {path} (state file)"
            )
            return 0, False, saved.parse_state, []
        if not saved.skipping and not statefile.at_line_start(path, saved.offset):
            del self._saved.files[os.path.abspath(path)]  # never written back
            self.note(f"{path}: saved position {saved.offset:,} is not at a line start (state file); read as new")
            return None
        self.note(f"{path}: resuming at byte {saved.offset:,} (state file)")
        return saved.offset, saved.skipping, saved.parse_state, []

    # -- the loop ---------------------------------------------------------------------

    def tick(self) -> None:
        """Find new files, read what is new in every file, save positions now and then."""
        now = time.monotonic()
        if now - self._last_scan >= RESCAN_SECONDS:
            self.discover()
        for w in list(self.files.values()):
            w.follower.poll_once()
            pos = w.follower.position()
            if pos is not None:  # its first line: a copy or compressed rotation of it is known later
                self._heads.add(w.path, w.fingerprint(pos[0], pos[1]))
            if w.follower.error != w.error:
                w.error = w.follower.error
                if w.error:
                    self.note(f"{w.path}: cannot read: {w.error}; retrying")
            w.say_waiting()
        if self.state_file is not None and now - self._last_save >= SAVE_SECONDS and self._moved():
            self.save_state()

    def _moved(self) -> bool:
        """Whether a position or the set of followed files changed since the last save."""
        return {p: w.follower.position() for p, w in self.files.items()} != self._saved_at

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
        """The folders to watch (each without its subfolders): every followed file's, and each glob's
        fixed head (where a new match may appear; deeper new folders are found by the rescan)."""
        out = {os.path.dirname(os.path.abspath(p)) for p in self.files}
        for pattern in self.patterns:
            if pattern in self.streams:
                continue
            head = os.path.abspath(pattern)
            while glob.has_magic(head):
                head = os.path.dirname(head)
            out.add(head if glob.has_magic(pattern) else os.path.dirname(head))
        return sorted(out)

    def run(self, stop: threading.Event, *, poll: bool = False, interval: float = 0.1) -> None:
        """Follow until ``stop`` is set; positions are saved on the way out."""
        self.discover()
        for s in self.streams.values():
            s.start(stop)
        try:
            watch_loop(self.tick, self.dirs, stop, poll=poll, interval=interval)
        finally:
            stop.set()
            for s in self.streams.values():
                s.join()
            if self.state_file is not None:
                self.save_state()

    def save_state(self) -> None:
        assert self.state_file is not None
        # Positions of files that are gone cannot be resumed: drop them, or the file grows forever.
        files = {path: pos for path, pos in self._saved.files.items() if os.path.exists(path)}
        self._saved_at = {}
        for w in self.files.values():
            pos = self._saved_at[w.path] = w.follower.position()
            if pos is None:
                continue
            dev, ino, offset, skipping = pos
            st = w.parser.state
            files[os.path.abspath(w.path)] = statefile.FilePosition(
                dev=dev,
                ino=ino,
                fingerprint=w.fingerprint(dev, ino),
                offset=offset,
                skipping=skipping,
                line=st.line,
                run=st.run,
                launch=st.launch,
                year=st.year,
                month=st.month,
                launch_open=st.launch_open,
                streams={k: statefile.StreamPosition.of(v) for k, v in st.streams.items()},
            )
        self._saved = statefile.FollowState(files=files)
        statefile.save(self.state_file, self._saved)
        self._last_save = time.monotonic()

    def close(self) -> None:
        """Close every file and release the state file's lock."""
        for w in self.files.values():
            w.follower.close()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _same_file(path: str, saved: statefile.FilePosition) -> bool:
    """Whether ``path`` still names the file of its saved position."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (saved.dev, saved.ino)
