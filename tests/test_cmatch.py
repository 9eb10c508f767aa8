"""The compiled matcher reads each piece exactly as its regular expression does.

Every value kind, strict and loose, an unknown key, and the envelope (timestamps and ranks)
are matched by C and by ``re`` on generated text: the same lines match, with the same
captured bytes. The lane as a whole is held to the general parser in ``tests/test_fastlane.py``.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import operator
import random
import re
import struct
from array import array
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.measure import bootstrap, plain, tokens
from acceptmon.parse import prescan
from acceptmon.parse.fast import native
from acceptmon.parse.fast.model import Shape
from acceptmon.parse.fast.pieces import ENVELOPE_KINDS, EXTRA_KEY, EXTRA_VALUE, VALUE, loosen
from acceptmon.parse.fast.rows import BOOL_SLOT, JSON_RANK, SLOT

CMATCH = native.load()
ENVELOPE = ENVELOPE_KINDS["timestamp"] + ENVELOPE_KINDS["rank"]
SHAPE = Shape(b"[", ENVELOPE, b"] ")
STAMP = b"[2026-02-26 10:00:00 TP0] "
END = rb"(?<![ \t])(?:, )?\r*(?=\n)"
ROW = (1, b"|", 2, b"|", 3, b"|", 4, b"|", SLOT, b"\r\n")


def test_the_compiled_matcher_is_built_here():
    """`./scripts/test` installs with the C compiler: the compiled lane is what these tests check."""
    assert CMATCH is not None, "acceptmon/parse/fast/cmatch.c was not compiled: run `python hatch_build.py`"


def _program(steps: list[native.Step]):
    assert CMATCH is not None
    return CMATCH.Program(SHAPE.prefix, SHAPE.suffix, [native.codes(CMATCH, steps)], [b"zq", b"Launch!", b"accept"], 1)


def _c_row(program, line: bytes, captured: bool) -> tuple[bytes, int] | None:
    buf = b"\n" + line + b"\n"
    plan = (ROW, (), {}) if captured else None
    got = program.scan(buf, 1, len(buf), 0, [plan])
    assert got is not None
    return got[1], got[2][0]


def _re_row(pattern: bytes, line: bytes) -> bytes | None:
    m = re.compile(b"\\n" + re.escape(SHAPE.prefix) + ENVELOPE + re.escape(SHAPE.suffix) + pattern + END).match(
        b"\n" + line + b"\n"
    )
    if m is None:
        return None
    return b"|".join(g or b"" for g in m.groups()) + b"\r\n"


TEXT = st.text(alphabet="0123456789.0 -,:\tTrueFals\x1bab\"\\'\r#", max_size=14).map(str.encode)
NUMBER = (
    st.from_regex(r"\A[0-9]{1,12}(\.[0-9]{0,10})?\Z", fullmatch=True).map(str.encode)
    | st.sampled_from([b"True", b"False", b"Tru", b"Falsee", b"true", b"0.0001", b"0.00001", b"2.50", b"3.000"])
    | TEXT
)


@pytest.mark.parametrize("kind", ["int", "float", "bool", "str"])
@given(value=NUMBER, tail=st.sampled_from([b"", b", ", b" ", b",", b"\r", b"\r\r", b", x", b"]"]))
@settings(max_examples=300, deadline=None)
def test_a_value_is_read_as_its_expression_reads_it(kind, value, tail):
    line = STAMP + b"k: " + value + tail
    strict = _program([("LIT", -1, (b"k: ",)), (native.STRICT[kind], 0, ())])
    want = _re_row(b"k: " + VALUE[kind], line)
    rows, hits = _c_row(strict, line, captured=True)
    assert (rows or None, hits) == (want, int(want is not None))
    loose = _program([("LIT", -1, (b"k: ",)), (native.LOOSE[kind], -1, ())])
    want_loose = re.compile(b"\\n" + re.escape(STAMP) + b"k: " + loosen(VALUE[kind]) + END).match(b"\n" + line + b"\n")
    assert _c_row(loose, line, captured=False) == (b"", int(want_loose is not None))


@given(key=TEXT, value=TEXT, tail=st.sampled_from([b"", b", ", b" ", b",x"]))
@settings(max_examples=300, deadline=None)
def test_an_unknown_key_is_read_as_its_expression_reads_it(key, value, tail):
    known = (b"k", b"accept len")
    line = STAMP + b"k: 1, " + key + b": " + value + tail
    steps = [("ALT", -1, (b"k: ",)), ("INT", 0, ()), ("LIT", -1, (b", ",)), ("EXTRA", -1, known)]
    avoid = b"|".join(re.escape(k) for k in known)
    pattern = b"k: " + VALUE["int"] + b", (?!(?:" + avoid + b"): )" + loosen(EXTRA_KEY + b": " + EXTRA_VALUE)
    want = _re_row(pattern, line)
    rows, hits = _c_row(_program(steps), line, captured=True)
    assert (rows or None, hits) == (want, int(want is not None))


DATE = st.builds(
    "{}-{:02d}-{:02d}".format, st.sampled_from(["2026", "2024", "0000", "1999"]), st.integers(0, 13), st.integers(0, 32)
)
TIME = st.builds(
    "{:02d}:{:02d}:{:02d}{}".format,
    st.integers(0, 25),
    st.integers(0, 61),
    st.integers(0, 61),
    st.sampled_from(["", ".000", ".001", ".120", ".5", ".1234", "."]),
)
TOKEN = st.sampled_from(["TP0", "DP12", "EP_X3", "PP1", "tp0", "TP", "A", "_A1", "X1_"])
RANK = st.lists(TOKEN, max_size=3).map(" ".join).flatmap(lambda r: st.sampled_from([r, " " + r, "  " + r, r + " "]))


@given(date=DATE, sep=st.sampled_from(" T"), time=TIME, rank=RANK)
@settings(max_examples=500, deadline=None)
def test_an_envelope_is_read_as_its_expression_reads_it(date, sep, time, rank):
    line = f"[{date}{sep}{time}{rank}] k: 7".encode()
    want = _re_row(b"k: " + VALUE["int"], line)
    rows, hits = _c_row(_program([("LIT", -1, (b"k: ",)), ("INT", 0, ())]), line, captured=True)
    assert (rows or None, hits) == (want, int(want is not None))


def test_real_stamps_and_ranks_match():
    program = _program([("LIT", -1, (b"k: ",)), ("INT", 0, ())])
    for line, row in [
        (b"[2026-02-26 10:00:00 TP0] k: 7", b"2026-02-26|10:00:00||TP0|7\r\n"),
        (b"[2024-12-31T23:59:59.120 DP1 TP3 EP3] k: 0", b"2024-12-31|23:59:59|.120|DP1 TP3 EP3|0\r\n"),
        (b"[2026-02-26 10:00:00] k: 12, \r", b"2026-02-26|10:00:00|||12\r\n"),
        (b"[2026-02-29 10:00:00] k: 1", b""),  # not every year has it: the general parser dates it
        (b"[2026-02-26 10:00:00.000] k: 1", b"2026-02-26|10:00:00|||1\r\n"),  # read, printed without a fraction
        (b"[2026-02-26 10:00:00 TP0] k: 01", b""),
    ]:
        assert _c_row(program, line, captured=True)[0] == row


def test_counts_are_bytes_count_and_a_launch_line_stops_the_scan():
    program = _program([("LIT", -1, (b"k: ",)), ("INT", 0, ())])
    block = b"\nzqzqzq accept accept\nzzq\n[2026-02-26 10:00:00] k: 3\naccept\n"
    got = program.scan(block, 1, len(block), 10, [((0, b"\r\n"), (), {})])
    # a dated envelope: no year state (0, 0); the scan went to the end (len(block)), not stopped at a line (0)
    assert got == (1, b"13\r\n", [1], [block.count(b"zq")], 2, 4, 0, 0, len(block), 0)  # fmt: skip
    launch = block + b"Launch! now\n"
    assert program.scan(launch, 1, len(launch), 10, [None]) is None


def test_a_greedy_reading_that_could_differ_is_refused():
    """A number followed by a digit, or alternatives one of which begins another: no compiled program."""
    from acceptmon.parse.fast.model import Template

    def template(ops):
        t = Template(grammar=None, kind="decode", head=b"")  # type: ignore[arg-type]
        t.ops = ops
        return t

    assert native.steps(template([("lit", b"k: "), ("int", 0), ("lit", b"5")])) is None
    assert native.steps(template([("alt", (b"a: ", b"a: b")), ("int", 0)])) is None
    assert native.steps(template([("lit", b"k: "), ("str", 0), ("lit", b" x")])) is None
    assert native.steps(template([("lit", b"k: "), ("int", 0), ("lit", b", ")])) is not None


def test_a_recipe_that_names_an_uncaptured_group_is_refused():
    """The C side never reads a capture the template does not make (a ValueError, not a stray read)."""
    program = _program([("LIT", -1, (b"k: ",)), ("INT", 0, ())])
    buf = b"\n" + STAMP + b"k: 1\n"
    refused = [((SLOT + 1, b"\r\n"), ()), ((7, b"\r\n"), ()), ((0, b"\r\n"), (3,)), ((BOOL_SLOT + 1, b"\n"), ())]
    for recipe, deps in refused:
        with pytest.raises(ValueError):
            program.scan(buf, 1, len(buf), 0, [(recipe, deps, {})])


NEEDLES = st.one_of(
    st.lists(st.text(alphabet="abcz q", min_size=2, max_size=5), min_size=1, max_size=5, unique=True),
    st.lists(st.text(alphabet="abcz q", min_size=6, max_size=12), min_size=1, max_size=5, unique=True),
)
"""Short anchors (the pass looks at pairs alone), or all of six bytes or more (pairs, then their trigrams)."""


@given(needles=NEEDLES, data=st.data())
@settings(max_examples=600, deadline=None)
def test_anchor_counts_are_bytes_count(needles, data):
    """Non-overlapping counts per anchor, and lines that say 'accept', as bytes.count and the lane's
    own line count give them, whatever the text (anchors that overlap themselves included, anchors at the
    block's ends): lines of random text and of the anchors themselves, pieces of them, joined."""
    assert CMATCH is not None
    piece = st.one_of(
        st.text(alphabet="abcaccept zq\r", max_size=12),
        st.sampled_from(needles),
        st.sampled_from(needles).map(lambda n: n[1:]),
    )
    lines = data.draw(st.lists(st.lists(piece, max_size=6).map("".join), max_size=12))
    words = [n.encode() for n in needles]
    steps = native.codes(CMATCH, [("LIT", -1, (b"never",))])
    program = CMATCH.Program(SHAPE.prefix, SHAPE.suffix, [steps], [*words, b"Launch!", b"accept"], 1)
    block = b"".join(line.encode() + b"\n" for line in lines)
    got = program.scan(b"\n" + block, 1, len(block) + 1, 0, [None])
    assert got is not None
    assert got[3] == [block.count(w) for w in words]
    assert got[4] == sum(1 for line in block.split(b"\n") if b"accept" in line)
    assert got[5] == len(lines)


WORDS = st.lists(st.text(alphabet="aab_=Z: ", min_size=1, max_size=12).map(str.encode), min_size=1, max_size=70)
"""Words the pre-scan looks for: of one byte to twelve (the pass steps by the shortest's length less one, up to
eight bytes), with letters, spaces, capitals and punctuation (each word is looked for by its least common pairs),
words that overlap themselves and each other, and more than one pass takes."""


@given(words=WORDS, data=st.data())
@settings(max_examples=500, deadline=None)
def test_the_first_of_any_word_is_where_bytes_find_it(words, data):
    """``find_any`` gives the first offset of any word in ``buf[start:end]``, as the smallest of ``bytes.find``:
    text built of the words and pieces of them, any span (out of bounds and reversed too)."""
    assert CMATCH is not None
    piece = st.one_of(st.binary(max_size=5), st.sampled_from(words), st.sampled_from(words).map(lambda w: w[1:]))
    buf = b"".join(data.draw(st.lists(piece, max_size=30)))
    start, end = data.draw(st.integers(-3, len(buf) + 3)), data.draw(st.integers(-3, len(buf) + 3))
    want = prescan.BYTES.find_any(buf, max(start, 0), max(end, 0), words)
    assert CMATCH.find_any(buf, start, end, words) == want


@pytest.mark.parametrize(
    ("buf", "words", "first"),
    [
        (b"xaa_=", [b"a_", b"aa_="], 1),  # "aa_=" is looked for by "_=", past where "a_" was found: it starts first
        (b"xaa_=", [b"aa_=", b"a_"], 1),
        (b"server_args=", [b"args=", b"server_"], 0),
        (b"ab", [b"ab", b"abc"], 0),
        (b"abab", [b"bab", b"x"], 1),
        (b"", [b"ab"], -1),
        # steps of 3 bytes (the shortest word's 4 less one): a word whose pairs lie further into it is met a step late
        (b"a_Zb_a==a_Zb_a==", [b"=a=b b", b"_Zb_", b"a_Zb_a=="], 0),
        (b"=bZZa=__", [b"ZZa=__", b"__a=Z Z= ", b"Za=_"], 2),
    ],
)
def test_a_word_found_later_in_the_pass_can_start_first(buf, words, first):
    assert CMATCH is not None
    assert CMATCH.find_any(buf, 0, len(buf), words) == first == prescan.BYTES.find_any(buf, 0, len(buf), words)


@pytest.mark.parametrize(
    ("line", "row"),
    [
        (b"[2026-02-26 10:00:00 TP0] k: True, n: 7", b'{"rank":"TP0","k":true,"n":7}\n'),
        (b"[2026-02-26 10:00:00] k: False, n: 0", b'{"rank":null,"k":false,"n":0}\n'),
    ],
)
def test_json_codes_write_a_rank_or_null_and_booleans(line, row):
    """JSONL recipes: the rank quoted (null for none), True/False as true/false, numbers as captured."""
    program = _program([("LIT", -1, (b"k: ",)), ("BOOL", 0, ()), ("LIT", -1, (b", n: ",)),
                        ("INT", 1, ())])  # fmt: skip
    recipe = (b'{"rank":', JSON_RANK, b',"k":', BOOL_SLOT, b',"n":', SLOT + 1, b"}\n")
    buf = b"\n" + line + b"\n"
    got = program.scan(buf, 1, len(buf), 0, [(recipe, (), {})])
    assert got is not None and got[:2] == (1, row)


def test_a_scan_lists_each_match_with_its_line_offset_template_and_row():
    """The careful path's matches: (the newline before the line, template, row or b'') per matched line whose plan
    is not False (a counted kind's with no row; a template the parser writes is left out), in order."""
    assert CMATCH is not None
    two = [native.codes(CMATCH, [("LIT", -1, (b"k: ",)), ("INT", 0, ())])]
    two.append(native.codes(CMATCH, [("LIT", -1, (b"j: ",)), ("INT", 0, ())]))
    program = CMATCH.Program(SHAPE.prefix, SHAPE.suffix, two, [b"zq", b"Launch!", b"accept"], 1)
    lines = [STAMP + b"k: 7", b"hello zq", STAMP + b"j: 8", STAMP + b"k: 12, ", STAMP + b"k: x"]
    buf = b"\n" + b"\n".join(lines) + b"\n"
    at = [i for i, byte in enumerate(buf[:-1]) if byte == ord("\n")]
    row = (0, b"|", SLOT, b"\r\n")
    for plans, want in [
        ([(row, (), {}), None], [(at[0], 0, b"41|7\r\n"), (at[2], 1, b""), (at[3], 0, b"44|12\r\n")]),
        ([(row, (), {}), False], [(at[0], 0, b"41|7\r\n"), (at[3], 0, b"44|12\r\n")]),
        ([False, (row, (), {})], [(at[2], 1, b"43|8\r\n")]),
    ]:
        entries: list[tuple[int, int, bytes]] = []
        got = program.scan(buf, 1, len(buf), 40, plans, 0, 0, False, entries)
        assert got is not None and got[2] == [2, 1]
        assert entries == want
    with pytest.raises(TypeError, match="entries must be a list"):
        program.scan(buf, 1, len(buf), 0, [None, None], 0, 0, False, ())


LEAD = [("LIT", -1, (b"(Actor pid=",)), ("LINT", -1, ()), ("LIT", -1, (b") ",))]
LEAD_RE = rb"\(Actor pid=[0-9]{1,30}\) "


@given(
    head=st.sampled_from([b"", b"(Actor pid=", b"(Actor pid=12", b"(Actor pid=x) ", b"(Actor pid=7)  ", b" "]),
    digits=st.from_regex(r"\A[0-9]{0,32}\Z", fullmatch=True).map(str.encode),
    tail=st.sampled_from([b") ", b")", b") [", b""]),
)
@settings(max_examples=300, deadline=None)
def test_a_lead_is_read_as_its_expression_reads_it(head, digits, tail):
    """A lead (loose digits between literals) before the envelope's prefix, or none: the same lines match."""
    assert CMATCH is not None
    steps = [("LIT", -1, (b"k: ",)), ("INT", 0, ())]
    program = CMATCH.Program(
        SHAPE.prefix, SHAPE.suffix, [native.codes(CMATCH, steps)], [b"zq", b"Launch!", b"accept"], 1,
        CMATCH.ENV_DATED, [native.codes(CMATCH, LEAD)],
    )  # fmt: skip
    for line in (head + digits + tail + STAMP + b"k: 5", head + STAMP + b"k: 5"):
        pattern = b"\\n(?:" + LEAD_RE + b")?" + re.escape(SHAPE.prefix) + ENVELOPE + re.escape(SHAPE.suffix)
        m = re.compile(pattern + b"k: " + VALUE["int"] + END).match(b"\n" + line + b"\n")
        buf = b"\n" + line + b"\n"
        got = program.scan(buf, 1, len(buf), 0, [(ROW, (), {})])
        assert got is not None and got[2][0] == int(m is not None)
        assert got[1] == (b"|".join(g or b"" for g in m.groups()) + b"\r\n" if m else b"")


@pytest.mark.parametrize(
    "leads",
    [
        [[("INT", 0, ())]],  # captures
        [[("LFLOAT", -1, ())]],  # not a literal nor loose digits
        [[("LIT", -1, (b"(",))]] * 65,  # more than MAX_LEADS
    ],
)
def test_a_lead_that_is_not_literals_and_digits_is_refused(leads):
    assert CMATCH is not None
    with pytest.raises(ValueError):
        CMATCH.Program(
            b"[", b"] ", [], [b"zq", b"accept"], 0, CMATCH.ENV_DATED, [native.codes(CMATCH, s) for s in leads]
        )
    with pytest.raises(ValueError):  # a year-less envelope has none
        CMATCH.Program(b"", b"", [], [b"zq", b"accept"], 0, CMATCH.ENV_YEARLESS, [native.codes(CMATCH, LEAD)])


def test_lead_steps_are_refused_where_greedy_reading_could_differ():
    assert native.lead_steps((("lit", b"(A pid="), ("lint", -1), ("lit", b") ")), b"[") is not None
    assert native.lead_steps((("lit", b"(A pid="), ("lint", -1)), b"1[") is None  # digits, then a digit
    assert native.lead_steps((("lint", -1), ("lint", -1)), b"[") is None
    assert native.lead_steps((("lit", b""),), b"[") is None
    assert native.lead_steps((("lnumber", -1),), b"[") is None


def test_a_bare_template_matches_only_lines_with_no_envelope_and_writes_no_stamp():
    """OP_BARE (first step only): the template starts its line; a line behind the program's envelope is another's.
    A year-less scan with year 0 (the parser has none yet) leaves every dated line to the parser."""
    assert CMATCH is not None
    bare = native.codes(CMATCH, [("BARE", -1, ()), ("LIT", -1, (b"k: ",)), ("INT", 0, ())])
    dated = native.codes(CMATCH, [("LIT", -1, (b"k: ",)), ("INT", 0, ())])
    needles = [b"k: ", b"Launch!", b"accept"]
    plan = (ROW, (), {})
    for envelope, stamp in (
        (CMATCH.ENV_DATED, b"[2026-02-26 10:00:00 TP0] "),
        (CMATCH.ENV_YEARLESS, b"INFO 02-26 10:00:00 [m.py:1] "),
    ):
        program = CMATCH.Program(b"[", b"] ", [bare, dated], needles, 1, envelope)
        buf = b"\nk: 5\n" + stamp + b"k: 6\n x k: 7\n" + stamp + b"k: 8\n"
        got = program.scan(buf, 1, len(buf), 0, [plan, plan], 2026, 2)
        assert got is not None and got[2] == [1, 2] and got[1].startswith(b"||||5\r\n2026-02-26|10:00:00||")
        if envelope == CMATCH.ENV_YEARLESS:  # no year: the bare line is said, the scan stops at the dated one
            got = program.scan(buf, 1, len(buf), 0, [plan, plan], 0, 0, True)
            assert got is not None and got[1] == b"||||5\r\n" and got[8] == buf.index(stamp)
    with pytest.raises(ValueError, match="first step only"):
        CMATCH.Program(b"[", b"] ", [native.codes(CMATCH, [("LIT", -1, (b"k",)), ("BARE", -1, ())])], needles, 1)


TYPED_STEPS = [("LIT", -1, (b"n: ",)), ("INT", 0, ()), ("LIT", -1, (b", x: ",)), ("FLOAT", 1, ()),
               ("LIT", -1, (b", ok: ",)), ("BOOL", 2, ()), ("LIT", -1, (b", s: ",)), ("STR", 3, ())]  # fmt: skip
TYPED_FIELDS = (
    (0,),
    (b'"', 1, b"T", 2, 3, b'"'),
    (JSON_RANK,),
    (SLOT,),
    (SLOT + 1,),
    (BOOL_SLOT + 2,),
    (b'"', b"<", SLOT + 3, b">", b'"'),
    (-1,),
)
TYPED_NAMES = ("line", "timestamp", "rank", "n", "x", "ok", "s", "d")


class _Values(dict):
    def __missing__(self, key):
        return (json.loads(key),)


def _typed(fields=TYPED_FIELDS, names=TYPED_NAMES, shape=None):
    shape = {"file": "f.log", **dict.fromkeys(names)} if shape is None else shape
    return (fields, (1,), _Values(), shape, names, "owner")


@pytest.mark.parametrize(
    ("line", "values"),
    [
        (
            b"[2026-02-26 10:00:00.125 TP0] n: 7, x: 2.50, ok: True, s: a b",
            (41, "2026-02-26T10:00:00.125", "TP0", 7, 2.5, True, "<a b>", 2.5),
        ),
        (
            b"[2026-02-26 10:00:00] n: 0, x: 3.0, ok: False, s: #-~",
            (41, "2026-02-26T10:00:00", None, 0, 3.0, False, "<#-~>", 3.0),
        ),
    ],
)
def test_a_typed_plan_gives_each_row_as_json_loads_reads_its_json_cells(line, values):
    """A typed plan's row is (owner, a copy of the shape with each varying field set), of the types json.loads gives
    of the JSON cells the same steps stand for: an int, a float, a bool, a str, None for no rank, a derived value."""
    program = _program(TYPED_STEPS)
    buf = b"\n" + line + b"\n"
    plan = _typed()
    got = program.scan(buf, 1, len(buf), 40, [plan])
    assert got is not None and got[0] == 1
    [(owner, row)] = got[1]
    want = {"file": "f.log", **dict(zip(TYPED_NAMES, values, strict=True))}
    assert owner == "owner" and row == want and list(row) == list(want)
    assert [type(v) for v in row.values()] == [type(v) for v in want.values()]
    assert row["file"] is plan[3]["file"] and plan[3]["n"] is None  # the shape is copied, its values shared
    json_row = b"[" + b",".join(json.dumps(v).encode() for v in values) + b"]"
    assert list(row.values())[1:] == json.loads(json_row)


def test_a_typed_plan_without_a_shape_gives_each_row_its_varying_values_alone():
    """A typed plan whose shape is None (a plan of tuples): each row is (owner, the varying fields' values in the order
    of its names), the values and types the plan with a shape sets."""
    program = _program(TYPED_STEPS)
    line = b"[2026-02-26 10:00:00.125 TP0] n: 7, x: 2.50, ok: True, s: a b"
    buf = b"\n" + line + b"\n"
    [(_, as_dict)] = program.scan(buf, 1, len(buf), 40, [_typed()])[1]
    plan = _typed()
    got = program.scan(buf, 1, len(buf), 40, [(*plan[:3], None, *plan[4:])])
    assert got is not None and got[0] == 1
    [(owner, row)] = got[1]
    want = tuple(as_dict[name] for name in TYPED_NAMES)
    assert owner == "owner" and type(row) is tuple and row == want
    assert [type(v) for v in row] == [type(v) for v in want]


def test_a_row_of_values_alone_is_left_to_reference_counting_and_one_holding_a_list_is_not():
    """A plan of tuples' row whose values are atomic (numbers, bools, strings, None) is untracked by the cyclic
    collector, as the interpreter untracks such a tuple at its first collection: a block's rows, alive until their
    turn, are not walked by each young collection. A row holding a list (per-position rates) stays tracked."""
    import gc

    program = _program(TYPED_STEPS)
    line = b"[2026-02-26 10:00:00.125 TP0] n: 7, x: 2.50, ok: True, s: a b"
    buf = b"\n" + line + b"\n"
    plan = _typed()
    [(_, row)] = program.scan(buf, 1, len(buf), 40, [(*plan[:3], None, *plan[4:])])[1]
    assert type(row) is tuple and not gc.is_tracked(row)
    listed = _program([("LIT", -1, (b"n: ",)), ("INT", 0, ())])
    memo = {b"7": ([1.5, 2.0],)}
    of_list = (((SLOT,), (-1,)), (0,), memo, None, ("n", "l"), None)
    buf = b"\n" + STAMP + b"n: 7\n"
    [(_, row)] = listed.scan(buf, 1, len(buf), 0, [of_list])[1]
    assert row == (7, [1.5, 2.0]) and gc.is_tracked(row)


def test_a_typed_plan_with_a_shape_that_is_not_a_dict_is_refused():
    program = _program(TYPED_STEPS)
    plan = _typed()
    with pytest.raises(ValueError, match="dict shape or None"):
        program.scan(b"\nx\n", 1, 3, 0, [(*plan[:3], [], *plan[4:])])


def test_a_typed_scan_lists_its_entries_with_their_rows_and_copies_a_derived_list():
    """The careful path's entries carry a typed row as (owner, dict); a derived list is each row's own."""
    program = _program([("LIT", -1, (b"n: ",)), ("INT", 0, ())])
    memo = {b"7": ([1.5, 2.0],)}
    plan = (((SLOT,), (-1,)), (0,), memo, {"n": None, "l": None}, ("n", "l"), None)
    buf = b"\n" + STAMP + b"n: 7\n" + STAMP + b"n: 7\n"
    entries: list[tuple[int, int, bytes]] = []
    got = program.scan(buf, 1, len(buf), 0, [plan], 0, 0, False, entries)
    assert got is not None and got[1] == [(None, {"n": 7, "l": [1.5, 2.0]})] * 2
    assert [e[2] for e in entries] == got[1] and entries[0][2][1] is got[1][0][1]
    lists = [got[1][0][1]["l"], got[1][1][1]["l"], memo[b"7"][0]]
    assert len({id(x) for x in lists}) == 3
    memo[b"7"] = ({"a": 1},)
    with pytest.raises(TypeError, match="scalar or a list of scalars"):
        program.scan(buf, 1, len(buf), 0, [plan])


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (((SLOT + 3,),), "not a value"),  # a str group read as a number
        (((b'"', SLOT, b'"'),), "not a value"),  # an int group as a string (only STR's text is read back as is)
        (((b'"', b"a\\n", 1, b'"'),), "not a value"),  # a literal JSON would unescape
        (((b'"', 1),), "not a value"),
        (((BOOL_SLOT + 0,),), "not a value"),  # an int group as a bool
        (((b"7",),), "not a value"),
        (((SLOT + 9,),), "does not capture"),
    ],
)
def test_typed_fields_the_scan_cannot_build_exactly_are_refused(fields, error):
    program = _program(TYPED_STEPS)
    buf = b"\n" + STAMP + b"n: 7, x: 2.5, ok: True, s: a\n"
    with pytest.raises(ValueError, match=error):
        program.scan(buf, 1, len(buf), 0, [_typed(fields, ("a",) * len(fields))])
    with pytest.raises(TypeError, match="name is a str"):
        program.scan(buf, 1, len(buf), 0, [_typed(((0,),), (b"a",), {})])
    with pytest.raises(ValueError, match="a name per field"):
        program.scan(buf, 1, len(buf), 0, [_typed(((0,),), ("a", "b"), {})])


