"""The fast lane's careful path: a segment whose anchor or 'accept' counts the fast matches do not explain.

Every line of the segment that holds an anchor is found. A fast match is kept only if its
line holds no other grammar's anchor; every other anchor line goes to the general parser,
in file order and at its own line number, so drift, unrecognized lines and their tallies
are the parser's own. Lines saying 'accept' that are neither kept decode rows nor given to
the parser are counted as noise, as :meth:`acceptmon.parse.parser.Parser.feed` counts them.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from acceptmon.parse.fast.templates import ACCEPT, Template
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import Record
from acceptmon.parse.state import line_starts

Part = tuple[int, bytes]
Entry = tuple[int, int, bytes]
"""A fast match: (line start in the block, template index, row bytes or b'')."""


def accept_lines(buf: bytes, s: int, e: int) -> int:
    """How many lines in ``[s, e)`` say 'accept' (one C-level pass)."""
    return len(_ACCEPT_LINE.findall(buf, s + 1, e + 1))


_ACCEPT_LINE = re.compile(ACCEPT + rb"[^\n]*()")  # an empty group: findall lists b"", allocates nothing


class Lane(Protocol):
    templates: list[Template]
    counted: list[bytes]
    exempt: list[bool]


def careful_segment(
    parser: Parser,
    buf: bytes,
    segment: tuple[int, int, int, int],
    entries: list[Entry],
    lane: Lane,
    out: tuple[list[Part], Callable[[list[Record]], Part]],
) -> None:
    """Rows and tallies of one segment from its fast ``entries`` and the general parser."""
    s, e, base, lines = segment
    parts, chunk = out
    templates = lane.templates
    holding = {a: {x - 1 for x in line_starts(buf, a, s + 1, e + 1)} for a in lane.counted}  # their newlines
    kept: dict[int, Entry] = {}
    for entry in entries:
        own = (templates[entry[1]].grammar.anchor or "").encode()
        if not any(entry[0] in starts for a, starts in holding.items() if a != own):
            kept[entry[0]] = entry
    leftover = set().union(*holding.values()) - set(kept)
    rows: list[bytes] = []
    kinds = parser.tally.kinds
    exempt, position, line = 0, s + 1, base
    for start in sorted(set(kept) | leftover):
        line += buf.count(b"\n", position, start + 1)
        position = start + 1
        end = buf.find(b"\n", start + 1) + 1
        fast = kept.get(start)
        if fast is not None:
            kinds[templates[fast[1]].kind] += 1
            if templates[fast[1]].kind in parser.stats_kinds:
                parser.launch_open, parser.closed = None, True  # as Parser.feed does
            exempt += lane.exempt[fast[1]] and ACCEPT in buf[start + 1 : end]
            if fast[2]:
                rows.append(fast[2])
            continue
        if rows:
            parts.append((len(rows), b"".join(rows)))
            rows = []
        exempt += ACCEPT in buf[start + 1 : end]  # the parser counts this line's noise itself
        parser.line = line
        records = parser.feed(buf[start + 1 : end])
        if records:
            parts.append(chunk(records))
    if rows:
        parts.append((len(rows), b"".join(rows)))
    kinds["other"] += lines - len(kept) - len(leftover)
    parser.tally.accept_noise += accept_lines(buf, s, e) - exempt
    parser.line = base + lines
