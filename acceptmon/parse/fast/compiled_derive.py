"""A plan's compiled derive: a vLLM spec line's derived cells computed by the compiled matcher, without Python.

A spec line's token counts differ line by line, so its derived cells (accept rate, accept length and its source)
cannot be remembered, and calling :func:`acceptmon.parse.derive.spec_values` for each line was most of a vLLM
``parse``. ``cmatch_derive.c`` is that function's twin, held to it by tests on drawn values; this module says when a
plan may use it (its template captures what the derive reads, with the steps C reads them by) and hands it what it
needs: which groups are its inputs, what each derived cell is, and the cells of the values that are the same on every
row. A line the twin cannot compute exactly as Python does is declined, and the plan's Python derive computes it.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acceptmon.parse.derive import LAUNCH_FIELDS, spec_values
from acceptmon.parse.records import LaunchConfig

IN_DRAFTED, IN_ACCEPTED, IN_POSITIONS, IN_LOGGED, IN_SPEC_TOKENS, IN_EMITTED = range(6)
"""The inputs' order in a compiled derive (``cmatch.h``)."""
INPUTS = (
    ("drafted_tokens", frozenset({"count"})),
    ("accepted_tokens", frozenset({"count"})),
    ("position_accept_rates", frozenset({"float_list"})),
    ("accept_len", frozenset({"number", "float"})),
    ("num_spec_tokens", frozenset({"int"})),
    ("emitted_tokens", frozenset({"count"})),
)
"""Each input's field and the kinds whose step the compiled derive reads it by (a count or an int: the INT step; the
logged mean: FLOAT; the rates: LIST)."""
REQUIRED = frozenset({"drafted_tokens", "accepted_tokens"})
OUT_RATE, OUT_LEN, OUT_SOURCE, OUT_CELL = range(4)
"""Derived cells the compiled derive computes, and a cell the same on every row (the launch's config)."""
COMPUTED = {
    "accept_rate": OUT_RATE,
    "draft_accept_rate": OUT_RATE,
    "accept_len": OUT_LEN,
    "accept_len_source": OUT_SOURCE,
}
EXACT_INT = 2**53


def spec(
    derive: Callable[..., Any] | None,
    captured: dict[str, tuple[int, str]],
    base: dict[str, Any],
    written: dict[str, Any],
    launch: LaunchConfig | None,
    cell: Callable[[Any], Any],
    typed: bool,
) -> tuple[Any, ...] | None:
    """The compiled derive of a plan, or None where its rows need the Python derive.

    ``captured``: the template's group and value kind of each field it captures; ``base``: the values a row has
    before its derive; ``written``: the derived columns in order, with the values the derive gave the template's
    sample (a launch's value is every row's); ``cell``: the plan's cell of a value (bytes; typed, the value)."""
    if derive is not spec_values:
        return None
    slots: list[int] = []
    for name, kinds in INPUTS:
        slot, kind = captured.get(name, (-1, ""))
        if slot >= 0 and kind not in kinds:
            return None  # captured by a step the compiled derive does not read it by
        if slot < 0 and (name in REQUIRED or base.get(name) is not None):
            return None  # a value the template does not capture, which the derive reads
        slots.append(slot)
    codes: list[int] = []
    cells: list[Any] = []
    for column, value in written.items():
        if column in COMPUTED:
            codes.append(COMPUTED[column])
            cells.append(None)
        elif column in LAUNCH_FIELDS and launch is not None:
            codes.append(OUT_CELL)
            cells.append(cell(value))
        else:
            return None
    k = launch.spec_num_steps if launch is not None else None
    if k is not None and not (type(k) is int and 0 <= k < EXACT_INT):
        return None
    source = base.get("accept_len_source")
    return (
        tuple(slots),
        k or 0,
        tuple(codes),
        tuple(cells),
        cell(None),
        cell("logged"),
        cell("derived"),
        cell(source),
        typed,
    )
