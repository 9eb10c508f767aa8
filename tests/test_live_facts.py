"""One set of facts per run, live too: tail (dashboard and --plain) and serve read the normalized facts
and number runs as ``acceptmon runs`` does."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from acceptmon.exporter.metrics import MetricsPage
from acceptmon.live.state import LiveStats
from acceptmon.measure.aggregate import RunSummary
from acceptmon.parse.kinds import Gauge, RecordKind, SeriesMetrics, register, unregister
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import BaseRecord
from acceptmon.pipeline.batch import run
from acceptmon.pipeline.live import LiveSource
from acceptmon.sinks.runs_table import StatsJob
from acceptmon.tui.history import history_cells
from acceptmon.tui.model import DashboardState
from tests.conftest import SAMPLES
from tests.serving import Clock, Serve, decode_line, feed, launch_line, wait_for

# -- (a) a toy kind with the acceptance role, in the dashboard and the live state ------------------------------

TOY_GRAMMAR = """
name = "toy_accept"
record = "toyacc"
anchor = "Toy accept:"
starts_like = '''Toy accept:'''
pattern = '''Toy accept: (?P<body>.*)$'''
body = "pairs"

[keys]
"accept len" = { kind = "float", field = "accept_len" }
"draft rate" = { kind = "float", field = "draft_accept_rate" }

