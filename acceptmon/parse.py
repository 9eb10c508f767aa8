"""The parser: text in, records out, no I/O.

:class:`Parser` consumes blocks of complete lines (``bytes`` ending in a newline)
from one file and returns the records they hold, keeping the only state a log
needs across lines: the line number, and the current server launch (run index
and config), which every decode record carries so it can report a normalized
acceptance rate. The same code serves one-shot conversion, the live follower and
the parallel reader; a parallel worker simply starts a parser in the state the
file had at its chunk (see :class:`ParseState`).

Speed comes from a literal prefilter: only lines containing a grammar's
``anchor`` reach the regex. A line that contains an anchor but matches nothing is
``unrecognized`` when it *starts like* a stats line (format drift), else
``other``. Nothing here raises on bad input: undecodable bytes are replaced, and
a value that does not convert makes the line unrecognized.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import regex

from acceptmon.grammar import Converter, Grammar, GrammarSet, _to_timestamp
from acceptmon.records import DecodeStats, LaunchConfig, LineKind, PrefillStats, Record, ServerLaunch, build
from acceptmon.redos import MATCH_TIMEOUT

ANSI = regex.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_KEYLIKE = regex.compile(r"[#A-Za-z][\w .()/+%#'-]*")
UNRECOGNIZED_KEPT = 20
"""How many unrecognized lines a parser keeps verbatim for the report."""


@dataclass(frozen=True)
class ParseState:
    """Where a file stands: lines consumed so far and the current launch."""

    line: int = 0
    run: int = 0
    launch: LaunchConfig | None = None


@dataclass
class Tally:
    """Counts of lines by kind, plus grep-bait: non-decode lines containing 'accept'."""

    kinds: Counter[str] = field(default_factory=Counter)
    accept_noise: int = 0
    unrecognized: list[tuple[str, int, str]] = field(default_factory=list)
    """The first few unrecognized lines: (file, line number, text)."""

    @property
    def lines(self) -> int:
        return sum(self.kinds.values())

    def merge(self, other: Tally) -> None:
        self.kinds.update(other.kinds)
        self.accept_noise += other.accept_noise
        room = UNRECOGNIZED_KEPT - len(self.unrecognized)
        self.unrecognized.extend(other.unrecognized[: max(room, 0)])


class Parser:
    """Parses the lines of one file, in order."""

    def __init__(
        self,
        grammars: GrammarSet,
        file: str = "",
        state: ParseState | None = None,
        *,
        records: frozenset[str] = frozenset({"decode", "prefill", "launch"}),
    ) -> None:
        """Start a parser at ``state``; ``records`` are the kinds built (others are only counted)."""
        self.grammars = grammars
        self.wanted = records | {"launch"}  # launches carry run state: always built
        self.file = file
        state = state or ParseState()
        self.line = state.line
        self.run = state.run
        self.launch = state.launch
        self.tally = Tally()
        self._all_anchors = [(a, a.encode(), [g for g in grammars.records if g.anchor == a]) for a in grammars.anchors]
        self._anchors = self._all_anchors
        self._launch_anchors = [
            (a, b, [g for g in gs if g.spec.record == "launch"])
            for a, b, gs in self._all_anchors
            if any(g.spec.record == "launch" for g in gs)
        ]

    @property
    def state(self) -> ParseState:
        return ParseState(self.line, self.run, self.launch)

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
        for start in sorted(starts):
            base += block.count(b"\n", prev, start)
            prev = start
            end = block.find(b"\n", start)
            raw = block[start:] if end < 0 else block[start:end]
            self.line = base + 1
            text = raw.decode("utf-8", "replace")
            kind, record = self.classify(text)
            self.tally.kinds[kind] += 1
            if kind == "decode":
                accept_seen += raw.count(b"accept")
                decoded.add(start)
            if record is not None:
                records.append(record)
        self.line = base + block.count(b"\n", prev) + (0 if not block or block.endswith(b"\n") else 1)
        self.tally.kinds["other"] += total - len(starts)
        if block.count(b"accept") != accept_seen:
            self._count_accept_noise(block, decoded)
        return records

    def scan_launches(self, block: bytes) -> None:
        """Advance over a block, parsing only launch lines (the parallel pre-scan)."""
        if not any(a in block for _, a, _ in self._launch_anchors):
            self.line += block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            return
        anchors, self._anchors = self._anchors, self._launch_anchors
        try:
            self.feed(block)
        finally:
            self._anchors = anchors

    def skip_oversized(self) -> None:
        """Account for one line that the reader skipped for its length."""
        self.line += 1
        self.tally.kinds["oversized"] += 1

    def parse_line(self, text: str) -> Record | None:
        """Parse one line (without its newline); a convenience over :meth:`feed`."""
        records = self.feed(text.encode("utf-8", "surrogateescape") + b"\n")
        return records[0] if records else None

    def classify(self, text: str) -> tuple[LineKind, Record | None]:
        """Match one line against the grammars whose anchor it contains."""
        if text.startswith('{"log":'):
            text = _docker_json(text)
        if "\x1b" in text:
            text = ANSI.sub("", text)
        if "\r" in text:
            # CRLF, or a progress bar (tqdm) that redrew itself with carriage returns before
            # another process's line: what a terminal shows is the text after the last one.
            text = text.rstrip("\r").rpartition("\r")[2]
        candidates = [g for a, _, gs in self._anchors if a in text for g in gs]
        try:
            return self._match(candidates, text)
        except TimeoutError:  # a pattern that backtracks without end on this line
            self._keep_unrecognized(text)
            return "unrecognized", None

    def _match(self, candidates: list[Grammar], text: str) -> tuple[LineKind, Record | None]:
        """Classify by the candidate grammars; every match is bounded by MATCH_TIMEOUT."""
        for g in candidates:
            m = g.regex.match(text, timeout=MATCH_TIMEOUT) if g.regex else None
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
            if g.starts_like is not None and g.starts_like.match(text, timeout=MATCH_TIMEOUT):
                self._keep_unrecognized(text)
                return "unrecognized", None
        return "other", None

    def _candidates(self, block: bytes) -> set[int]:
        starts: set[int] = set()
        find, rfind = block.find, block.rfind
        for _, anchor, _ in self._anchors:
            pos = find(anchor)
            while pos >= 0:
                start = rfind(b"\n", 0, pos) + 1
                starts.add(start)
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
        if len(self.tally.unrecognized) < UNRECOGNIZED_KEPT:
            self.tally.unrecognized.append((self.file, self.line, text[:500]))

    def _build(self, g: Grammar, m: regex.Match[str]) -> Record:
        values: dict[str, Any] = {"file": self.file, "line": self.line, "server": g.spec.server}
        ts, rank = m.group("timestamp", "rank")
        if ts is not None:
            values["timestamp"] = _to_timestamp(ts)
        if rank:
            values["rank"] = " ".join(rank.split())
        for name, conv in g.fields.items():
            raw = m.group(name)
            if raw is not None:
                values[conv.field] = conv(raw)
        body = m.group("body") if g.spec.body != "none" else None
        record_type = g.spec.record
        if record_type == "launch":
            return self._launch(g, body or "", values)
        extra: dict[str, str] = {}
        if body:
            _read_pairs(body, g.key_table, g.keys, values, extra)
        values["extra"] = extra
        values["run"] = self.run
        if record_type == "prefill":
            return build(PrefillStats, values)
        launch = self.launch
        if launch is not None:
            values["spec_algorithm"] = launch.spec_algorithm
            values["spec_num_steps"] = launch.spec_num_steps
            values["spec_num_draft_tokens"] = launch.spec_num_draft_tokens
            accept_len = values.get("accept_len")
            tokens = launch.draft_tokens
            if accept_len is not None and tokens is not None and tokens > 1:
                values["draft_accept_rate"] = round((accept_len - 1) / (tokens - 1), 4)
        return build(DecodeStats, values)

    def _launch(self, g: Grammar, body: str, values: dict[str, Any]) -> ServerLaunch:
        raw = _split_top_level(body, "=" if g.spec.body == "kwargs" else ":")
        config: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, text in raw.items():
            value = _literal(text)
            conv = g.keys.get(key)
            if conv is None:
                extra[key] = value
            elif value is not None:
                config[conv.field] = conv(str(value))
        launch = LaunchConfig.model_validate({**config, "extra": extra})
        self.run += 1
        self.launch = launch
        values.update(run=self.run, config=launch)
        return build(ServerLaunch, values)


def _docker_json(text: str) -> str:
    """The message of a Docker json-file log line (``{"log":"...\\n","stream":...}``), else the line."""
    try:
        entry = json.loads(text)
    except ValueError:
        return text
    log = entry.get("log") if isinstance(entry, dict) else None
    return log.rstrip("\n") if isinstance(log, str) else text


def _read_pairs(
    body: str,
    table: dict[str, tuple[str, Callable[[str], Any], bool, Converter]],
    keys: dict[str, Converter],
    values: dict[str, Any],
    extra: dict[str, str],
) -> None:
    """Read ``key: value, key: value`` at known keys, in any order.

    Fast path: every piece is one pair. A piece without ``: `` means a value itself
    holds ', ' (``est uncap acc len: 3.3 [3.1, 3.5]``, ``#token: full=1, swa=2``);
    then the careful reader reads the body instead.
    """
    pieces = body.rstrip(", \t").split(", ")
    found: dict[str, Any] = {}
    get = table.get
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if not sep:
            _read_pairs_careful(pieces, keys, values, extra)
            return
        entry = get(key)
        if entry is None:
            extra[key] = value
            continue
        field_name, convert, fallback, conv = entry
        if fallback and field_name in found:
            continue
        try:
            found[field_name] = convert(value)
        except ValueError:
            found[field_name] = conv(value)
    values.update(found)


def _read_pairs_careful(
    pieces: list[str], keys: dict[str, Converter], values: dict[str, Any], extra: dict[str, str]
) -> None:
    """A piece starts a new pair only if its key is known or looks like a key."""
    pairs: list[list[str]] = []
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if sep and (key in keys or _KEYLIKE.fullmatch(key)):
            pairs.append([key, value])
        elif pairs:
            pairs[-1][1] += ", " + piece
    for key, value in pairs:
        conv = keys.get(key)
        if conv is None:
            extra[key] = value
        elif not (conv.fallback and conv.field in values):
            values[conv.field] = conv(value)


def _split_top_level(body: str, sep: str) -> dict[str, str]:
    """Split a repr of kwargs (``a=1, b='x, y'``) or a dict (``'a': 1``) into raw values."""
    out: dict[str, str] = {}
    depth, quote, start = 0, "", 0
    items: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    items.append(body[start:])
    for item in items:
        key, found, value = item.partition(sep)
        key = key.strip().strip("'\"")
        if found and key.isidentifier():
            out[key] = value.strip()
    return out


def _literal(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return text