def test_a_scan_refuses_typed_and_byte_plans_together():
    assert CMATCH is not None
    two = [native.codes(CMATCH, [("LIT", -1, (b"k: ",)), ("INT", 0, ())])] * 2
    program = CMATCH.Program(SHAPE.prefix, SHAPE.suffix, two, [b"zq", b"Launch!", b"accept"], 1)
    buf = b"\n" + STAMP + b"k: 7\n"
    typed = (((SLOT,),), (), {}, {"k": None}, ("k",), None)
    with pytest.raises(ValueError, match="all typed or none"):
        program.scan(buf, 1, len(buf), 0, [typed, (ROW, (), {})])
    got = program.scan(buf, 1, len(buf), 0, [typed, False])
    assert got is not None and got[1] == [(None, {"k": 7})]


# ---- converted groups: a percentage and a list, as the parser's converters give them --------------------------

CONVERT_STEPS = [("LIT", -1, (b"p: ",)), ("LFLOAT", 0, ()), ("LIT", -1, (b"%, l: ",)), ("LIST", 1, ())]
SHORT_FLOAT = st.from_regex(r"\A(0|[1-9][0-9]{0,2})(\.0{0,6}[0-9]{1,3})?\Z", fullmatch=True)
"""The usual spellings (``57.3``, ``0.0004``), which C reads and prints from their digits (``cmatch_convert.c``)."""
EDGES = (
    "100 100.0 100.000000001 0 0.0 99.999999995 12.345678905 0.000000005 57.3 007.50 0.01 0.001 0.0001 0.00001 "
    "0.005 0.0005 100.000000 0.000001 99.999999 123456789012345 1234567890123456 0.000000000000000000001 "
    "0.1234567890123456789012 999999999999999.9 0.00000000000000000000001"
).split()
"""Ties at the 8th digit, over 100, and the edges of C's exact reading: 15 and 16 digits, 22 and 23 decimals."""
LOOSE_FLOAT = st.from_regex(r"\A[0-9]{1,30}(\.[0-9]{1,30})?\Z", fullmatch=True) | SHORT_FLOAT | st.sampled_from(EDGES)


