"""Each detector's columnar ``steps`` leaves it as its ``stats`` fed line by line (:meth:`Detector.steps`) would.

For every detector that reads stats lines, with the params of each built-in rule of its type (and a few more that
open other branches), hypothesis draws a run (no launch; a speculative launch with draft tokens, steps, topk,
CUDA graph sizes, a running cap, CUDA graphs disabled; a launch without speculation), a run of lines (values
logged in stretches, missing, nan; accept lengths at 1.00 and around; per-position rates ending in None; the
record fields ``cuda_graph``, ``queue_req``, ``retracted_req`` and ``position_accept_rates`` logged, None on
every line, or absent) cut into consecutive parts, and between parts warnings with the detector's codes, a
relaunch, or a judgement.
One detector is fed by the reference and one by its override, at the same points: their attributes must be
equal (floats to the last bit, :class:`Lines` by count and lines kept) and so must their findings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from acceptmon.diagnose.breakeven import BreakEven
from acceptmon.diagnose.detector import Detector, Lines
from acceptmon.diagnose.model import Hit
from acceptmon.diagnose.rules import load_rules
from acceptmon.diagnose.signatures import SIGNATURES
from acceptmon.diagnose.state import RunState, Steps
from acceptmon.parse.records import LaunchConfig, WarningRecord

COLUMNS = ("line", "warm", "steady", "seq_len", "accept_len", "accept_rate", "running_req", "num_tokens", "token_usage")
VALUES = ("cuda_graph", "queue_req", "retracted_req", "position_accept_rates", "gen_throughput")


def _reads_stats(signature: str) -> bool:
    return SIGNATURES[signature].detector.__dict__.get("stats") is not None


def _cases() -> list[tuple[str, str, Any]]:
    """(label, signature, params): every built-in rule whose detector reads stats lines, and a few variants."""
    cases = [(rule.id, rule.signature, rule.params) for rule in load_rules() if _reads_stats(rule.signature)]
    variants = {
        "draft_algorithm": {"min_running": 0, "stuck_at_most": 1.5, "stuck_lines": 3},
        "below_expected": {"max_running": 300},
        "large_batch": {"verify_tokens_at_least": 16, "efficiency_below": 0.9},
        "queue_at_cap": {"require_warning": False},
        "chain_depth": {"position_field": "gen_throughput"},  # a field that is not a list
    }
    for signature, changed in variants.items():
        sig = SIGNATURES[signature]
        base = next(params for _, name, params in cases if name == signature)
        cases.append((f"{signature}+", signature, sig.params.model_validate({**base.model_dump(), **changed})))
    return cases


CASES = _cases()


def test_every_detector_that_reads_stats_lines_has_steps_and_is_drawn():
    reading = {sig.detector for sig in SIGNATURES.values() if _reads_stats(sig.name)}
    assert {d.__name__ for d in reading} == {
        "Stuck", "Low", "Depth", "Expected", "LongContext", "Retractions", "LargeBatch", "GraphOff", "QueueAtCap"
    }  # fmt: skip
    assert all(d.__dict__.get("steps") is not None for d in reading)
    assert {SIGNATURES[s].detector for _, s, _ in CASES} == reading


@dataclass
class Ctx:
    """The doctor's context as far as these detectors ask: no other runs, no baseline."""

    expected_accept_len: float | None = None

    def same_config(self, run: RunState) -> list[RunState]:
        return []

    def break_even(self, run: RunState) -> BreakEven | None:
        return None


CONTEXTS = (Ctx(), Ctx(2.5))


def plain(value: Any) -> Any:
    """A value to compare exactly: floats by their bits, numbers with their type, Lines by count and lines."""
    if isinstance(value, Lines):
        return ("Lines", value.count, plain(value.lines))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, bool | int | str) or value is None:
        return (type(value).__name__, value)
    if isinstance(value, list | tuple):
        return (type(value).__name__, [plain(v) for v in value])
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def hits(det: Detector[Any], run: RunState) -> list[Any]:
    """The detector's findings in each context, to compare (a nan mean is equal to itself here)."""
    return [plain(found(det, run, ctx)) for ctx in CONTEXTS]


def found(det: Detector[Any], run: RunState, ctx: Ctx) -> dict[str, Any] | None:
    h = det.hit(run, ctx)
    return None if h is None else h.model_dump()


# -- drawing


