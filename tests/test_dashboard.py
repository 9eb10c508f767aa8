"""DashboardState: the numbers the dashboard shows, without a screen."""

from __future__ import annotations

from acceptmon.measure.aggregate import RunSummary
from acceptmon.parse.parser import Parser, ParseState
from acceptmon.tui.model import DashboardState
from acceptmon.tui.view import event_line
from tests.serving import Clock, decode_line, launch_line
from tests.serving import feed as feed_sink


def feed(state: DashboardState, parser: Parser, *lines: str) -> None:
    feed_sink(state.add, parser, *lines)


def ts(second: int) -> str:
    return f"2026-02-26 14:{second // 60:02d}:{second % 60:02d}"


def test_tiles_from_the_latest_batches(grammars):
    state = DashboardState()
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0), steps=3, tokens=4))
    feed(state, p, decode_line(rank="TP0", acc=2.5, tput=90, running=3, queued=1, ts=ts(10)),
         decode_line(rank="TP1", acc=3.1, tput=95.5, running=4, queued=0, ts=ts(10)))  # fmt: skip
    v = state.view()
    assert v.launch is not None and v.launch.spec_algorithm == "EAGLE3" and v.run == 1
    t = v.tiles
    assert t.accept_len_last == 3.1
    assert t.accept_len_mean == 2.8
    assert t.draft_accept_rate == 0.6  # mean of (2.5-1)/3 = 0.5 and (3.1-1)/3 = 0.7
    assert t.accept_rate == 0.47
    assert t.throughput == 185.5 and t.throughput_ranks == 2
    assert (t.running, t.queued) == (7, 1)
    assert t.health == "good"
    assert [(r.rank, r.accept_len, r.window_mean) for r in v.ranks] == [("TP0", 2.5, 2.5), ("TP1", 3.1, 3.1)]


def test_window_is_log_time(grammars):
    state = DashboardState(window=60)
    p = Parser(grammars, "s.log")
    feed(state, p, decode_line(acc=1.0, ts=ts(0)), decode_line(acc=2.0, ts=ts(30)), decode_line(acc=3.0, ts=ts(90)))
    v = state.view()
    assert v.tiles.accept_len_mean == 2.5  # the batch at 0 s fell out of the 60 s window ending at 90 s
    assert [y for _, y in v.accept_series] == [2.0, 3.0]
    state.reset_window()
    assert state.view().tiles.accept_len_mean is None


def test_launch_starts_a_new_run_and_the_previous_mean_is_the_reference(grammars):
    state = DashboardState(clock=Clock())
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0), algo="NONE"))
    state.add("s.log", [])
    feed(state, p, *(decode_line(acc=1.12, tput=80, ts=ts(1 + i)) for i in range(3)))
    feed(state, p, launch_line(ts=ts(100)), *(decode_line(acc=2.85, tput=94, ts=ts(101 + i)) for i in range(3)))
    v = state.view()
    assert v.run == 2 and v.tiles.accept_len_mean == 2.85  # the window holds the current run only
    assert v.accept_reference == 1.12 and v.accept_reference_label == "run 1 mean"
    assert v.throughput_reference == 80 and v.throughput_reference_label == "run 1 mean per rank"
    assert [(h.run, h.accept_len_mean) for h in v.history] == [(1, 1.12), (2, 2.85)]
    assert [e.text for e in v.events if e.text.startswith("launch")] == [
        "launch: Qwen/Qwen3-8B, NONE steps 3 topk 1 draft 4",
        "launch: Qwen/Qwen3-8B, EAGLE3 steps 3 topk 1 draft 4",
    ]


def test_no_speculation_baseline_is_the_throughput_reference(grammars):
    state = DashboardState()
    p = Parser(grammars, "s.log")
    nospec = launch_line(ts=ts(0)).replace("speculative_algorithm='EAGLE3'", "speculative_algorithm=None")
    feed(state, p, nospec, decode_line(tput=89.0, ts=ts(1)))
    feed(state, p, launch_line(ts=ts(50)), decode_line(tput=70.0, ts=ts(51)))
    feed(state, p, launch_line(ts=ts(100)), decode_line(tput=94.0, ts=ts(101)))
    v = state.view()
    assert v.throughput_reference == 89.0 and v.throughput_reference_label == "no-spec run 1 mean per rank"
    assert v.accept_reference == 2.85 and v.accept_reference_label == "run 2 mean"


