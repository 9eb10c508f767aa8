"""The parser: text in, records out, no I/O.

:class:`Parser` consumes blocks of complete lines (``bytes`` ending in a newline)
from one file and returns the records they hold, keeping the only state a log
needs across lines: the line number, and each source's current server launch (run
index and config), which every decode record carries so it can report a normalized
acceptance rate. The same code serves one-shot conversion, the live follower and
the parallel reader; a parallel worker simply starts a parser in the state the
file had at its chunk (see :class:`ParseState`).

A line first loses what wraps it: a Docker json-file envelope, ANSI colour, carriage
returns, then a stream prefix (``kubectl logs --prefix``, stern, docker compose, a CRI
file's head: :mod:`acceptmon.parse.streams`). The prefix names the line's source, whose
run and launch the line's record takes; the rest is matched by the grammars.

Speed comes from a literal prefilter: only lines containing a grammar's
``anchor`` reach the regex. A line that contains an anchor but matches nothing is
``unrecognized`` when it *starts like* a stats line (format drift), else
``other``. Nothing here raises on bad input: undecodable bytes are replaced, and
a value that does not convert makes the line unrecognized.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import regex

from acceptmon.parse.grammar import Grammar, GrammarSet, bounded
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.meta_info import read_meta_info
from acceptmon.parse.pairs import (
    JOURNAL_HEAD,
    docker_json,
    journal_entry,
    literal,
    read_pairs,
    split_argv,
    split_top_level,
)
from acceptmon.parse.records import LaunchConfig, LineKind, Record, build
from acceptmon.parse.state import UNRECOGNIZED_KEPT, ParseState, StreamState, Tally, continued, launch_config
from acceptmon.parse.streams import NONE, Origin, path_origin, split
from acceptmon.parse.values import Fields, Yearless

ANSI = regex.compile(r"\x1b\[[0-9;]*[A-Za-z]")
__all__ = ["UNRECOGNIZED_KEPT", "ParseState", "Parser", "Tally"]


class _Stream:
    """One source's current run and launch group in a parser (:class:`StreamState`, mutable)."""

    __slots__ = ("closed", "fields", "launch", "launch_open", "lead", "lead_run", "run")

    def __init__(self, state: StreamState) -> None:
        self.run, self.launch, self.launch_open = state.run, state.launch, state.launch_open
        self.closed, self.lead, self.lead_run = state.closed, state.lead, state.lead_run
        self.fields: dict[str, str] | None = None
        """What its records say of where they came from (:data:`acceptmon.parse.streams.STREAM_FIELDS`)."""

    @property
    def state(self) -> StreamState:
        return StreamState(self.run, self.launch, self.launch_open, self.closed, self.lead, self.lead_run)


