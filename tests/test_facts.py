"""One set of facts per run: every command reports the same figures under the same names.

``runs``, each side of ``compare FILE#N FILE#N`` and each run of ``doctor`` read the one
normalized stream (:mod:`acceptmon.measure.normalize`), so their ``batches``,
``accept_len_mean``, ``gen_throughput_per_rank`` and ``gen_throughput_total`` are equal on
every bundled sample, and a record kind that only declares the ``acceptance`` role shows
up in all three without touching them.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, Literal
from unittest.mock import patch

import pytest

from acceptmon.cli import main
from acceptmon.measure.parts import judged, order_free
from acceptmon.parse import kinds
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import BaseRecord
from acceptmon.parse.unmade import Unmade
from acceptmon.sinks import runs_table
from acceptmon.sinks.runs_table import StatsJob
from tests.conftest import SAMPLES
from tests.unmade import parts

FIGURES = ("batches", "accept_len_mean", "gen_throughput_per_rank", "gen_throughput_total")
LOGS = sorted(p.name for p in SAMPLES.glob("*.log"))


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main([*args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _figures(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(entry[name] for name in FIGURES)


def test_the_cases_are_there():
    assert len(LOGS) >= 10 and any(n.startswith("vllm_v0") for n in LOGS) and any("dp" in n for n in LOGS)


@pytest.mark.parametrize("name", LOGS)
def test_runs_compare_and_doctor_agree_on_every_run(name, capsys):
    log = str(SAMPLES / name)
    runs = _json(capsys, "runs", log)
    doctor = {(r["run"]): r for r in _json(capsys, "doctor", log)["runs"]}
    with_batches = [r for r in runs if r["batches"]]
    assert with_batches, "a sample with no batch proves nothing"
    for r in with_batches:
        d = doctor[r["run"]]
        assert _figures(d) == _figures(r), f"{name} run {r['run']}: doctor vs runs"
        assert d["judged_batches"] <= d["batches"]
        if r["run"] == 0:
            continue  # lines before any launch: no FILE#0 to name
        side = _json(capsys, "compare", f"{log}#{r['run']}", f"{log}#{r['run']}")["a"]
        assert (side["batches"], *(side[n] for n in FIGURES[1:])) == _figures(r), f"{name} run {r['run']}: compare"
        assert side["accept_len"]["mean"] == r["accept_len_mean"]
        assert side["gen_throughput"]["mean"] == pytest.approx(r["gen_throughput_per_rank"], abs=2e-4)  # summed apart
    assert sorted(doctor) == sorted(r["run"] for r in runs)


def test_a_vllm_run_reports_its_engines_apart_and_added_up(capsys):
    """The dp sample's run 1: two engines, per engine and total, the same in the three commands."""
    log = str(SAMPLES / "vllm_v1_0.10.2_dp.log")
    (run1, _) = _json(capsys, "runs", log)
    assert (run1["batches"], run1["ranks"]) == (60, 2)
    assert run1["gen_throughput_total"] == pytest.approx(2 * run1["gen_throughput_per_rank"], rel=0.02)
    assert round(run1["gen_throughput_per_rank"], 1) == 220.9 and round(run1["gen_throughput_total"], 1) == 441.8


class ToyAccept(BaseRecord):
    """A made-up server's acceptance line: it declares the ``acceptance`` role and nothing else."""

    kind: Literal["toyaccept"] = "toyaccept"
    run: int = 0
    accept_len: float | None = None
    draft_accept_rate: float | None = None


TOY_GRAMMAR = """
name = "toy_accept"
record = "toyaccept"
anchor = "Toy accept:"
starts_like = '''Toy accept:'''
pattern = '''Toy accept: len (?P<accept_len>\\d+(?:\\.\\d+)?)$'''

[fields]
accept_len = { kind = "float" }

[[samples]]
line = "[2026-01-02 03:04:05 TP1] Toy accept: len 2.5"
expect = { accept_len = 2.5, rank = "TP1" }
"""


@pytest.fixture
def toy_kind(tmp_path: Path):
    kinds.register(kinds.RecordKind("toyaccept", ToyAccept, acceptance=True, ends_launch_group=True))
    grammar = tmp_path / "toy.toml"
    grammar.write_text(TOY_GRAMMAR)
    yield grammar
    kinds.unregister("toyaccept")


