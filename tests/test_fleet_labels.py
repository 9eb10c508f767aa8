"""Per-source series for a fleet: Kubernetes labels from CRI paths and stream prefixes, the verify-step and
generated-token counters, --timezone. Real `acceptmon serve` processes over a /var/log/pods-style tree."""

from __future__ import annotations

import calendar
import gzip
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from acceptmon.live.state import LiveStats
from acceptmon.measure.verify import DEFAULT_DECODE_LOG_INTERVAL, Window, decode_log_interval, estimated, window
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import LaunchConfig
from tests.serving import Serve, decode_line, feed

Metrics = dict[str, dict[tuple[tuple[str, str], ...], float]]

LAUNCH = (
    "[{ts}] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, dp_size=1, "
    "speculative_algorithm='EAGLE3', speculative_draft_model_path='d/e3', speculative_num_steps=3, "
    "speculative_eagle_topk=1, speculative_num_draft_tokens=4{interval})"
)
VLLM_TPUT = (
    "(APIServer pid=3051) INFO 02-26 14:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 700.9 tokens/s, "
    "Avg generation throughput: 247.9 tokens/s, Running: 26 reqs, Waiting: 0 reqs, GPU KV cache usage: 9.4%, "
    "Prefix cache hit rate: 35.9%"
)
VLLM_SPEC = (
    "(APIServer pid=3051) INFO 02-26 14:00:{s:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 3.17, "
    "Accepted throughput: 169.60 tokens/s, Drafted throughput: 234.90 tokens/s, Accepted: {acc} tokens, "
    "Drafted: {drafted} tokens, Per-position acceptance rate: 0.888, 0.731, 0.548, Avg Draft acceptance rate: 72.2%"
)


def launch(interval: int | None, ts: str = "2026-02-26 14:00:00") -> str:
    return LAUNCH.format(ts=ts, interval="" if interval is None else f", decode_log_interval={interval}")


def cri(lines: list[str]) -> str:
    """Lines as a CRI runtime writes them (``TIME STREAM F MESSAGE``)."""
    return "".join(f"2026-02-26T14:00:00.{i:09d}Z stdout F {line}\n" for i, line in enumerate(lines))


class Written:
    """Decode lines written for one file: what its counters must come to."""

    def __init__(self, interval: int) -> None:
        self.interval, self.lines, self.steps, self.tokens = interval, 0, 0.0, 0.0

    def decode(self, i: int, running: int, acc: float) -> str:
        self.lines += 1
        self.steps += self.interval * running
        self.tokens += round(acc, 2) * self.interval * running
        return decode_line(i, rank="TP0", running=running, acc=acc)


def wait_for(serve: Serve, done: Callable[[Metrics], bool], timeout: float = 30.0) -> Metrics:
    """The page once ``done(page)``; the last page read when ``timeout`` is up (generous: a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        m = serve.metrics()
        if done(m) or time.monotonic() > deadline:
            return m
        time.sleep(0.1)


def sample(m: Metrics, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels`` (None if none; fails on several)."""
    hits = [v for k, v in m.get(name, {}).items() if all(item in k for item in labels.items())]
    assert len(hits) <= 1, (name, labels, hits)
    return hits[0] if hits else None


