"""`acceptmon compare`: goldens for the seed scenarios, the bootstrap against a naive one, bad references."""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.cli import compare as compare_cmd
from acceptmon.errors import InputError
from acceptmon.inputs.refs import parse_ref
from acceptmon.measure.bootstrap import block_length, bootstrap_means, draw_starts
from acceptmon.measure.compare import MIN_VERDICT_BATCHES, Batch, Side, compare, matched_load
from acceptmon.measure.speedup import bucket_of
from acceptmon.parse.load import load_grammars
from acceptmon.pipeline import batch as pipeline
from acceptmon.pipeline.sides import read_side
from tests.conftest import ROOT, SAMPLES
from tests.data.compare.make import GOLDEN, SCENARIOS, render, write_logs

SEED = SAMPLES / "seed_eagle3_moe.log"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("compare")
    write_logs(directory)
    return directory


def cli(*argv: str) -> str:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(parser_class=argparse.ArgumentParser)
    compare_cmd.add_parsers(sub)
    args = parser.parse_args(["compare", *argv, "-j", "1"])
    out = io.StringIO()
    with redirect_stdout(out):
        assert compare_cmd.cmd_compare(args) == 0
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_scenario_matches_golden(logs, name, fmt):
    suffix = "txt" if fmt == "table" else "json"
    assert render(name, logs, fmt) == (GOLDEN / f"{name}.{suffix}").read_text()


@pytest.mark.parametrize(
    ("name", "verdict", "pct", "a_len", "b_len"),
    [
        ("seed_broken_vs_fixed", "better", 25.2, 1.13, 2.84),  # wrong config, then the fix
        ("spec_vs_baseline", "better", 5.9, None, 2.85),  # 94 vs 89 tok/s
        ("regression", "worse", -27.35, None, 2.30),  # 60 vs 83 tok/s: a tree too big for the load
        ("healthy_halves", "no difference", 0.2, 2.85, 2.85),
    ],
)
def test_scenario_verdicts(name, verdict, pct, a_len, b_len):
    result = json.loads((GOLDEN / f"{name}.json").read_text())
    assert list(result) == ["a", "b", "change", "verdict", "reason"]
    assert result["verdict"] == verdict
    change = result["change"]
    assert change["gen_throughput_pct"] == pytest.approx(pct, abs=0.05)
    low, high = change["gen_throughput_pct_ci_low"], change["gen_throughput_pct_ci_high"]
    assert low < change["gen_throughput_pct"] < high
    assert (low > 0) == (verdict == "better") and (high < 0) == (verdict == "worse")
    for side, length in (("a", a_len), ("b", b_len)):
        got = result[side]["accept_len"]["mean"]
        assert got == (None if length is None else pytest.approx(length, abs=0.005))
        assert set(result[side]["gen_throughput"]) == {"mean", "ci_low", "ci_high"}
    assert change["matched"]["comparable"] is True
    assert change["matched"]["gen_throughput_pct"] == pytest.approx(pct, abs=2.0)


def test_reason_sentence_names_change_ci_and_accept_lengths():
    reason = json.loads((GOLDEN / "seed_broken_vs_fixed.json").read_text())["reason"]
    assert reason.startswith("B +25.2 % tok/s (CI +23.9 … +26.3 %), accept len 2.84 vs 1.13")


def test_table_fits_100_columns_and_metric_selects_rows(logs):
    for name in SCENARIOS:
        assert max(map(len, (GOLDEN / f"{name}.txt").read_text().splitlines())) <= 100
    only = cli(str(SEED) + "#1", str(SEED) + "#2", "--metric", "gen_throughput")
    assert "gen throughput tok/s" in only and "accept len" not in only.split("verdict")[0]
    assert "accept rate" not in only


def test_seed_changes_intervals_not_means():
    one = json.loads(cli(str(SEED) + "#3", str(SEED) + "#4", "--format", "json", "--seed", "1"))
    two = json.loads(cli(str(SEED) + "#3", str(SEED) + "#4", "--format", "json", "--seed", "2"))
    assert one["change"]["gen_throughput_pct"] == two["change"]["gen_throughput_pct"]
    assert one["a"]["gen_throughput"]["mean"] == two["a"]["gen_throughput"]["mean"] == pytest.approx(90.3, abs=0.05)
    assert one["a"]["gen_throughput"]["ci_low"] != two["a"]["gen_throughput"]["ci_low"]


