"""Values from a log are untrusted: absurd launch sizes and impossible stats values."""

from __future__ import annotations

import json
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.diagnose.detect_accept import deepest_step
from acceptmon.display import strict_json
from acceptmon.measure import normalize
from acceptmon.measure.normalize import VALID, Normalizer
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import DecodeStats, LaunchConfig
from tests.serving import Serve, decode_line, launch_line, value, wait_for
from tests.test_cli import acceptmon

REFUSED = "launch config refused"
LEFT_OUT = "impossible value"


def _log(tmp_path, steps: int, acc: float = 2.0, tokens: int = 4, n: int = 20, name: str = "x.log"):
    log = tmp_path / name
    log.write_text(
        "\n".join([launch_line(steps=steps, tokens=tokens), *(decode_line(i, acc=acc) for i in range(n))]) + "\n"
    )
    return log


def _no_constants(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# Item 1: one launch line must not stop doctor or serve.


def test_deepest_step_is_the_brute_force_answer_in_constant_time():
    for alpha in (0.0, 0.31, 0.5, 0.77, 0.93, 0.999):
        for below in (-0.5, 0.0, 0.1, 0.3, 0.9, 1.0, 1.2):
            for steps in (0, 1, 2, 7, 64):
                want = max([i for i in range(1, steps + 1) if alpha**i >= below], default=1)
                assert deepest_step(alpha, below, steps) == want, (alpha, below, steps)
    start = time.perf_counter()
    assert deepest_step(0.5, 0.3, 10**15) == 1 and deepest_step(0.99, 0.3, 10**30) == 119
    assert time.perf_counter() - start < 0.01


def test_the_normalizer_refuses_an_implausible_config(grammars):
    parser = Parser(grammars, "x.log")
    records = parser.feed((launch_line(steps=10**15, tokens=-2) + "\n" + decode_line(0, acc=2.0) + "\n").encode())
    assert records[0].config.spec_num_steps == 10**15  # parse keeps the launch as logged
    launch, batch = Normalizer().feed(records)
    assert launch.refused == ("spec_num_steps", "spec_num_draft_tokens")
    config = launch.record.config
    assert (config.spec_num_steps, config.spec_num_draft_tokens, config.spec_eagle_topk) == (None, None, 1)
    assert batch.batch is not None and batch.batch.accept_len == 2.0 and not batch.refused


@pytest.mark.parametrize("steps", [10**15, 10**30, -3, 0, 65])
def test_doctor_finishes_on_an_absurd_launch_and_says_so(tmp_path, steps):
    log = _log(tmp_path, steps)  # L = 2.0: alpha 0.5, the depth rule's loop ran to k
    start = time.monotonic()
    p = acceptmon("doctor", log, "--format", "json")
    assert p.returncode == 0 and time.monotonic() - start < 20
    (run,) = json.loads(p.stdout)["runs"]
    assert run["spec"] == "EAGLE3 topk 1, draft 4" and run["accept_len_mean"] == 2.0
    assert f"1 {REFUSED}" in p.stderr.decode()


@pytest.mark.parametrize("steps", [10**30, -3])
def test_runs_and_compare_read_an_absurd_config_as_unknown(tmp_path, steps):
    log = _log(tmp_path, steps, tokens=-2 if steps < 0 else 4)
    p = acceptmon("runs", log, "--format", "json")
    (run,) = json.loads(p.stdout)
    assert run["spec_num_steps"] is None and run["refused_configs"] == 1 and run["accept_len_mean"] == 2.0
    assert run["spec_num_draft_tokens"] == (None if steps < 0 else 4)
    assert f"1 {REFUSED}" in p.stderr.decode()
    good = _log(tmp_path, 3, name="good.log")
    c = acceptmon("compare", good, log, "--format", "json")
    assert c.returncode == 0, c.stderr
    assert json.loads(c.stdout)["b"]["spec"] == ("EAGLE3 topk 1" if steps < 0 else "EAGLE3 topk 1, draft 4")
    assert f"x.log: 1 {REFUSED}" in c.stderr.decode() and "good.log" not in c.stderr.decode()


def test_plausible_configs_are_kept(tmp_path):
    p = acceptmon("runs", _log(tmp_path, 64, tokens=64), "--format", "json")
    (run,) = json.loads(p.stdout)
    assert (run["spec_num_steps"], run["spec_num_draft_tokens"], run["refused_configs"]) == (64, 64, 0)
    assert REFUSED not in p.stderr.decode()


@pytest.mark.integration
def test_serve_answers_scrapes_after_an_absurd_launch_and_stops_on_sigterm(tmp_path):
    log = _log(tmp_path, 3, n=3)
    serve = Serve(str(log))
    try:
        serve.wait_listening()
        assert wait_for(lambda: value(serve.metrics(), "acceptmon_decode_batches_total") == 3)
        with log.open("a") as f:
            f.write("\n".join([launch_line(steps=10**15), *(decode_line(i, acc=2.0) for i in range(12))]) + "\n")
        start = time.monotonic()
        assert wait_for(lambda: value(serve.metrics(), "acceptmon_decode_batches_total") == 15, timeout=10)
        for _ in range(5):
            serve.get()
        assert time.monotonic() - start < 10
    finally:
        start = time.monotonic()
        assert serve.stop(timeout=10) == 0
        assert time.monotonic() - start < 10
    assert "Traceback" not in serve.stderr


# Item 9: impossible values never reach an aggregate, and JSON is JSON.


def test_strict_json_writes_null_for_non_finite_numbers():
    assert strict_json({"a": [math.inf, -math.inf, math.nan, 1.5], "b": (2, None)}) == (
        '{"a": [null, null, null, 1.5], "b": [2, null]}'
    )


def _impossible(tmp_path):
    log = tmp_path / "odd.log"
    good = [decode_line(i, acc=2.5) for i in range(10)]
    bad = [decode_line(10).replace("accept len: 2.85", "accept len: 1e308")]
    bad += [decode_line(11).replace("accept len: 2.85", "accept len: 0.00")]
    log.write_text("\n".join([launch_line(steps=3, tokens=4), *good, *bad]) + "\n")
    return log


def test_impossible_accept_lengths_are_counted_and_left_out(tmp_path):
    log = _impossible(tmp_path)
    p = acceptmon("runs", log, "--format", "json")
    (run,) = _no_constants(p.stdout.decode())  # type: ignore[misc]
    assert run["batches"] == 12 and run["accept_len_mean"] == 2.5 and run["accept_len_p90"] == 2.5
    assert run["draft_accept_rate_mean"] == 0.5  # 0.00 gave -0.33, 1e308 an overflow
    assert run["invalid_values"] == 4  # each line's accept len and the draft rate derived from it
    assert f"4 {LEFT_OUT}s left out" in p.stderr.decode()
    c = acceptmon("compare", log, log, "--format", "json")
    side = _no_constants(c.stdout.decode())["a"]  # type: ignore[index]
    assert side["accept_len"]["mean"] == 2.5 and "nan" not in c.stdout.decode().lower()
    d = acceptmon("doctor", log, "--format", "json")
    (report,) = _no_constants(d.stdout.decode())["runs"]  # type: ignore[index]
    assert report["accept_len_mean"] == 2.5 and f"4 {LEFT_OUT}s" in d.stderr.decode()
    parsed = acceptmon("parse", log, "-o", "-").stdout.decode()
    assert "1e+308" in parsed and "-0.3333" in parsed  # parse is the table as logged


def test_negative_counts_and_rates_outside_0_1_are_invalid(grammars):
    line = decode_line(0).replace("accept rate: 0.47", "accept rate: 1.70")
    launch, decode = Parser(grammars, "x.log").feed((launch_line() + "\n" + line + "\n").encode())
    decode = decode.model_copy(update={"running_req": -4})  # the grammar refuses a sign; another kind may not
    fact = Normalizer().feed([launch, decode])[1]
    assert fact.invalid == 2 and fact.record.accept_rate is None and fact.record.running_req is None
    assert fact.record.num_tokens == 4521
    decode = decode.model_copy(update={"num_tokens": -500})  # '#token: -500' is read as logged
    fact = Normalizer().feed([launch, decode])[1]
    assert fact.invalid == 3 and fact.record.num_tokens is None
    assert fact.batch is not None and fact.batch.running_req is None and fact.batch.accept_len == 2.85


def test_impossible_per_request_values_are_counted_and_left_out(tmp_path, grammars):
    """A finished request's accept length is held to the same meaning as a batch's, in runs and on /metrics."""
    from acceptmon.exporter.metrics import MetricsPage
    from acceptmon.live.state import LiveStats
    from tests.conftest import SAMPLES

    text = (SAMPLES / "request_0.5.23.log").read_text()
    finishes = [line for line in text.splitlines() if "Finish: " in line and "'spec_accept_length': " in line]
    good = sorted(float(x.split("'spec_accept_length': ")[1].split(",")[0]) for x in finishes[2:])
    odd = text.replace(finishes[0], _with_length(finishes[0], "1e308")).replace(
        finishes[1], _with_length(finishes[1], "0.4").replace("'spec_verify_ct': ", "'spec_verify_ct': -")
    )
    log = tmp_path / "requests.log"
    log.write_text(odd)
    p = acceptmon("runs", log, "--format", "json")
    runs = _no_constants(p.stdout.decode())
    logged = _no_constants(acceptmon("runs", SAMPLES / "request_0.5.23.log", "--format", "json").stdout.decode())
    requests = sum(r["requests"] for r in logged)  # type: ignore[attr-defined]
    assert sum(r["requests"] for r in runs) == requests  # the requests still count, their impossible values not
    assert sum(r["invalid_values"] for r in runs) == 3
    for r in (r for r in runs if r["requests"]):  # 0.4 and 1e308 left out of every run's quantiles
        assert round(min(good), 2) - 1e-9 <= r["request_accept_len_p10"] <= r["request_accept_len_p90"] <= max(good)
    live = LiveStats()
    parser = Parser(grammars, "requests.log")
    live.update("requests.log", parser.feed(odd.encode()), parser.tally)
    page = MetricsPage(live).render().decode()
    (count,) = [x for x in page.splitlines() if x.startswith("acceptmon_request_accept_length_count{")]
    assert count.endswith(f" {float(requests - 2)}")  # the histogram holds only possible lengths
    assert "+Inf" in page and "1e+308" not in page


def _with_length(line: str, value: str) -> str:
    head, tail = line.split("'spec_accept_length': ", 1)
    return f"{head}'spec_accept_length': {value}, {tail.split(', ', 1)[1]}"


SPECIAL = [None, 0.0, -0.0, 1.0, 0.5, 1000.0, 1000.0000001, 0.9999999, -1e-300, math.inf, -math.inf, math.nan, 1e308]
SPECIAL += [0, 1, 1000, 1001, -1, 2**70, True, False, "1", 1.5]
CHECKED = sorted(set(DecodeStats.model_fields) & set(VALID))
SIZES = [None, -1, 0, 1, 3, 64, 65, 1024, 1025, 10**30]
"""A launch's draft tokens and steps, as the parser gives a decode record them: refused outside CONFIG_LIMITS."""


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries({n: st.sampled_from(SPECIAL) | st.floats() | st.integers() for n in CHECKED}),
    st.sampled_from(SIZES),
    st.sampled_from(SIZES),
)
def test_the_check_of_untrusted_values_is_the_bounds_themselves(values, tokens, steps):
    """A decode record's values, plain or not (NaN, infinities, -0.0, bools, huge ints, text), are left out exactly
    where :data:`VALID`'s bounds say, and a draft accept rate derived from a refused draft-token count (the
    launch's ``num_draft_tokens``, else its ``num_steps + 1``) is dropped: the per-model test of the usual values
    is only a shortcut to the same answer."""
    _check_as_bounds({**values, "spec_num_draft_tokens": tokens, "spec_num_steps": steps})


