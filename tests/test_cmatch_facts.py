"""The compiled module's loops over rows of several plans (``cmatch_weave.c``, ``cmatch_facts.c``) give what the
Python beside each gives.

Rows of a vLLM log's spec and throughput lines come as one piece per plan and an order; the doctor weaves their
columns, carries each engine's load from throughput lines onto spec lines, weighs per-position rates by drafts and
takes the last position's rate. Each loop is drawn here with values of the lane's types (None, bools, ints, floats,
texts, lists) and compared with its Python, which runs where the module is not built.
"""

from __future__ import annotations

import math
import pickle
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.diagnose import depth
from acceptmon.diagnose.detect_accept import Depth, DepthParams
from acceptmon.diagnose.state import Steps
from acceptmon.measure import columns, facts, plain
from acceptmon.measure.plain import Piece
from acceptmon.parse.fast import built, native
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.unmade import Coded, Unmade, joined

CMATCH = native.load()
_VALUE = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, width=32) | st.sampled_from(["", "x"])
)
_NUMBER = st.none() | st.integers(0, 3) | st.floats(0, 4, width=32)


@contextmanager
def _python() -> Iterator[None]:
    """The Python loops: as where the module is not built."""
    with mock.patch.object(native, "load", lambda: None), mock.patch.object(built, "module", lambda: None):
        yield


def _unmakeable(start: int, stop: int) -> list[Any]:
    raise AssertionError("no record is made here")


@st.composite
def _woven_rows(draw: st.DrawFn, pieces: int = 0) -> tuple[bytes, list[list[Any]]]:
    """An order of rows over 2 or 3 pieces (each with a row), and each piece's column."""
    n = pieces or draw(st.integers(2, 3))
    order = draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=40).filter(lambda o: set(o) == set(range(n))))
    columns = [draw(st.lists(_VALUE, min_size=order.count(i), max_size=order.count(i))) for i in range(n)]
    return bytes(order), columns


@settings(max_examples=200, deadline=None)
@given(_woven_rows())
def test_woven_is_the_python_gathering(rows):
    """A column of rows of several pieces, in the rows' order: ``woven`` gives what :class:`Unmade`'s Python gathers,
    and ``unwoven`` gives each piece's values back."""
    assert CMATCH is not None
    order, columns = rows
    pieces = [Unmade(len(c), frozenset({"spec"}), {}, {"x": c}, _unmakeable) for c in columns]
    whole = joined(pieces, order, _unmakeable, (0, len(order)))
    with _python():
        want = list(whole.column("x"))
        back = plain._unwoven(order, want, len(columns))
    assert list(whole.column("x")) == want == CMATCH.woven(order, columns)
    assert CMATCH.unwoven(order, want, len(columns)) == back == columns
    assert CMATCH.spread(order, ["a", "b", "c"][: len(columns)]) == [["a", "b", "c"][i] for i in order]


def test_woven_refuses_rows_its_columns_do_not_hold():
    assert CMATCH is not None
    with pytest.raises(ValueError):
        CMATCH.woven(b"\x00\x01\x00", [[1], [2]])  # piece 0 has 2 rows, its column 1 value
    with pytest.raises(ValueError):
        CMATCH.woven(b"\x00\x02", [[1], [2]])  # a row of a third piece
    with pytest.raises(ValueError):
        CMATCH.unwoven(b"\x00\x01", [1, 2, 3], 2)
    with pytest.raises(ValueError):
        CMATCH.unwoven(b"\x00\x05", [1, 2], 2)
    with pytest.raises(IndexError):
        CMATCH.spread(b"\x00\x03", ["a", "b"])
    assert CMATCH.woven(b"", [[], []]) == [] and CMATCH.unwoven(b"", [], 2) == [[], []]


def _pieces(order: bytes, units: list[str], loads: list[list[Any]]) -> list[Piece]:
    """A spec piece (0) and a throughput piece (1): each row's unit, the throughput rows' loads."""
    spec_units = [u for u, i in zip(units, order, strict=True) if i == 0]
    load_units = [u for u, i in zip(units, order, strict=True) if i == 1]
    tput, running, queue = ([row[c] for row in loads] for c in range(3))
    columns = {"gen_throughput": tput, "running_req": running, "queue_req": queue}
    made = [
        Unmade(len(spec_units), frozenset({"spec"}), {}, {}, _unmakeable),
        Unmade(len(load_units), frozenset({"throughput"}), {}, columns, _unmakeable),
    ]
    return [
        Piece(KINDS["spec"], made[0], {}, spec_units, {}),
        Piece(KINDS["throughput"], made[1], columns, load_units, {}),
    ]