def _converted(p: str, rates: list[str], plan: tuple) -> Any:
    program = _program(CONVERT_STEPS)
    buf = b"\n" + STAMP + f"p: {p}%, l: {', '.join(rates)}".encode() + b"\n"
    return program.scan(buf, 1, len(buf), 0, [plan])


@settings(max_examples=600, deadline=None)
@given(LOOSE_FLOAT, st.lists(LOOSE_FLOAT, min_size=1, max_size=16))
def test_a_converted_group_is_the_converters_value_and_cell(p, rates):
    """A percentage's fraction and a list's floats, built by C, are what ``to_percent`` and ``to_float_list``
    give, of the same type, and their CSV and JSON cells are what the table writers print; a percentage the
    converter refuses (over 100) is refused by the scan too (ValueError: the lane leaves it to the parser)."""
    from acceptmon.parse.fast.pieces import csv_cell, json_cell
    from acceptmon.parse.fast.rows import CONV_FLOATS_CSV, CONV_FLOATS_JSON, CONV_PERCENT, CONV_SLOT
    from acceptmon.parse.values import to_float_list, to_percent

    def code(conv: int, slot: int) -> int:
        return CONV_SLOT + 256 * conv + slot

    csv = ((code(CONV_PERCENT, 0), b"|", code(CONV_FLOATS_CSV, 1), b"\n"), (), {})
    jsonl = ((code(CONV_PERCENT, 0), b"|", code(CONV_FLOATS_JSON, 1), b"\n"), (), {})
    typed = (((code(CONV_PERCENT, 0),), (code(CONV_FLOATS_JSON, 1),)), (), {}, {"p": None, "l": None}, ("p", "l"), 0)
    text = ", ".join(rates)
    try:
        fraction = to_percent(p)
    except ValueError:
        for plan in (csv, jsonl, typed):
            with pytest.raises(ValueError, match="from 0 to 100"):
                _converted(p, rates, plan)
        return
    floats = to_float_list(text)
    assert _converted(p, rates, csv)[1] == csv_cell(fraction) + b"|" + csv_cell(floats) + b"\n"
    assert _converted(p, rates, jsonl)[1] == json_cell(fraction) + b"|" + json_cell(floats) + b"\n"
    [(_, row)] = _converted(p, rates, typed)[1]
    assert row == {"p": fraction, "l": floats} and type(row["p"]) is float
    assert all(type(v) is float for v in row["l"])


