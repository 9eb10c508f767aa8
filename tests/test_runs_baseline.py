"""``runs --baseline``: each speculative run's speedup against a run without speculation, its interval and
verdict, and the best run of a sweep; held to ``compare`` pair by pair and to the doctor's recommendation."""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import re

import pytest

from acceptmon.cli import batch as batch_cli
from acceptmon.cli import compare as compare_cli
from acceptmon.cli import doctor as doctor_cli
from acceptmon.errors import InputError
from acceptmon.measure.columns import Batches
from acceptmon.measure.speedup import MIN_MATCHED_BATCHES, shared, speedup, verdict, weighted_speedup
from acceptmon.measure.summary import RunSummary
from tests.conftest import ROOT

SEED = "sample_logs/seed_eagle3_moe.log"
BASE = "sample_logs/baseline_nospec.log"


def _cli(module, capsys, *argv: str) -> tuple[str, str]:
    parser = argparse.ArgumentParser()
    module.add_parsers(parser.add_subparsers())
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    got = capsys.readouterr()
    return got.out, got.err


def _runs(capsys, *argv: str) -> dict[tuple[str, int], dict]:
    out, _ = _cli(batch_cli, capsys, "runs", *argv, "--format", "json", "-j", "1")
    return {(r["file"], r["run"]): r for r in json.loads(out)}


def _compare(capsys, a: str, b: str) -> dict:
    out, _ = _cli(compare_cli, capsys, "compare", a, b, "--format", "json")
    return json.loads(out)


# The pure rule


def _steady(batches: Batches, running: int, tput: float, n: int) -> None:
    for _ in range(n):
        batches.add(2.0, 0.5, tput, running, True)


def test_speedup_is_the_batch_weighted_ratio_of_shared_buckets_with_a_bootstrap_interval():
    spec, base = Batches(), Batches()
    _steady(spec, 4, 120.0, 30)
    _steady(spec, 8, 200.0, 10)
    _steady(spec, 30, 999.0, 20)  # no baseline batch at 30: left out
    _steady(base, 4, 100.0, 20)
    _steady(base, 8, 250.0, 30)
    spec.add(2.0, 0.5, 5000.0, 4, False)  # not steady: left out
    s = speedup(spec, base)
    weights = (30 + 20, 10 + 30)
    expected = (weights[0] * 1.2 + weights[1] * 0.8) / sum(weights)
    assert s.speedup == pytest.approx(expected, abs=1e-4)
    assert (s.spec_batches, s.base_batches) == (40, 50)
    assert [b.running_req for b in s.buckets] == ["4", "8"]
    # constant throughput in each bucket: every replicate that draws both buckets gives the point; one that
    # draws only one bucket on a side gives that bucket's ratio, so the interval lies between 0.8 and 1.2
    assert 0.8 <= s.ci_low <= s.speedup <= s.ci_high <= 1.2
    assert verdict(s.speedup) == "marginal"  # 1.022: at least 1.0, below 1.03


def test_speedup_interval_covers_the_true_ratio_of_noisy_batches():
    rng = random.Random(7)
    spec, base = Batches(), Batches()
    for _ in range(400):
        spec.add(2.0, 0.5, 110.0 + rng.gauss(0, 8), 4, True)
        base.add(None, None, 100.0 + rng.gauss(0, 8), 4, True)
    s = speedup(spec, base)
    assert s.ci_low < 1.1 < s.ci_high
    assert s.ci_high - s.ci_low < 0.05
    assert s.ci_low < s.speedup < s.ci_high


def test_too_few_shared_batches_give_no_speedup_and_say_why():
    spec, base = Batches(), Batches()
    _steady(spec, 4, 120.0, 30)
    _steady(base, 4, 100.0, MIN_MATCHED_BATCHES - 1)
    s = speedup(spec, base)
    assert s.speedup is None and s.ci_low is None
    assert s.note.startswith("too few steady batches at shared #running-req")
    assert weighted_speedup([(30, 120.0, MIN_MATCHED_BATCHES, 100.0)]) == pytest.approx(1.2)
    assert shared({(4, 4): 5, (8, 8): 1}, {(4, 4): 2, (8, 8): 9}) == [(4, 4)]


def test_verdict_thresholds_are_the_doctors():
    assert [verdict(x) for x in (0.99, 1.0, 1.0299, 1.03)] == ["loses", "marginal", "marginal", "pays"]
    assert verdict(1.05, 1.0, 1.10) == "marginal"


# The seed sweep against its baseline


