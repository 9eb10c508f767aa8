"""CSV rows of a segment without a Python loop per row: C-level ``map`` chains over the matches.

The matches are listed once; then their line numbers (newline counts between match
starts, accumulated), their captured cells (``Match.group`` with the plan's group
numbers), their derived cells (the plan's memo, which computes a missing entry) and the
``%``-formatting run through ``map``, ``zip``, ``compress`` and ``accumulate``, so no
bytecode runs per row. Rows of several templates in one segment are merged by position.
Pure: no I/O.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate, chain, compress, repeat

from acceptmon.parse.fast.rows import Plan

_START = operator.methodcaller("start")
_LAST = operator.attrgetter("lastindex")
_NEXT = (1).__add__


def csv_rows(
    pattern: re.Pattern[bytes], buf: bytes, span: tuple[int, int, int], slots: Sequence[Plan | bool | None]
) -> tuple[list[bytes], Counter[int]]:
    """Rows (in order) and match counts by ``lastindex`` of the lines in ``span`` = (start, end, base line).

    ``slots[lastindex]``: the template's plan, None for a kind only counted, False for a
    template whose rows the general parser must write (its matches are counted, not written).
    """
    s, e, base = span
    matches = list(pattern.finditer(buf, s, e + 1))
    keys = list(map(_LAST, matches))
    hits = Counter(keys)
    table = list(map(bool, map(slots.__getitem__, keys)))
    if not any(table):
        return [], hits
    rows_at = list(compress(matches, table))
    kinds = list(compress(keys, table))
    after = list(map(_NEXT, map(_START, rows_at)))
    steps = map(buf.count, repeat(b"\n"), chain((s + 1,), after), after)
    lines = list(accumulate(steps, initial=base + 1))[1:]
    present = set(kinds)
    if len(present) == 1:
        plan = slots[kinds[0]]
        assert isinstance(plan, Plan)
        return _rows(plan, rows_at, lines), hits
    merged: list[tuple[int, bytes]] = []
    for k in present:
        plan = slots[k]
        assert isinstance(plan, Plan)
        mine = list(map(k.__eq__, kinds))
        at = list(compress(rows_at, mine))
        merged += zip(map(_START, at), _rows(plan, at, list(compress(lines, mine))), strict=True)
    merged.sort()
    return [row for _, row in merged], hits


def _rows(plan: Plan, matches: list[re.Match[bytes]], lines: list[int]) -> list[bytes]:
    args = map(operator.add, zip(lines), map(operator.methodcaller("group", *plan.idx), matches))
    if plan.dep:
        derived = map(plan.memo.__getitem__, map(operator.methodcaller("group", *plan.dep), matches))
        args = map(operator.add, args, derived)
    return list(map(plan.fmt.__mod__, map(plan.pick, args)))