def test_a_conversion_is_only_of_the_step_that_reads_its_text():
    """A percentage is converted only from the LFLOAT step's text, a list only from the LIST step's."""
    from acceptmon.parse.fast.rows import CONV_FLOATS_CSV, CONV_PERCENT, CONV_SLOT

    for bad in (CONV_SLOT + 256 * CONV_PERCENT + 1, CONV_SLOT + 256 * CONV_FLOATS_CSV + 0, CONV_SLOT + 256 * 3):
        with pytest.raises(ValueError, match="does not capture"):
            _converted("5", ["0.5"], ((bad, b"\n"), (), {}))


def test_a_dependency_reaches_the_memo_as_its_text_or_its_converted_value():
    """A derived cell's memo is keyed by what its dependencies' kinds say: the text (bytes), the INT or FLOAT
    step's number, a percentage's fraction, a list's floats as a tuple; a kind its step does not read is refused."""
    from acceptmon.parse.fast.rows import DEP_FLOATS, DEP_NUMBER, DEP_PERCENT, DEP_TEXT

    keys: list[Any] = []

    class Memo(dict):
        def __missing__(self, key):
            keys.append(key)
            return (b"x",)

    steps = [("LIT", -1, (b"n: ",)), ("INT", 0, ()), ("LIT", -1, (b", p: ",)), ("LFLOAT", 1, ()),
             ("LIT", -1, (b"%, l: ",)), ("LIST", 2, ())]  # fmt: skip
    program = _program(steps)
    buf = b"\n" + STAMP + b"n: 12, p: 57.30%, l: 0.8370, 1, 2.5\n"
    deps = (0 + 256 * DEP_NUMBER, 1 + 256 * DEP_PERCENT, 2 + 256 * DEP_FLOATS, 0 + 256 * DEP_TEXT)
    got = program.scan(buf, 1, len(buf), 0, [((-1, b"\n"), deps, Memo())])
    assert got is not None and got[1] == b"x\n"
    assert keys == [(12, 0.573, (0.837, 1.0, 2.5), b"12")]
    assert [type(v) for v in keys[0]] == [int, float, tuple, bytes]
    for bad in (1 + 256 * DEP_NUMBER, 0 + 256 * DEP_PERCENT, 1 + 256 * DEP_FLOATS, 0 + 256 * 9):
        with pytest.raises(ValueError, match="dependency"):
            program.scan(buf, 1, len(buf), 0, [((-1, b"\n"), (bad,), Memo())])


def test_a_callable_memo_is_called_for_every_row():
    """A plan that remembers nothing hands the compiled matcher a callable: it is called once per row, with the
    key a mapping would be asked for."""
    calls: list[Any] = []

    def cells(key):
        calls.append(key)
        return (key,)

    program = _program([("LIT", -1, (b"n: ",)), ("INT", 0, ())])
    buf = b"\n" + STAMP + b"n: 7\n" + STAMP + b"n: 7\n"
    got = program.scan(buf, 1, len(buf), 0, [((-1, b"\n"), (0,), cells)])
    assert got is not None and got[1] == b"7\n7\n" and calls == [b"7", b"7"]