def naive_means(column, rng, resamples):
    """Build every resampled series element by element and average it."""
    n = len(column)
    length = block_length(n)
    blocks = -(-n // length)
    means = []
    for _ in range(resamples):
        series = []
        for j, start in enumerate(draw_starts(rng, n, blocks)):
            take = length if j < blocks - 1 else n - (blocks - 1) * length
            series += [column[(start + i) % n] for i in range(take)]
        assert len(series) == n
        have = [v for v in series if v is not None]
        means.append(sum(have) / len(have) if have else None)
    return means


def naive_interval(values):
    cuts = statistics.quantiles([v for v in values if v is not None], n=40, method="inclusive")
    return cuts[0], cuts[-1]


def test_block_bootstrap_equals_naive_resampling():
    r = random.Random(7)
    tput = [r.uniform(50, 100) for _ in range(23)]
    accept = [None if i % 4 == 0 else r.uniform(1, 3) for i in range(23)]  # gaps: counts matter
    fast = bootstrap_means([tput, accept], random.Random(3), 300)
    for column, got in zip([tput, accept], fast, strict=True):
        want = naive_means(column, random.Random(3), 300)
        assert got == pytest.approx(want, rel=1e-12)


def test_change_ci_equals_naive_ratio_bootstrap():
    r = random.Random(8)
    a = [Batch(None, None, r.uniform(80, 90), 4, True) for _ in range(30)]
    b = [Batch(None, None, r.uniform(84, 96), 4, True) for _ in range(17)]
    result = compare(Side("a", a), Side("b", b), resamples=500, seed=5)
    ma = naive_means([x.gen_throughput for x in a], random.Random(5), 500)
    mb = naive_means([x.gen_throughput for x in b], random.Random(6), 500)
    low, high = naive_interval([100 * (y / x - 1) for x, y in zip(ma, mb, strict=True)])
    assert result.change.gen_throughput_pct_ci_low == pytest.approx(low, abs=0.005)
    assert result.change.gen_throughput_pct_ci_high == pytest.approx(high, abs=0.005)
    a_low, a_high = naive_interval(ma)
    assert result.a.gen_throughput.ci_low == pytest.approx(a_low, abs=5e-5)
    assert result.a.gen_throughput.ci_high == pytest.approx(a_high, abs=5e-5)
    assert result.a.block_length == 4 and result.b.block_length == 3  # ceil(30^(1/3)), ceil(17^(1/3))


@pytest.mark.parametrize(
    ("n", "length"), [(1, 1), (2, 2), (8, 2), (9, 3), (27, 3), (28, 4), (1000, 10), (1001, 11), (100_000, 47)]
)
def test_block_length_is_ceil_cube_root(n, length):
    assert block_length(n) == length


@pytest.mark.parametrize(
    ("running", "bucket"),
    [(1, (1, 1)), (16, (16, 16)), (17, (16, 19)), (23, (20, 23)), (33, (32, 39)), (100, (96, 111))],
)
def test_running_req_buckets(running, bucket):
    assert bucket_of(running) == bucket


def steady(running: int, tput: float, n: int) -> list[Batch]:
    return [Batch(2.0, 0.5, tput, running, True) for _ in range(n)]


def test_matched_load_weights_bucket_ratios_by_batches():
    a = steady(2, 100.0, 6) + steady(4, 50.0, 6) + steady(3, 70.0, 9)  # bucket 3 only on A: left out
    b = steady(2, 110.0, 4) + steady(4, 60.0, 8) + [Batch(2.0, 0.5, 999.0, 2, False)] * 5  # not steady: left out
    m = matched_load(a, b)
    assert m.comparable and [x.running_req for x in m.buckets] == ["2", "4"]
    assert (m.a_batches, m.b_batches) == (12, 12)
    assert m.gen_throughput_pct == pytest.approx(100 * ((10 * 1.1 + 14 * 1.2) / 24 - 1), abs=0.005)


def test_matched_load_says_when_too_few_batches_are_shared():
    m = matched_load(steady(2, 100.0, 30) + steady(5, 80.0, 4), steady(5, 90.0, 30))
    assert not m.comparable and m.gen_throughput_pct is None
    assert m.note.startswith("too few steady batches at shared #running-req") and "4 vs 30" in m.note


def test_steady_batches_need_empty_queue_and_no_prefill_since_the_ranks_last_decode(tmp_path):
    def decode(rank: str, queue: int) -> str:
        return (
            f"[2026-03-02 10:00:00 {rank}] Decode batch, #running-req: 3, #token: 3000, token usage: 0.01, "
            f"cuda graph: True, gen throughput (token/s): 80.00, #queue-req: {queue}"
        )

    prefill = (
        "[2026-03-02 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 100, #cached-token: 0, token usage: 0.01, "
        "#running-req: 2, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 5000.00"
    )
    lines = [decode("TP0", 0), decode("TP0", 0), decode("TP1", 0), prefill, decode("TP1", 0), decode("TP0", 0)]
    lines += [decode("TP0", 0), decode("TP0", 2), decode("TP1", 0)]
    log = tmp_path / "s.log"
    log.write_text("\n".join(lines) + "\n")
    side = read_side(str(log), None, load_grammars()).side
    # first line of each rank follows its (unlogged) prefill; the prefill line is TP0's
    assert [x.steady for x in side.batches] == [False, True, False, True, False, True, False, True]
    assert side.spec == "config unknown: no launch line" and side.label == "s.log"


@pytest.mark.parametrize("run_no", [None, 37])
def test_parallel_read_marks_the_same_steady_batches(tmp_path, grammars, monkeypatch, run_no):
    big = tmp_path / "big.log"
    big.write_bytes(SEED.read_bytes() * 10)  # 50 launches, cut into 8 ranges
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(pipeline, "RANGE_BYTES", 1 << 18)
    one, two = (read_side(str(big), run_no, grammars, jobs).side for jobs in (1, 2))
    assert one == two and len(one.batches) == (384 * 10 if run_no is None else 96)
    assert 0 < sum(b.steady for b in one.batches) < len(one.batches)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("#9", "#9: no run 9 (runs there: 1-5)"),
        ("#0", "#0: no run 0 (runs there: 1-5)"),
        ("#abc", "#abc: 'abc' is not a run number: write FILE#N, N as listed by `acceptmon runs`"),
        ("#", "#: '' is not a run number"),
    ],
)
def test_bad_run_reference_is_one_line_naming_the_runs(ref, message):
    with pytest.raises(InputError) as err:
        cli(str(SEED) + "#1", str(SEED) + ref)
    assert str(err.value).startswith(str(SEED) + message) and "\n" not in str(err.value)


