"""vLLM logs in the live state and on /metrics: engines as series, token counters, per-position gauges, one run per start."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from acceptmon.exporter.metrics import MetricsPage
from acceptmon.live.state import LiveStats
from acceptmon.parse.parser import Parser
from tests.conftest import SAMPLES

DP = "vllm_v1_0.10.2_dp.log"
V0 = "vllm_v0_0.6.log"
SEED = "seed_eagle3_moe.log"


def _live(grammars, *names: str) -> LiveStats:
    live = LiveStats(clock=lambda: 0.0)
    for name in names:
        parser = Parser(grammars, name)
        live.update(name, parser.feed((SAMPLES / name).read_bytes()), parser.tally)
    return live


def _samples(live: LiveStats) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = MetricsPage(live).render().decode()
    families = list(text_string_to_metric_families(text))
    names = [f.name for f in families]
    assert len(names) == len(set(names))  # one family per name, whichever kinds feed it
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in families:
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_dp_log_series_are_engines_and_counters_add_up(grammars):
    got = _samples(_live(grammars, DP, V0, SEED))
    accepted = {(d["file"], d["engine"]): v for d, v in got["acceptmon_accepted_tokens_total"]}
    drafted = {(d["file"], d["engine"]): v for d, v in got["acceptmon_drafted_tokens_total"]}
    assert accepted[(DP, "000")] + accepted[(DP, "001")] == 90981 + 58749
    assert drafted[(DP, "000")] + drafted[(DP, "001")] == 137964 + 94600
    assert (accepted[(V0, "")], drafted[(V0, "")]) == (49776, 68319)  # cumulative counters: their increase
    ranks = {d["rank"] for d, _ in got["acceptmon_accept_length"] if d["file"] == DP}
    assert ranks == {"000", "001"}
    seed_ranks = {d["rank"] for d, _ in got["acceptmon_accept_length"] if d["file"] == SEED}
    assert len(seed_ranks) == 8  # SGLang series unchanged beside them
    positions = sorted((d["engine"], d["position"]) for d, _ in got["acceptmon_position_accept_rate"])
    assert positions == [(e, str(p)) for e in ("000", "001") for p in range(1, 5)]
    throughput = {d["rank"] for d, _ in got["acceptmon_gen_throughput_tokens_per_second"] if d["file"] == DP}
    assert throughput == {"000", "001"}


def test_v0_prefix_cache_line_keeps_the_throughput_gauges(grammars):
    got = _samples(_live(grammars, V0))
    gen = [v for d, v in got["acceptmon_gen_throughput_tokens_per_second"]]
    hit = [v for d, v in got["acceptmon_prefix_cache_hit_ratio"]]
    assert len(gen) == 1 and gen[0] > 0 and len(hit) == 1 and 0 < hit[0] < 1


def test_one_server_start_is_one_launch_in_the_live_state(grammars):
    live = _live(grammars, DP)
    (info,) = live.snapshot().files
    assert (info.launches, info.run) == (2, 2)
    assert info.launch is not None and (info.launch.spec_num_steps, info.launch.dp_size) == (4, 2)
    spec = [s for s in live.snapshot().series if s.kind == "spec"]
    assert {s.rank for s in spec} == {"000", "001"}
    means = spec[0].position_means
    assert len(means) == 4 and means == sorted(means, reverse=True) and 0 < means[-1] < means[0] < 1


def test_v0_gauges_show_the_latest_interval_not_the_average_since_start(grammars):
    """v0 counts tokens since server start: the accept length gauge is its last interval's, as doctor judges it."""
    parser = Parser(grammars, V0)
    specs = [r for r in parser.feed((SAMPLES / V0).read_bytes()) if r.kind == "spec"]
    before, last = specs[-2], specs[-1]
    assert last.cumulative and last.run == before.run
    k = last.num_spec_tokens
    drafted = last.drafted_tokens - before.drafted_tokens
    interval = round((last.emitted_tokens - before.emitted_tokens) * k / drafted, 6)
    got = _samples(_live(grammars, V0))
    (length,) = [v for d, v in got["acceptmon_accept_length"] if d["file"] == V0]
    assert length == interval and abs(interval - last.accept_len) > 0.01  # not the running average
