"""The runs' fold of plain decode lines (:meth:`Normalizer.plain`, :meth:`RunStats.plain`) is the facts' fold.

``runs`` folds a record that :meth:`~acceptmon.measure.normalize.Normalizer.plain` takes without making its fact;
every other record goes through :meth:`~acceptmon.measure.normalize.Normalizer.fact`. On drawn records (ranks,
runs, files and streams mixed; prefill lines between; values missing, impossible or not finite; draft accept
rates derived from refused draft-token counts) the runs and the normalizer's state must come out equal, sums of
floats to the last digit, to those of the facts' fold.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.measure import plain
from acceptmon.measure.aggregate import Stats
from acceptmon.measure.normalize import Normalizer, plain_kinds
from acceptmon.measure.plain import checks, plain_columns
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import DecodeStats, PrefillStats, ServerLaunch, SpecStats, ThroughputStats
from acceptmon.parse.unmade import Unmade
from tests.unmade import cut, machine, part, unmade

FLOAT = st.one_of(
    st.none(),
    st.floats(min_value=0.0, max_value=8.0),
    st.sampled_from([-1.0, 0.5, 1.0, 1000.0, 1000.5, math.inf, -math.inf, math.nan, 0.1, 0.2, 0.3]),
)
RATE = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0), st.sampled_from([-0.1, 1.5, math.nan]))
COUNT = st.one_of(st.none(), st.integers(min_value=0, max_value=300), st.just(-3))
START = datetime(2026, 1, 1)


def _where(draw: st.DrawFn, i: int, runs: int) -> dict[str, Any]:
    """A drawn line's file, stream, run, line number and time."""
    return {
        "file": draw(st.sampled_from(["a.log", "b.log"])),
        "source": draw(st.sampled_from(["", "pod/x/c"])),
        "run": draw(st.integers(min_value=0, max_value=runs)),
        "line": i + 1,
        "timestamp": draw(st.one_of(st.none(), st.integers(-5, 50).map(lambda s: START + timedelta(seconds=s)))),
    }


def _acceptance(draw: st.DrawFn) -> dict[str, Any]:
    return {"accept_len": draw(FLOAT), "accept_rate": draw(RATE), "draft_accept_rate": draw(RATE)}


@st.composite
def records(draw: st.DrawFn) -> list[DecodeStats | PrefillStats]:
    out: list[DecodeStats | PrefillStats] = []
    for i in range(draw(st.integers(min_value=0, max_value=40))):
        where = _where(draw, i, runs=2) | {"rank": draw(st.sampled_from([None, "", "TP0", "DP1 TP1"]))}
        if draw(st.integers(0, 5)) == 0:
            out.append(PrefillStats(**where, queue_req=draw(COUNT)))
            continue
        steps = draw(st.sampled_from([None, 3, 0, 100]))
        out.append(
            DecodeStats(
                **where,
                **_acceptance(draw),
                gen_throughput=draw(FLOAT),
                running_req=draw(COUNT),
                queue_req=draw(COUNT),
                spec_num_steps=steps,
                spec_num_draft_tokens=draw(st.sampled_from([None, steps, 2000])),
            )
        )
    return out


@st.composite
def vllm_records(draw: st.DrawFn) -> list[Any]:
    """vLLM's lines: throughput lines that name an engine (or not), spec lines that mostly do not (they take the
    engine named last), per interval or (v0) since start, SGLang decode and prefill lines among them."""
    out: list[Any] = []
    for i in range(draw(st.integers(min_value=0, max_value=30))):
        where = _where(draw, i, runs=1)
        engine = draw(st.sampled_from([None, None, "", "000", "001"]))
        pick = draw(st.integers(0, 9))
        if pick < 4:
            out.append(
                ThroughputStats(
                    **where, engine=engine, gen_throughput=draw(FLOAT), running_req=draw(COUNT), queue_req=draw(COUNT)
                )
            )
        elif pick < 8:
            rates = draw(st.one_of(st.none(), st.lists(RATE, min_size=1, max_size=3)))
            out.append(
                SpecStats(
                    **where,
                    engine=engine,
                    **_acceptance(draw),
                    accepted_tokens=draw(COUNT),
                    drafted_tokens=draw(COUNT),
                    emitted_tokens=draw(COUNT),
                    num_spec_tokens=draw(st.sampled_from([None, 3])),
                    spec_num_steps=draw(st.sampled_from([None, 3, 100])),
                    position_accept_rates=rates,
                    cumulative=draw(st.sampled_from([None, False, True])),
                )
            )
        else:
            out.extend(draw(records())[:1])
    return out