def test_collapse_below_threshold_and_recovery(grammars):
    state = DashboardState(alert_below=2.0)
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0)), *(decode_line(acc=1.1, ts=ts(1 + i)) for i in range(6)))
    v = state.view()
    assert v.tiles.health == "bad"
    assert [e.text for e in v.events if e.level == "bad"] == [
        "acceptance collapse: window mean accept len 1.10, below 2"
    ]
    feed(state, p, *(decode_line(acc=3.5, ts=ts(10 + i)) for i in range(20)))
    v = state.view()
    assert v.tiles.health == "good"
    assert v.events[-1].text.startswith("acceptance recovered")


def test_collapse_against_the_runs_first_ten_minutes(grammars):
    state = DashboardState(window=60)
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0)), *(decode_line(acc=3.0, ts=ts(10 + i)) for i in range(10)))
    feed(state, p, *(decode_line(acc=1.8, ts=ts(900 + i)) for i in range(10)))  # 40% below the start
    bad = [e.text for e in state.view().events if e.level == "bad"]
    assert bad == ["acceptance collapse: window mean accept len 1.80, 40% below the run's start"]


def test_stale_while_queued(grammars):
    clock = Clock()
    state = DashboardState(stale_after=30, clock=clock)
    p = Parser(grammars, "s.log")
    feed(state, p, decode_line(queued=0, ts=ts(0)))
    clock.now += 60
    state.check()
    assert not [e for e in state.view().events if e.level == "bad"]  # idle, nothing queued: not stale
    feed(state, p, decode_line(queued=4, ts=ts(61)))
    clock.now += 31
    state.check()
    state.check()
    assert [(e.at, e.text) for e in state.view().events if e.level == "bad"] == [
        (None, "s.log: no decode line for 31 s (last logged 14:01:01) while 4 requests are queued")
    ]


def test_an_ended_input_is_not_a_stall(grammars):
    """A finished replay leaves requests queued in its last line: silence after the end is not a stalled server."""
    clock = Clock()
    state = DashboardState(stale_after=30, clock=clock)
    p = Parser(grammars, "s.log")
    feed(state, p, decode_line(queued=4, ts=ts(0)))
    state.end_of_input("s.log")
    clock.now += 600
    state.check()
    assert [e for e in state.view().events if e.level == "bad"] == []
    other = Parser(grammars, "t.log")  # another file, still live, is judged as before
    feed(state, other, decode_line(queued=2, ts=ts(0)))
    clock.now += 31
    state.check()
    assert [e.file for e in state.view().events if e.level == "bad"] == ["t.log"]


def test_events_carry_the_log_time_of_their_record(grammars):
    state = DashboardState(alert_below=2.0, clock=Clock())
    state.note("started at the last launch")
    state.set_waiting("s.log", True)
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0)), *(decode_line(acc=1.1, ts=ts(10 + i)) for i in range(6)))
    feed(state, p, "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: many, accept len: soon")
    got = [(e.at.strftime("%H:%M:%S") if e.at else None, e.text.split(":")[0]) for e in state.view().events]
    assert got == [
        (None, "started at the last launch"),  # notes about acceptmon itself have no log time
        (None, "s.log"),  # waiting for the file
        ("14:00:00", "launch"),
        ("14:00:14", "acceptance collapse"),  # the fifth batch (MIN_POINTS) made the window judgeable
        (None, "format drift"),
    ]
    assert event_line(state.view().events[0], False) == ("--:--:--", "started at the last launch")
    assert event_line(state.view().events[2], False)[0] == "14:00:00"