@st.composite
def _interleaved_rows(draw: st.DrawFn) -> tuple[list[Piece], bytes, dict[str, tuple[bool, tuple[Any, ...]]]]:
    order = bytes(draw(st.lists(st.integers(0, 1), min_size=2, max_size=40)))
    units = draw(st.lists(st.sampled_from(["0", "1", "DP1"]), min_size=len(order), max_size=len(order)))
    loads = draw(st.lists(st.tuples(_NUMBER, _NUMBER, _NUMBER), min_size=order.count(1), max_size=order.count(1)))
    before = {u: (draw(st.booleans()), draw(st.tuples(_NUMBER, _NUMBER, _NUMBER))) for u in dict.fromkeys(units)}
    return _pieces(order, units, [list(row) for row in loads]), order, before


@settings(max_examples=300, deadline=None)
@given(_interleaved_rows())
def test_interleaved_carries_each_units_load_as_the_python_does(drawn):
    """Spec lines take their engine's load from its last throughput line (a value a throughput line lacks kept from
    before it), a throughput line its own; a unit's first line after a prefill is not steady: the same columns from C
    as from Python, and the state each unit is left in the same."""
    pieces, order, before = drawn
    with _python():
        want = facts._interleaved(pieces, order, before)
    got = facts._interleaved(pieces, order, before)
    assert got == want
    assert all(type(s) is bool for s in got[1][2])
    state = {u: [after, *load] for u, (after, load) in before.items()}
    loads = [None, tuple(pieces[1].rows.column(name) for name in facts._LOAD)]
    assert CMATCH is not None
    assert CMATCH.interleaved(order, got[0], loads, state) == got[1]
    assert all(now[0] is False for u, now in state.items() if u in got[0])


def test_interleaved_leaves_values_of_other_types_to_python_and_the_state_as_it_was():
    assert CMATCH is not None
    state = {"0": [True, 1.0, 2, 0]}
    loads = [None, ([5.0], [3], [Decimal(0)])]
    assert CMATCH.interleaved(b"\x01\x00", ["0", "0"], loads, state) is None
    assert state == {"0": [True, 1.0, 2, 0]}
    assert CMATCH.interleaved(b"\x00", [0], [None, None], {0: [False, 1.0, 2, 0]}) is None  # a unit not a text
    with pytest.raises(KeyError):
        CMATCH.interleaved(b"\x00", ["9"], [None], state)
    with pytest.raises(ValueError):
        CMATCH.interleaved(b"\x00\x01", ["0", "0"], [None, ([1.0, 2.0], [1], [0])], state)  # 2 values, 1 row
    pieces = _pieces(b"\x01\x00", ["0", "0"], [[5.0, 3, Decimal(0)]])
    assert facts._interleaved(pieces, b"\x01\x00", {"0": (True, (1.0, 2, 0))}) == (
        ["0", "0"],
        ([5.0, 5.0], [3, 3], [False, True]),
    )


_RATES = st.none() | st.lists(st.none() | st.floats(0, 1, width=32), max_size=4) | st.just(())


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 25).flatmap(lambda n: st.tuples(*(st.lists(s, min_size=n, max_size=n) for s in (
    _RATES, st.none() | st.booleans(), st.booleans(), _NUMBER, _NUMBER, _NUMBER | st.integers(0, 10**6))))))  # fmt: skip
def test_drafts_each_weighs_the_rows_the_python_weighs(columns):
    """The lines whose per-position rates the depth sweep weighs, and their drafts per width: the same lines and the
    same floats (division and all) from C as from Python."""
    with _python():
        want = depth._drafts_each(*columns)
    assert CMATCH is not None
    rates, cumulative, batch, tokens, _, drafted = columns  # (a row with rates is as wide as them: steps unread)
    got = CMATCH.drafts_each(rates, cumulative, batch, tokens, drafted)
    assert got is not None
    assert got[0] == want[0] and all(a is b for a, b in zip(got[0], want[0], strict=True))
    assert [(type(d), d) for d in got[1]] == [(type(d), d) for d in want[1]]
    assert depth._drafts_each(*columns) == want