def test_pods_tree_rotation_restart_and_streams_give_per_source_series_and_counters(tmp_path):
    pods = tmp_path / "var" / "log" / "pods"
    a_dir, b_dir = pods / "team-a_sglang-a-7d9f_0a1b" / "sglang", pods / "team-a_sglang-b-55c2_9f8e" / "sglang"
    v_dir = pods / "team-v_vllm-x-1_77aa" / "vllm"
    for d in (a_dir, b_dir, v_dir):
        d.mkdir(parents=True)
    a, b = Written(20), Written(DEFAULT_DECODE_LOG_INTERVAL)  # pod A logs every 20 passes, pod B by default
    (a_dir / "0.log").write_text(cri([launch(20), *(a.decode(i, 3 + i, 2.0 + i / 10) for i in range(4))]))
    (b_dir / "0.log").write_text(cri([launch(None), *(b.decode(i, 10 - i, 3.1) for i in range(3))]))
    vllm = [(1696, 2349), (1000, 1500)]  # accepted, drafted per interval; k = 3 (three per-position rates)
    (v_dir / "0.log").write_text(
        cri(
            [
                x
                for i, (acc, d) in enumerate(vllm)
                for x in (VLLM_TPUT.format(s=i), VLLM_SPEC.format(s=i, acc=acc, drafted=d))
            ]
        )
    )
    stream = tmp_path / "kubectl.log"  # kubectl logs -f --prefix -l app=sglang: two pods, both TP0
    web = {"web-1": Written(40), "web-2": Written(10)}
    stream.write_text(
        "".join(
            f"[pod/{pod}/server] {line}\n"
            for pod, w in web.items()
            for line in (launch(w.interval), *(w.decode(i, 2, 1.5 + len(pod) / 10) for i in range(2)))
        )
    )
    serve = Serve(str(pods / "*" / "*" / "*.log"), str(stream), "--poll", "--poll-interval", "50ms", "--from-start")
    try:
        serve.wait_listening()
        files = {"a": str(a_dir / "0.log"), "b0": str(b_dir / "0.log"), "b1": str(b_dir / "1.log")}

        def batches(m: Metrics, file: str) -> float | None:
            return sample(m, "acceptmon_decode_batches_total", file=file)

        m = wait_for(serve, lambda m: batches(m, files["a"]) == 4 and batches(m, files["b0"]) == 3)
        assert (batches(m, files["a"]), batches(m, files["b0"])) == (4, 3), "the pods' first lines"
        # kubelet rotation of pod A: rename, the runtime writes on into the renamed file until it reopens, a new 0.log
        rotated = a_dir / "0.log.20260226-140500"
        os.rename(a_dir / "0.log", rotated)
        with rotated.open("a") as f:
            f.write(cri([a.decode(4 + i, 5, 2.75) for i in range(2)]))
        (a_dir / "0.log").write_text(cri([a.decode(6 + i, 4, 3.25) for i in range(3)]))
        # pod B's container restarts: a new 1.log beside 0.log, a new launch (its own run)
        b1 = Written(DEFAULT_DECODE_LOG_INTERVAL)
        (b_dir / "1.log").write_text(
            cri([launch(None, "2026-02-26 14:10:00"), *(b1.decode(i, 6, 2.2) for i in range(5))])
        )
        m = wait_for(serve, lambda m: batches(m, files["a"]) == a.lines and batches(m, files["b1"]) == b1.lines)
        assert (batches(m, files["a"]), batches(m, files["b1"])) == (a.lines, b1.lines), "the rotated and new files"
        # then kubelet compresses the rotated file: nothing is read again
        with rotated.open("rb") as src, gzip.open(f"{rotated}.gz", "wb") as dst:
            dst.write(src.read())
        rotated.unlink()
        time.sleep(2.5)  # past a glob rescan and the rotation grace
        m = serve.metrics()
    finally:
        assert serve.stop() == 0

    pod_a = {"namespace": "team-a", "pod": "sglang-a-7d9f", "container": "sglang"}
    pod_b = {"namespace": "team-a", "pod": "sglang-b-55c2", "container": "sglang"}
    expect = [(files["a"], pod_a, a), (files["b0"], pod_b, b), (files["b1"], pod_b, b1)]
    expect += [(str(stream), {"namespace": "", "pod": pod, "container": "server"}, w) for pod, w in web.items()]
    for file, where, w in expect:
        key = {"file": file, **where, "rank": "TP0"}
        assert sample(m, "acceptmon_decode_batches_total", **key) == w.lines, key
        assert sample(m, "acceptmon_verify_steps_total", **key) == pytest.approx(w.steps), key
        assert sample(m, "acceptmon_generated_tokens_total", **key) == pytest.approx(w.tokens), key
        assert sample(m, "acceptmon_run_info", file=file, **where) == 1.0, key
    written = a.lines + b.lines + b1.lines + sum(w.lines for w in web.values()) + len(vllm)  # spec lines are batches
    assert sum(m["acceptmon_decode_batches_total"].values()) == written  # every line once, none twice
    # the restarted container's file is a run of its own, with its pod's labels
    info = [dict(k) for k in m["acceptmon_run_info"] if dict(k)["file"] == files["b1"]]
    assert [(i["run"], i["pod"], i["model"]) for i in info] == [("1", "sglang-b-55c2", "Qwen/Qwen3-8B")]
    # per-file series carry the labels the file's path names
    assert sample(m, "acceptmon_log_file_present", file=files["a"], **pod_a) == 1.0
    assert sample(m, "acceptmon_lines_total", file=files["b1"], kind="launch", **pod_b) == 1.0
    # vLLM: exact counts, drafts = drafted / k, tokens = accepted + drafts
    pod_v = {"file": str(v_dir / "0.log"), "namespace": "team-v", "pod": "vllm-x-1", "container": "vllm"}
    drafts = sum(d / 3 for _, d in vllm)
    assert sample(m, "acceptmon_verify_steps_total", **pod_v) == pytest.approx(drafts)
    assert sample(m, "acceptmon_generated_tokens_total", **pod_v) == pytest.approx(sum(x for x, _ in vllm) + drafts)
    assert sample(m, "acceptmon_accepted_tokens_total", **pod_v) == sum(x for x, _ in vllm)