def test_a_dict_memo_is_read_as_its_brackets_read_it():
    """A dict memo's entries are looked up in C (no Python call a row), a miss goes to its ``__missing__``; a dict
    whose ``__getitem__`` is its own is asked through it, every row."""
    missed: list[Any] = []
    asked: list[Any] = []

    class Missing(dict):
        def __missing__(self, key):
            missed.append(key)
            self[key] = (b"m" + key,)
            return self[key]

    class Own(dict):
        def __getitem__(self, key):
            asked.append(key)
            return (b"o" + key,)

    program = _program([("LIT", -1, (b"n: ",)), ("INT", 0, ())])
    buf = b"\n" + STAMP + b"n: 7\n" + STAMP + b"n: 8\n" + STAMP + b"n: 7\n"
    memo = Missing({b"8": (b"k8",)})
    got = program.scan(buf, 1, len(buf), 0, [((-1, b"\n"), (0,), memo)])
    assert got is not None and got[1] == b"m7\nk8\nm7\n" and missed == [b"7"]
    got = program.scan(buf, 1, len(buf), 0, [((-1, b"\n"), (0,), Own({b"7": (b"never",)}))])
    assert got is not None and got[1] == b"o7\no8\no7\n" and asked == [b"7", b"8", b"7"]


def _rows(tables: list[tuple[Any, Any]], n: int) -> tuple[bytearray, tuple[bool, ...]]:
    """The tables laid out as ``block_totals_each`` reads them (:func:`bootstrap.packed`'s layout): start by start, each
    table's sum and, where it has counts, its count, 8 bytes each."""
    rows = bytearray()
    for i in range(n):
        for sums, counts in tables:
            rows += struct.pack("=d", sums[i]) + (b"" if counts is None else struct.pack("=q", counts[i]))
    return rows, tuple(counts is not None for _, counts in tables)


def _totals(draws: list[bytes], n: int, tables: list[tuple[Any, Any]]) -> list[list[tuple[float, int | None]]]:
    """``block_totals_each`` over the tables laid out as the bootstrap packs them."""
    assert CMATCH is not None
    return CMATCH.block_totals_each(draws, n, *_rows(tables, n))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6) | st.just(math.nan), min_size=1, max_size=300),
    st.integers(1, 40),
    st.binary(min_size=8, max_size=8 * 60).filter(lambda b: len(b) % 8 == 0),
)
def test_block_totals_adds_what_the_bootstrap_adds_in_python(values, length, draws):
    """The compiled replicate loop gives bootstrap.py's block sums bit for bit, with and without counts."""
    assert CMATCH is not None
    column, n = array("d", values), len(values)
    sums, counts = bootstrap._block_sums(column, min(length, n))  # a block is never longer than its column
    for table in (counts, None):
        want = bootstrap.block_totals(draws, n, sums, table)
        got = _totals([draws, draws], n, [(sums, table)])[1][0]
        assert got[1] == want[1]
        assert got[0] == want[0] or (math.isnan(got[0]) and math.isnan(want[0]))
        assert struct.pack("d", got[0]) == struct.pack("d", want[0])  # -0.0, and a NaN's bits, alike


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 300),
    st.lists(st.integers(0, 2**64 - 1) | st.sampled_from(["0", "-1", "n", "n-1", "top"]), min_size=2),
)
def test_block_starts_are_each_draw_mod_n_at_the_edges(n, picks):
    """The compiled loop's draw mod n (no division where the compiler has 128-bit integers) is Python's ``%``, at the
    edges too: multiples of n and one short of them, 2**64 - 1, and the largest multiple of n below 2**64."""
    top = (2**64 - 1) // n * n
    edge = {"0": 0, "-1": 2**64 - 1, "n": 7 * n, "n-1": 7 * n - 1, "top": top}
    values = [edge[p] if isinstance(p, str) else p for p in picks]
    draws = b"".join(v.to_bytes(8, "little") for v in values)
    sums = array("d", [float(2**i % 1000003) for i in range(n)] + [0.0])  # each start's own sum; a 0 pad, as made
    got = _totals([draws], n, [(sums, None)])[0][0][0]
    assert got == sum((sums[v % n] for v in values[:-1]), 0.0) == bootstrap.block_totals(draws, n, sums, None)[0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(-1e6, 1e6) | st.just(math.nan), min_size=12, max_size=12), min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.lists(st.binary(min_size=8, max_size=8 * 30).filter(lambda b: len(b) % 8 == 0), max_size=4),
)
def test_block_totals_of_several_tables_are_each_one_alone(columns, counted, draws):
    """The draws read once for every table: each table's totals are what it gives alone, bit for bit."""
    assert CMATCH is not None
    tables = []
    for column, with_counts in zip(columns, counted, strict=False):
        sums, counts = bootstrap._block_sums(array("d", column), 3)
        tables.append((sums, counts if with_counts else None))
    together = _totals(draws, 12, tables)
    alone = [_totals(draws, 12, [table]) for table in tables]
    assert len(together) == len(draws) and all(len(row) == len(tables) for row in together)
    for j in range(len(tables)):
        for r in range(len(draws)):
            got, want = together[r][j], alone[j][r][0]
            assert got[1] == want[1] and struct.pack("d", got[0]) == struct.pack("d", want[0])


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**64), st.integers(0, 1300), st.integers(0, 4), st.integers(0, 700))
def test_random_bytes_are_the_generators_randbytes(seed, used, k, words):
    """The compiled draws are ``randbytes``'s, from any place in the generator's state (across its refills of 624
    words), and leave the generator where ``randbytes`` leaves it."""
    assert CMATCH is not None
    rng, mine = random.Random(seed), random.Random(seed)
    for r in (rng, mine):
        for _ in range(used):
            r.getrandbits(32)  # one word each
    want = [rng.randbytes(4 * words) for _ in range(k)]
    assert bootstrap.random_bytes(mine, k, 4 * words) == want
    assert mine.getstate() == rng.getstate() and mine.random() == rng.random()
    fresh = random.Random(seed)
    got, after = CMATCH.random_bytes(fresh.getstate()[1], k, 4 * words)
    assert got == [fresh.randbytes(4 * words) for _ in range(k)] and after == fresh.getstate()[1]


def test_random_bytes_refuse_a_state_they_cannot_read():
    assert CMATCH is not None
    internal = random.Random(1).getstate()[1]
    for bad in (internal[:-1], (*internal[:-1], 625), (*internal[:-1], -1), (2**32, *internal[1:])):
        with pytest.raises(ValueError):
            CMATCH.random_bytes(bad, 1, 8)
    with pytest.raises(ValueError):
        CMATCH.random_bytes(internal, 1, 6)  # not whole words
    with pytest.raises(ValueError):
        CMATCH.random_bytes(internal, -1, 8)
    with pytest.raises(TypeError):
        CMATCH.random_bytes(("a",) * 625, 1, 8)
    assert bootstrap.random_bytes(random.Random(2), 2, 6) == [random.Random(2).randbytes(6), _second(2, 6)]


def _second(seed: int, size: int) -> bytes:
    rng = random.Random(seed)
    rng.randbytes(size)
    return rng.randbytes(size)


def test_block_totals_refuses_what_it_cannot_read():
    """A ragged or empty draw, n <= 0, rows shorter than n starts of the cells counted says: a ValueError, never a read
    past the end; and pack_spans refuses a prefix of another type or too short, cells past a row, rows it cannot
    write."""
    assert CMATCH is not None
    sums, counts, draws = array("d", [1.0, 2.0, 0.0]), array("q", [1, 1, 0]), bytes(16)
    rows, counted = _rows([(sums, counts), (sums, None)], 2)
    assert CMATCH.block_totals_each([draws], 2, rows, counted) == [[(1.0, 1), (1.0, None)]]  # the first of two: 0
    assert CMATCH.block_totals_each([], 2, rows, counted) == [] and CMATCH.block_totals_each([draws], 2, b"", ()) == [
        []
    ]
    for bad in (
        ([bytes(15)], 2, rows, counted),
        ([b""], 2, rows, counted),
        ([draws], 0, rows, counted),
        ([draws], 3, rows, counted),  # rows of fewer starts than n
        ([draws], 2, rows, (True, True)),  # or fewer cells than counted says
    ):
        with pytest.raises(ValueError):
            CMATCH.block_totals_each(*bad)
    with pytest.raises(TypeError):
        CMATCH.block_totals_each([draws], 2, rows, [True, False])
    prefix, cprefix = array("d", [0.0, 1.0, 3.0]), array("q", [0, 1, 2])  # the column [1.0, 2.0], blocks of 1
    packed = bytearray(48)
    CMATCH.pack_spans(packed, 3, 0, prefix, cprefix, 2, 1)  # start by start: sum, count, sum
    CMATCH.pack_spans(packed, 3, 2, prefix, None, 2, 1)
    assert packed == struct.pack("=dqddqd", 1.0, 1, 1.0, 2.0, 1, 2.0) == rows
    for wrong in (
        (packed, 3, 2, prefix, cprefix, 2, 1),  # a count past the row
        (packed, 3, 0, prefix, None, 3, 1),  # a prefix too short for n
        (packed, 3, 0, prefix, None, 2, 2),  # or for the blocks' length
        (packed, 3, 0, array("f", [0.0, 1.0, 3.0]), None, 2, 1),
        (packed, 3, 0, prefix, array("i", [0, 1, 2]), 2, 1),
        (packed, 3, 0, prefix, None, 0, 1),
        (bytearray(40), 3, 0, prefix, None, 2, 1),  # rows too short
        (bytes(48), 3, 0, prefix, None, 2, 1),  # rows not writable
    ):
        with pytest.raises((ValueError, BufferError)):
            CMATCH.pack_spans(*wrong)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.just(-0.0), min_size=8, max_size=8),
        min_size=1,
        max_size=3,
    ),
    st.integers(1, 8),
)
def test_packed_rows_hold_the_block_sums_python_makes(columns, length):
    """bootstrap.packed's rows (made in place from prefix sums) hold bootstrap.py's own block sums and counts, bit for
    bit, laid out start by start."""
    floats = [array("d", column) for column in columns]
    rows, counted = bootstrap.packed(floats, length)
    with mock.patch.object(native, "load", lambda: None):  # bootstrap.py's own additions
        tables = [bootstrap._block_sums(column, length) for column in floats]
    want, says = _rows(tables, 8)
    assert bytes(rows) == bytes(want) and counted == says


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64) | st.just(-0.0), min_size=1, max_size=300),
    st.integers(0, 1 << 20),
    st.integers(1, 40),
)
def test_prefix_and_block_sums_are_what_the_bootstrap_adds_in_python(values, at, length):
    """The compiled prefix sums (twice round the column, NaN as 0.0 and not counted) and block sums give
    bootstrap.py's own, bit for bit: the same additions in the same order."""
    assert CMATCH is not None
    column, n = array("d", values), len(values)
    upto, width = at % (2 * n + 1), min(length, n)
    got = [bootstrap._prefixes(column, upto), bootstrap._block_sums(column, width)]
    with mock.patch.object(native, "load", lambda: None):  # bootstrap.py's own additions
        want = [bootstrap._prefixes(column, upto), bootstrap._block_sums(column, width)]
    assert [[None if a is None else a.tobytes() for a in pair] for pair in got] == [
        [None if a is None else a.tobytes() for a in pair] for pair in want
    ]