def test_drafts_each_leaves_other_types_to_python():
    assert CMATCH is not None
    assert CMATCH.drafts_each(["ab"], [False], [True], [None], [4]) is None  # len() of a text: Python's
    assert depth._drafts_each(["ab"], [False], [True], [None], [None], [4]) == (["ab"], [2.0])
    assert CMATCH.drafts_each([[0.5]], [False], [True], [None], [Decimal(4)]) is None
    assert CMATCH.drafts_each([[0.5, 0.2]], [None], [True], [0], [4]) == ([[0.5, 0.2]], [2.0])  # width from rates
    assert CMATCH.drafts_each([[0.5, 0.2]], [None], [True], [8], [4]) == ([[0.5, 0.2]], [0.5])  # from the tokens
    assert CMATCH.drafts_each([[]], [None], [True], [None], [4]) == ([], [])  # no rates: not weighed
    with pytest.raises(ValueError):
        CMATCH.drafts_each([[0.5]], [], [True], [None], [4])


def _depth_steps(warm: list[bool], rates: list[Any]) -> tuple[list[float], list[int], int]:
    detector = Depth(DepthParams())
    lines = list(range(10, 10 + len(warm)))
    nones = [None] * len(warm)
    steps = Steps(lines, warm, warm, nones, nones, nones, nones, nones, nones, 0, {"position_accept_rates": rates})
    detector.steps(steps, None)  # type: ignore[arg-type]  # (the run is not read)
    return detector.last_position, detector.position_lines.lines, detector.position_lines.count


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 25).flatmap(lambda n: st.tuples(
    st.lists(st.booleans(), min_size=n, max_size=n),
    st.lists(_RATES | st.lists(st.integers(0, 1), max_size=2) | st.sampled_from(["", "x", 0]), min_size=n, max_size=n))))  # fmt: skip
def test_last_rates_takes_the_lines_the_python_takes(drawn):
    """P13's last per-position rate of warm lines (nan, nothing drafted, is None and left out): the same floats and
    lines from C as from Python."""
    warm, rates = drawn
    with _python():
        want = _depth_steps(warm, rates)
    got = _depth_steps(warm, rates)
    assert got == want and all(type(v) is float for v in got[0])
    assert CMATCH is not None
    lasts, lines = CMATCH.last_rates(warm, rates, list(range(len(warm))))
    assert lasts == want[0] and len(lines) == want[2]


def test_last_rates_leaves_other_types_to_python():
    assert CMATCH is not None
    assert CMATCH.last_rates([True], [[Decimal("0.5")]], [1]) is None
    assert CMATCH.last_rates([False], [[Decimal("0.5")]], [1]) == ([], [])  # (a line not warm is not read)
    assert _depth_steps([True, True], [[0.5, Decimal("0.25")], [1, math.inf]]) == ([0.25, math.inf], [10, 11], 2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_VALUE, _VALUE | st.just([]) | st.just([0]))))
def test_masked_keeps_what_the_python_keeps(pairs):
    """A column's values where a mask entry is true (whatever its type among the lane's: a bool, a number, a text, a
    list), else None: the same list from C as from Python."""
    values, mask = [v for v, _ in pairs], [m for _, m in pairs]
    with _python():
        want = plain.masked(values, mask)
    assert CMATCH is not None
    got = CMATCH.masked(values, mask)
    assert got == want and all(a is b for a, b in zip(got, want, strict=True))
    assert want == [v if m else None for v, m in pairs]


def test_masked_leaves_other_types_to_python():
    assert CMATCH is not None
    assert CMATCH.masked([1, 2], [True, Decimal(0)]) is None
    assert plain.masked([1, 2], [True, Decimal(0)]) == [1, None]
    with pytest.raises(ValueError):
        CMATCH.masked([1, 2], [True])
    with pytest.raises(ValueError):
        plain.masked([1, 2], [True])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans() | st.none() | st.integers(0, 1), _VALUE)), st.lists(_VALUE, max_size=3))
def test_filled_replaces_what_the_python_replaces(pairs, extra):
    """The intervals a vLLM v0 stretch closes put in place of its batches' logged values, in order: the same list from
    C as from Python, and a fill that does not hold one value per batch left to Python."""
    mask, values = [m for m, _ in pairs], [v for _, v in pairs]
    fill = [("closed", i) for i in range(sum(map(bool, mask)))]
    with _python():
        want = facts._filled(mask, fill, values)
    assert CMATCH is not None
    assert CMATCH.filled(mask, fill, values) == want == facts._filled(mask, fill, values)
    assert [v for v, m in zip(want, mask, strict=True) if m] == fill
    if extra:  # more values than batches: Python's loop leaves the rest unread, and is the one run
        assert CMATCH.filled(mask, fill + extra, values) is None
        assert facts._filled(mask, fill + extra, values) == want