@pytest.mark.parametrize("tokens", SIZES)
@pytest.mark.parametrize("steps", [None, 3, 65])
def test_each_special_value_in_each_field_is_judged_by_the_bounds(tokens, steps):
    for name in CHECKED:  # the others in bounds
        for v in SPECIAL:
            _check_as_bounds(
                {**dict.fromkeys(CHECKED, 1), name: v, "spec_num_draft_tokens": tokens, "spec_num_steps": steps}
            )


def _check_as_bounds(values: dict[str, object]) -> None:
    record = DecodeStats.model_construct(**values)
    got, invalid = normalize._checked(record)
    bad = sorted(n for n in CHECKED if (v := getattr(record, n)) is not None and not normalize._valid(n, v))
    assert invalid == len(bad), values
    config = LaunchConfig(
        spec_algorithm="EAGLE",
        spec_num_draft_tokens=values["spec_num_draft_tokens"],
        spec_num_steps=values["spec_num_steps"],
    )
    refused = normalize.refused(config)
    clean = config.model_copy(update=dict.fromkeys(refused))
    from_refused = clean.draft_tokens != config.draft_tokens  # the count the parser derived the rate from is refused
    derived = from_refused and record.draft_accept_rate is not None and getattr(record, "accepted_tokens", None) is None
    for n in CHECKED:
        left_out = n in bad or (n == "draft_accept_rate" and derived)
        assert getattr(got, n) is (None if left_out else getattr(record, n)), (n, values)
    assert (got is record) == (not bad and not derived)
