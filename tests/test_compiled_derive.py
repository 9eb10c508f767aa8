"""A vLLM spec line's derived cells as the compiled matcher computes them (``cmatch_derive.c``), held to
:func:`acceptmon.parse.derive.spec_values`: rows, JSON rows and records byte for byte and type for type what the
general parser gives, on drawn counts, means, per-position rates and launches, in every released line order; the
lines the compiled derive must decline (a count beyond 2^53, a mean midway between the rates' sum and one more)
are computed by the plan's Python derive, and no other line is.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acceptmon.parse.derive import FIELDS
from acceptmon.parse.fast import lane as fastlane
from acceptmon.parse.fast import native, rows
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.pipeline import batch
from tests import test_cmatch_fuzz, test_fastlane
from tests.test_cmatch_fuzz import _lane_and_parser
from tests.test_typed_lane import _same

LAUNCH_V1 = (
    "INFO 04-08 10:00:00 [core.py:76] Initializing a V1 LLM engine (v0.8.5) with config: model='m', "
    "speculative_config=SpeculativeConfig(method='eagle3', model='d', num_spec_tokens={k}), tokenizer='m', seed=0"
)
LAUNCH_V0 = (
    "INFO 04-08 10:00:00 llm_engine.py:161] Initializing an LLM engine (v0.5.0) with config: model='m', "
    "speculative_config=SpeculativeConfig(draft_model='[ngram]', num_spec_tokens={k}), tokenizer='m', seed=0)"
)
SPEC = "INFO 04-08 10:00:{s:02d} [metrics.py:82] SpecDecoding metrics: "
ORDERS = {
    "0.8.3": SPEC + "Draft acceptance rate: {pct}%, Accepted: {a} tokens, Drafted: {d} tokens",
    "0.8.5": SPEC + "Draft acceptance rate: {pct}%, Mean acceptance length: {mean}, Accepted: {a} tokens, "
    "Drafted: {d} tokens, Per-position acceptance rate: {rates}",
    "0.10.2": "(APIServer pid=123) " + SPEC + "Mean acceptance length: {mean}, Accepted throughput: 41.25 tokens/s, "
    "Drafted throughput: 72.00 tokens/s, Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: "
    "{rates}, Avg Draft acceptance rate: {pct}%",
    "v0": "INFO 04-08 10:00:{s:02d} metrics.py:367] Speculative metrics: Draft acceptance rate: {r}, System "
    "efficiency: 0.598, Number of speculative tokens: {k}, Number of accepted tokens: {a}, Number of draft tokens: "
    "{d}, Number of emitted tokens: {e}.",
}
COUNT = st.one_of(
    st.integers(0, 50_000), st.integers(0, 10**18 - 1), st.sampled_from([0, 2**53 - 1, 2**53, 2**53 + 1, 10**18 - 1])
)
RATE = st.integers(0, 1000).map(lambda n: f"{n / 1000:.3f}")


@st.composite
def spec_line(draw: st.DrawFn, order: str, second: int) -> str:
    rates = draw(st.lists(RATE, min_size=1, max_size=16))
    total = sum(map(float, rates))
    near = st.sampled_from([total, total + 1, total + 0.5]).map(lambda x: f"{x:.2f}")  # a tie: 0.250, 0.250 and 1.00
    mean = draw(st.one_of(near, st.integers(0, 2000).map(lambda n: f"{n / 100:.2f}")))
    return ORDERS[order].format(
        s=second,
        pct=draw(st.integers(0, 1000).map(lambda n: f"{n / 10:.1f}")),
        mean=mean,
        a=draw(COUNT),
        d=draw(COUNT),
        e=draw(COUNT),
        k=draw(st.integers(0, 20)),
        r=draw(RATE),
        rates=", ".join(rates),
    )


@st.composite
def spec_log(draw: st.DrawFn) -> bytes:
    order = draw(st.sampled_from(sorted(ORDERS)))
    launch = (LAUNCH_V0 if order == "v0" else LAUNCH_V1).format(k=draw(st.integers(0, 20)))
    lines = [draw(spec_line(order, s)) for s in range(draw(st.integers(2, 12)))]
    return "\n".join([launch, *lines, ""]).encode()


@pytest.fixture(autouse=True)
def _lane_on_small_inputs(monkeypatch):
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(fastlane, "LEARN_PIECE", 1 << 10)
    monkeypatch.delenv("ACCEPTMON_PURE_PYTHON", raising=False)
    for grammars in (test_cmatch_fuzz.GRAMMARS, test_fastlane.GRAMMARS):
        monkeypatch.setattr(grammars, "year_for", lambda file, stamp: 2025)
    assert native.load() is not None


@pytest.fixture
def python_derives(monkeypatch) -> list[object]:
    """The keys the plans' Python derive was asked for: the lines the compiled derive declined."""
    asked: list[object] = []
    derived_cells = rows.Plan.derived_cells

    def spy(self: rows.Plan, key: object) -> tuple[object, ...]:
        asked.append(key)
        return derived_cells(self, key)

    monkeypatch.setattr(rows.Plan, "derived_cells", spy)
    return asked


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec_log())
def test_drawn_spec_lines_are_the_general_parsers(data):
    for fmt in ("csv", "jsonl"):
        fast, general = _lane_and_parser(data, [data], fmt)
        assert fast == general
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "spec.log"
        log.write_bytes(data)
        _same(log)


