"""The fast lane's careful path: a segment whose anchor or 'accept' counts the fast matches do not explain.

Every line of the segment that holds an anchor is found. A fast match (one the compiled matcher
gave, :meth:`acceptmon.parse.fast.lane.FastLane._entries`) is kept only if its line holds no other
grammar's anchor; every other anchor line goes to the general parser, in file order and at its own
line number, so drift, unrecognized lines and their tallies are the parser's own. Lines saying
'accept' that are neither kept decode rows nor given to the parser are counted as noise, as
:meth:`acceptmon.parse.parser.Parser.feed` counts them; the kept lines' tallies are the parser's
:meth:`~acceptmon.parse.parser.Parser.account`. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from acceptmon.parse.fast.model import ACCEPT, Template
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import Record
from acceptmon.parse.state import line_starts
from acceptmon.parse.unmade import Unmade

Part = tuple[int, bytes] | list[Record] | list[Unmade]
Entry = tuple[int, int, Any]
"""A fast match: (the newline before its line in the block, template index, row bytes or b''; a typed lane's
row is a (plan, values) pair, :mod:`acceptmon.parse.fast.typed`)."""


class Lane(Protocol):
    templates: list[Template]
    counted: list[bytes]
    exempt: list[bool]

    def part(self, parser: Parser, nrows: int, rows: Any) -> Any: ...


def _joined(rows: list[Any]) -> Any:
    """A part's rows as the lane's scan gives them: bytes joined, a typed lane's pairs in a list."""
    return b"".join(rows) if isinstance(rows[0], bytes) else rows


def careful_segment(
    parser: Parser,
    buf: bytes,
    segment: tuple[int, int, int, int],
    entries: list[Entry],
    lane: Lane,
    out: tuple[list[Part], Callable[[list[Record]], Part]],
) -> None:
    """Rows and tallies of one segment (start, end, lines, lines saying 'accept') from its fast ``entries`` and
    the general parser; the parser's line is the segment's first line's."""
    s, e, lines, accepts = segment
    parts, chunk = out
    templates = lane.templates
    holding = {a: {x - 1 for x in line_starts(buf, a, s + 1, e + 1)} for a in lane.counted}  # their newlines
    kept: dict[int, Entry] = {}
    for entry in entries:
        own = (templates[entry[1]].grammar.anchor or "").encode()
        if not any(entry[0] in starts for a, starts in holding.items() if a != own):
            kept[entry[0]] = entry
    leftover = set().union(*holding.values()) - set(kept)
    rows: list[Any] = []
    kinds: Counter[str] = Counter()
    end_line = parser.line + lines
    exempt, position, line = 0, s + 1, parser.line
    for start in sorted(set(kept) | leftover):
        line += buf.count(b"\n", position, start + 1)
        position = start + 1
        end = buf.find(b"\n", start + 1) + 1
        fast = kept.get(start)
        if fast is not None:
            kinds[templates[fast[1]].kind] += 1
            exempt += lane.exempt[fast[1]] and ACCEPT in buf[start + 1 : end]
            if fast[2]:
                rows.append(fast[2])
            continue
        if rows:
            parts.append(lane.part(parser, len(rows), _joined(rows)))
            rows = []
        exempt += ACCEPT in buf[start + 1 : end]  # the parser counts this line's noise itself
        parser.account(kinds, line - parser.line, 0)  # the lines before this one (a stats line ends a group)
        kinds = Counter()
        records = parser.feed(buf[start + 1 : end])
        if records:
            parts.append(chunk(records))
    if rows:
        parts.append(lane.part(parser, len(rows), _joined(rows)))
    parser.account(kinds, end_line - parser.line, accepts - exempt)