def test_a_launch_with_the_previous_config_says_the_difference_is_elsewhere(grammars):
    state = DashboardState(clock=Clock())
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0)), *(decode_line(acc=1.12, ts=ts(1 + i)) for i in range(8)))
    feed(state, p, launch_line(ts=ts(100)), *(decode_line(acc=2.85, ts=ts(101 + i)) for i in range(4)))
    texts = [e.text for e in state.view().events]
    assert texts == ["launch: Qwen/Qwen3-8B, EAGLE3 steps 3 topk 1 draft 4",
                     "launch: Qwen/Qwen3-8B, EAGLE3 steps 3 topk 1 draft 4 (same config as run 1)"]  # fmt: skip
    feed(state, p, decode_line(acc=2.85, ts=ts(105)))  # the fifth batch: this run's mean is known
    same = state.view().events[-1]
    assert same.text == "run 2: same config as run 1, accept len 1.12 -> 2.85: the difference is outside server_args"
    assert same.at is not None and f"{same.at:%H:%M:%S}" == "14:01:45"
    feed(state, p, *(decode_line(acc=2.85, ts=ts(106 + i)) for i in range(10)))
    assert sum("same config" in e.text for e in state.view().events) == 2  # said once per run
    feed(
        state, p, launch_line(ts=ts(200), steps=5, tokens=6), *(decode_line(acc=3.2, ts=ts(201 + i)) for i in range(6))
    )
    assert not any(e.text.startswith("run 3") for e in state.view().events)  # another config: nothing to say


def test_same_config_with_a_similar_mean_names_no_cause(grammars):
    state = DashboardState(clock=Clock())
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0)), *(decode_line(acc=2.80, ts=ts(1 + i)) for i in range(5)))
    feed(state, p, launch_line(ts=ts(100)), *(decode_line(acc=2.85, ts=ts(101 + i)) for i in range(5)))
    assert state.view().events[-1].text == "run 2: same config as run 1, accept len 2.80 -> 2.85"


def test_unrecognized_lines_are_format_drift_events(grammars):
    state = DashboardState()
    p = Parser(grammars, "s.log")
    feed(state, p, "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: many, accept len: soon")
    warn = [e.text for e in state.view().events if e.level == "warn"]
    assert len(warn) == 1 and warn[0].startswith("format drift: 1 unrecognized stats-like line(s): line 1:")


def test_history_before_the_live_start_numbers_the_runs(grammars):
    """The live start hands the parser the file's state there (two runs before it): the live run is run 3."""
    state = DashboardState()
    earlier = [
        RunSummary(file="s.log", run=r, start=None, end=None, duration_s=None, model="m", spec_algorithm="EAGLE3",
                   spec_num_steps=r, spec_eagle_topk=1, spec_num_draft_tokens=r + 1, batches=5, ranks=1,
                   accept_len_mean=1.5 + r, accept_len_p10=None, accept_len_p50=None, accept_len_p90=None,
                   accept_rate_mean=None, draft_accept_rate_mean=None, gen_throughput_per_rank=90.0,
                   gen_throughput_total=90.0)
        for r in (1, 2)
    ]  # fmt: skip
    state.set_history("s.log", earlier)
    p = Parser(grammars, "s.log", ParseState(line=40, run=2))
    feed(state, p, launch_line(ts=ts(0)), decode_line(acc=3.0, ts=ts(1)))
    v = state.view()
    assert v.run == 3 and v.current_run_key == ("s.log", 3)
    assert [(h.run, h.accept_len_mean) for h in v.history] == [(1, 2.5), (2, 3.5), (3, 3.0)]
    assert v.accept_reference == 3.5


def test_the_current_run_is_judged_against_the_previous_one_by_compares_rule(grammars):
    """The seed incident: the fixed run against the broken one is `better`, as `acceptmon compare` says."""
    from acceptmon.measure.compare import compare
    from acceptmon.pipeline.sides import read_side
    from tests.conftest import SAMPLES

    log = SAMPLES / "seed_eagle3_moe.log"
    state = DashboardState()
    lines = log.read_text().splitlines()
    second_launch = [i for i, line in enumerate(lines) if "server_args=" in line][2]
    feed(state, Parser(grammars, str(log)), *lines[:second_launch])  # runs 1 and 2, then stop
    state.compare_runs()
    verdicts = [e.text for e in state.view().events if " vs run " in e.text]
    expected = compare(read_side(str(log), 1, grammars).side, read_side(str(log), 2, grammars).side)
    assert expected.verdict == "better"
    assert verdicts == [f"run 2 vs run 1: better. {expected.reason.replace('B ', 'run 2 ', 1)}"]
    state.compare_runs()  # the same verdict is not announced twice
    assert len([e for e in state.view().events if " vs run " in e.text]) == 1