def _log(order: str, lines: list[dict[str, object]]) -> list[bytes]:
    """The launch and the first spec line (which the parser reads, the lane learning from it), then the others."""
    launch = (LAUNCH_V0 if order == "v0" else LAUNCH_V1).format(k=3)
    values = {"pct": "57.3", "mean": "2.72", "rates": "0.812, 0.566, 0.341", "r": "0.642", "k": 3, "e": 10616}
    text = [ORDERS[order].format(**{**values, "s": s, **x}) + "\n" for s, x in enumerate(lines)]
    return [(launch + "\n" + text[0]).encode(), "".join(text[1:]).encode()]


def test_only_the_lines_it_declines_reach_the_python_derive(python_derives, monkeypatch):
    """Ordinary lines: the lane's (the parser reads only the launch and the first), and no call of the Python derive,
    in any order; a count beyond 2^53 and a mean midway between the rates' sum (0.5) and one more: exactly those
    lines reach it, and their rows are the general parser's all the same."""
    parsed: list[int] = []
    feed = Parser.feed

    def spy(self: Parser, block: bytes) -> list[Record]:
        records = feed(self, block)
        parsed.extend(r.line for r in records)
        return records

    monkeypatch.setattr(Parser, "feed", spy)
    for order in ORDERS:
        blocks = _log(order, [{"a": 4125 + i, "d": 7200} for i in range(20)])
        parsed.clear()
        fast, general = _lane_and_parser(b"".join(blocks), blocks, "csv")
        assert fast == general and fast[0].count(b"\n") == 20
        assert python_derives == [], order
        assert len(parsed) == 2 + 21, order  # the fast run's launch and first line, the general run's 21 lines
    odd = [
        {"a": 2**53 + 1, "d": 7200},
        {"a": 5, "d": 10**17},
        {"a": 5, "d": 9, "mean": "1.00", "rates": "0.250, 0.250"},
    ]
    blocks = _log("0.8.5", [{"a": 4125, "d": 7200}, *odd, {"a": 4125, "d": 7200}])
    fast, general = _lane_and_parser(b"".join(blocks), blocks, "csv")
    assert fast == general and fast[0].count(b"\n") == 5
    assert [key[2:4] for key in python_derives] == [(2**53 + 1, 7200), (5, 10**17), (5, 9)]  # type: ignore[index]


class _Touched(dict[str, object]):
    """A record's values that remember every key read or written."""

    def __init__(self, data: dict[str, object]) -> None:
        super().__init__(data)
        self.reads: set[str] = set()
        self.writes: set[str] = set()

    def get(self, key: str, default: object = None) -> object:
        self.reads.add(key)
        return super().get(key, default)

    def pop(self, key: str, *default: object) -> object:
        self.reads.add(key)
        return super().pop(key, *default)

    def __setitem__(self, key: str, value: object) -> None:
        self.writes.add(key)
        super().__setitem__(key, value)


MAYBE = st.one_of(st.none(), st.integers(0, 10**6), st.floats(0, 20, allow_nan=False))
LAUNCH = st.builds(
    LaunchConfig,
    spec_algorithm=st.sampled_from([None, "eagle3"]),
    spec_num_steps=st.one_of(st.none(), st.integers(0, 8)),
    spec_num_draft_tokens=st.one_of(st.none(), st.integers(0, 9)),
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(FIELDS, key=lambda f: f.__name__)),
    st.fixed_dictionaries(
        {},
        optional={
            "drafted_tokens": MAYBE,
            "accepted_tokens": MAYBE,
            "emitted_tokens": MAYBE,
            "num_spec_tokens": MAYBE,
            "accept_len": MAYBE,
            "accept_rate": MAYBE,
            "position_accept_rates": st.one_of(st.none(), st.lists(st.floats(0, 1), max_size=4)),
        },
    ),
    st.one_of(st.none(), LAUNCH),
)
def test_a_derive_touches_only_its_declared_fields(derive, values, launch):
    """What a derive reads and writes, on any values and launch, is within its declared :class:`Fields`: the fast
    lane's plans take those as the derive's, whatever the line they learned from."""
    touched = _Touched(values)
    derive(touched, launch)
    assert touched.reads <= FIELDS[derive].reads
    assert touched.writes <= FIELDS[derive].writes