@pytest.fixture
def sweep(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    return _runs(capsys, SEED, "--baseline", BASE)


def test_seed_sweep_speedups_are_compares_matched_load_pair_by_pair(sweep, capsys):
    for n in range(1, 6):
        run = sweep[SEED, n]
        pair = _compare(capsys, BASE, f"{SEED}#{n}")
        assert round(100 * (run["speedup"] - 1), 2) == pytest.approx(pair["change"]["matched"]["gen_throughput_pct"])
        assert run["speedup_ci_low"] < run["speedup"] < run["speedup_ci_high"]
        assert run["baseline"] == "baseline_nospec.log#1"
        # compare's throughput verdict against the baseline agrees with the sweep's
        assert pair["verdict"] == ("worse" if run["verdict"] == "loses" else "better")
        # the run's throughput interval is compare's for the run as side A (seed 0)
        as_a = _compare(capsys, f"{SEED}#{n}", BASE)["a"]["gen_throughput"]
        assert (run["gen_throughput_ci_low"], run["gen_throughput_ci_high"]) == (as_a["ci_low"], as_a["ci_high"])
    assert [sweep[SEED, n]["verdict"] for n in range(1, 6)] == ["loses", "pays", "marginal", "pays", "loses"]


def test_seed_sweep_best_and_ties_agree_with_compare_and_the_doctor(sweep, capsys):
    best = [n for n in range(1, 6) if sweep[SEED, n]["best"]]
    tied = [n for n in range(1, 6) if sweep[SEED, n]["tied_with_best"]]
    assert (best, tied) == ([4], [2])
    for n in (1, 2, 3, 5):
        pair = _compare(capsys, f"{SEED}#4", f"{SEED}#{n}")
        assert pair["verdict"] == ("no difference" if n in tied else "worse")
    out, _ = _cli(doctor_cli, capsys, "doctor", SEED, "--baseline", BASE, "--format", "json", "-j", "1")
    rec = json.loads(out)["runs"][0]["recommendation"]
    assert rec["depth"] == sweep[SEED, 4]["spec_num_steps"] == 2
    assert rec["tied"] == [sweep[SEED, 2]["spec_num_steps"]]
    assert rec["predicted_speedup"] == pytest.approx(sweep[SEED, 4]["speedup"], abs=0.005)


def test_baseline_from_the_files_listed_is_the_same_as_given(sweep, capsys):
    auto = _runs(capsys, SEED, BASE, "--baseline")
    for n in range(1, 6):
        assert auto[SEED, n] == sweep[SEED, n]
    plain = auto[BASE, 1]
    assert (plain["speedup"], plain["verdict"], plain["baseline"], plain["best"]) == (None, None, None, False)


def test_baseline_adds_columns_and_changes_none(sweep, capsys):
    before = _runs(capsys, SEED)
    for key, run in before.items():
        assert {k: sweep[key][k] for k in run} == run
    assert set(sweep[SEED, 1]) - set(RunSummary.model_fields) == {
        "baseline",
        "speedup",
        "speedup_ci_low",
        "speedup_ci_high",
        "verdict",
        "speedup_note",
        "gen_throughput_ci_low",
        "gen_throughput_ci_high",
        "best",
        "tied_with_best",
    }
    out, _ = _cli(batch_cli, capsys, "runs", SEED, "--baseline", BASE, "--format", "csv", "-j", "1")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["verdict"] for r in rows] == ["loses", "pays", "marginal", "pays", "loses"]
    assert [r["best"] for r in rows] == ["False", "False", "False", "True", "False"]