def test_prefix_sums_and_spans_refuse_what_they_cannot_read_or_write():
    """A column of no value, upto past twice the column, a wrong array type, a too short or read-only output: a
    ValueError or TypeError, never a write past the end."""
    assert CMATCH is not None
    column, prefix, counts = array("d", [1.0, math.nan]), array("d", bytes(40)), array("q", bytes(40))
    CMATCH.prefix_sums(column, 4, prefix, counts)
    assert list(prefix) == [0.0, 1.0, 1.0, 2.0, 2.0] and list(counts) == [0, 1, 1, 2, 2]
    out = array("d", bytes(16))
    CMATCH.spans(prefix, 2, 2, out)
    assert list(out) == [1.0, 1.0]
    for bad in (
        (array("d"), 0, prefix, None),
        (column, 5, prefix, None),
        (column, -1, prefix, None),
        (column, 4, array("d", bytes(32)), None),
        (column, 2, prefix, array("i", bytes(12))),
        (array("f", [1.0]), 1, prefix, None),
    ):
        with pytest.raises(ValueError):
            CMATCH.prefix_sums(*bad)
    with pytest.raises(BufferError):
        CMATCH.prefix_sums(column, 2, bytes(24), None)  # read-only
    for bad_spans in (
        (prefix, 4, 2, array("d", bytes(32))),
        (prefix, 2, 2, array("d", bytes(8))),
        (prefix, -1, 0, out),
    ):
        with pytest.raises(ValueError):
            CMATCH.spans(*bad_spans)
    with pytest.raises(ValueError):
        CMATCH.spans(counts, 2, 2, array("d", bytes(16)))  # counts' sums into floats


BOUNDS = [(1.0, 1000.0), (0.0, 1.0), (0, math.inf), (0.0, math.inf)]
"""VALID's kinds of bounds: an accept length's, a rate's, a count's, a throughput's."""
ODD = [None, True, False, "1", 1.5, 2**53, 2**53 + 1, -(2**70), 2**70, 2**1100, -0.0, math.inf, -math.inf, math.nan]


class _Float(float):
    pass


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.none()
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.integers(-(2**80), 2**80)
        | st.sampled_from(ODD)
        | st.builds(_Float, st.floats(0, 2)),
        max_size=40,
    ),
    st.sampled_from(BOUNDS),
    st.booleans(),
)
def test_bounded_answers_what_the_python_check_of_a_column_does(values, bounds, as_tuple):
    """The compiled check of a column against a field's bounds (plain.py's ``_bounded``): the same count of values
    logged, or the same refusal, for ints past 2**53 and past any float, bools, subclasses, text, NaN, infinities."""
    assert CMATCH is not None
    column = tuple(values) if as_tuple else values
    assert CMATCH.bounded(column, *bounds) == plain._bounded(column, *bounds)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.just(-0.0), max_size=40),
    st.lists(st.integers(-(2**63), 2**63 - 1) | st.sampled_from([2**53, 2**53 + 1, -(2**53) - 1]), max_size=40),
    st.sampled_from(BOUNDS),
)
def test_bounded_reads_an_array_as_its_values(floats, ints, bounds):
    """A column of machine values (an array of doubles or of 64-bit ints, as the lane keeps numbers) gets the answer
    its values get as a list, ints past 2**53 compared exactly."""
    assert CMATCH is not None
    assert (
        CMATCH.bounded(array("d", floats), *bounds)
        == CMATCH.bounded(floats, *bounds)
        == plain._bounded(floats, *bounds)
    )
    assert CMATCH.bounded(array("q", ints), *bounds) == CMATCH.bounded(ints, *bounds) == plain._bounded(ints, *bounds)
    assert CMATCH.bounded(array("i", [1, 2]), 0, 1) == -1 == plain._bounded([1, 2], 0, 1)  # (read as objects)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "", "DP1 TP4"]), st.none() | st.integers(-3, 3) | st.floats(width=32))
    ),
    st.booleans(),
)
def test_grouped_is_the_python_grouping(pairs, as_tuple):
    """Values grouped by their line's key (None left out), the keys in the order of their first value kept: the same
    dict, in the same order, from C as from Python."""
    assert CMATCH is not None
    keys, values = [k for k, _ in pairs], [v for _, v in pairs]
    if as_tuple:
        keys, values = tuple(keys), tuple(values)  # type: ignore[assignment]
    with mock.patch.object(native, "load", lambda: None):
        want = plain.grouped(keys, values)
    got = CMATCH.grouped(keys, values)
    assert got == want and list(got) == list(want) and plain.grouped(keys, values) == want
    assert all(v is not None for vs in want.values() for v in vs)


def test_grouped_leaves_keys_that_are_not_text_to_python():
    assert CMATCH is not None
    assert CMATCH.grouped([1, "a"], [1, 2]) is None
    assert plain.grouped([1, "a", 1], [1, 2, None]) == {1: [1], "a": [2]}
    with pytest.raises(ValueError):
        CMATCH.grouped(["a"], [1, 2])
    with pytest.raises(ValueError):
        plain.grouped(["a"], [1, 2])


def test_bounded_compares_ints_exactly_and_refuses_what_is_no_column():
    assert CMATCH is not None
    assert CMATCH.bounded([2**1100, 3], 0, math.inf) == 2  # an int is below infinity however large
    assert CMATCH.bounded([2**53 + 1], 0, 2.0**53) == -1  # not rounded to 2**53 on the way
    assert CMATCH.bounded([1000, 1.0, None], 1.0, 1000.0) == 2
    assert CMATCH.bounded([], 0, 1) == 0
    for bounds in BOUNDS:
        assert CMATCH.bounded([1.0, math.nan], *bounds) == -1 == plain._bounded([1.0, math.nan], *bounds)
    with pytest.raises(TypeError):
        CMATCH.bounded(3, 0, 1)


_ENTRY = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True) | st.sampled_from([2**70, "", "x"])


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 30).flatmap(lambda n: st.lists(st.lists(_ENTRY, min_size=n, max_size=n), min_size=2, max_size=4)),
       st.lists(st.sampled_from(["list", "tuple", "bytes", "map"]), min_size=4, max_size=4))  # fmt: skip
def test_every_ands_the_masks_as_the_python_does(columns, forms):
    """The doctor's masks and-ed (detector.py's ``every`` of several columns): the same bytes from C as from
    :func:`~acceptmon.diagnose.detector.marks`, whatever each column is (a list, a tuple, a mask ``every`` gave, an
    iterator read once) and whatever its values' truth (None, 0, NaN, an empty string, a big int)."""
    from acceptmon.diagnose.detector import marks

    assert CMATCH is not None

    def made(column, form):
        if form == "bytes":
            return bytes(map(bool, column))
        return tuple(column) if form == "tuple" else iter(column) if form == "map" else column

    want = marks([made(c, f) for c, f in zip(columns, forms, strict=False)])
    got = CMATCH.every([made(c, f) for c, f in zip(columns, forms, strict=False)])
    assert got == want and len(got) == len(columns[0])
    assert set(got) <= {0, 1}