@pytest.mark.parametrize("ref", ["missing.log", "missing.log#2"])
def test_missing_file_is_one_line(tmp_path, ref):
    with pytest.raises(InputError, match=r"missing\.log: no such file$"):
        cli(str(tmp_path / ref), str(SEED))


def test_file_name_with_hash_is_a_file_when_it_exists(tmp_path):
    odd = tmp_path / "run#2"
    odd.write_bytes(SEED.read_bytes())
    assert parse_ref(str(odd)) == (str(odd), None)
    assert parse_ref(str(odd) + "#2") == (str(odd), 2)


def test_stdin_on_both_sides_is_refused():
    with pytest.raises(InputError, match="not both"):
        cli("-", "-")


def test_run_without_decode_lines_is_an_error(tmp_path):
    log = tmp_path / "idle.log"
    log.write_text("[2026-03-02 10:00:00] server_args=ServerArgs(model_path='m', speculative_algorithm=None)\n")
    with pytest.raises(InputError, match=r"idle\.log#1: no decode lines to compare$"):
        cli(str(SEED), str(log) + "#1")


batches = st.lists(
    st.builds(
        Batch,
        st.one_of(st.none(), st.floats(1, 5)),
        st.one_of(st.none(), st.floats(0, 1)),
        st.one_of(st.none(), st.floats(0.5, 5000)),
        st.one_of(st.none(), st.integers(0, 300)),
        st.booleans(),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(batches, st.integers(0, 2**32))
def test_a_run_compared_with_itself_has_no_change(side_batches, seed):
    result = compare(Side("x", side_batches), Side("x", side_batches), resamples=200, seed=seed)
    c = result.change
    assert result.verdict == ("no difference" if len(side_batches) >= MIN_VERDICT_BATCHES else "too few batches")
    assert c.gen_throughput_diff in (0.0, None) and c.gen_throughput_pct in (0.0, None)
    assert c.accept_len_diff in (0.0, None) and c.accept_rate_diff in (0.0, None)
    assert c.matched.gen_throughput_pct in (0.0, None)
    if c.gen_throughput_pct is not None:
        assert c.gen_throughput_pct_ci_low <= 0 <= c.gen_throughput_pct_ci_high


def test_compare_reads_vllm_spec_and_throughput_lines():
    """vLLM: a batch per spec line, with the load of the throughput line before it."""
    from tests.conftest import SAMPLES

    log = str(SAMPLES / "vllm_v1_0.10.2_dp.log")
    a, b = (read_side(log, n, load_grammars()).side for n in (1, 2))
    lines = open(log).read().splitlines()
    second = [i for i, line in enumerate(lines) if "non-default args" in line][1]  # run 2's first launch line
    run1 = lines[:second]
    assert len(a.batches) == sum("SpecDecoding metrics" in x for x in run1)  # a batch per spec line
    assert all(x.accept_len is not None and x.gen_throughput is not None for x in a.batches)  # with its load
    result = compare(a, b)
    assert result.a.accept_len.mean is not None and result.b.gen_throughput.mean is not None
    assert result.verdict in ("better", "worse", "no difference")
    assert result.b.accept_len.mean > result.a.accept_len.mean


@pytest.mark.parametrize("order", ["stdin first", "stdin second"])
def test_a_run_of_stdin_is_a_side_not_an_option(order):
    """``-#2`` is run 2 of stdin: argparse must not take it for an option."""
    sides = ["-#1", f"{SEED}#2"] if order == "stdin first" else [f"{SEED}#1", "-#2"]
    p = subprocess.run([sys.executable, "-m", "acceptmon", "compare", *sides, "--format", "json"],
                       input=SEED.read_bytes(), capture_output=True, cwd=ROOT, check=False)  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    labels = [out["a"]["label"], out["b"]["label"]]
    assert labels == (["stdin#1", "seed_eagle3_moe.log#2"] if order == "stdin first"
                      else ["seed_eagle3_moe.log#1", "stdin#2"])  # fmt: skip


def test_fewer_than_ten_batches_a_side_get_no_verdict():
    """Two batches a side once gave "better +1241.4 % (CI +1241.4 … +1241.4 %)": a zero-width interval."""
    slow = [Batch(2.0, 0.5, 10.0, 4, True)] * 2
    fast = [Batch(2.0, 0.5, 134.1, 4, True)] * 2
    result = compare(Side("a", slow), Side("b", fast * 10), resamples=200)
    assert result.verdict == "too few batches"
    assert result.reason.startswith("too few batches to judge (A has 2, B 20; a verdict needs 10 a side)")
    enough = compare(Side("a", slow * 5), Side("b", fast * 5), resamples=200)
    assert enough.verdict == "better"


_MAYBE = st.none() | st.floats(0.5, 900, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_MAYBE, _MAYBE, _MAYBE), min_size=1, max_size=60),
    st.none() | st.lists(st.floats(1, 900, allow_nan=False), max_size=20),
    st.lists(st.sampled_from(["accept_len", "accept_rate", "gen_throughput"]), min_size=1, max_size=3, unique=True),
    st.integers(0, 3),
)
def test_intervals_of_some_columns_are_summarizes(rows, loads, names, seed):
    """The intervals of some columns drawn alone (the doctor's depth: accept length and throughput) are those
    :func:`summarize` gives of all of them, with or without load lines of their own, whichever columns are empty."""
    from acceptmon.measure.compare import intervals, summarize

    side = Side("x", [Batch(a, r, t, 4, True) for a, r, t in rows], loads=loads)
    result = summarize(side, random.Random(seed), 200)[0]
    want = [(e.ci_low, e.ci_high) for e in (getattr(result, n) for n in names)]
    assert intervals(side, seed, 200, names) == want


@pytest.mark.parametrize("names", [["gen_throughput"], ["accept_len", "gen_throughput"], ["accept_rate"]])
@pytest.mark.parametrize("loads", [None, 30])
def test_intervals_draw_the_batches_blocks_before_the_loads_as_summarize_does(names, loads):
    """Load lines of their own are drawn after the batches' blocks: asked for their interval alone, the batches'
    blocks are drawn all the same (else every replicate of the loads differs)."""
    from acceptmon.measure.compare import intervals, summarize

    r = random.Random(1)
    rates = [r.uniform(100, 200) for _ in range(loads)] if loads else None
    side = Side("x", [Batch(r.uniform(1, 3), 0.5, r.uniform(50, 60), 4, True) for _ in range(50)], loads=rates)
    result = summarize(side, random.Random(0), 200)[0]
    want = [(e.ci_low, e.ci_high) for e in (getattr(result, n) for n in names)]
    assert intervals(side, 0, 200, names) == want
    assert None not in want[0]