def _mostly(usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual``, and one time in fifty ``odd``."""
    return st.integers(0, 49).flatmap(lambda n: odd if n == 0 else usual)


@st.composite
def decode_records(draw: st.DrawFn) -> list[DecodeStats | PrefillStats]:
    """SGLang's decode lines as a log has them, mostly plain: ranks mixed, the odd prefill line, impossible or missing
    value, and run of another launch."""
    value = _mostly(st.floats(min_value=1.0, max_value=8.0), st.sampled_from([None, 0.5, math.nan]))
    rate = _mostly(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([None, 1.5]))
    count = _mostly(st.integers(min_value=0, max_value=64), st.sampled_from([None, -3]))
    out: list[DecodeStats | PrefillStats] = []
    for i in range(draw(st.integers(min_value=1, max_value=30))):
        where = _where(draw, i, runs=1) | {"file": "a.log", "source": "", "run": draw(_mostly(st.just(0), st.just(1)))}
        where["rank"] = draw(st.sampled_from(["TP0", "TP1", "DP1 TP1", None]))
        if draw(_mostly(st.just(False), st.just(True))):
            out.append(PrefillStats(**where, queue_req=draw(count)))
            continue
        out.append(
            DecodeStats(
                **where,
                accept_len=draw(value),
                accept_rate=draw(rate),
                draft_accept_rate=draw(rate),
                gen_throughput=draw(_mostly(st.floats(min_value=0.0, max_value=900.0), st.just(None))),
                running_req=draw(count),
                queue_req=draw(count),
            )
        )
    return out


@st.composite
def vllm_interval_records(draw: st.DrawFn) -> list[Any]:
    """vLLM's lines as a log has them, mostly plain: throughput lines that name their engine, spec lines that mostly
    do not, counting per interval (v1) or, in some lists, since start (v0: rising counters, no engine named, after a
    launch or not), the odd impossible or missing value, runs and streams seldom mixed."""
    rate = _mostly(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([None, 1.5]))
    count = _mostly(st.integers(min_value=0, max_value=300), st.sampled_from([None, -3]))
    since_start = draw(st.booleans())
    out: list[Any] = [ServerLaunch(file="a.log")] if since_start and draw(st.booleans()) else []
    engines = _mostly(st.none(), st.just("001")) if since_start else st.sampled_from(["000", "001", "002", None])
    counters = [0, 0, 0]
    for i in range(draw(st.integers(min_value=1, max_value=30))):
        where = _where(draw, i, runs=1) | {"file": "a.log", "source": "", "run": draw(_mostly(st.just(0), st.just(1)))}
        if draw(st.booleans()):
            tput = draw(_mostly(st.floats(min_value=0.0, max_value=500.0), st.sampled_from([None, -1.0])))
            out.append(ThroughputStats(**where, engine=draw(engines), gen_throughput=tput, running_req=draw(count)))
            continue
        if since_start:
            steps = [draw(st.integers(min_value=0, max_value=60)) for _ in counters]
            counters = (
                [c + n for c, n in zip(counters, steps, strict=True)]
                if draw(_mostly(st.just(1), st.just(0)))
                else steps
            )
            accepted, drafted, emitted = draw(_mostly(st.just(counters), st.just([None, *counters[1:]])))
        else:
            accepted, drafted, emitted = draw(count), draw(st.one_of(st.integers(0, 300), st.none())), draw(count)
        out.append(
            SpecStats(
                **where,
                engine=draw(engines if since_start else st.sampled_from([None] * 5 + ["001"])),
                accept_len=draw(_mostly(st.floats(min_value=1.0, max_value=4.0), st.sampled_from([None, 0.5]))),
                draft_accept_rate=draw(rate),
                accepted_tokens=accepted,
                drafted_tokens=drafted,
                emitted_tokens=emitted,
                num_spec_tokens=draw(st.sampled_from([None, 3])),
                spec_num_steps=draw(st.sampled_from([None, 2])),
                position_accept_rates=draw(st.one_of(st.none(), st.lists(rate, min_size=1, max_size=3))),
                cumulative=True if since_start else draw(st.sampled_from([None] * 9 + [False])),
            )
        )
    return out


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (a drawn value; the fold never lets one through, but the test should not say so)."""
    return repr(a) == repr(b)


@settings(max_examples=400, deadline=None)
@given(st.one_of(records(), vllm_records()))
def test_the_plain_fold_is_the_facts_fold(drawn):
    fast = Stats()
    fast.update(drawn)
    _is_the_facts_fold(fast, drawn)


def _is_the_facts_fold(got: Stats, drawn: list[Any]) -> None:
    """``got``'s runs, normalizer state and summaries are those of the facts' fold of ``drawn``."""
    slow = Stats()
    slow.fold(slow.normalizer.feed(drawn))
    assert _same(got.runs, slow.runs)
    assert _same(got.normalizer._units, slow.normalizer._units)
    assert _same(got.normalizer._last_unit, slow.normalizer._last_unit)
    assert _same(got.summaries(), slow.summaries())


def test_a_plain_line_is_taken_and_an_impossible_one_is_not():
    """Both halves of the test above can happen: the plain fold takes a valid decode line and refuses one with an
    impossible value or a draft accept rate derived from a refused count (the facts' fold then counts it)."""
    assert {"decode", "spec", "throughput"} <= plain_kinds() and "prefill" not in plain_kinds()
    normalizer, decode = Normalizer(), KINDS["decode"]
    ok = DecodeStats(file="a", rank="TP0", accept_len=2.5, gen_throughput=10.0, queue_req=0)
    assert normalizer.plain(ok, decode) == ("TP0", 10.0, None)
    carried = DecodeStats(file="a", rank="TP0", accept_len=2.0)
    assert normalizer.plain(carried, decode) == ("TP0", None, None)  # a batch's own throughput: none logged
    assert normalizer._units["a", "", 0, "TP0"].load == (10.0, None, 0)  # what later lines without it take
    assert normalizer.plain(DecodeStats(file="a", rank="TP0", accept_len=0.5), decode) is None
    derived = DecodeStats(file="a", draft_accept_rate=0.3, spec_num_steps=100)
    assert normalizer.plain(derived, decode) is None
    stats = Stats()
    stats.update([ok, carried, DecodeStats(file="a", rank="TP0", accept_len=0.5)])
    run = stats.runs["a", "", 0]
    assert (run.figures.batches, run.figures.invalid_values, run.accept_len.count) == (3, 1, 2)
    assert (run.figures.units["TP0"].count, run.figures.units["TP0"].total) == (1, 10.0)


def test_a_vllm_spec_line_takes_the_engine_named_last_and_a_cumulative_one_closes_its_interval():
    normalizer = Normalizer()
    normalizer.intervals.launch(("a", "", 1))
    throughput = ThroughputStats(file="a", run=1, engine="001", gen_throughput=5.0)
    assert normalizer.plain(throughput, KINDS["throughput"]) == ("001", 5.0, None)
    spec = KINDS["spec"]
    assert normalizer.plain(SpecStats(file="a", run=1, accept_len=2.0, drafted_tokens=9), spec) == ("001", None, None)
    assert normalizer._units["a", "", 1, "001"].run.batches == 1
    since_start = SpecStats(
        file="a", run=1, cumulative=True, accepted_tokens=6, drafted_tokens=9, emitted_tokens=9, num_spec_tokens=3
    )
    assert normalizer.plain(since_start, spec) == ("001", None, (3.0, 0.666667))  # 9 emitted over 3 drafts


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(records(), decode_records(), vllm_records(), vllm_interval_records()),
    st.lists(st.integers(min_value=0, max_value=40), max_size=4),
)
def test_the_column_fold_is_the_facts_fold(drawn, cuts):
    """Runs of plain records (cut where a record of another kind or ``cuts`` fall) handed on unmade, as the lane does
    (SGLang's decode lines; vLLM's spec and throughput lines, interleaved, as pieces): folded as columns where all
    are plain and of one run of one stream (lines counting since start: of one unit), else made and folded one by
    one, the same as the facts' fold."""
    items = cut(drawn, cuts)
    folded: list[tuple[bool, frozenset[str], bool]] = []
    plain_fold = Stats()
    original = plain_fold.fold_values

    def fold_values(rows: Unmade) -> bool:
        folded.append((original(rows), rows.kinds, any(rows.column("cumulative"))))
        return folded[-1][0]

    plain_fold.fold_values = fold_values  # type: ignore[method-assign]
    plain_fold.update(items)
    _is_the_facts_fold(plain_fold, drawn)
    COLUMN_FOLDS.update(folded)


