"""The doctor reads a run's stats lines a stretch at a time, as columns, and gets what it got line by line.

Two ways a stretch reaches the engine: the facts of records normalized one by one (:meth:`Facts.of`), or the lane's
rows not made into records (:func:`plain_facts`, in the process that read them or shipped from a worker). On drawn
lines (SGLang's decode lines, vLLM's spec and throughput lines per interval or since start, a launch before them or
not, runs mixed, impossible values) the columns must be those of the facts, and the engine must come out the same
(every run's state, every detector's state, the findings and reports) however the lines are cut into stretches.
"""

from __future__ import annotations

import pickle
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.diagnose import read
from acceptmon.diagnose.depth import DepthInputs
from acceptmon.diagnose.engine import Doctor
from acceptmon.diagnose.read import DoctorJob
from acceptmon.diagnose.rules import load_rules
from acceptmon.diagnose.state import RunState, Step
from acceptmon.measure.facts import Facts, plain_facts
from acceptmon.measure.normalize import Normalizer
from acceptmon.parse.records import DecodeStats, LaunchConfig, ServerLaunch, WarningRecord
from acceptmon.parse.unmade import Unmade
from acceptmon.pipeline.workers import Shipped
from tests.test_plain_fold import decode_records, records, vllm_interval_records, vllm_records
from tests.unmade import cut, part

RULES = load_rules()
READ = ("accept_rate", "num_tokens", "token_usage", "cuda_graph", "queue_req", "retracted_req", "accept_len")
READ += ("position_accept_rates", "cumulative", "server", "draft_accept_rate", "drafted_tokens")
COLUMNS = ("kinds", "line", "unit", "batch", "load", "accept_len", "gen_throughput", "running_req", "steady")
COLUMNS += ("warmup",)


def _columns(facts: Facts) -> dict[str, Any]:
    got = {name: list(getattr(facts, name)) for name in COLUMNS}
    got |= {f"values.{name}": list(facts.values[name]) for name in READ}
    return {"key": facts.key, "invalid": facts.invalid, **got}


def _with_launch(draw: st.DrawFn, lines: list[Any]) -> list[Any]:
    """A speculative launch (chain or tree, CUDA graph sizes and a running cap in its args) before the lines, or
    none, and the odd warning between them."""
    if not lines or draw(st.booleans()):
        return lines
    first = lines[0]
    steps = draw(st.sampled_from([1, 3, 5]))
    config = LaunchConfig(
        model_path="m",
        spec_algorithm=draw(st.sampled_from(["EAGLE", "EAGLE3", None])),
        spec_num_steps=steps,
        spec_eagle_topk=draw(st.sampled_from([1, 4])),
        spec_num_draft_tokens=steps + 1,
        extra={"cuda_graph_max_bs": draw(st.sampled_from([4, 32])), "max_running_requests": 48},
    )
    out: list[Any] = [ServerLaunch(file=first.file, source=first.source, run=first.run, config=config)]
    for i, r in enumerate(lines):
        if i and draw(st.integers(0, 9)) == 0:
            code = draw(st.sampled_from(["KV cache pool is full", "Max running requests is reset to", "other"]))
            out.append(WarningRecord(file=r.file, source=r.source, run=r.run, line=r.line, code=code, value=8))
        out.append(r)
    return out


@st.composite
def doctor_lines(draw: st.DrawFn) -> list[Any]:
    drawn = draw(st.one_of(records(), decode_records(), vllm_records(), vllm_interval_records()))
    if draw(st.booleans()):  # nothing queued, mostly: steady lines, in few #running-req buckets
        idle = st.integers(0, 9).map(lambda n: {"queue_req": 0, "running_req": n % 3 + 15} if n else {})
        drawn = [r.model_copy(update=draw(idle)) if "queue_req" in type(r).model_fields else r for r in drawn]
    return _with_launch(draw, drawn)


@settings(max_examples=300, deadline=None)
@given(st.one_of(records(), decode_records(), vllm_records(), vllm_interval_records()), st.lists(st.integers(0, 40)))
def test_the_lanes_columns_are_the_facts_columns(drawn, cuts):
    """:func:`plain_facts` of a part gives the columns :meth:`Facts.of` gives of the part's facts, and moves the
    normalizer on as they did; a part it does not take is left to the facts."""
    fast, slow = Normalizer(), Normalizer()
    for item in cut(drawn, cuts):
        if type(item) is not Unmade:
            fast.fact(item), slow.fact(item)
            continue
        facts = [slow.fact(r) for r in item.made()]
        columns = plain_facts(fast, item)
        if columns is None:
            fast.feed(item.made())
            continue
        TOOK.add(frozenset(item.kinds))
        assert _columns(columns) == _columns(Facts.of(facts))
    assert repr(fast._units) == repr(slow._units)
    assert fast._last_unit == slow._last_unit
    assert repr(fast.intervals.__dict__) == repr(slow.intervals.__dict__)


