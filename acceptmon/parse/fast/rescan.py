"""The fast lane on ``re`` alone: rows of a segment from the fast pattern's matches.

Where the compiled matcher is not built (or is refused for the templates), and for JSONL
and the careful path's entries, the lane's one whole-line pattern is run with ``finditer``;
each match's captured text fills its template's row plan. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from acceptmon.parse.fast.bulk import csv_rows
from acceptmon.parse.fast.careful import Entry
from acceptmon.parse.fast.rows import Plan
from acceptmon.parse.fast.templates import Template
from acceptmon.parse.parser import Parser


class Lane(Protocol):
    """What a scan reads of :class:`acceptmon.parse.fast.lane.FastLane`."""

    pattern: re.Pattern[bytes] | None
    templates: list[Template]
    by_group: dict[int, int]
    numbers: list[tuple[int, list[int]]]
    plans: list[Plan | bool | None]
    fmt: Any

    def plans_for(self, parser: Parser) -> list[Plan | bool | None]: ...


def scan(
    lane: Lane, parser: Parser, buf: bytes, span: tuple[int, int, int], starts: list[Entry] | None
) -> tuple[list[bytes], list[int], bool]:
    """Rows and per-template match counts; ``clean`` is False if a match was refused.

    ``starts``: if given, each kept match's (line start, template, row) is appended to it.
    """
    s, e, base = span
    assert lane.pattern is not None
    if starts is None and lane.fmt == "csv":
        return _scan_csv(lane, parser, buf, span)
    rows: list[bytes] = []
    counts = [0] * len(lane.templates)
    clean = True
    by_group, plans, count, json = lane.by_group, lane.plans_for(parser), buf.count, lane.fmt == "jsonl"
    line, prev = base, s + 1
    for m in lane.pattern.finditer(buf, s, e + 1):
        i = by_group[m.lastindex or 0]
        plan = plans[i]
        if plan is None:
            counts[i] += 1
            if starts is not None:
                starts.append((m.start(), i, b""))
            continue
        if not isinstance(plan, Plan):
            clean = False
            continue
        counts[i] += 1
        p = m.start()
        line += count(b"\n", prev, p + 1)
        prev = p + 1
        if json:
            args = (line + 1, *plan.json_cells(m.group(*plan.idx)))
        else:
            args = (line + 1, *m.group(*plan.idx))
        if plan.dep:
            args += plan.derived_cells(m.group(*plan.dep))
        if json and plan.extras:
            args += (plan.json_extra(m),)
        row = plan.fmt % plan.pick(args)
        rows.append(row)
        if starts is not None:
            starts.append((p, i, row))
    return rows, counts, clean


def _scan_csv(
    lane: Lane, parser: Parser, buf: bytes, span: tuple[int, int, int]
) -> tuple[list[bytes], list[int], bool]:
    """:func:`scan` for CSV without entries: no Python loop per row (:mod:`acceptmon.parse.fast.bulk`)."""
    assert lane.pattern is not None
    slots: list[Plan | bool | None] = [False] * (max(lane.by_group) + 1)
    for (outer, _), plan in zip(lane.numbers, lane.plans_for(parser), strict=True):
        slots[outer] = plan
    rows, hits = csv_rows(lane.pattern, buf, span, slots)
    counts = [hits[outer] for outer, _ in lane.numbers]
    unsupported = any(hits[outer] for (outer, _), plan in zip(lane.numbers, lane.plans, strict=True) if plan is False)
    return rows, counts, not unsupported