def stretches(draw: st.DrawFn, n: int, values: st.SearchStrategy[Any]) -> list[Any]:
    """``n`` values, drawn in stretches of equal ones (so that conditions hold on consecutive lines)."""
    out: list[Any] = []
    while len(out) < n:
        out += [draw(values)] * draw(st.integers(1, 9))
    return out[:n]


ACCEPT_LEN = st.one_of(
    st.none(),
    st.sampled_from([1.0, 1.01, 1.02, 1.0200001, 1.03, 1.5, 2.0, 3.0, math.nan, 0.0, -0.0]),
    st.floats(0.9, 3.2),
)
LOW_ACCEPT_LEN = st.one_of(st.none(), st.sampled_from([1.0, 1.01, 1.02, 1.1]), st.floats(1.0, 1.3))
RATE = st.one_of(st.none(), st.sampled_from([0.0, 0.02, 0.04, 0.5, math.nan]), st.floats(0.0, 1.0))
RUNNING = st.one_of(st.none(), st.sampled_from([0, 1, 4, 8, 9, 16, 48, 64, 100, 256, 300]), st.integers(0, 300))
ODD_RUNNING = st.sampled_from([math.nan, 2.5, -1])  # not what a parser gives, but the detectors must agree
SEQ = st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2047.9, 2048.0, 4096.0, 9000.5, -3.0]), st.floats(0.0, 70000.0))
TOKENS = st.one_of(st.none(), st.just(0), st.integers(1, 500_000))
USAGE = st.one_of(st.none(), st.sampled_from([0.0, 0.05, 0.5, 0.99, math.nan]), st.floats(0.0, 1.0))
POSITION = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from([0.05, 0.0]))
RECORD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "cuda_graph": st.sampled_from([None, True, False]),
    "queue_req": st.one_of(st.none(), st.integers(0, 5)),
    "retracted_req": st.one_of(st.none(), st.just(0), st.integers(0, 4)),
    "position_accept_rates": st.one_of(
        st.none(),
        st.just([]),
        st.lists(POSITION, min_size=1, max_size=5),
        st.lists(POSITION, min_size=1, max_size=3).map(tuple),
    ),
    "gen_throughput": st.one_of(st.none(), st.floats(0.0, 500.0)),
}


@st.composite
def launches(draw: st.DrawFn) -> LaunchConfig | None:
    kind = draw(st.sampled_from(["none", "speculative", "speculative", "plain"]))
    if kind == "none":
        return None
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra["cuda_graph_max_bs"] = draw(st.sampled_from([8, 16, 48, 160]))
    elif draw(st.booleans()):
        extra["cuda_graph_bs"] = draw(st.sampled_from(["[1, 2, 4, 8]", [1, 2, 4, 8, 16], "[]"]))
    if draw(st.booleans()):
        extra["max_running_requests"] = draw(st.sampled_from([4, 8, 48, 48.0, 64]))
    if draw(st.booleans()):
        extra["disable_cuda_graph"] = draw(st.booleans())
    if kind == "plain":
        return LaunchConfig(model_path="Qwen2.5-7B", extra=extra)
    return LaunchConfig(
        model_path=draw(st.sampled_from(["Qwen2.5-7B", "Qwen2.5-VL-7B", None])),
        spec_algorithm=draw(st.sampled_from(["EAGLE", "eagle3", "NGRAM"])),
        spec_num_steps=draw(st.sampled_from([None, 1, 3, 5])),
        spec_eagle_topk=draw(st.sampled_from([None, 1, 2, 4])),
        spec_num_draft_tokens=draw(st.sampled_from([None, 2, 4, 8, 16])),
        spec_draft_model_path=draw(st.sampled_from([None, "llama-eagle3-8B", "qwen-draft"])),
        extra=extra,
    )