def test_no_verdict_before_enough_batches(grammars):
    state = DashboardState()
    p = Parser(grammars, "s.log")
    feed(state, p, launch_line(ts=ts(0)), *[decode_line(acc=1.1, tput=70, ts=ts(1 + i)) for i in range(30)])
    feed(state, p, launch_line(ts=ts(100)), *[decode_line(acc=2.8, tput=94, ts=ts(101 + i)) for i in range(19)])
    state.compare_runs()
    assert not [e for e in state.view().events if " vs run " in e.text]
    feed(state, p, decode_line(acc=2.8, tput=94, ts=ts(130)))
    state.compare_runs()
    assert [e.text.split(".")[0] for e in state.view().events if " vs run " in e.text] == ["run 2 vs run 1: better"]


VLLM_DP = "vllm_v1_0.10.2_dp.log"


def vllm_lines(name: str = VLLM_DP, upto: int | None = None) -> list[str]:
    """The first ``upto`` lines (all by default) of a bundled vLLM sample log."""
    from tests.conftest import SAMPLES

    return (SAMPLES / name).read_text().splitlines()[:upto]


def test_vllm_spec_lines_are_acceptance_and_throughput_lines_the_load_per_engine(grammars):
    state = DashboardState(clock=Clock())
    p = Parser(grammars, "v.log")
    feed(state, p, *vllm_lines(upto=18))  # launch lines, then two 10 s intervals of engines 000 and 001
    v = state.view()
    assert v.run == 1 and v.unit == "engine" and v.stats_kind == "spec"
    assert [e.text for e in v.events] == ["launch: Qwen/Qwen3-8B, eagle3 steps 3 topk - draft 4"]  # 3 lines, 1 launch
    t = v.tiles
    assert (t.accept_len_last, t.accept_rate) == (3.3, 0.765755)  # engine 001 at 23:42:13
    assert t.accept_len_mean == 3.25  # (3.17 + 3.30 + 3.21 + 3.30) / 4 = 3.245
    assert t.draft_accept_rate == 0.75  # accepted / drafted: 0.722, 0.766, 0.736, 0.766
    # As runs defines a run's total, over the window: each engine's mean logged rate, summed.
    assert (t.throughput, t.throughput_ranks, t.unit) == (529.55, 2, "engine")  # (247.9+251.2)/2 + (294.9+265.1)/2
    assert (t.running, t.queued, t.token_usage) == (48, 0, 0.336)  # 35 + 13 running; KV of the fuller engine
    assert [(r.rank, r.accept_len, r.window_mean, r.throughput, r.running, r.queued) for r in v.ranks] == [
        ("000", 3.21, 3.19, 251.2, 35, 0),
        ("001", 3.3, 3.3, 265.1, 13, 0),
    ]
    assert [y for _, y in v.throughput_series] == [271.4, 258.15]  # per engine, mean of engines, per 10 s interval


def test_vllm_per_position_acceptance_is_weighted_by_drafts_over_engines(grammars):
    state = DashboardState(clock=Clock())
    p = Parser(grammars, "v.log")
    feed(state, p, *vllm_lines(upto=18))
    drafts = (2349, 2682, 2349, 2412)  # per spec line, in file order; the position-1 rates are 0.888 ... 0.919
    mean_1 = sum(d * r for d, r in zip(drafts, (0.888, 0.917, 0.893, 0.919), strict=True)) / sum(drafts)
    last_1 = (2349 * 0.893 + 2412 * 0.919) / (2349 + 2412)  # each engine's latest interval
    got = state.view().positions
    assert [b.position for b in got] == [1, 2, 3]
    assert (got[0].mean, got[0].last) == (round(mean_1, 4), round(last_1, 4))
    assert got[2].last == round((2349 * 0.581 + 2412 * 0.617) / (2349 + 2412), 4)