COLUMN_FOLDS: set[tuple[bool, frozenset[str], bool]] = set()


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(records(), decode_records(), vllm_records(), vllm_interval_records()),
    st.lists(st.integers(min_value=0, max_value=40), max_size=4),
)
def test_a_worker_ships_as_values_the_rows_plain_columns_takes(drawn, cuts):
    """:func:`checks` (a worker's checks alone) says what :func:`plain_columns` says of each part, whatever
    engine was named before it, its numbers as lists or as the machine columns the compiled lane keeps."""
    for item in cut(drawn, cuts):
        if type(item) is not Unmade:
            continue
        taken = plain_columns(item, {}) is not None
        assert (checks(item) is not None) is taken
        assert (plain_columns(item, {("f", ""): "9"}) is not None) is taken
        rows = machine(item)
        assert (checks(rows) is not None) is taken and (plain_columns(rows, {}) is not None) is taken
        found = checks(rows)
        if found is not None:  # what the worker found, shipped: the same columns, not checked again
            assert _plain_values(plain_columns(rows.shipped(found), {})) == _plain_values(plain_columns(rows, {}))
            with mock.patch.object(plain, "_checked", side_effect=AssertionError("checked again")):
                assert plain_columns(rows.shipped(found), {}) is not None


def _plain_values(got: Any) -> Any:
    """What :func:`plain_columns` found, its pieces' rows left out (objects of their own)."""
    assert got is not None
    pieces = [(p.kind.name, p.columns, list(p.units), p.groups) for p in got.pieces]
    return got.key, pieces, got.units, got.named, got.counts