_NUMBER = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True)
_TEST = st.none() | st.tuples(
    st.sampled_from([None, operator.lt, operator.le, operator.gt, operator.ge, operator.eq]),
    st.integers(-3, 3) | st.floats(allow_nan=True),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 30).flatmap(lambda n: st.lists(st.lists(_NUMBER, min_size=n, max_size=n), min_size=1, max_size=4)),
    st.lists(_TEST, min_size=4, max_size=4),
)
def test_every_asks_each_test_as_python_does(columns, tests):
    """The doctor's tests of a column (whether a value is logged, is None, or compares with a bound; a None's answer
    given; turned over), asked in C by ``every``: the same mask as their entries made in Python and and-ed."""
    from acceptmon.diagnose import detector

    masks = [c if t is None else detector.Test(c, *t) for c, t in zip(columns, tests, strict=False)]
    entries = [m.entries() if type(m) is detector.Test else m for m in masks]
    want = list(map(bool, detector.marks(entries))) if len(masks) > 1 else list(map(bool, entries[0]))
    got = detector.every(*masks)
    with mock.patch.object(native, "load", lambda: None):
        python = detector.every(*masks)
    assert list(map(bool, got)) == want == list(map(bool, python))


def test_every_refuses_a_test_it_cannot_ask():
    assert CMATCH is not None
    with pytest.raises(ValueError, match="one test per column"):
        CMATCH.every([[1], [1]], [None])
    with pytest.raises(ValueError, match="-3 to 5"):
        CMATCH.every([[1], [1]], [None, (9, 0, False, False)])
    with pytest.raises(ValueError, match="truth alone"):
        CMATCH.every([b"\x01", [1]], [(CMATCH.TEST_KNOWN, None, False, False), None])
    assert CMATCH.every([[None, 2], [1, 1]], [(CMATCH.TEST_NONE, None, False, False), None]) == b"\x01\x00"


def test_every_refuses_columns_of_two_lengths_and_no_column():
    assert CMATCH is not None
    assert CMATCH.every([[1, 0, 2.5], b"\x01\x01\x00", (True, True, True)]) == b"\x01\x00\x00"
    with pytest.raises(ValueError, match="one length"):
        CMATCH.every([[1, 1], [1]])
    with pytest.raises(ValueError, match="needs a column"):
        CMATCH.every([])
    with pytest.raises(TypeError):
        CMATCH.every([3, [1]])


_COUNTER = st.integers(0, 2**20) | st.integers(-(2**55), 2**55) | st.sampled_from([0, 1, 2**53, -(2**53)])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_COUNTER, _COUNTER, st.none() | _COUNTER, st.none() | st.integers(-3, 9) | st.sampled_from([2**40])),
        max_size=30,
    ),
    st.none() | st.tuples(_COUNTER, _COUNTER, st.none() | _COUNTER),
    st.booleans(),
    st.booleans(),
)
def test_intervals_closes_each_line_as_the_python_loop_does(lines, before, launched, rising):
    """The compiled loop of counters since server start (tokens.py's ``Intervals.close_each``): each line's interval
    length and rate, rounded, bit for bit, or None where Python's exact ints must take over (a number past 2**53),
    with and without the counters before and the run's launch, counters that go back, no emitted count, no width."""
    assert CMATCH is not None
    if rising:  # counters as a server logs them: rising from line to line
        total = [0, 0, 0]
        rows = []
        for a, d, e, k in lines:
            total = [total[0] + abs(a) % 5000, total[1] + abs(d) % 9000, total[2] + abs(e or 0) % 9000]
            rows.append((total[0], total[1], None if e is None else total[2], k))
        lines = rows
    key = ("f.log", "", 1, "")
    columns = tuple(list(c) for c in zip(*lines, strict=True)) if lines else ([], [], [], [])
    want = tokens.Intervals()
    got = tokens.Intervals()
    for state in (want, got):
        if before is not None:
            state._last[key] = before
        if launched:
            state.launch(key[:3])
    expected = want.close_each(key, iter(lines))
    compiled = CMATCH.intervals(*columns, got._last.get(key), before is not None or launched) if lines else []
    if compiled is None:  # a count, a difference or a product with the width past 2**53
        rows = [*lines, (*before, 1)] if before is not None else lines
        widest = max(abs(row[3] or 1) for row in lines)
        assert any(abs(v) * 2 * widest > 2**53 for row in rows for v in row[:3] if v is not None)
        assert got.close_columns(key, columns) == expected and got._last == want._last
        return
    assert [tuple(map(repr, pair)) for pair in compiled] == [tuple(map(repr, pair)) for pair in expected]
    assert got.close_columns(key, columns) == expected and got._last == want._last


def test_intervals_refuses_ragged_columns_and_a_bad_before():
    assert CMATCH is not None
    with pytest.raises(ValueError, match="one length"):
        CMATCH.intervals([1], [1, 2], [None], [3], None, True)
    with pytest.raises(ValueError, match="before"):
        CMATCH.intervals([1], [1], [None], [3], (1, 2), True)
    assert CMATCH.intervals([1.5], [2], [None], [3], None, True) is None  # not an int: Python's loop
    assert CMATCH.intervals([10, 25], [20, 50], [40, 95], [2, 2], (0, 0, 0), True) == [(4.0, 0.5), (3.666667, 0.5)]


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**24), st.integers(1, 2**24), st.integers(1, 16))
def test_intervals_rounds_each_ratio_as_round_does(accepted, drafted, k):
    """Each rate and length of one interval, rounded to 6 decimals as ``round`` does: from a product with 10^6 where
    it is sure to be ``round``'s, else from the decimal string (cm_round)."""
    assert CMATCH is not None
    [pair] = CMATCH.intervals([accepted], [drafted], [None], [k], (0, 0, 0), True)
    want = (round(1 + accepted * k / drafted, 6), round(accepted / drafted, 6))
    assert tuple(map(repr, pair)) == tuple(map(repr, want))


def test_intervals_rounds_ties_half_to_even_as_round_does():
    """Ratios whose product with 10^6 is a tie, or within a few units in its last place of one (odd multiples of
    2^-j: 1/128 is 7812.5 millionths), are read from the decimal string, as ``round`` reads them."""
    assert CMATCH is not None
    cases = [(odd, 2**j) for j in range(7, 30) for odd in (1, 3, 5, 7, 2**j - 1)]
    cases += [(n, d) for d in (3, 7, 9, 11, 13, 999_999, 1_000_001) for n in range(0, 3 * d, max(1, d // 7))]
    for accepted, drafted in cases:
        [pair] = CMATCH.intervals([accepted], [drafted], [None], [1], (0, 0, 0), True)
        want = (round(1 + accepted / drafted, 6), round(accepted / drafted, 6))
        assert tuple(map(repr, pair)) == tuple(map(repr, want)), (accepted, drafted)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-1e6, 1e6) | st.floats(0, 2.0**70) | st.sampled_from([0.0, -0.0, 0.99, 1.0, 2.0**63, -(2.0**63)]),
            st.floats(0, 10) | st.integers(0, 2**54),
        ),
        max_size=80,
    ),
    st.dictionaries(st.integers(0, 70), st.floats(0, 100) | st.integers(0, 5), max_size=4),
)
def test_log2_sums_are_the_python_sums_or_none(rows, totals):
    """The compiled log2 buckets give LongContext's Python buckets exactly (keys, counts, sums added in order from
    each bucket's total, first places); where a value is beyond what it reads as Python reads it (a sequence length
    of 2**63 or more, a length beyond 2**53, a total not a float), it gives None and Python does it."""
    from acceptmon.diagnose.detect_context import python_log2_sums

    assert CMATCH is not None
    seqs, lengths = [s for s, _ in rows], [x for _, x in rows]
    got = CMATCH.log2_sums(seqs, lengths, totals)
    readable = all(abs(s) < 2.0**63 for s in seqs) and all(type(x) is float or x <= 2**53 for x in lengths)
    if got is None:
        assert not readable or any(type(totals[k]) is not float for k in totals if k < 64)
        return
    want = python_log2_sums(seqs, lengths, totals)
    assert readable and [(k, c, struct.pack("d", t), f) for k, c, t, f in got] == [
        (k, c, struct.pack("d", t), f) for k, c, t, f in want
    ]


def test_log2_sums_refuses_what_it_cannot_read():
    """Columns of two lengths, or totals that are not a dict: an error, not a read past the end."""
    assert CMATCH is not None
    assert CMATCH.log2_sums([], [], {}) == [] and CMATCH.log2_sums([3.5], [2.0], {2: 1.0}) == [(2, 1, 3.0, 0)]
    assert CMATCH.log2_sums([3], [2.0], {}) is None and CMATCH.log2_sums([3.5], [None], {}) is None
    with pytest.raises(ValueError):
        CMATCH.log2_sums([1.0, 2.0], [1.0], {})
    with pytest.raises(TypeError):
        CMATCH.log2_sums([1.0], [1.0], [])
    with pytest.raises(TypeError):
        CMATCH.log2_sums(1.0, [1.0], {})


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.floats() | st.integers(-(2**60), 2**60) | st.sampled_from([True, None, -0.0]), max_size=60),
    st.floats(),
)
def test_added_adds_as_reduce_does_or_gives_none(values, start):
    """The compiled ``added`` is ``reduce(add, values, start)`` to the bit (NaN, infinities, -0.0, ints within
    2**53 alike), and None where a value is not a float or such an int (a bool, None, a larger int)."""
    assert CMATCH is not None
    got = CMATCH.added(values, start)
    readable = all(type(v) is float or (type(v) is int and abs(v) <= 2**53) for v in values)
    if not readable:
        assert got is None
        return
    want = functools.reduce(operator.add, values, start)
    assert got is not None and struct.pack("d", got) == struct.pack("d", want)
    assert struct.pack("d", plain.added(iter(values), start)) == struct.pack("d", want)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(allow_nan=True) | st.just(math.nan), max_size=200))