def test_fleet_accept_length_is_the_token_weighted_sum_not_a_mean_of_replicas(grammars):
    """sum(tokens) / sum(steps) over two replicas weighs each by its verify steps."""
    live = LiveStats()
    feed(
        live.update,
        Parser(grammars, "busy.log"),
        launch(None),
        *(decode_line(i, running=200, acc=3.0) for i in range(3)),
    )
    feed(
        live.update, Parser(grammars, "idle.log"), launch(None), *(decode_line(i, running=1, acc=1.2) for i in range(3))
    )
    series = [s for s in live.snapshot().series if s.kind == "decode"]
    assert sum(s.tokens for s in series) / sum(s.steps for s in series) == pytest.approx((3.0 * 200 + 1.2) / 201)


def test_the_estimate_rule():
    assert decode_log_interval(None) == 40
    assert decode_log_interval(LaunchConfig(extra={"decode_log_interval": 7})) == 7
    assert decode_log_interval(LaunchConfig(extra={"decode_log_interval": -3})) == 40  # no server runs that
    assert estimated(2.5, 8, 40) == Window(320.0, 800.0, estimated=True)
    assert estimated(None, 8, 40) is None  # a decode line without speculation covers no verify window


def test_a_v0_cumulative_spec_line_counts_the_increase(grammars):
    from acceptmon.parse.records import SpecStats

    r = SpecStats(accepted_tokens=900, drafted_tokens=1200, num_spec_tokens=4, cumulative=True)
    assert window(r, None, {"accepted_tokens": 90.0, "drafted_tokens": 120.0}) == Window(30.0, 120.0, estimated=False)
    assert window(r, None) == Window(300.0, 1200.0, estimated=False)
    # v0 counts emitted tokens: those are the tokens (its accepted count has drafts matched after a rejection)
    increase = {"accepted_tokens": 90.0, "drafted_tokens": 120.0, "emitted_tokens": 100.0}
    assert window(r, None, increase) == Window(30.0, 100.0, estimated=False)


def test_v0_cumulative_lines_count_their_intervals_in_the_live_counters(grammars):
    lines = [
        "INFO 10-16 19:00:51 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.797, System efficiency: "
        f"0.766, Number of speculative tokens: 3, Number of accepted tokens: {acc}, Number of draft tokens: {drafted}, "
        f"Number of emitted tokens: {emitted}."
        for acc, drafted, emitted in [(1404, 1761, 1798), (2900, 3600, 3700)]
    ]
    live = LiveStats()
    feed(live.update, Parser(grammars, "v0.log"), *lines)
    (s,) = [s for s in live.snapshot().series if s.kind == "spec"]
    assert (s.steps, s.tokens) == (pytest.approx(3600 / 3), pytest.approx(3700))  # the second line's increase added


def _timestamp(tmp_path: Path, *args: str) -> float | None:
    log = tmp_path / "tz.log"
    log.write_text(launch(None) + "\n" + decode_line(0, ts="2026-07-01 12:00:00") + "\n")
    serve = Serve(str(log), "--poll", "--poll-interval", "50ms", *args)
    try:
        serve.wait_listening()
        m = wait_for(serve, lambda m: bool(m.get("acceptmon_last_decode_timestamp_seconds")))
    finally:
        assert serve.stop() == 0
    return sample(m, "acceptmon_last_decode_timestamp_seconds", rank="TP0")


@pytest.mark.parametrize(
    ("zone", "offset"),
    [("Asia/Kolkata", 5.5 * 3600), ("-03:00", -3 * 3600), ("America/New_York", -4 * 3600)],
)
def test_timezone_sets_the_zone_of_log_times(tmp_path, zone, offset):
    as_utc = calendar.timegm(datetime(2026, 7, 1, 12, 0, 0).timetuple())
    assert _timestamp(tmp_path, f"--timezone={zone}") == as_utc - offset  # New York: daylight time in July