def test_the_column_fold_took_some_and_left_some():
    """The drawn cases above had the column fold take a part and refuse one, of SGLang's decode lines, of vLLM's
    spec and throughput lines interleaved and of lines counting since start (the test above ran first where this
    process ran it, else it runs here)."""
    if not COLUMN_FOLDS:
        test_the_column_fold_is_the_facts_fold()
    for kinds in ({"decode"}, {"spec", "throughput"}):
        assert {took for took, of, _ in COLUMN_FOLDS if of == kinds} == {True, False}
    assert {took for took, _, since_start in COLUMN_FOLDS if since_start} == {True, False}


def _decode(rank: str, accept_len: float = 2.0, tput: float | None = 10.0, source: str = "") -> DecodeStats:
    return DecodeStats(file="a", source=source, rank=rank, accept_len=accept_len, gen_throughput=tput, queue_req=0)


@pytest.mark.parametrize(
    ("rows", "taken"),
    [
        ([_decode("TP0"), _decode("TP1", accept_len=math.nan)], False),  # NaN after a number: min and max miss it
        ([_decode("TP0", tput=None), _decode("TP1", tput=5.0), _decode("TP0", tput=7.0)], True),  # means' order
        ([_decode("TP0"), _decode("TP0", source="pod/x/c")], False),  # two streams
        ([_decode("TP0", tput=math.inf)], False),
        ([_decode("TP0", accept_len=1000.0), _decode("TP1", accept_len=1.0)], True),  # the bounds, inclusive
    ],
)
def test_the_column_fold_on_chosen_rows(rows, taken):
    """Cases drawn rows rarely reach: the column fold takes or leaves them as said, and the runs are the facts'."""
    fast = Stats()
    assert fast.fold_values(unmade(rows)) is taken
    if not taken:
        fast.update(rows)
    _is_the_facts_fold(fast, rows)