def test_a_toy_acceptance_kind_shows_in_runs_compare_and_doctor(toy_kind, tmp_path, capsys):
    launch = next(line for line in (SAMPLES / "seed_eagle3_moe.log").read_text().splitlines() if "server_args=" in line)
    log = tmp_path / "toy.log"
    lines = [f"[2026-02-26 13:50:{s:02d} TP0] Toy accept: len {v}\n" for s, v in enumerate([2.0, 3.0, 2.5, 3.5])]
    log.write_text(launch + "\n" + "".join(lines))
    extra = ("--grammar", str(toy_kind))
    (run,) = _json(capsys, "runs", str(log), *extra)
    assert (run["batches"], run["accept_len_mean"]) == (4, 2.75)
    side = _json(capsys, "compare", f"{log}#1", f"{log}#1", *extra)["a"]
    assert (side["batches"], side["accept_len_mean"]) == (4, 2.75)
    (report,) = _json(capsys, "doctor", str(log), *extra)["runs"]
    assert (report["batches"], report["accept_len_mean"], report["judged_batches"]) == (4, 2.75, 2)
    assert report["judged_accept_len_mean"] == 3.0  # the first two batches warm up


def test_an_amended_record_is_its_model_copy_and_shares_only_a_shared_fields_set():
    """``amended`` is ``model_copy(update=...)`` for less: equal records and fields sets; a record made whole keeps
    its one fields set that refuses changes, a validated record's set is never shared with its copy."""
    from acceptmon.measure.amend import amended
    from acceptmon.parse.records import DecodeStats, Shared, prepare

    made = prepare(DecodeStats).make(DecodeStats(file="a.log", accept_len=2.5).__dict__.copy(), None)
    validated = DecodeStats(file="a.log", accept_len=2.5)
    for r in (made, validated):
        got, want = amended(r, {"rank": "DP1"}), r.model_copy(update={"rank": "DP1"})
        assert got == want and got.rank == "DP1" and r.rank is None
        assert got.model_fields_set == want.model_fields_set
    assert isinstance(made.model_fields_set, Shared)
    assert amended(made, {"rank": "DP1"}).model_fields_set is made.model_fields_set
    copy = amended(validated, {"rank": "DP1"})
    assert copy.model_fields_set is not validated.model_fields_set and "rank" not in validated.model_fields_set


def _split_runs(records: list[Any], cut: int, unmade: bool = False, worker: bool = False) -> list[Any]:
    """``runs``' summaries with the records read as two parts, cut before ``cut`` (as two blocks, or two ranges of
    ``-j``, are): the second aggregated on its own from where it is order-free, and merged. ``unmade``: each run of
    plain records handed on as the lane hands them, not made (:func:`tests.unmade.parts`); ``worker``: the second
    part read as a worker of ``-j`` reads its range (a part that assumes no engine was named before it is
    aggregated apart too, and read again in order if one was)."""
    job = StatsJob()
    first, second = (parts(p) if unmade else p for p in (records[:cut], records[cut:]))
    job.collect(job.chunk(first))
    with patch.object(runs_table, "in_worker", lambda: worker):
        part = job.chunk(second)
    if not job.ready([part]):
        part = job.chunk(second)
    job.collect(part)
    return job.stats.summaries()


@pytest.mark.parametrize(
    "name",
    ["vllm_v1_0.10.2_dp.log", "vllm_v1_0.8.5.log", "vllm_v0_0.6.log", "newest_0.5.23.log", "llamacpp_draft_mtp.log"],
)
def test_runs_read_in_two_parts_are_runs_read_whole(name, grammars):
    """Cut anywhere, a log's runs are the same, its plain lines handed on unmade or not, the part after the cut read
    here or as a worker reads it: a vLLM part's spec lines before its first line naming an engine
    are fed in order (they take the engine named before the cut), as are the first lines of counters since start
    (vLLM v0, llama.cpp's statistics); the rest is aggregated apart, its token counts, counters and per-position
    rates merged."""
    records = Parser(grammars, name, records=StatsJob().records_wanted).feed((SAMPLES / name).read_bytes())
    whole = _split_runs(records, 0)
    assert whole and any(s.batches for s in whole)
    for cut in range(1, len(records)):
        for unmade, worker in itertools.product((False, True), (False, True)):
            got = _split_runs(records, cut, unmade, worker)
            assert len(got) == len(whole)
            for a, b in zip(got, whole, strict=True):
                assert _same(a.model_dump(), b.model_dump()), (cut, unmade, worker, a, b)