[[samples]]
line = "[2026-01-02 03:04:05 TP1] Toy accept: accept len: 2.50, draft rate: 0.50"
expect = { accept_len = 2.5, draft_accept_rate = 0.5, rank = "TP1" }
"""
TOY_LOG = [
    "[2026-01-02 03:04:00] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE', "
    "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)",
    "[2026-01-02 03:04:05 TP0] Toy accept: accept len: 2.50, draft rate: 0.50",
    "[2026-01-02 03:04:06 TP1] Toy accept: accept len: 3.50, draft rate: 0.80",
]


class ToyAccept(BaseRecord):
    """A kind no server logs, with the acceptance role: no tui or live code names it."""

    kind: Literal["toyacc"] = "toyacc"
    run: int = 0
    accept_len: float | None = None
    draft_accept_rate: float | None = None
    extra: dict[str, str] = Field(default_factory=dict)


@pytest.fixture
def toy_grammars(tmp_path):
    register(
        RecordKind(
            "toyacc",
            ToyAccept,
            acceptance=True,
            series=SeriesMetrics(gauges=(Gauge("acceptmon_toy_accept_length", "accept_len", "Toy accept len."),)),
        )
    )
    path = tmp_path / "toy.toml"
    path.write_text(TOY_GRAMMAR)
    yield load_grammars([path])
    unregister("toyacc")


def test_a_toy_acceptance_kind_shows_on_the_dashboard_and_in_the_live_state(toy_grammars):
    state = DashboardState(clock=Clock())
    feed(state.add, Parser(toy_grammars, "t.log"), *TOY_LOG)
    v = state.view()
    assert (v.run, v.stats_kind, v.unit) == (1, "toyacc", "rank")
    assert (v.tiles.accept_len_last, v.tiles.accept_len_mean, v.tiles.draft_accept_rate) == (3.5, 3.0, 0.65)
    assert [(r.rank, r.accept_len, r.window_mean) for r in v.ranks] == [("TP0", 2.5, 2.5), ("TP1", 3.5, 3.5)]
    assert [(h.run, h.batches, h.accept_len_mean, h.ranks) for h in v.history] == [(1, 2, 3.0, 2)]
    assert [y for _, y in v.accept_series] == [3.0]

    live = LiveStats(clock=Clock())
    facts = live.update("t.log", Parser(toy_grammars, "t.log").feed(("\n".join(TOY_LOG) + "\n").encode()))
    assert [(f.batch.unit, f.batch.accept_len, f.batch.warmup) for f in facts if f.batch] == [
        ("TP0", 2.5, True),
        ("TP1", 3.5, True),
    ]
    snap = live.snapshot()
    assert {(s.kind, s.rank, s.run) for s in snap.series} == {("toyacc", "TP0", 1), ("toyacc", "TP1", 1)}
    assert (
        'acceptmon_toy_accept_length{container="",file="t.log",namespace="",pod="",rank="TP1"} 3.5'
        in MetricsPage(live).render().decode()
    )


# -- tail --plain and serve as processes ---------------------------------------------------------------------

PLAIN = re.compile(r"^(?P<file>\S+) (?:\S+ \S+|-) (?P<unit>.*?) run=(?P<run>\d+) (?P<pairs>.*)$")
"""A ``tail --plain`` line of several files: the file, the log time (``-`` for none: llama.cpp), the unit."""


def acceptmon(*args: str) -> list[str]:
    return [sys.executable, "-m", "acceptmon", *args]


def runs_of(*files: Path) -> list[RunSummary]:
    done = subprocess.run(acceptmon("runs", "--format", "json", *map(str, files)), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [RunSummary.model_validate(r) for r in json.loads(done.stdout)]


def plain_lines(*args: str, expect: int, timeout: float = 30.0) -> list[dict[str, str]]:
    """``tail --plain ARGS`` until it printed ``expect`` lines (it follows: stopped with SIGTERM)."""
    proc = subprocess.Popen(acceptmon("tail", "--plain", *args), stdout=subprocess.PIPE, text=True)
    got: list[dict[str, str]] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < expect and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            m = PLAIN.match(line.rstrip("\n"))
            assert m, line
            pairs = dict(p.split("=", 1) for p in m["pairs"].split())
            got.append({"file": m["file"], "unit": m["unit"], "run": m["run"], **pairs})
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=15)  # drained: a tail blocked writing to a full pipe still sees the signal
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    return got


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> list[Path]:
    """Every bundled sample log, copied (so that every command reads the same files, mtime and all)."""
    folder = tmp_path_factory.mktemp("samples")
    return [Path(shutil.copy(p, folder)) for p in sorted(SAMPLES.glob("*.log"))]


@pytest.fixture(scope="module")
def sample_runs(samples) -> dict[str, list[RunSummary]]:
    out: dict[str, list[RunSummary]] = {str(p): [] for p in samples}
    for s in runs_of(*samples):
        out[s.file].append(s)
    return out


# -- (b) the engine and its throughput on vLLM spec lines ----------------------------------------------------


def test_plain_vllm_spec_lines_carry_their_engine_and_its_interval_throughput(tmp_path):
    log = Path(shutil.copy(SAMPLES / "vllm_v1_0.10.2_dp.log", tmp_path))
    lines = plain_lines("--from-start", str(log), str(log), expect=92)  # named twice: read once, file-prefixed
    assert len(lines) == 92  # runs' batches: 60 + 32
    assert {x["unit"] for x in lines} == {"000", "001"}
    assert all(x["gen_throughput"] not in ("-", "") for x in lines)
    throughput = re.compile(r"Engine (\d+): .*Avg generation throughput: ([\d.]+) tokens/s")
    logged = [m.groups() for m in map(throughput.search, log.read_text().splitlines()) if m]
    assert [(x["unit"], float(x["gen_throughput"])) for x in lines[:2]] == [(e, float(t)) for e, t in logged[:2]]
    assert (lines[0]["run"], lines[-1]["run"]) == ("1", "2")


# -- (c) run numbers: tail (plain, header, history) and serve equal runs' for every sample -------------------


def test_plain_run_numbers_equal_runs_for_every_sample(samples, sample_runs):
    wanted = {f: [s.run for s in rs if s.batches] for f, rs in sample_runs.items()}
    lines = plain_lines(
        "--from-start", *map(str, samples), expect=sum(s.batches for rs in sample_runs.values() for s in rs)
    )
    for f, runs in wanted.items():
        mine = [int(x["run"]) for x in lines if x["file"] == f]
        assert sorted(set(mine)) == runs and mine == sorted(mine), f
        assert mine[-1] == sample_runs[f][-1].run, f  # the current run: the last one runs lists
    # From the current run's launch line (the default start): every line is the current run's.
    last = {f: rs[-1] for f, rs in sample_runs.items()}
    lines = plain_lines(*map(str, samples), expect=sum(s.batches for s in last.values()))
    assert len(lines) == sum(s.batches for s in last.values())
    assert {x["file"]: int(x["run"]) for x in lines} == {f: s.run for f, s in last.items() if s.batches}


@pytest.mark.parametrize("start", [(), ("--from-start",)], ids=["current-run", "from-start"])
def test_serve_run_info_equals_runs_current_run_for_every_sample(samples, sample_runs, start):
    lines = {str(p): len(p.read_text().splitlines()) for p in samples}
    serve = Serve(*start, str(samples[0].parent / "*.log"))
    try:
        serve.wait_listening()

        def read_all():  # type: ignore[no-untyped-def]
            """The page once every file's run is known: from its first record (the current run's launch
            line) at the default start, from its last line with --from-start."""
            m = serve.metrics()
            if {dict(k)["file"] for k in m.get("acceptmon_run_info", {})} != set(lines):
                return None
            seen = dict.fromkeys(lines, 0.0)
            for key, n in m.get("acceptmon_lines_total", {}).items():
                seen[dict(key)["file"]] += n
            return m if not start or seen == lines else None

        m = wait_for(read_all, timeout=20.0)
        assert m, "serve did not read every sample"
        info = {dict(k)["file"]: int(dict(k)["run"]) for k in m["acceptmon_run_info"]}
        assert info == {f: rs[-1].run for f, rs in sample_runs.items()}
    finally:
        serve.stop()


def test_dashboard_header_and_history_number_runs_as_runs_does(samples, sample_runs, grammars):
    for path in samples:
        p = str(path)
        state = DashboardState()
        source = LiveSource([p], grammars, state.add, on_waiting=state.set_waiting)
        source.discover()  # the default start: the current run's first launch line
        source.tick()
        source.close()
        for f, end in source.history_end.items():  # what tail's `acceptmon runs --max-bytes` child reads
            job = StatsJob()
            run([f], grammars, job, limit=end)
            state.set_history(f, job.stats.summaries())
        v = state.view()
        want = sample_runs[p]
        assert (v.run, v.current_run_key) == (want[-1].run, (p, want[-1].run)), p
        figures = ("run", "batches", "accept_len_mean", "gen_throughput_per_rank", "gen_throughput_total")
        assert [tuple(getattr(h, k) for k in figures) for h in v.history] == [
            tuple(getattr(s, k) for k in figures) for s in want
        ], p


def test_a_vllm_server_start_is_one_run_live(tmp_path, grammars):
    """The API server's args line and the engines' Initializing lines are one run, as in runs: not run 2."""
    log = Path(shutil.copy(SAMPLES / "vllm_v1_0.8.5.log", tmp_path))
    live = LiveStats()
    source = LiveSource([str(log)], grammars, live.update)
    source.discover()
    source.tick()
    source.close()
    (info,) = live.snapshot().files
    assert (info.run, info.launches) == (1, 1) and source.history_end[str(log)] < 100  # only line 1 before it
    assert [s.run for s in runs_of(log)] == [1]


# -- (d) tail over an SGLang and a vLLM file: each file's own figures ----------------------------------------


@pytest.mark.parametrize("order", [("seed_eagle3_moe.log", "vllm_v1_0.10.2_dp.log"),
                                   ("vllm_v1_0.10.2_dp.log", "seed_eagle3_moe.log")], ids=["vllm-last", "seed-last"])  # fmt: skip
def test_two_servers_in_one_tail_each_show_their_own_figures(grammars, order):
    state = DashboardState()
    for name in order:  # as tail --from-start reads them: each file whole, one after the other
        parser = Parser(grammars, name)
        state.add(name, parser.feed((SAMPLES / name).read_bytes()), parser.tally)
    v = state.view()
    alone = {name: runs_of(SAMPLES / name) for name in order}
    cur = order[-1]
    unit = "engine" if cur.startswith("vllm") else "rank"
    assert v.current_run_key == (cur, alone[cur][-1].run) and v.unit == unit
    # the history: each file's runs with runs' own tok/s/rank (seed run 1: 75.1, not 75.1 / 8 = 9.4)
    got = [(h.file, h.run, history_cells(h, False, v.unit)["tok/s/rank"]) for h in v.history]
    assert sorted(got) == sorted((n, s.run, f"{s.gen_throughput_per_rank:.1f}") for n in order for s in alone[n])
    assert ("seed_eagle3_moe.log", 1, "75.1") in got
    # the tiles: the current file's run (shorter than the 5 min window) as runs gives its total
    assert v.tiles.throughput == round(alone[cur][-1].gen_throughput_total or 0, 2)
    assert v.tiles.throughput_ranks == alone[cur][-1].ranks and v.tiles.unit == unit
    assert {r.file for r in v.ranks} == set(order)
    assert v.throughput_reference == alone[cur][-2].gen_throughput_per_rank  # per rank or engine, as plotted


def test_plain_over_two_servers_prints_each_files_own_lines(tmp_path):
    seed = Path(shutil.copy(SAMPLES / "seed_eagle3_moe.log", tmp_path))
    dp = Path(shutil.copy(SAMPLES / "vllm_v1_0.10.2_dp.log", tmp_path))
    both = plain_lines("--from-start", str(seed), str(dp), expect=384 + 92)
    for path, n in ((seed, 384), (dp, 92)):
        alone = [x for x in plain_lines("--from-start", str(path), str(path), expect=n)]
        assert [x for x in both if x["file"] == str(path)] == alone


@pytest.mark.parametrize("model_name", ["DecodeStats", "SpecStats", "RequestStats"])
def test_impossible_values_are_left_out_as_the_rule_says_for_every_field_and_kind_of_value(model_name):
    """The normalizer's check of each record's values (its fast path for plain ints and floats) leaves out
    exactly the values :data:`VALID` says are impossible: out of bounds, not finite, a bool, not a number."""
    import math

    from acceptmon.measure import normalize
    from acceptmon.parse import records

    model = getattr(records, model_name)
    odd = [math.inf, -math.inf, math.nan, True, False, -1, 0, 1, 0.5, 1.0, 2.5, 999.0, 1000.0, 1000.5, 10**6, "3"]
    fields = [n for n in normalize.VALID if n in model.model_fields]
    assert fields
    for name in fields:
        for value in odd:
            r = records.build(model, {"file": "x.log", "line": 1, name: value})
            checked, invalid = normalize._checked(r)
            assert invalid == (0 if normalize._valid(name, value) else 1), (name, value)
            assert getattr(checked, name) == (value if invalid == 0 else None) or value != value, (name, value)


def test_a_file_that_appears_is_said_present_before_its_lines_are_handed_on(tmp_path, grammars):
    """A scrape between the two would see a file's batches counted while it is still marked missing."""
    log = tmp_path / "late.log"
    said: list[tuple[str, object]] = []
    source = LiveSource(
        [str(log)],
        grammars,
        lambda path, records, _tally: said.append(("records", len(records))) if records else None,
        on_waiting=lambda path, waiting: said.append(("waiting", waiting)),
    )
    source.discover()
    source.tick()
    log.write_text(launch_line() + "\n" + decode_line(0) + "\n" + decode_line(1) + "\n")
    source.tick()
    source.close()
    assert said[0] == ("waiting", True) and said.count(("waiting", False)) == 1, said
    assert said.index(("waiting", False)) < next(i for i, s in enumerate(said) if s[0] == "records"), said