def test_lines_counting_since_start_of_two_engines_close_their_own_intervals():
    """vLLM v0's spec lines count since start, each engine its own counters: the plain fold closes each line's interval
    on its engine's (named by the throughput line before it), as the facts' fold does, and takes its rates."""
    drawn: list[Any] = []
    for step in range(1, 4):
        for engine, (accepted, drafted) in (("000", (40, 90)), ("001", (10, 60))):
            drawn.append(ThroughputStats(file="a", engine=engine, gen_throughput=float(step * 10)))
            drawn.append(
                SpecStats(
                    file="a",
                    cumulative=True,
                    num_spec_tokens=3,
                    accepted_tokens=accepted * step,
                    drafted_tokens=drafted * step,
                    emitted_tokens=(accepted + drafted // 3) * step,
                    accept_len=2.0,
                    accept_rate=0.5,
                    draft_accept_rate=0.5,
                )
            )
    stats = Stats()
    stats.update(drawn)
    _is_the_facts_fold(stats, drawn)
    run = stats.runs["a", "", 0]
    assert run.accept_len.count == 4  # each engine's first line has no interval before it: no values
    assert sorted(run.accept_len.values.elements()) == [1.5, 1.5, 2.333333, 2.333333]
    assert run.draft_accept_rate.total == pytest.approx(2 * (40 / 90 + 10 / 60), abs=1e-5)


def _throughput(engine: str | None, tput: float) -> ThroughputStats:
    return ThroughputStats(file="a", engine=engine, gen_throughput=tput, running_req=3)


def _spec(rates: list[float | None] | None = None) -> SpecStats:
    return SpecStats(
        file="a",
        accept_len=2.0,
        draft_accept_rate=0.5,
        accepted_tokens=3,
        drafted_tokens=6,
        num_spec_tokens=3,
        position_accept_rates=rates,
    )


def test_the_column_fold_of_vllm_parts_on_chosen_rows():
    """A part whose first spec line names no engine takes the one the part before it named last; a throughput line
    that names none is its engine's that was named last; per-position rates of several widths and a missing rate
    add up as line by line."""
    first = [_throughput("000", 10.0), _spec([0.5, 0.25, None]), _throughput("001", 20.0), _spec()]
    second = [_spec([0.5]), _throughput("000", 30.0), _spec([0.75, 0.5, 0.25]), _throughput(None, 40.0), _spec()]
    fast = Stats()
    assert fast.fold_values(part(first, fix=True)) and fast.fold_values(part(second, fix=False))
    _is_the_facts_fold(fast, first + second)
    run = fast.runs["a", "", 0]
    assert {unit: mean.total for unit, mean in run.figures.units.items()} == {"000": 80.0, "001": 20.0}
    assert run.spec is not None and run.spec.positions == [3.5, 1.5, 0.5]  # each line 2 drafts