def test_a_v0_part_unmade_is_order_free_after_its_first_line_counting_since_start(grammars):
    """vLLM v0's lines handed on unmade: the part is cut after its first spec line (which counts since start, and
    whose interval needs the counters before the part), and is order-free from there, its rows not made."""
    name = "vllm_v0_0.6.log"
    records = Parser(grammars, name, records=StatsJob().records_wanted).feed((SAMPLES / name).read_bytes())
    start = next(i for i, r in enumerate(records) if r.kind == "throughput" and records[i + 2].kind == "spec")
    items = judged(parts(records[start:]))
    free = order_free(items)
    assert free is not None and free.start == 1
    assert [type(r) for r in items] == [Unmade, Unmade] and [r.size for r in items] == [3, len(records) - start - 3]
    assert [r.kind for r in items[0].made()] == ["throughput", "throughput", "spec"]


def test_a_part_after_a_refused_launch_drops_the_rates_derived_from_it(grammars):
    """A launch with a draft-token count no server runs: every batch of its run loses the draft accept rate the
    parser derived from that count, in a part read on its own too (the rule reads the batch's record alone)."""
    from tests.serving import decode_line, launch_line

    lines = [launch_line(steps=3, tokens=4000), *(decode_line(i, acc=2.0 + i / 10) for i in range(6))]
    records = Parser(grammars, "x.log", records=StatsJob().records_wanted).feed(("\n".join(lines) + "\n").encode())
    assert all(r.draft_accept_rate is not None for r in records[1:])  # as the parser derives it
    for cut in range(len(records)):
        (run,) = _split_runs(records, cut)
        assert (run.batches, run.draft_accept_rate_mean, run.refused_configs) == (6, None, 1), cut
        assert run.accept_len_mean == 2.25 and run.spec_num_draft_tokens is None