@st.composite
def lines(draw: st.DrawFn, ceiling: int) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Columns of a run's stats lines (#running-req at most ``ceiling``), and the record fields logged (each absent
    from some runs, or None on every line)."""
    n = draw(st.integers(0, 90))
    running = RUNNING if draw(st.integers(0, 4)) else st.one_of(RUNNING, ODD_RUNNING)
    columns = {
        "line": list(
            accumulate(draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)), initial=draw(st.integers(1, 50)))
        )[1:],
        "warm": stretches(draw, n, st.booleans()),
        "steady": stretches(draw, n, st.booleans()),
        "seq_len": stretches(draw, n, SEQ),
        "accept_len": stretches(draw, n, draw(st.sampled_from([ACCEPT_LEN, LOW_ACCEPT_LEN]))),
        "accept_rate": stretches(draw, n, RATE),
        "running_req": [r if r is None else min(r, ceiling) for r in stretches(draw, n, running)],
        "num_tokens": stretches(draw, n, TOKENS),
        "token_usage": stretches(draw, n, USAGE),
    }
    values = {}
    for name, strategy in RECORD_VALUES.items():
        given = draw(st.sampled_from(["absent", "None on every line", "drawn", "drawn"]))
        if given != "absent":  # (the engine's columns are made on demand: None on every line, never absent)
            values[name] = stretches(draw, n, strategy) if given == "drawn" else [None] * n
    return columns, values


def warnings(draw: st.DrawFn, codes: list[str], line: int, ceiling: int) -> list[WarningRecord]:
    """Warnings before a line: the detector's codes or another, numbers among them the run's largest batch."""
    number = st.one_of(st.just(float(ceiling)), st.none(), st.sampled_from([2048.0, 4096.0, 48.0, 8.0, 2.0, 0.0]))
    code = st.sampled_from([*codes, "Something else"])
    return [
        WarningRecord(line=line, code=draw(code), value=draw(number), limit=draw(number), detail="d")
        for _ in range(draw(st.sampled_from([0, 1, 2])))
    ]


def piece(columns: dict[str, list[Any]], values: dict[str, list[Any]], lo: int, hi: int, spec_from: int) -> Steps:
    part = {name: column[lo:hi] for name, column in columns.items()}
    return Steps(**part, speculative_from=spec_from, values={name: v[lo:hi] for name, v in values.items()})


def take_in(run: RunState, steps: Steps) -> None:
    """What the run's state takes from the lines, as far as the detectors' judgements read it."""
    for i in range(len(steps)):
        length, rate = steps.accept_len[i], steps.accept_rate[i]
        if length is not None or rate is not None:
            run.spec_lines += 1
        if length is not None and steps.warm[i]:
            run.accept_len.add(length)
            run.accept_lines = (run.accept_lines[0] if run.accept_lines else steps.line[i], steps.line[i])


def same(reference: Detector[Any], columnar: Detector[Any]) -> None:
    assert plain(vars(columnar)) == plain(vars(reference))


# -- the property


@pytest.mark.parametrize(("label", "signature", "params"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_steps_is_stats_line_by_line(label: str, signature: str, params: Any, data: st.DataObject) -> None:
    sig = SIGNATURES[signature]
    reference, columnar = sig.detector(params), sig.detector(params)
    codes = list(getattr(params, "codes", []))
    run = RunState("f", 1, launch=data.draw(launches()), launch_line=data.draw(st.sampled_from([None, 3])))
    ceiling = data.draw(st.sampled_from([8, 48, 64, 300]))  # the run's largest batch, often a cap
    columns, values = data.draw(lines(ceiling))
    n = len(columns["line"])
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=6)))
    for lo, hi in zip([0, *cuts], [*cuts, n], strict=True):
        before = columns["line"][lo] - 1 if lo < n else 10_000
        for w in warnings(data.draw, codes, before, ceiling):
            reference.warning(w, run)
            columnar.warning(w, run)
        if data.draw(st.integers(0, 9)) == 0:  # a relaunch of the run
            run.launch = data.draw(launches())
        spec_from = data.draw(st.sampled_from([0, hi - lo, *range(hi - lo + 1)]))
        part = piece(columns, values, lo, hi, spec_from)
        take_in(run, part)
        Detector.steps(reference, part, run)
        columnar.steps(part, run)
        same(reference, columnar)
        if data.draw(st.booleans()):  # a judgement between parts (GraphOff caches the captured size in it)
            assert hits(columnar, run) == hits(reference, run)
    judged = hits(reference, run)
    assert hits(columnar, run) == judged
    same(reference, columnar)
    for ctx in CONTEXTS:  # which findings the draws reach (--hypothesis-show-statistics)
        h = reference.hit(run, ctx)
        if h is not None:
            words = [w for w in h.evidence.text.split() if w.isalpha()][:3]
            event(f"{label} (expected {ctx.expected_accept_len}): {' '.join(words)}")


# -- examples that reach each finding, both ways


def steps_of(rows: list[dict[str, Any]], spec_from: int = 0, **values: list[Any]) -> Steps:
    """Lines from row dicts (lines numbered from 10 unless given; warm and steady unless said)."""
    full = [{"line": 10 + i, "warm": True, "steady": True} | row for i, row in enumerate(rows)]
    columns = {name: [row.get(name) for row in full] for name in COLUMNS}
    return Steps(**columns, speculative_from=spec_from, values=values)


def both(
    signature: str,
    parts: list[Steps],
    run: RunState,
    params: dict[str, Any] | None = None,
    warns: tuple[WarningRecord, ...] = (),
    ctx: Ctx = CONTEXTS[0],
) -> tuple[Hit | None, Detector[Any]]:
    """The finding after ``parts`` (``warns`` first), fed both ways; they must agree."""
    sig = SIGNATURES[signature]
    rule_params = next(p for _, s, p in CASES if s == signature)
    chosen = sig.params.model_validate({**rule_params.model_dump(), **(params or {})})
    reference, columnar = sig.detector(chosen), sig.detector(chosen)
    for w in warns:
        reference.warning(w, run)
        columnar.warning(w, run)
    for part in parts:
        take_in(run, part)
        Detector.steps(reference, part, run)
        columnar.steps(part, run)
    same(reference, columnar)
    assert plain(found(columnar, run, ctx)) == plain(found(reference, run, ctx))
    return reference.hit(run, ctx), columnar


SPEC = LaunchConfig(spec_algorithm="EAGLE", spec_num_steps=3, spec_eagle_topk=1)


def test_stuck_counts_a_stretch_across_parts():
    """Ten lines at 1.00 fed 3 + 3 + 4: the stretch goes on across calls (a count reset per call finds 4)."""
    rows = [{"accept_len": 1.0, "running_req": 4} for _ in range(10)]
    whole = steps_of(rows)
    parts = [
        piece({n: list(getattr(whole, n)) for n in COLUMNS}, {}, lo, hi, 0) for lo, hi in ((0, 3), (3, 6), (6, 10))
    ]
    found, det = both("draft_algorithm", parts, RunState("f", 1))
    assert found is not None and found.evidence.values["consecutive_lines"] == 10
    assert (det.best, det.best_lines, det.count, det.start) == (10, [10, 19], 10, 10)


def test_stuck_keeps_the_first_longest_stretch_and_the_open_one():
    lengths = [1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 2.0, None, 1.0, 1.0]
    found, det = both(
        "draft_algorithm", [steps_of([{"accept_len": x, "running_req": 2} for x in lengths])], RunState("f", 1)
    )
    assert found is None
    assert (det.best, det.best_lines, det.count, det.start) == (3, [13, 15], 2, 22)


def test_low_rate_only_lines():
    run = RunState("f", 1)
    found, det = both("accept_len_low", [steps_of([{"accept_rate": 0.02} for _ in range(6)])], run)
    assert found is not None and det.rate_lines.count == 6


def test_depth_last_position():
    rates = [[0.5, 0.05]] * 6 + [[0.5, None], None, []]
    found, _ = both(
        "chain_depth", [steps_of([{} for _ in rates], position_accept_rates=rates)], RunState("f", 1, launch=SPEC)
    )
    assert found is not None and found.evidence.values["line_count"] == 6


def test_expected_small_batches():
    rows = [{"accept_len": 2.0, "running_req": 4} for _ in range(6)] + [{"accept_len": 3.0, "running_req": 40}]
    found, _ = both("below_expected", [steps_of(rows)], RunState("f", 1, launch=SPEC), {"algorithms": []}, ctx=Ctx(3.0))
    assert found is not None and found.evidence.values["line_count"] == 6


def test_long_context_over_the_window():
    warn = WarningRecord(line=1, code="is greater than the derived context_length", value=8192.0, limit=2048.0)
    rows = [{"accept_len": 2.0, "seq_len": 4000.0 + i} for i in range(6)]
    found, det = both("long_context", [steps_of(rows)], RunState("f", 1, launch=SPEC), warns=(warn,))
    assert found is not None and det.over.count == 6 and det.longest == 4005.0


def test_long_context_decay():
    rows = [{"accept_len": 2.5, "seq_len": 100.0}] * 5 + [{"accept_len": 1.2, "seq_len": 9000.0}] * 5
    found, _ = both("long_context", [steps_of(rows)], RunState("f", 1, launch=SPEC))
    assert found is not None and found.evidence.values["long_accept_len"] == 1.2


def test_retractions_and_reserve():
    run = RunState("f", 1, launch=SPEC)
    rows = [{"running_req": 40, "token_usage": 0.9, "num_tokens": 1000}] * 3
    found, det = both("retractions", [steps_of(rows, retracted_req=[None, 2, 0])], run)
    assert found is not None and (det.retracted, det.events.count, det.usage) == (2, 1, 0.9)
    found, det = both("retractions", [steps_of(rows)], run)
    assert found is not None and det.reserve == 40 * (4 + 1 * 3) / (1000 / 0.9) and det.reserve_line == 10


def test_large_batch_wasteful():
    rows = [{"accept_len": 1.5, "running_req": 100} for _ in range(6)]
    found, det = both("large_batch", [steps_of(rows)], RunState("f", 1, launch=SPEC))
    assert found is not None and det.wasteful.count == 6


@pytest.mark.parametrize(("draft", "verify", "wasteful"), [(4, 100, [11, 12]), (4, 101, [12]), (-2, -5, [10, 11])])
def test_large_batch_verifies_b_times_n_tokens_at_the_bound(draft, verify, wasteful):
    """``B·N >= V`` at its bound: N = 4, V = 100 holds from B = 25 on, V = 101 from B = 26; a negative N (as a launch
    line may give it) turns it over, B <= 2 for N = -2, V = -5."""
    rows = [{"accept_len": 0.5, "running_req": b} for b in ((24, 25, 26) if draft > 0 else (1, 2, 3))]
    launch = LaunchConfig(spec_algorithm="EAGLE", spec_num_draft_tokens=draft)
    params = {"verify_tokens_at_least": verify, "efficiency_below": 2.0 if draft > 0 else -0.1}
    _, det = both("large_batch", [steps_of(rows)], RunState("f", 1, launch=launch), params)
    assert det.wasteful.lines == wasteful and det.wasteful.count == len(wasteful)


def test_graph_off_logged_and_by_captured_size():
    rows = [{"running_req": r} for r in (4, 8, 16, 20, 24, 30, 32)]
    found, det = both(
        "cuda_graph_off",
        [steps_of(rows, 1, cuda_graph=[True, True, True, False, False, None, False])],
        RunState("f", 1, launch=SPEC),
    )
    assert found is not None and (det.total, det.max_on, det.min_off, det.stats_lines) == (5, 16, 20, 1)
    launch = LaunchConfig(spec_algorithm="EAGLE", spec_num_steps=3, extra={"cuda_graph_bs": "[1, 2, 4, 8]"})
    found, det = both("cuda_graph_off", [steps_of(rows)], RunState("f", 1, launch=launch))
    assert found is not None and (det.above.count, det.cap) == (5, 8)


def test_queue_at_cap():
    warn = WarningRecord(line=1, code="Max running requests is reset to", value=48.0)
    rows = [{"running_req": 48} for _ in range(6)] + [{"running_req": None}]
    queue = [3, 3, 0, None, 2, 1, 5]
    found, det = both("queue_at_cap", [steps_of(rows, queue_req=queue)], RunState("f", 1, launch=SPEC), warns=(warn,))
    assert found is not None and (det.total, det.at_cap.count) == (6, 4)
    launch = LaunchConfig(spec_algorithm="EAGLE", spec_num_steps=3, extra={"max_running_requests": 48})
    found, _ = both(
        "queue_at_cap", [steps_of(rows, queue_req=queue)], RunState("f", 1, launch=launch), {"require_warning": False}
    )
    assert found is not None


def test_long_context_buckets_of_any_size():
    """Sequence lengths whose log2 bucket does not fit a byte are bucketed as the others."""
    seqs = [100.0, 1e80, 100.0, 3.0, 1e80, 2.0**255, 2.0**254]
    rows = [{"accept_len": 1.0 + i / 10, "seq_len": s} for i, s in enumerate(seqs)]
    _, det = both("long_context", [steps_of(rows[:3]), steps_of(rows[3:])], RunState("f", 1, launch=SPEC))
    assert {k: v[0] for k, v in det.by_length.items()} == {7: 2, 266: 2, 2: 1, 256: 1, 255: 1}