class Parser:
    """Parses the lines of one file, in order."""

    def __init__(
        self,
        grammars: GrammarSet,
        file: str = "",
        state: ParseState | None = None,
        *,
        records: frozenset[str] | None = None,
        origin: Origin | None = None,
    ) -> None:
        """Start a parser at ``state``; ``records`` are the kinds built (default all; others are only counted).

        ``origin``: the namespace, pod and container every line of the file comes from (default: what
        the file's name says, a Kubernetes log file's path: :func:`acceptmon.parse.streams.path_origin`).
        """
        self.grammars = grammars
        runs = {k.name for k in KINDS.values() if k.starts_run}  # launches carry run state: always built
        self.wanted = (frozenset(KINDS) if records is None else records) | runs
        self.file = file
        self.origin = path_origin(file) if origin is None else origin
        state = state or ParseState()
        self.line, self.year, self.month = state.line, state.year, state.month
        self._plain = _Stream(state.plain)
        self._plain.fields = self.origin.values()
        self.streams: dict[str, _Stream] = {"": self._plain, **{k: _Stream(s) for k, s in state.streams.items()}}
        """Each source's run state, by its ``source`` ('' for the file's plain lines, first)."""
        self.last_run = state.last_run
        """The highest run number given in the file so far (runs are numbered per file)."""
        self._current = self._plain
        """The run state of the source of the line classified last."""
        self._source = ""
        """That source's name (its stream prefix's; empty for a plain line)."""
        self._entry_time: int | None = None
        """The journald entry time (``__REALTIME_TIMESTAMP``, µs) of the line unwrapped last, if it was one."""
        self.guess: tuple[int, int] | None = None
        """(month, year) of the first year-less timestamp if its year was guessed (no year to go on)."""
        self.stats_kinds = frozenset(k.name for k in KINDS.values() if k.ends_launch_group)
        self.tally = Tally()
        self._data_kinds = {k.name for k in KINDS.values() if k.series is not None}
        """Kinds whose own lines say 'accept' (not grep bait)."""
        self._all_anchors = [(a, a.encode(), [g for g in grammars.records if g.anchor == a]) for a in grammars.anchors]
        self._anchors = self._all_anchors
        self.stats_words = [b for _, b, gs in self._all_anchors if any(g.spec.record in self.stats_kinds for g in gs)]
        """Anchors of stats lines (which end a launch group), for the parallel pre-scan (:mod:`.prescan`)."""
        self._launch_anchors = [
            (a, b, [g for g in gs if g.spec.record in runs])
            for a, b, gs in self._all_anchors
            if any(g.spec.record in runs for g in gs)
        ]
        self.launch_words = [b for _, b, _ in self._launch_anchors]
        self._plans: dict[Grammar, _Plan] = {}
        self._last_dated: tuple[Yearless | None, int, datetime] = (None, 0, datetime.min)

    @property
    def state(self) -> ParseState:
        p = self._plain
        streams = {k: s.state for k, s in self.streams.items() if k}
        return ParseState(
            self.line, p.run, p.launch, self.year, self.month, p.launch_open, p.closed, p.lead, p.lead_run, streams
        )

    # The plain source's run state, as the fast lane (whose rows are plain lines) and callers read it.
    @property
    def run(self) -> int:
        return self._plain.run

    @property
    def launch(self) -> LaunchConfig | None:
        return self._plain.launch

    @property
    def launch_open(self) -> str | None:
        return self._plain.launch_open

    @launch_open.setter
    def launch_open(self, value: str | None) -> None:
        self._plain.launch_open = value

    @property
    def closed(self) -> bool:
        return self._plain.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self._plain.closed = value

    @property
    def lead(self) -> str | None:
        return self._plain.lead

    @property
    def streamed(self) -> bool:
        """Whether a line of another source than the file's plain lines was classified (or the state had one)."""
        return len(self.streams) > 1

    def end_group(self) -> None:
        """The line classified last is a stats line: its source's launch group ends."""
        self._current.launch_open, self._current.closed = None, True

    def source_of(self, text: str) -> str:
        """The ``source`` of a line (without its newline): '' for the file's plain lines."""
        return self._unwrap(text)[0].source

    def feed(self, block: bytes) -> list[Record]:
        """Parse a block of complete lines; return its records in order."""
        total = block.count(b"\n")
        if block and not block.endswith(b"\n"):
            total += 1
        starts = self._candidates(block)
        records: list[Record] = []
        base, prev = self.line, 0
        accept_seen = 0
        decoded: set[int] = set()
        count, find, classify = block.count, block.find, self.classify
        kinds, stats_kinds, data_kinds = self.tally.kinds, self.stats_kinds, self._data_kinds
        for start in sorted(starts):
            base += count(b"\n", prev, start)
            prev = start
            end = find(b"\n", start)
            raw = block[start:] if end < 0 else block[start:end]
            self.line = base + 1
            kind, record = classify(raw.decode("utf-8", "replace"), starts[start])
            kinds[kind] += 1
            if kind in stats_kinds:
                self.end_group()
            if kind in data_kinds:
                accept_seen += raw.count(b"accept")
                decoded.add(start)
            if record is not None:
                records.append(record)
        self.line = base + block.count(b"\n", prev) + (0 if not block or block.endswith(b"\n") else 1)
        self.tally.kinds["other"] += total - len(starts)
        if block.count(b"accept") != accept_seen:
            self._count_accept_noise(block, decoded)
        return records

    def account(self, kinds: dict[str, int], lines: int, noise: int) -> None:
        """Tally lines another reader said (the fast lane): ``kinds`` counts its lines by kind, ``lines`` how far
        the line number goes on (lines not in ``kinds`` are ``other``), ``noise`` the lines saying 'accept' that
        are grep bait. They are plain lines: a stats line among them ends the plain source's launch group, as in
        :meth:`feed`."""
        tally = self.tally.kinds
        for kind, n in kinds.items():
            tally[kind] += n
        tally["other"] += lines - sum(kinds.values())
        if any(n and kind in self.stats_kinds for kind, n in kinds.items()):
            self._plain.launch_open, self._plain.closed = None, True
        self.tally.accept_noise += noise
        self.line += lines

    def skip_oversized(self) -> None:
        """Account for one line that the reader skipped for its length."""
        self.line += 1
        self.tally.kinds["oversized"] += 1

    def parse_line(self, text: str) -> Record | None:
        """Parse one line (without its newline); a convenience over :meth:`feed`."""
        records = self.feed(text.encode("utf-8", "surrogateescape") + b"\n")
        return records[0] if records else None

    def classify(self, text: str, anchors: list[int] | None = None) -> tuple[LineKind, Record | None]:
        """Match one line against the grammars whose anchor it contains.

        ``anchors``: indexes (into the anchor list) of the anchors found in the raw line; only those
        can be in the text, so the others are not looked for. The line's source becomes the current one.
        """
        origin, text = self._unwrap(text)
        self._current = self._plain if not origin.source else self._stream(origin)
        self._source = origin.source
        table = self._anchors
        if anchors is not None and len(anchors) == 1:  # the usual line: one anchor, its grammars as they are
            anchor, _, grammars = table[anchors[0]]
            candidates = grammars if anchor in text else []
        else:
            pairs = table if anchors is None else [table[i] for i in anchors]
            candidates = [g for a, _, gs in pairs if a in text for g in gs]
        try:
            return self._match(candidates, text)
        except TimeoutError:  # a pattern that backtracks without end on this line
            self._keep_unrecognized(text)
            return "unrecognized", None

    def _unwrap(self, text: str) -> tuple[Origin, str]:
        """A line's stream prefix (:data:`~acceptmon.parse.streams.NONE` if none) and its message with
        its envelope, without what wraps them.

        A journald entry line (``journalctl -o json``, or ``-o export`` made one line by
        :mod:`acceptmon.inputs.journal`) is its ``MESSAGE``, with its ``_SYSTEMD_UNIT`` as the source
        when the message names none; its ``__REALTIME_TIMESTAMP`` dates a record that has no time of
        its own (:meth:`_build`)."""
        self._entry_time, unit = None, ""
        if text.startswith('{"log":'):
            text = docker_json(text)
        elif text.startswith(JOURNAL_HEAD):
            entry = journal_entry(text)
            if entry is not None:
                text, unit, self._entry_time = entry
        if "\x1b" in text:
            text = ANSI.sub("", text)
        if "\r" in text:
            # CRLF, or a progress bar (tqdm) that redrew itself with carriage returns before
            # another process's line: what a terminal shows is the text after the last one.
            text = text.rstrip("\r").rpartition("\r")[2]
        first = text[:1]
        if first == "[" and text[1:2] != "p":  # the usual SGLang line: no stream prefix
            return (Origin(source=unit) if unit else NONE), text
        origin, text = split(text)
        return (Origin(source=unit) if unit and not origin else origin), text

    def _stream(self, origin: Origin) -> _Stream:
        """The run state of a prefix's source (new: no run yet)."""
        stream = self.streams.get(origin.source)
        if stream is None:
            stream = self.streams[origin.source] = _Stream(StreamState())
        if stream.fields is None:
            stream.fields = {**self.origin.values(), **origin.values()}
        return stream

    def _match(self, candidates: list[Grammar], text: str) -> tuple[LineKind, Record | None]:
        """Classify by the candidate grammars; every match is bounded (:func:`acceptmon.parse.grammar.bounded`)."""
        for g in candidates:
            m = bounded(g.regex.match, text) if g.regex else None
            if m is None:
                continue
            if g.spec.record not in self.wanted:
                return g.spec.record, None  # type: ignore[return-value]
            try:
                record = self._build(g, m)
            except (ValueError, SyntaxError):
                break
            return record.kind, record
        for g in candidates:
            if g.starts_like is not None and bounded(g.starts_like.match, text):
                self._keep_unrecognized(text)
                return "unrecognized", None
        return "other", None

    def _candidates(self, block: bytes) -> dict[int, list[int]]:
        """Start of every line holding an anchor -> the indexes of the anchors it holds, in anchor order."""
        starts: dict[int, list[int]] = {}
        find, rfind = block.find, block.rfind
        for i, (_, anchor, _) in enumerate(self._anchors):
            pos = find(anchor)
            while pos >= 0:
                start = rfind(b"\n", 0, pos) + 1
                found = starts.setdefault(start, [])
                if not found or found[-1] != i:
                    found.append(i)
                end = find(b"\n", pos)
                if end < 0:
                    break
                pos = find(anchor, end)
        return starts

    def _count_accept_noise(self, block: bytes, decoded: set[int]) -> None:
        pos = block.find(b"accept")
        noise = 0
        while pos >= 0:
            start = block.rfind(b"\n", 0, pos) + 1
            end = block.find(b"\n", pos)
            if start not in decoded:
                noise += 1
            if end < 0:
                break
            pos = block.find(b"accept", end)
        self.tally.accept_noise += noise

    def _keep_unrecognized(self, text: str) -> None:
        self.tally.unrecognized_runs[self.file, self._source, self._current.run] += 1
        if len(self.tally.unrecognized) < UNRECOGNIZED_KEPT:
            self.tally.unrecognized.append((self.file, self.line, text[:500]))

    def _build(self, g: Grammar, m: regex.Match[str]) -> Record:
        plan = self._plans.get(g) or self._plan(g)
        values: dict[str, Any] = {"file": self.file, "line": self.line, **plan.base}
        stream = self._current
        if stream.fields:
            values.update(stream.fields)
        raws = m.groups()  # one call: m.group(name) costs as much as all of them
        for i, conv in plan.envelope:  # envelope groups: an empty or None value is left out
            raw = raws[i]
            if raw:
                value = conv(raw)
                if value is not None:
                    values[conv.field] = value
        for i, conv in plan.fields:
            raw = raws[i]
            if raw is not None:
                values[conv.field] = conv(raw)
        if isinstance(values.get("timestamp"), Yearless):
            values["timestamp"] = self._dated(values["timestamp"])
        elif values.get("timestamp") is None and self._entry_time is not None:  # a journald entry's time, UTC
            values["timestamp"] = datetime.fromtimestamp(self._entry_time / 1e6, UTC).replace(tzinfo=None)
        body = raws[plan.body_group] if plan.body else None
        kind = plan.kind
        if kind.starts_run:
            return self._launch(g, body or "", values)
        extra: dict[str, str] = {}
        if plan.body == "meta_info":
            read_meta_info(body or "", g.keys, values, extra)
        elif body:
            read_pairs(body, g.key_table, values, extra)
        values["extra"] = extra
        values["run"] = stream.run
        if kind.derive is not None:
            kind.derive(values, stream.launch)
        return build(kind.model, values)

    def _plan(self, g: Grammar) -> _Plan:
        plan = self._plans[g] = _Plan(g, dict(g.regex.groupindex) if g.regex else {})
        return plan

    def _launch(self, g: Grammar, body: str, values: dict[str, Any]) -> Record:
        if g.spec.body == "argv":
            raw = split_argv(body)
        else:
            raw = split_top_level(body, "=" if g.spec.body == "kwargs" else ":")
        config: dict[str, Any] = {k: values.pop(k) for k in list(values) if k in _CONFIG_FIELDS}
        extra: dict[str, Any] = {}
        for key, text in raw.items():
            value = literal(text)
            conv = g.keys.get(key)
            if conv is None:
                extra[key] = value
            elif value is not None:
                converted = conv(str(value))
                if isinstance(converted, Fields):
                    config.update(converted)  # one logged value, several config fields
                else:
                    config[conv.field] = converted
        stream = self._current
        previous = stream.launch
        first = stream.lead is None
        if first:
            stream.lead = g.spec.server if g.spec.merge and not stream.closed else ""
        if g.spec.merge and previous is not None and stream.launch_open == g.spec.server:
            stream.launch = continued(previous, config, extra, g.spec.server)
        else:
            self.last_run += 1
            stream.run = self.last_run
            stream.launch = launch_config(config, extra, g.spec.server)
        if first:
            stream.lead_run = stream.run
        stream.launch_open = g.spec.server
        values.update(run=stream.run, config=stream.launch)
        return build(KINDS[g.spec.record or ""].model, values)

    def _dated(self, stamp: Yearless) -> datetime:
        """A year-less timestamp in the file's current year; MM-DD going back (12-31 -> 01-01) is New Year."""
        if self.year is None:
            self.year = self.grammars.year_for(self.file, stamp)
            self.guess = (stamp.month, self.year)
        elif self.month is not None and stamp.month < self.month - 6:
            self.year += 1
        elif self.month is not None and stamp.month > self.month + 6:
            return stamp.at(self.year - 1)  # a late line from before New Year
        self.month = stamp.month
        last = self._last_dated  # the lines of one log interval share their time (and its Yearless)
        if last[0] is not stamp or last[1] != self.year:
            last = self._last_dated = (stamp, self.year, stamp.at(self.year))
        return last[2]


_CONFIG_FIELDS = frozenset(LaunchConfig.model_fields) - {"extra"}


class _Plan:
    """What :meth:`Parser._build` needs of a grammar, looked up once per grammar rather than per line."""

    __slots__ = ("base", "body", "body_group", "envelope", "fields", "kind")

    def __init__(self, g: Grammar, groups: dict[str, int]) -> None:
        """``groups``: the compiled pattern's group numbers by name (one number for a name used twice)."""
        self.base: dict[str, Any] = {"server": g.spec.server, **g.spec.defaults}
        self.body = "" if g.spec.body == "none" else g.spec.body
        self.body_group = groups.get("body", 0) - 1
        """Indexes into ``Match.groups()`` (the group number - 1) of the body, envelope fields and fields."""
        self.envelope = [(groups[name] - 1, conv) for name, conv in g.envelope_fields.items()]
        self.fields = [(groups[name] - 1, conv) for name, conv in g.fields.items()]
        self.kind = KINDS[g.spec.record or ""]