def test_timezone_defaults_to_the_local_zone(tmp_path):
    assert _timestamp(tmp_path) == datetime(2026, 7, 1, 12, 0, 0).timestamp()


def test_timezone_takes_iana_names_and_utc_offsets():
    from datetime import timedelta

    from acceptmon.cli.args import zone

    stamp = datetime(2026, 1, 15, 12, 0)
    got = {text: zone(text).utcoffset(stamp) for text in ("UTC", "Europe/Berlin", "+02:00", "-0530", "UTC+2", "GMT-11")}
    hours = {"UTC": 0, "Europe/Berlin": 1, "+02:00": 2, "-0530": -5.5, "UTC+2": 2, "GMT-11": -11}
    assert got == {text: timedelta(hours=h) for text, h in hours.items()}


@pytest.mark.parametrize("command", ["serve", "tail"])
def test_a_bad_timezone_is_one_line_and_exit_2(tmp_path, command):
    log = tmp_path / "x.log"
    log.write_text("")
    out = subprocess.run(
        [sys.executable, "-m", "acceptmon", command, str(log), "--timezone", "Mars/Olympus_Mons"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "not a time zone: 'Mars/Olympus_Mons'" in out.stderr


ALERT_TEST = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{series}
    alert_rule_test:
      - eval_time: 20m
        alertname: AcceptLengthDropped
        exp_alerts:
          - exp_labels: {{severity: warning, instance: n1, file: k.log, pod: web-2, container: server, rank: TP0}}
            exp_annotations:
              summary: "Accept length dropped 30% on n1 web-2 TP0"
              description: "5-minute mean accept length is 1.50, more than 30% below the first ten minutes of this run in k.log (traffic mix change or a regression)."
      - eval_time: 20m
        alertname: DecodeLogStaleWhileQueued
        exp_alerts: []
"""


def test_alert_rules_keep_two_pods_of_one_stream_file_apart(tmp_path):
    """Two pods in one `kubectl logs --prefix` file, both TP0: the rules judge each (promtool test rules)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: install Debian's prometheus package, or run ./scripts/test which does")
    series = []
    for pod, per_batch in (("web-1", 3.0), ("web-2", 1.5)):
        where = f'instance="n1",file="k.log",namespace="",pod="{pod}",container="server",rank="TP0"'
        series += [
            (f"acceptmon_batch_accept_length_sum{{{where}}}", f"0+{10 * per_batch:g}x30"),
            (f"acceptmon_batch_accept_length_count{{{where}}}", "0+10x30"),
            (f"acceptmon_decode_batches_total{{{where}}}", "0+10x30"),
            (f"acceptmon_run_baseline_accept_length{{{where}}}", "3x30"),
            (f"acceptmon_queued_requests{{{where}}}", "2x30"),
        ]
    rules = Path(__file__).resolve().parent.parent / "deploy" / "prometheus" / "alerts.yml"
    test = tmp_path / "test.yml"
    test.write_text(
        ALERT_TEST.format(
            rules=rules, series="\n".join(f"      - series: '{s}'\n        values: '{v}'" for s, v in series)
        )
    )
    out = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_two_journald_units_in_one_file_are_two_series(grammars):
    """A source named by nothing but its stream (a journald unit) has its name as the container label."""
    import json

    def entry(unit: str, message: str) -> str:
        return json.dumps({"__CURSOR": "s=1", "__REALTIME_TIMESTAMP": "1772114400000000", "_SYSTEMD_UNIT": unit,
                           "MESSAGE": message})  # fmt: skip

    live = LiveStats()
    lines = [
        entry(unit, line)
        for unit in ("sglang-a.service", "sglang-b.service")
        for line in (launch(None), decode_line(0))
    ]
    feed(live.update, Parser(grammars, "journal.json"), *lines)
    labels = [tuple(dict(k).items()) for k in parse_page(live)["acceptmon_accept_length"]]
    assert sorted(dict(k)["container"] for k in labels) == ["sglang-a.service", "sglang-b.service"]
    assert {dict(k)["pod"] for k in labels} == {""}


def parse_page(live: LiveStats) -> Metrics:
    from acceptmon.exporter.metrics import MetricsPage
    from tests.serving import parse_metrics

    return parse_metrics(MetricsPage(live).render().decode())