def test_table_marks_the_best_and_says_what_s_is_against(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    out, err = _cli(batch_cli, capsys, "runs", SEED, "--baseline", BASE, "-j", "1")
    head, *rows = [line.split() for line in out.splitlines()]
    assert head[-4:] == ["speedup", "speedup_95%", "verdict", "best"]
    cells = {r[1]: r[-4:] for r in rows}
    assert cells["4"] == ["1.05", "1.05..1.06", "pays", "best"]
    assert cells["2"][2:] == ["pays", "tied"]
    assert cells["1"][2:] == ["loses", "-"]
    assert "against baseline_nospec.log#1" in err
    assert "best: seed_eagle3_moe.log#4 (EAGLE3 steps 2, topk 1, draft 3), 94.2 tok/s/rank, S = 1.05 (pays)" in err
    assert "as fast within the 95 % intervals: seed_eagle3_moe.log#2 (EAGLE3 steps 3, topk 1, draft 4)" in err


def test_a_baseline_sharing_too_few_batches_says_so_instead_of_a_number(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    short = tmp_path / "short.log"
    short.write_text("".join((ROOT / BASE).read_text().splitlines(keepends=True)[:40]))
    out, err = _cli(batch_cli, capsys, "runs", SEED, "--baseline", str(short), "-j", "1")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert {r[-4] for r in rows} == {"too_few"}
    assert "seed_eagle3_moe.log#2: no speedup: too few steady batches at shared #running-req" in err
    runs = _runs(capsys, SEED, "--baseline", str(short))
    assert all(r["speedup"] is None and r["verdict"] is None and "too few" in r["speedup_note"] for r in runs.values())


def test_a_speculative_or_missing_baseline_is_one_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    for ref, message in (
        (f"{SEED}#2", "run 2 speculates; a baseline is a run with speculation off"),
        (SEED, "no run without speculation to use as a baseline"),
        (f"{BASE}#7", "no run 7 with stats lines (runs there: 1)"),
    ):
        parser = argparse.ArgumentParser()
        batch_cli.add_parsers(parser.add_subparsers())
        args = parser.parse_args(["runs", SEED, "--baseline", ref, "-j", "1"])
        with pytest.raises(InputError, match=re.escape(message)):
            args.func(args)
    _, err = _cli(batch_cli, capsys, "runs", SEED, "--baseline", "-j", "1")
    assert "no run without speculation in these files to measure a speedup against" in err


def test_parquet_has_the_sweep_columns_typed(sweep, capsys, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "runs.parquet"
    _cli(batch_cli, capsys, "runs", SEED, "--baseline", BASE, "-o", str(out), "-j", "1")
    table = pq.read_table(out)
    assert table.schema.field("speedup").type == "double" and table.schema.field("best").type == "bool"
    rows = table.to_pylist()
    assert [r["speedup"] for r in rows] == [sweep[SEED, n]["speedup"] for n in range(1, 6)]
    assert [r["verdict"] for r in rows] == ["loses", "pays", "marginal", "pays", "loses"]


def test_without_running_requests_on_either_side_s_is_the_ratio_of_mean_throughputs():
    from acceptmon.measure.speedup import running_logged, unmatched

    rng = random.Random(3)
    spec = [150.0 + rng.gauss(0, 5) for _ in range(300)]
    base = [100.0 + rng.gauss(0, 5) for _ in range(300)]
    s = unmatched(spec, base)
    assert s.speedup == pytest.approx(round((sum(spec) / 300) / (sum(base) / 300), 4))
    assert s.ci_low < s.speedup < s.ci_high and s.ci_low < 1.5 < s.ci_high
    assert unmatched(spec, [0.0, 0.0]).speedup is None
    logged, blank = Batches(), Batches()
    logged.add(2.0, None, 10.0, 3, True)
    blank.add(2.0, None, 10.0, None, False)
    assert (running_logged(logged), running_logged(blank)) == (True, False)


def test_the_library_gives_what_the_command_prints(sweep, capsys):
    import acceptmon

    got = acceptmon.runs(SEED, baseline=BASE)
    assert [r.model_dump(mode="json") for r in got] == [sweep[SEED, n] for n in range(1, 6)]
    auto = acceptmon.runs([SEED, BASE], baseline=True)
    assert [r.speedup for r in auto[:5]] == [sweep[SEED, n]["speedup"] for n in range(1, 6)]
    assert not hasattr(acceptmon.runs(SEED)[0], "speedup")


def test_a_baseline_that_made_no_tokens_is_said_so_not_too_few():
    spec, base = Batches(), Batches()
    _steady(spec, 4, 120.0, 30)
    _steady(base, 4, 0.0, 30)
    s = speedup(spec, base)
    assert s.speedup is None and s.note.startswith("the baseline made no tokens at the shared #running-req")


def test_in_a_stream_of_two_pods_the_plain_pods_run_is_the_baseline(tmp_path, capsys, monkeypatch):
    """Two pods in one stern stream (runs numbered per file, across its sources): the baseline of the file
    is the plain pod's run, and only the speculative pod's runs get a speedup."""
    monkeypatch.chdir(ROOT)
    spec = [f"spec-0 sglang {line}" for line in (ROOT / SEED).read_text().splitlines()]
    plain = [f"base-0 sglang {line}" for line in (ROOT / BASE).read_text().splitlines()]
    both = tmp_path / "both.log"
    both.write_text("\n".join(spec[: len(spec) // 5] + plain) + "\n")
    runs = _runs(capsys, str(both), "--baseline", str(both))
    by_source = {r["source"]: r for r in runs.values()}
    assert by_source["spec-0 sglang"]["baseline"] == "both.log#2"
    assert by_source["spec-0 sglang"]["speedup"] is not None
    assert by_source["base-0 sglang"]["baseline"] is None