def _same(a: Any, b: Any) -> bool:
    """Equal, a float to its last rounded digit: a part's sums are added up apart, then merged (``runs`` adds them
    so per block, whatever ``-j``; here the cut is anywhere), and a mean at a rounding midpoint may round either way."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1.001e-4)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_a_part_is_order_free_after_its_last_line_that_takes_an_earlier_lines_engine(grammars):
    """Spec lines name no engine: each takes the one its file's and source's (here: pod's) last throughput line
    named. A part's lines before a name in it take one from before the part: they are fed in order. Lines whose
    file and source the part never names assume none was named before (vLLM v0 names none); where the part is
    merged that is checked, and the whole part is fed in order if a line before it named one."""
    throughput = (
        "[pod/{}/vllm] INFO 05-02 09:14:52 [loggers.py:111] Engine 00{}: Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 388.6 tokens/s, Running: 19 reqs, Waiting: 0 reqs, GPU KV cache usage: 27.8%"
    )
    spec = (
        "[pod/{}/vllm] INFO 05-02 09:14:52 [metrics.py:82] SpecDecoding metrics: Mean acceptance length: 1.97, "
        "Accepted: 12{}9 tokens, Drafted: 1962 tokens"
    )
    lines = [throughput.format("p1", 1), spec.format("p2", 1), spec.format("p1", 2), throughput.format("p2", 2)]
    lines += [spec.format("p2", 3), spec.format("p1", 4), spec.format("p1", 5)]
    records = Parser(grammars, "a.log").feed(("\n".join(lines) + "\n").encode())
    assert [r.kind for r in records] == ["throughput", "spec", "spec", "throughput", "spec", "spec", "spec"]
    assert [r.source for r in records[:2]] == ["pod/p1/vllm", "pod/p2/vllm"]
    p1, p2 = ("a.log", "pod/p1/vllm"), ("a.log", "pod/p2/vllm")
    assert order_free(records) == (2, frozenset(), {p1, p2})  # p2's first line needs a name from before
    assert order_free(records[:3]) == (0, {p2}, {p1})  # p2 named nowhere in the part: assumed never named
    assert order_free(records[1:3]) == (0, {p1, p2}, frozenset())
    assert order_free(records[1:]) == (1, {p1}, {p2})  # p2 named after its first line, p1 nowhere
    whole = _split_runs(records, 0)
    assert [(s.source, s.ranks, s.batches) for s in whole] == [(p1[1], 1, 3), (p2[1], 2, 2)]  # p2 first took none
    for cut in range(1, len(records)):  # every later part assumes p1 (or p2) was never named: it was, before it
        got = _split_runs(records, cut)
        assert [s.model_dump() for s in got] == [s.model_dump() for s in whole], cut


def test_counters_since_start_are_each_sources_own(grammars):
    """Two vLLM v0 processes in one stream (kubectl's ``[pod/...]`` prefixes), their spec lines interleaved: each
    line's interval is its own process's counters less its own previous line's, as in a file of that process alone."""
    spec = (
        "[pod/{}/vllm] INFO 10-16 19:0{}:00 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.5, "
        "System efficiency: 0.5, Number of speculative tokens: 3, Number of accepted tokens: {}, "
        "Number of draft tokens: {}, Number of emitted tokens: {}."
    )
    p1 = [spec.format("p1", i, 100 * i, 300 * i, 100 * i + 100 * i) for i in range(1, 5)]  # 1 + 3 * 1/3 = 2.0
    p2 = [spec.format("p2", i, 250 * i, 300 * i, 250 * i + 100 * i) for i in range(1, 5)]  # 1 + 3 * 2.5/3 = 3.5
    mixed = [line for pair in zip(p1, p2, strict=True) for line in pair]

    def runs(lines: list[str]) -> dict[str, float | None]:
        records = Parser(grammars, "a.log", records=StatsJob().records_wanted).feed(("\n".join(lines) + "\n").encode())
        return {s.source: s.accept_len_mean for s in _split_runs(records, 0)}

    assert runs(p1) == {"pod/p1/vllm": 2.0} and runs(p2) == {"pod/p2/vllm": 3.5}
    assert runs(mixed) == {"pod/p1/vllm": 2.0, "pod/p2/vllm": 3.5}


V1_THROUGHPUT = (
    "INFO 05-02 09:14:52 [loggers.py:111] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
    "throughput: 388.6 tokens/s, Running: 19 reqs, Waiting: 0 reqs, GPU KV cache usage: 27.8%"
)
V1_SPEC = (
    "INFO 05-02 09:{:02d}:{:02d} [metrics.py:82] SpecDecoding metrics: Mean acceptance length: 1.{:02d}, "
    "Accepted: 1{:03d} tokens, Drafted: 1962 tokens"
)
V0_SPEC = (
    "INFO 10-16 19:{:02d}:{:02d} metrics.py:367] Speculative metrics: Draft acceptance rate: 0.5, System efficiency: "
    "0.5, Number of speculative tokens: 3, Number of accepted tokens: {}, Number of draft tokens: {}, Number of emitted "
    "tokens: {}."
)


@pytest.mark.parametrize(
    ("lines", "read_again"),
    [
        ([V1_THROUGHPUT, *(V1_SPEC.format(i // 60 % 60, i % 60, i % 97, i) for i in range(3000))], True),
        ([V0_SPEC.format(i // 60 % 60, i % 60, 100 * i, 300 * i, 200 * i) for i in range(1, 3000)], False),
    ],
    ids=["engine-named-before", "v0"],
)
def test_a_worker_part_that_assumes_no_engine_comes_without_its_records_and_is_read_again_if_one_was(
    lines, read_again, tmp_path, monkeypatch
):
    """A worker's part whose lines take no engine, none being named in it, is sent without its records (a vLLM v0
    log's are all of them): where a line before it named one, the range is read again in the main process and its
    lines take that engine, as in one reader."""
    from acceptmon.pipeline import batch
    from tests.test_fastlane import GRAMMARS

    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 16 << 10)
    monkeypatch.setattr(batch, "FAST_BLOCK", 4 << 10)
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(GRAMMARS, "year_for", lambda file, stamp: 2025)
    path = tmp_path / "vllm.log"
    path.write_text("\n".join(lines) + "\n")
    said: list[bool] = []
    ready = StatsJob.ready

    def spy(self: StatsJob, parts: Any) -> bool:
        said.append(ready(self, parts))
        return said[-1]

    monkeypatch.setattr(StatsJob, "ready", spy)

    def runs(jobs: int) -> list[dict[str, Any]]:
        job = StatsJob()
        batch.run([str(path)], GRAMMARS, job, jobs=jobs)
        return [s.model_dump() for s in job.stats.summaries()]

    one = runs(1)
    assert one[0]["batches"] > 2900 and one[0]["ranks"] == 1
    got = runs(2)
    assert len(said) > 10 and (False in said) == read_again
    assert len(got) == len(one) and all(_same(a, b) for a, b in zip(got, one, strict=True))