def test_no_per_position_bars_without_per_position_rates(grammars):
    sglang = DashboardState()
    feed(sglang, Parser(grammars, "s.log"), launch_line(ts=ts(0)), decode_line(ts=ts(1)))
    v = sglang.view()
    assert (v.positions, v.unit, v.stats_kind) == ((), "rank", "decode")
    v0 = DashboardState()  # vLLM v0: cumulative counters, no per-position rates, no engine index
    feed(v0, Parser(grammars, "v0.log"), *vllm_lines("vllm_v0_0.6.log", upto=30))
    v = v0.view()
    assert v.positions == () and v.unit == "engine" and v.stats_kind == "spec"
    assert [(r.rank, r.throughput, r.running) for r in v.ranks] == [("", 292.8, 36)]  # the 19:01:11 line


def test_vllm_run_against_run_uses_spec_lines_with_their_engines_throughput(grammars):
    from acceptmon.measure.compare import Batch
    from acceptmon.measure.normalize import Normalizer
    from acceptmon.tui.filestate import FileState

    f = FileState("v.log")
    records = Parser(grammars, "v.log").feed(("\n".join(vllm_lines(upto=13)) + "\n").encode())
    for fact in Normalizer().feed(records):
        if fact.record.kind == "launch":
            f.launch(fact.record)
        else:
            f.add(fact, 0.0)
    assert f.run == 1 and f.pair.current is not None
    assert list(f.pair.current.sample.batches) == [
        Batch(3.17, 0.722009, 247.9, 26, True),
        Batch(3.3, 0.766219, 294.9, 28, True),
    ]
    assert list(f.pair.current.sample.loads) == [247.9, 294.9]  # the engines' load lines, as compare reads them

    state = DashboardState(clock=Clock())
    feed(state, Parser(grammars, "v.log"), *vllm_lines())
    state.compare_runs()
    v = state.view()
    verdicts = [e.text for e in v.events if " vs run " in e.text]
    assert len(verdicts) == 1 and verdicts[0].startswith("run 2 vs run 1: better. run 2 +16.6 % tok/s")
    assert "accept len 3.48 vs 2.98" in verdicts[0]
    # The per-engine plot's reference is the run's throughput per engine, as runs gives it (tok/s/rank).
    run1 = next(h for h in v.history if h.run == 1)
    assert run1.ranks == 2 and v.throughput_reference == run1.gen_throughput_per_rank == 220.9177
    assert run1.gen_throughput_total == 441.8355  # the engines' means added up
    assert v.throughput_reference_label == "run 1 mean per engine" and v.accept_reference == run1.accept_len_mean


def test_tail_judges_vllm_runs_as_compare_does(grammars):
    """The same batches (a spec line with its engine's latest load) give the same verdict and reason."""
    from acceptmon.measure.compare import compare
    from acceptmon.pipeline.sides import read_side
    from tests.conftest import SAMPLES

    log = SAMPLES / "vllm_v1_0.10.2_dp.log"
    state = DashboardState()
    feed(state, Parser(grammars, str(log)), *log.read_text().splitlines())
    state.compare_runs()
    verdicts = [e.text for e in state.view().events if " vs run " in e.text]
    expected = compare(read_side(str(log), 1, grammars).side, read_side(str(log), 2, grammars).side)
    assert verdicts == [f"run 2 vs run 1: {expected.verdict}. {expected.reason.replace('B ', 'run 2 ', 1)}"]


# -- several files: which one the tiles show ------------------------------------------------------------------

NOSPEC = "speculative_algorithm=None"


