"""The live doctor: judges the facts the live state makes, apart from the state's lock.

A judgement looks at whole runs, so its cost grows with what was read; whatever it costs, a scrape,
a screen refresh and the reading of new lines must not wait for it. :class:`LiveDoctor` keeps the
facts it was fed in a queue (feeding is an append) and publishes the findings and changes of its
last judgement; readers read those. Once :meth:`LiveDoctor.start` runs it in its own thread, only
that thread judges; before that (a library caller, a test with its own clock) a reader judges in
its own thread, as one step of :meth:`LiveDoctor.judge`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from acceptmon.measure.normalize import Fact
from acceptmon.parse.records import Record

__all__ = ["DOCTOR_SECONDS", "FindingSource", "LiveDoctor"]

DOCTOR_SECONDS = 1.0
"""How often the doctor's findings are judged again while records arrive (clock seconds)."""


class FindingSource(Protocol):
    """What the live state needs of the doctor (``acceptmon.diagnose.engine.Doctor``): fed facts, it judges."""

    warmup: int
    """Batches at each run's start that its rules leave out (the live normalizer marks them)."""

    def take(self, facts: Iterable[Fact]) -> None: ...

    def update(self, records: Iterable[Record]) -> list[Any]: ...

    def labels(self) -> set[tuple[str, str, str]]: ...


class LiveDoctor:
    """A :class:`FindingSource` judged at most every :data:`DOCTOR_SECONDS`, never under a reader's lock."""

    def __init__(self, doctor: FindingSource, clock: Callable[[], float]) -> None:
        self.doctor = doctor
        self.clock = clock
        self._lock = threading.Lock()
        """Guards the queue and what the last judgement published; held for appends and copies only."""
        self._judging = threading.Lock()
        """One judgement at a time (the doctor's own state is not shared)."""
        self._pending: list[list[Fact]] = []
        self._findings: frozenset[tuple[str, str, str]] = frozenset()
        self._changes: list[Any] = []
        self._judged = -math.inf
        self._unjudged = False
        self._thread: threading.Thread | None = None

    def feed(self, facts: list[Fact]) -> None:
        """Queue facts for the next judgement (constant time: the judging happens elsewhere). The doctor's
        thread takes them at its next tick: waking it for every batch of lines cost a followed log more
        CPU than parsing them (a thread switch per read, 30 files at 1,000 lines/s)."""
        if not facts:
            return
        with self._lock:
            self._pending.append(facts)

    def judge(self) -> None:
        """One step: hand the queued facts to the doctor, and judge again if the interval has passed."""
        with self._judging:
            with self._lock:
                pending, self._pending = self._pending, []
            for facts in pending:
                self.doctor.take(facts)
                self._unjudged = True
            now = self.clock()
            if self._unjudged and now - self._judged >= DOCTOR_SECONDS:
                self._judged, self._unjudged = now, False
                changes = self.doctor.update([])
                findings = frozenset(self.doctor.labels())
                with self._lock:
                    self._changes += changes
                    self._findings = findings

    def findings(self) -> frozenset[tuple[str, str, str]]:
        """(file, rule, severity) of every finding holding at the last judgement."""
        self._judge_here()
        with self._lock:
            return self._findings

    def take_changes(self) -> list[Any]:
        """Findings that started or cleared since the last call (``Change`` objects), oldest first."""
        self._judge_here()
        with self._lock:
            changes, self._changes = self._changes, []
            return changes

    def start(self, stop: threading.Event) -> None:
        """Judge in a daemon thread from now on, until ``stop`` is set; readers no longer judge."""
        if self._thread is not None:
            return

        def run() -> None:
            while not stop.wait(DOCTOR_SECONDS):
                self.judge()

        self._thread = threading.Thread(target=run, name="acceptmon-doctor", daemon=True)
        self._thread.start()

    def _judge_here(self) -> None:
        if self._thread is None:
            self.judge()