def test_nans_counts_an_arrays_nans_as_python_does(values):
    """``nans`` of an ``array('d')`` (or a contiguous view of one) is Python's count of NaNs; of anything else (a
    list, floats of 4 bytes, a view with a step, no buffer) None, for Python to count."""
    assert CMATCH is not None
    column = array("d", values)
    want = sum(map(math.isnan, values))
    assert CMATCH.nans(column) == want == CMATCH.nans(memoryview(column))
    stepped = memoryview(array("d", [math.nan, 0.0, 1.0]))[::2]
    assert all(CMATCH.nans(other) is None for other in (values, array("f", values), stepped, 3))


COLUMN_LINE = st.tuples(
    st.from_regex(r"\A(0|[1-9][0-9]{0,19})\Z", fullmatch=True) | st.sampled_from(["-1", "007"]),
    st.from_regex(r"\A[0-9]{1,7}\.[0-9]{1,9}\Z", fullmatch=True) | st.sampled_from(["3", "2.50", "1e5", "nan"]),
    st.booleans(),
    st.sampled_from(["a b", "a b", "#-~", "é"]),
    st.sampled_from([" TP0", " TP0", "", " DP1 TP2"]),
)


@given(lines=st.lists(COLUMN_LINE, min_size=1, max_size=30))
@settings(max_examples=200, deadline=None)
def test_a_columnar_scan_holds_the_values_of_the_rows_type_for_type(lines):
    """Asked for columns, a scan of plans of tuples keeps each field's values of every row: a column of floats or of
    ints of 64 bits as machine values, any other (an int among floats, a bigger int, texts) as a list; a row of a plan
    of dicts is a record, in its place. Made back into rows, they are the rows the scan gives without columns, value
    for value and type for type (a text the same as the row before's is that same object)."""
    from acceptmon.parse.fast import typed

    program = CMATCH.Program(
        SHAPE.prefix, SHAPE.suffix, [native.codes(CMATCH, TYPED_STEPS)] * 2, [b"zq", b"Launch!", b"accept"], 1
    )
    body = [f"[2026-02-26 10:00:0{i % 10}{rank}] n: {n}, x: {x}, ok: {ok}, s: {s}" for i, (n, x, ok, s, rank) in
            enumerate(lines)]  # fmt: skip
    buf = ("\n" + "\n".join(body) + "\n").encode()
    plan = _typed()
    tuples = (*plan[:3], None, *plan[4:])
    for plans in ([tuples, tuples], [plan, tuples]):  # the first template matches every line: its plan's rows
        try:
            want = program.scan(buf, 1, len(buf), 9, plans)
        except (ValueError, OverflowError) as e:  # a number the scan cannot read: refused the same with columns
            with pytest.raises(type(e)):
                program.scan(buf, 1, len(buf), 9, plans, 0, 0, False, None, True)
            continue
        got = program.scan(buf, 1, len(buf), 9, plans, 0, 0, False, None, True)
        assert got[0] == want[0] and got[2:] == want[2:]
        order, each, others = got[1]
        if not want[0]:
            assert (order, each, others) == (b"", [None, None], [])
            continue
        matched = want[0]
        if plans[0] is plan:  # a plan of dicts: its rows are records, in the order
            assert order == bytes([typed.RECORD]) * matched and each == [None, None] and others == want[1]
            continue
        assert order == bytes(matched) and each[1] is None and not others
        rows = typed._rows(order, each, others)
        assert [(p, list(map(type, v))) for p, v in rows] == [(p, list(map(type, v))) for p, v in want[1]]
        assert json.dumps(rows) == json.dumps(want[1])
        kept = {name: typed._column(c) for name, c in zip(TYPED_NAMES, each[0][2], strict=True)}
        assert type(kept["line"]) is array and list(kept["line"]) == [v[0] for _, v in want[1]]
        xs = [v[4] for _, v in want[1]]
        assert (type(kept["x"]) is array) == (all(type(x) is float for x in xs))
        assert (type(kept["n"]) is array) == (all(-(2**63) <= v[3] < 2**63 for _, v in want[1]))
        ranks = kept["rank"]
        assert all(a is b for a, b in itertools.pairwise(ranks) if a == b)


def test_a_columnar_scan_keeps_ints_and_floats_as_machine_values_and_the_rest_as_lists():
    """The INT step's values (at most 18 digits) are kept as 64-bit ints, the FLOAT step's and a derived float as
    doubles, the line numbers as ints; a bool and a text as lists, a text the same as one before it that object."""
    from acceptmon.parse.fast import typed

    program = _program(TYPED_STEPS)
    xs, ns = ["2.50", "1.25", "3.0", "0.5"], ["7", "0", "9" * 18, "9"]
    buf = b"\n" + b"".join(
        f"{STAMP.decode()}n: {n}, x: {x}, ok: True, s: a\n".encode() for n, x in zip(ns, xs, strict=True)
    )
    plan = _typed()
    tuples = (*plan[:3], None, *plan[4:])
    order, [(owner, n, columns)], others = program.scan(buf, 1, len(buf), 0, [tuples], 0, 0, False, None, True)[1]
    kept = dict(zip(TYPED_NAMES, map(typed._column, columns), strict=True))
    assert (owner, n, order, others) == ("owner", 4, bytes(4), [])
    assert type(kept["x"]) is array and kept["x"].tolist() == [2.5, 1.25, 3.0, 0.5]
    assert type(kept["n"]) is array and kept["n"].tolist() == [7, 0, int("9" * 18), 9]
    assert type(kept["line"]) is array and list(kept["line"]) == [1, 2, 3, 4]
    assert kept["rank"] == ["TP0"] * 4 and all(r is kept["rank"][0] for r in kept["rank"])
    assert kept["ok"] == [True] * 4 and kept["s"] == ["<a>"] * 4 and all(s is kept["s"][0] for s in kept["s"])
    assert type(kept["d"]) is array and kept["d"].tolist() == [2.5, 1.25, 3.0, 0.5]


RATE = st.floats(allow_infinity=False) | st.integers(-(2**53), 2**53) | st.sampled_from([None, 0, 0.0, -0.0, 0.5])


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 5).flatmap(
        lambda w: st.lists(
            st.none() | st.lists(RATE, min_size=w, max_size=w) | st.lists(RATE, max_size=6).map(tuple), max_size=12
        )
    ),
    st.data(),
)
def test_weighed_is_the_python_weighing_to_the_bit(rates, data):
    """The compiled ``weighed`` gives Python's per-position totals bit for bit: uniform rows (a column with a None
    taking `p or 0.0`, so -0.0 as 0.0), ragged ones, None and empty rows, ints, NaN; None where it cannot read a
    value (then Python weighs them)."""
    from acceptmon.measure import positions

    drafts = data.draw(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=len(rates),
                                max_size=len(rates)))  # fmt: skip
    totals = data.draw(st.lists(st.floats(allow_nan=False, width=32), max_size=4))
    want = list(totals)
    with mock.patch.object(native, "load", return_value=None):
        positions.weighed(want, rates, drafts)
    got = CMATCH.weighed(rates, drafts, list(totals))
    assert got is not None
    assert struct.pack(f"{len(want)}d", *want) == struct.pack(f"{len(got)}d", *got)
    through = list(totals)
    positions.weighed(through, rates, drafts)
    assert struct.pack(f"{len(want)}d", *want) == struct.pack(f"{len(through)}d", *through)


def test_weighed_leaves_to_python_what_it_cannot_read():
    assert CMATCH.weighed([[True]], [1.0], []) is None and CMATCH.weighed([[2**60]], [1.0], []) is None
    assert CMATCH.weighed([[0.5]], [1], []) is None and CMATCH.weighed([[0.5]], [1.0], [0]) is None
    assert CMATCH.weighed([[0.5]], [1.0, 2.0], []) is None and CMATCH.weighed(["ab"], [1.0], []) is None
    assert CMATCH.weighed([[0.5, None], [None, 0.25]], [2.0, 4.0], [1.0]) == [2.0, 1.0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.none() | st.floats() | st.integers() | st.booleans() | st.text(max_size=3) | st.lists(st.none())),
    st.booleans(),
)
def test_has_none_is_in(values, as_tuple):
    """``has_none`` says what ``None in values`` says, by identity for lists and tuples; an array of floats has none."""
    column = tuple(values) if as_tuple else values
    want = None in column
    assert CMATCH.has_none(column) is want and plain.has_none(column) is want
    assert CMATCH.has_none(array("d", [x for x in values if type(x) is float])) is False