def nospec_lines(start: int, n: int, ranks: int = 2, tput: float = 71.5) -> list[str]:
    """A server without speculation: its launch, then decode lines with no accept len (``n`` per rank)."""
    launch = launch_line(ts=ts(start)).replace("speculative_algorithm='EAGLE3'", NOSPEC)
    for name in ("speculative_draft_model_path='d/e3'", "speculative_num_steps=3", "speculative_num_draft_tokens=4",
                 "speculative_eagle_topk=1"):  # fmt: skip
        launch = launch.replace(name, name.split("=")[0] + "=None")
    return [launch] + [
        f"[{ts(start + 1 + i)} TP{r}] Decode batch, #running-req: 4, #token: 4521, token usage: 0.02, cuda graph: "
        f"True, gen throughput (token/s): {tput:.2f}, #queue-req: 1"
        for i in range(n)
        for r in range(ranks)
    ]


def three_servers(grammars) -> DashboardState:
    """Read in this order: a speculative server, a baseline without speculation, one that launched and then
    logged nothing (a failed start)."""
    state = DashboardState(clock=Clock())
    spec = [launch_line(ts=ts(0), steps=5, tokens=6)]
    spec += [decode_line(rank=f"DP{r} TP{r}", acc=3.21, tput=94, ts=ts(1 + i)) for i in range(3) for r in range(11)]
    feed(state, Parser(grammars, "spec.log"), *spec)
    feed(state, Parser(grammars, "baseline.log"), *nospec_lines(0, 3))
    feed(state, Parser(grammars, "broken.log"), launch_line(ts=ts(200)))
    return state


def test_the_tiles_show_a_file_with_data_not_the_last_launch(grammars):
    state = three_servers(grammars)
    v = state.view()
    assert v.files == ("spec.log", "baseline.log", "broken.log")
    # broken.log launched last but has nothing to show: the newest run with data is the baseline's
    assert v.shown == "baseline.log" and v.current_run_key == ("baseline.log", 1)
    t = v.tiles
    assert (t.throughput, t.throughput_ranks, t.running, t.queued) == (143.0, 2, 8, 2)  # 2 x 71.5
    assert t.accept_len_last is None  # no speculation: nothing to accept, and said so
    assert v.launch is not None and v.launch.method is None
    state.select("spec.log")
    v = state.view()
    assert v.shown == "spec.log" and v.run == 1 and v.launch is not None and v.launch.spec_num_steps == 5
    assert (v.tiles.accept_len_last, v.tiles.accept_len_mean, v.tiles.throughput) == (3.21, 3.21, 1034.0)
    state.select("broken.log")  # its own tiles are empty, and it is the one asked for
    v = state.view()
    assert v.shown == "broken.log" and v.tiles.throughput is None and v.run == 1
    state.select(None)
    assert state.view().shown == "baseline.log"


def test_two_files_logging_in_turn_do_not_take_turns_on_the_tiles(grammars):
    state = DashboardState(clock=Clock())
    a, b = Parser(grammars, "a.log"), Parser(grammars, "b.log")
    feed(state, a, launch_line(ts=ts(0)), decode_line(acc=2.0, ts=ts(1)))
    feed(state, b, launch_line(ts=ts(0)), decode_line(acc=3.0, ts=ts(1)))
    for i in range(3):  # a logs after b, each time: b's run started later and stays shown
        feed(state, b, decode_line(acc=3.0, ts=ts(2 + i)))
        feed(state, a, decode_line(acc=2.0, ts=ts(2 + i)))
        v = state.view()
        assert (v.shown, v.tiles.accept_len_last) == ("b.log", 3.0), i
    feed(state, a, launch_line(ts=ts(10)))  # a restarts: b keeps the tiles until a's new run logs a batch
    assert state.view().shown == "b.log"
    feed(state, a, decode_line(acc=2.5, ts=ts(11)))
    v = state.view()
    assert (v.shown, v.tiles.accept_len_last, v.run) == ("a.log", 2.5, 2)


def test_ranks_are_in_the_order_a_person_reads_them(grammars):
    state = DashboardState(clock=Clock())
    feed(state, Parser(grammars, "s.log"), launch_line(ts=ts(0)),
         *(decode_line(rank=f"DP{r} TP{r}", ts=ts(1)) for r in (10, 2, 0, 11, 1)))  # fmt: skip
    assert [r.rank for r in state.view().ranks] == ["DP0 TP0", "DP1 TP1", "DP2 TP2", "DP10 TP10", "DP11 TP11"]