TOOK: set[frozenset[str]] = set()


def test_the_lanes_columns_were_taken():
    """The draws above had :func:`plain_facts` take SGLang's parts and vLLM's (the test ran first in this process,
    else it runs here)."""
    if not TOOK:
        test_the_lanes_columns_are_the_facts_columns()
    assert {frozenset({"decode"}), frozenset({"spec", "throughput"})} <= TOOK


def _state(obj: Any) -> Any:
    """An object's state, all the way down, for comparing two engines (bound methods and caches left out)."""
    if isinstance(obj, dict):
        return {repr(k): _state(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, list | tuple):
        return [_state(v) for v in obj]
    fields = getattr(obj, "__dict__", None)
    if fields is None and hasattr(obj, "__slots__"):
        fields = {name: getattr(obj, name) for name in obj.__slots__ if hasattr(obj, name)}
    if fields is None or callable(obj):
        return repr(obj)
    return {k: _state(v) for k, v in fields.items() if not k.startswith("_") and k not in {"p", "rules"}}


def _engine(doctor: Doctor, depth: DepthInputs) -> Any:
    runs = {key: (_state(run.state), [_state(det) for _, det in run.detectors]) for key, run in doctor.runs.items()}
    return (
        runs,
        [f.model_dump() for f in doctor.findings()],
        [r.model_dump() for r in doctor.reports()],
        repr(doctor.normalizer._units),
        _state(depth.runs),
    )


def _one_by_one(drawn: list[Any]) -> Any:
    """The engine given each line on its own: a stretch of one line each."""
    doctor, depth = Doctor(RULES), DepthInputs()
    job = DoctorJob(doctor, depth)
    for r in drawn:
        job.collect([r])
    doctor.finish()
    return _engine(doctor, depth)


@settings(max_examples=200, deadline=None)
@given(doctor_lines(), st.lists(st.integers(0, 40)), st.booleans())
def test_the_engine_is_the_same_however_its_lines_are_cut(drawn, cuts, worker):
    """The doctor's job given the lines as the lane hands them (cut into parts, rows unmade, from this process or
    shipped from a worker) ends as the engine given each line on its own."""
    doctor, depth = Doctor(RULES), DepthInputs()
    job = DoctorJob(doctor, depth)
    items = cut(drawn, cuts)
    with patch.object(read, "in_worker", lambda: worker):
        handed = job.chunk(items)
    if worker:
        assert type(handed) is Shipped
        handed = pickle.loads(pickle.dumps(handed))
    job.collect(handed)
    doctor.finish()
    assert _engine(doctor, depth) == _one_by_one(drawn)


def test_a_stretch_of_decode_lines_is_judged_as_lines():
    """A chosen case: a speculative launch, the accept length stuck at 1 on six lines past the warm-up, handed as
    one part of unmade rows, finds P1 with the lines a line-by-line reading cites."""
    launch = ServerLaunch(file="a", line=1, config=LaunchConfig(spec_algorithm="EAGLE", spec_num_steps=3))
    lines = [
        DecodeStats(file="a", line=n, rank="TP0", accept_len=1.0, running_req=4, queue_req=0, gen_throughput=50.0)
        for n in range(2, 10)
    ]
    doctor, depth = Doctor(RULES), DepthInputs()
    job = DoctorJob(doctor, depth)
    job.collect([launch, part(lines, fix=True)])
    doctor.finish()
    stuck = [f for f in doctor.findings() if f.rule == "P1"]
    assert [f.evidence.lines for f in stuck] == [[4, 9]]  # past the two warm-up batches, to the last
    assert _engine(doctor, depth) == _one_by_one([launch, *lines])


@settings(max_examples=300, deadline=None)
@given(doctor_lines(), st.lists(st.integers(0, 40)))
def test_a_runs_state_folds_a_stretch_as_it_takes_each_line(drawn, cuts):
    """:meth:`RunState.fold` of stretches of a run's stats lines leaves the run's state as :meth:`RunState.stats` of
    each line does, and gives each line the :class:`Step` that gives it."""
    normalizer = Normalizer()
    by_line: dict[Any, RunState] = {}
    by_stretch: dict[Any, RunState] = {}
    stretch: list[Any] = []

    def fold() -> None:
        if stretch:
            key = stretch[0].key
            state = by_stretch.setdefault(key, RunState(key[0], key[2], key[1]))
            steps = state.fold(Facts.of(stretch))
            assert [steps.step(i) for i in range(len(steps))] == [_taken(by_line, f) for f in stretch]
            stretch.clear()

    for i, r in enumerate(drawn):
        fact = normalizer.fact(r)
        if r.kind == "launch":
            fold()
            for states in (by_line, by_stretch):
                states.setdefault(fact.key, RunState(r.file, r.run, r.source)).launch = r.config
        if fact.batch is None and fact.load is None:
            continue
        if i in cuts or (stretch and stretch[0].key != fact.key):
            fold()
        stretch.append(fact)
    fold()
    assert _state(by_stretch) == _state(by_line)


def _taken(states: dict[Any, RunState], fact: Any) -> Step:
    key = fact.key
    return states.setdefault(key, RunState(key[0], key[2], key[1])).stats(fact)


def _bucketed(native_on: bool, stretches: list[tuple[list, list, list, list]]) -> RunState:
    from acceptmon.parse.fast import native

    state = RunState("f", 1)
    with patch.object(native, "load", wraps=native.load) if native_on else patch.object(native, "load", lambda: None):
        for tputs, running, lengths, steady in stretches:
            state._buckets(tputs, running, lengths, steady)
    return state


STRETCH = st.integers(0, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.none() | st.floats(allow_infinity=False) | st.integers(0, 5000), min_size=n, max_size=n),
        st.lists(st.none() | st.integers(0, 300) | st.sampled_from([2**60, 17, 18, 19]), min_size=n, max_size=n),
        st.lists(st.none() | st.floats(allow_infinity=False) | st.sampled_from([2.5, 3]), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(st.lists(STRETCH, max_size=4))
def test_the_compiled_buckets_are_the_python_buckets_to_the_bit(stretches):
    """``kept_keys`` and ``keyed_sums`` give each ``#running-req`` bucket what the Python fold gives it, stretch after
    stretch: the same buckets in the same order, lines, running sums, and the throughput and accept length totals
    added in line order to the bit (NaN, ints, None, a #running-req past 2**53 left to Python)."""
    want, got = _bucketed(False, stretches), _bucketed(True, stretches)
    assert list(got.buckets) == list(want.buckets)
    for key, w in want.buckets.items():
        g = got.buckets[key]
        assert (g.lines, g.running, g.accept_len.count) == (w.lines, w.running, w.accept_len.count)
        assert pickle.dumps((g.throughput, g.accept_len.total)) == pickle.dumps((w.throughput, w.accept_len.total))


def test_the_compiled_buckets_read_what_they_can():
    """The compiled pass takes floats and ints within 2**53, and leaves the rest to Python."""
    from acceptmon.parse.fast import native

    module = native.load()
    assert module is not None
    steady, running, tputs, lengths = [True, True, False, True], [4, 5, 4, 4], [1.5, 2.0, 9.0, 3], [2.5, None, 1.0, 3.5]
    assert module.kept_keys(steady, running, tputs) == [4, 5]
    got = module.keyed_sums(steady, running, tputs, lengths, {4: 0, 5: 1}, [(0.5, 1.0), (0.0, 0.0)])
    assert got == [(2, 5.0, 8, 2, 7.0), (1, 2.0, 5, 0, 0.0)]
    assert module.keyed_sums(steady, running, ["x", 2.0, 1.0, 1.0], lengths, {4: 0, 5: 1}, [(0.0, 0.0)] * 2) is None
    assert module.keyed_sums(steady, running, tputs, lengths, {4: 0, 5: 1}, [(0, 0.0), (0.0, 0.0)]) is None


def _reserve_python(running, tokens, usage, lines, c, start):
    """Retractions' largest reserve as its Python takes it."""
    from itertools import chain, compress, repeat
    from operator import mul, truediv

    from acceptmon.diagnose.detector import every

    judged = every(running, usage, tokens)
    pools = map(truediv, compress(tokens, judged), compress(usage, judged))
    reserves = list(map(truediv, map(mul, compress(running, judged), repeat(c)), pools))
    largest = max(chain((start,), reserves))
    if largest > start:
        return largest, list(compress(lines, judged))[reserves.index(largest)]
    return start, None


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 30).flatmap(
        lambda n: st.tuples(
            st.lists(st.none() | st.integers(0, 600), min_size=n, max_size=n),
            st.lists(st.none() | st.integers(0, 10**6), min_size=n, max_size=n),
            st.lists(st.none() | st.floats(0, 1) | st.sampled_from([1, 0.5]), min_size=n, max_size=n),
        )
    ),
    st.integers(0, 40),
    st.floats(0, 50) | st.just(0.0),
)
def test_the_compiled_reserve_is_the_python_reserve(columns, c, start):
    """``reserve_max`` gives Retractions' largest reserve ``r·c / (t / u)`` and its first line to the bit, or None
    where Python must (a pool of 0)."""
    from acceptmon.parse.fast import native

    running, tokens, usage = columns
    lines = list(range(10, 10 + len(running)))
    got = native.load().reserve_max(running, tokens, usage, lines, c, start)
    try:
        want = _reserve_python(running, tokens, usage, lines, c, start)
    except ZeroDivisionError:
        assert got is None
        return
    assert got is not None and pickle.dumps(got) == pickle.dumps(want)
