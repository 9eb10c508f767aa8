"""LiveStats and the Prometheus collector: values, histogram, staleness, cardinality cap."""

from __future__ import annotations

from prometheus_client import generate_latest

from acceptmon.exporter.metrics import MetricsPage
from acceptmon.live.state import LiveStats
from acceptmon.parse.parser import Parser
from tests.serving import Clock, decode_line, launch_line, parse_metrics, value
from tests.serving import feed as feed_sink


def feed(live: LiveStats, parser: Parser, *lines: str) -> None:
    feed_sink(live.update, parser, *lines)


def scrape(page: MetricsPage) -> dict:
    return parse_metrics(generate_latest(page.registry).decode())


def test_gauges_counters_and_run_info(grammars):
    live = LiveStats(clock=Clock())
    parser = Parser(grammars, "s.log")
    feed(live, parser, launch_line(steps=3, tokens=4), decode_line(0, acc=2.5), decode_line(1, acc=3.25, tput=90.5))
    feed(live, parser, decode_line(2, rank="TP1", acc=1.1, running=7, queued=2), "INFO: 127.0.0.1 GET /health 200")
    m = scrape(MetricsPage(live))
    assert value(m, "acceptmon_accept_length", rank="TP0") == 3.25
    assert value(m, "acceptmon_accept_length", rank="TP1") == 1.1
    assert value(m, "acceptmon_draft_accept_rate", rank="TP0") == 0.75  # (3.25 - 1) / (4 - 1)
    assert value(m, "acceptmon_gen_throughput_tokens_per_second", rank="TP0") == 90.5
    assert value(m, "acceptmon_running_requests", rank="TP1") == 7
    assert value(m, "acceptmon_queued_requests", rank="TP1") == 2
    assert value(m, "acceptmon_decode_batches_total", rank="TP0") == 2
    assert value(m, "acceptmon_batch_accept_length_count", rank="TP0") == 2
    assert value(m, "acceptmon_batch_accept_length_sum", rank="TP0") == 5.75
    assert value(m, "acceptmon_batch_accept_length_bucket", rank="TP0", le="2.5") == 1
    assert value(m, "acceptmon_batch_accept_length_bucket", rank="TP0", le="3.5") == 2
    assert value(m, "acceptmon_batch_accept_length_bucket", rank="TP1", le="1.25") == 1
    assert value(m, "acceptmon_lines_total", kind="decode") == 3
    assert value(m, "acceptmon_lines_total", kind="launch") == 1
    assert value(m, "acceptmon_lines_total", kind="other") == 1
    assert value(m, "acceptmon_lines_total", kind="unrecognized") == 0
    assert value(m, "acceptmon_server_launches_total", file="s.log") == 1
    info = m["acceptmon_run_info"]
    assert list(info.values()) == [1.0]
    labels = dict(next(iter(info)))
    assert labels == {
        "file": "s.log",
        "namespace": "",
        "pod": "",
        "container": "",
        "run": "1",
        "model": "Qwen/Qwen3-8B",
        "spec_algorithm": "EAGLE3",
        "spec_num_steps": "3",
        "spec_eagle_topk": "1",
        "spec_num_draft_tokens": "4",
    }
    ts = value(m, "acceptmon_last_decode_timestamp_seconds", rank="TP0")
    from datetime import datetime

    assert ts == datetime(2026, 2, 26, 14, 0, 1).timestamp()


def test_stale_gauges_are_dropped_counters_stay(grammars):
    clock = Clock()
    live = LiveStats(clock=clock)
    parser = Parser(grammars, "s.log")
    feed(live, parser, decode_line(0, rank="TP0"))
    clock.now += 200
    feed(live, parser, decode_line(1, rank="TP1"))
    clock.now += 150  # TP0 last seen 350 s ago, TP1 150 s ago
    m = scrape(MetricsPage(live, stale_after=300))
    assert value(m, "acceptmon_accept_length", rank="TP0") is None
    assert value(m, "acceptmon_accept_length", rank="TP1") == 2.85
    assert value(m, "acceptmon_decode_batches_total", rank="TP0") == 1


def test_series_cap_counts_overflow(grammars):
    live = LiveStats(max_series=2)
    parser = Parser(grammars, "s.log")
    feed(live, parser, *(decode_line(i, rank=f"DP{i} TP0") for i in range(5)))
    m = scrape(MetricsPage(live))
    assert len(m["acceptmon_accept_length"]) == 2
    assert value(m, "acceptmon_series_overflow_total") == 3


def test_model_label_is_cut_and_no_other_free_text(grammars):
    live = LiveStats()
    parser = Parser(grammars, "s.log")
    long_model = "m" * 500
    feed(live, parser, launch_line().replace("Qwen/Qwen3-8B", long_model))
    m = scrape(MetricsPage(live))
    labels = dict(next(iter(m["acceptmon_run_info"])))
    assert labels["model"] == "m" * 200


def test_page_cache_renders_again_only_on_change(grammars):
    clock = Clock()
    live = LiveStats(clock=clock)
    page = MetricsPage(live)
    parser = Parser(grammars, "s.log")
    feed(live, parser, decode_line(0))
    first = page.render()
    assert page.render() is first
    feed(live, parser, decode_line(1, acc=1.5))
    second = page.render()
    assert second is not first
    assert value(parse_metrics(second.decode()), "acceptmon_accept_length") == 1.5
    clock.now += 1
    assert page.render() is not second  # the stale cut-off moved


def test_run_baseline_is_the_first_ten_minutes_of_the_current_run(grammars):
    live = LiveStats()
    parser = Parser(grammars, "s.log")
    feed(
        live,
        parser,
        launch_line(ts="2026-02-26 14:00:00"),
        decode_line(ts="2026-02-26 14:01:00", acc=3.0),
        decode_line(ts="2026-02-26 14:09:59", acc=2.0),
        decode_line(ts="2026-02-26 14:30:00", acc=1.1),  # after the first ten minutes: not in the baseline
    )
    m = scrape(MetricsPage(live))
    assert value(m, "acceptmon_run_baseline_accept_length") == 2.5
    feed(live, parser, launch_line(ts="2026-02-26 15:00:00"), decode_line(ts="2026-02-26 15:00:05", acc=1.2))
    m = scrape(MetricsPage(live))
    assert value(m, "acceptmon_run_baseline_accept_length") == 1.2  # a new launch starts a new baseline


def test_forgotten_file_takes_its_series_along(grammars):
    live = LiveStats()
    a, b = Parser(grammars, "a.log"), Parser(grammars, "b.log")
    feed(live, a, decode_line(0))
    feed(live, b, decode_line(0))
    live.forget("a.log")
    m = scrape(MetricsPage(live))
    assert {dict(k)["file"] for k in m["acceptmon_accept_length"]} == {"b.log"}
    assert {dict(k)["file"] for k in m["acceptmon_lines_total"]} == {"b.log"}


def test_collector_goes_to_the_registry_given_never_the_global_one(grammars):
    from prometheus_client import REGISTRY, CollectorRegistry

    live = LiveStats()
    feed(live, Parser(grammars, "s.log"), decode_line(0, acc=2.4))
    mine = CollectorRegistry()
    page = MetricsPage(live, registry=mine)
    assert page.registry is mine
    where = {"file": "s.log", "namespace": "", "pod": "", "container": "", "rank": "TP0"}
    assert mine.get_sample_value("acceptmon_accept_length", where) == 2.4
    assert REGISTRY.get_sample_value("acceptmon_accept_length", where) is None