def test_filled_leaves_other_types_to_python():
    assert CMATCH is not None
    assert CMATCH.filled([True, Decimal(1)], [1, 2], [0, 0]) is None
    assert facts._filled([True, Decimal(1)], [1, 2], [0, 0]) == [1, 2]
    with pytest.raises(ValueError):
        CMATCH.filled([True], [1], [0, 0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50))
def test_int_extremes_are_min_and_max(values):
    """A machine int column's least and largest, read in C: min's and max's, as ints."""
    assert CMATCH is not None
    column = array("q", values)
    assert CMATCH.int_extremes(column) == (min(column), max(column))
    assert all(type(v) is int for v in CMATCH.int_extremes(column))


def test_int_extremes_leave_other_columns_to_python():
    assert CMATCH is not None
    for other in (array("q"), array("d", [1.0, math.nan]), [1, 2], b"12345678", array("i", [1, 2])):
        assert CMATCH.int_extremes(other) is None


FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.just(-0.0) | st.none()


@settings(max_examples=200, deadline=None)
@given(st.lists(FLOATS, max_size=60), st.sampled_from([list, tuple]), st.lists(st.floats(-9, 9), max_size=3))
def test_extend_floats_appends_what_python_appends(values, kind, before):
    """``extend_floats`` appends each float as it is (-0.0, a NaN's bits) and NaN for None, compiled or not."""
    assert CMATCH is not None
    got, want = array("d", before), array("d", before)
    columns.extend_floats(got, kind(values))
    with _python():
        columns.extend_floats(want, kind(values))
    assert got.tobytes() == want.tobytes()
    assert [None if v != v else v for v in got[len(before) :]] == [None if v is None or v != v else v for v in values]
    assert CMATCH.doubles(kind(values)) == array("d", [math.nan if v is None else v for v in values]).tobytes()


def test_doubles_leave_any_other_value_to_python():
    """An int, a bool or a string among the values, or a column that is no list or tuple: None (Python converts)."""
    assert CMATCH is not None
    for values in ([1.0, 2], [True], [1.0, "x"], array("d", [1.0]), iter([1.0])):
        assert CMATCH.doubles(values) is None
    got = array("d")
    columns.extend_floats(got, [1.0, 2, None, True])
    assert got.tolist()[:2] == [1.0, 2.0] and math.isnan(got[2]) and got[3] == 1.0
    columns.extend_floats(got, array("d", [5.0]))
    assert got[-1] == 5.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["DP0 TP0", "DP1 TP1", None, True, 2.5, "EAGLE"]), max_size=80), st.booleans())
def test_a_shipped_list_column_is_its_values_again(picks, fresh):
    """A list column of few distinct objects ships as them and each row's code (Coded); unpickled, it reads back as
    the list, value for value, each row's text the object the rows that had it before share; a list with more
    distinct objects than half its rows, or when the module is not built, ships as it is."""
    assert CMATCH is not None
    column = [("x" + p)[1:] if fresh and type(p) is str else p for p in picks]  # equal texts, distinct objects
    coded = Coded.of(column)
    ids = {id(v) for v in column}
    assert (type(coded) is Coded) is (2 * len(ids) <= len(column) and len(ids) <= 65535 and bool(column))
    back = pickle.loads(pickle.dumps(coded))
    listed = back.listed() if type(back) is Coded else back
    assert listed == column and len(back) == len(column) and list(back) == column
    if type(coded) is Coded:  # rows that held one text object hold one again
        firsts = {id(v): i for i, v in reversed(list(enumerate(column)))}
        assert [firsts[id(v)] for v in column] == [next(i for i, w in enumerate(listed) if w is v) for v in listed]
    if type(coded) is Coded:
        assert coded[1:3].listed() == column[1:3] and coded[0] == column[0]
    with _python():
        assert Coded.of(column) is column
        if type(coded) is Coded:  # read back by Python's own look-ups: the same list
            assert coded.listed() == column
    assert CMATCH.codes(tuple(column)) is None and CMATCH.codes(["a", "b"]) is None


def test_decoded_refuses_codes_it_cannot_read():
    """A code past the values, or codes that are not an array('H'): a ValueError, never a read past the end."""
    assert CMATCH is not None
    assert CMATCH.decoded(("a", "b"), array("H", [1, 0, 1])) == ["b", "a", "b"]
    for codes in (array("H", [2]), array("B", [0]), array("h", [0]), b"\0\0"):
        with pytest.raises(ValueError):
            CMATCH.decoded(("a", "b"), codes)
