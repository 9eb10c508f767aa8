"""llama.cpp's llama-server: the bundled sample log through every command, against oracles read off its text."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import re
import subprocess
import sys

import pytest

from acceptmon.parse.pairs import split_argv
from acceptmon.parse.parser import Parser
from acceptmon.parse.values import to_ratio, to_step_tokens
from tests.conftest import ROOT, SAMPLES
from tests.serving import Serve, value, wait_for

LOG = SAMPLES / "llamacpp_draft_mtp.log"
STATS = re.compile(
    r"statistics\s+([\w-]+): #calls\(b,g,a\) = +\d+ +\d+ +(\d+), .*#gen tokens = +(\d+), #acc tokens = +(\d+)"
)
REQUEST = re.compile(r"draft acceptance = ([\d.]+) \( *(\d+) accepted / *(\d+) generated\)(?:, mean len = +([\d.]+))?")
ROUND = re.compile(r"accepted (\d+)/(\d+) draft tokens")


def _runs_of_text() -> list[dict[str, list[tuple[str, ...]]]]:
    """The log cut at each `build:` line, with its statistics rows, request lines and round lines."""
    runs: list[dict[str, list[tuple[str, ...]]]] = []
    for line in LOG.read_text().splitlines():
        if " build: " in line:
            runs.append({"stats": [], "requests": [], "rounds": []})
        for name, pattern in (("stats", STATS), ("requests", REQUEST), ("rounds", ROUND)):
            m = pattern.search(line)
            if m:
                runs[-1][name].append(m.groups())
    return runs


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acceptmon", *args], capture_output=True, text=True, cwd=ROOT)


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered) - 1e-9)) - 1]


def test_records_of_every_line_family(grammars):
    parser = Parser(grammars, "x.log")
    records = parser.feed(LOG.read_bytes())
    text = _runs_of_text()
    spec = [r for r in records if r.kind == "spec"]
    stats = [r for r in spec if r.engine != "steps"]
    rounds = [r for r in spec if r.engine == "steps"]
    requests = [r for r in records if r.kind == "request"]
    assert len(stats) == sum(len(t["stats"]) for t in text) == 24
    assert len(rounds) == sum(len(t["rounds"]) for t in text) > 500
    assert len(requests) == sum(len(t["requests"]) for t in text) == 24
    assert parser.tally.kinds["launch"] == 4 + 3  # the command line, build, model lines; run 1 a draft model too
    assert not parser.tally.unrecognized
    # A statistics row: the implementation, its cumulative counters, their ratio.
    engine, _, drafted, accepted = text[0]["stats"][-1]
    last = stats[13]
    assert (last.engine, last.drafted_tokens, last.accepted_tokens, last.cumulative) == (
        engine,
        int(drafted),
        int(accepted),
        True,
    )
    assert last.accept_rate == round(int(accepted) / int(drafted), 6)
    # A request line: accepted / generated as logged, the mean length where the release logs it.
    first_old, first_new = requests[0], requests[14]
    rate, acc, gen, mean = text[0]["requests"][0]
    assert (first_old.accept_rate, first_old.correct_drafts, first_old.proposed_drafts) == (
        float(rate),
        int(acc),
        int(gen),
    )
    assert first_old.accept_len is None and mean is None
    assert first_new.accept_len == float(text[1]["requests"][0][3])
    assert first_new.rank is not None and first_new.spec_algorithm == "draft-mtp"
    # A round: accepted + the bonus token; a 0 denominator is counted and never divided by.
    zero = [r for r in rounds if r.num_spec_tokens == 0]
    assert zero and all(r.accept_rate is None and r.accept_len == 1.0 for r in zero)
    full = next(r for r in rounds if r.num_spec_tokens == 3 and r.accept_len == 4.0)
    assert full.accept_rate == 1.0


def test_runs_give_each_server_start_its_model_method_tokens_and_request_quantiles():
    out = _cli("runs", "--format", "json", str(LOG))
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)
    text = _runs_of_text()
    assert [(r["run"], r["spec_algorithm"], r["spec_num_steps"], r["version"]) for r in runs] == [
        (1, "draft", 8, "6780"),
        (2, "draft-mtp", 3, "7412"),
    ]
    assert runs[0]["spec_draft_model"] == "/models/Qwen3-0.6B-Q8_0.gguf"
    assert {r["model"] for r in runs} == {"/models/Qwen3-8B-Q4_K_M.gguf"}
    for got, want in zip(runs, text, strict=True):
        _, calls, drafted, accepted = want["stats"][-1]  # counters since start: the run's last row is its total
        assert (got["accepted_tokens"], got["drafted_tokens"]) == (int(accepted), int(drafted))
        assert got["accept_len_by_tokens"] == round(1 + int(accepted) / int(calls), 6)
        assert got["requests"] == len(want["requests"])
    assert runs[0]["request_accept_len_p50"] is None  # that release logs no mean length
    means = [float(m[3]) for m in text[1]["requests"]]
    assert [runs[1][f"request_accept_len_p{q}"] for q in (10, 50, 90)] == [
        _nearest_rank(means, q / 100) for q in (10, 50, 90)
    ]


def test_a_log_of_request_lines_alone_still_has_a_run_per_server_start(tmp_path):
    """The default log level of the newest releases prints no statistics rows and no verify steps."""
    log = tmp_path / "info.log"
    log.write_text("".join(x for x in LOG.read_text().splitlines(True) if not STATS.search(x) and not ROUND.search(x)))
    out = _cli("runs", "--format", "json", str(log))
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)
    assert [(r["run"], r["spec_algorithm"], r["requests"], r["batches"]) for r in runs] == [
        (1, "draft", 14, 0),
        (2, "draft-mtp", 10, 0),
    ]
    assert runs[1]["request_accept_len_p50"] is not None


def test_doctor_and_compare_read_the_runs():
    doctor = _cli("doctor", str(LOG))
    assert doctor.returncode == 0, doctor.stderr
    assert "run 1: /models/Qwen3-8B-Q4_K_M.gguf, draft steps 8, 14 batches" in doctor.stdout
    assert "2 runs: 0 errors" in doctor.stdout
    compare = _cli("compare", f"{LOG}#1", f"{LOG}#2")
    assert compare.returncode == 0, compare.stderr
    assert "draft steps 8; 14 batches" in compare.stdout


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_llamacpp", ROOT / "scripts" / "make_llamacpp_sample_logs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_llamacpp"] = module
    spec.loader.exec_module(module)
    return module


def test_doctor_warns_of_a_draft_model_whose_tokens_are_rarely_accepted(tmp_path):
    make = _generator()
    log = make.Log(random.Random(1), pid=None)
    make.launch(log, 6780, "1a2b3c4d", "-m /m/a.gguf -md /m/b.gguf --draft-max 8", "/m/a.gguf", "/m/b.gguf")
    impl = make.Impl("draft")
    for _ in range(40):
        make.request(log, impl, 8, 0.15, era="server", rounds=False)
    path = tmp_path / "weak.log"
    path.write_text("\n".join(log.lines) + "\n")
    out = _cli("doctor", "--format", "json", str(path))
    assert out.returncode == 0, out.stderr
    findings = json.loads(out.stdout)["findings"]
    assert [(f["rule"], f["severity"]) for f in findings] == [("P2", "warning")]
    stats = [STATS.search(x) for x in path.read_text().splitlines()]
    _, calls, _, accepted = [m.groups() for m in stats if m][-1]
    assert 1 + int(accepted) / int(calls) < 1.5  # what the log says: under the rule's threshold


def test_serve_counts_the_statistics_rows_tokens_and_the_requests():
    text = _runs_of_text()
    serve = Serve("--from-start", str(LOG))
    try:
        serve.wait_listening()
        metrics = wait_for(lambda: (m := serve.metrics()) and value(m, "acceptmon_requests_total", rank="0") and m)
        for run in text:
            engine, calls, drafted, accepted = run["stats"][-1]
            assert value(metrics, "acceptmon_accepted_tokens_total", engine=engine) == int(accepted)
            assert value(metrics, "acceptmon_drafted_tokens_total", engine=engine) == int(drafted)
            assert value(metrics, "acceptmon_verify_steps_total", rank=engine) == int(calls)
        requests = sum(v for k, v in metrics["acceptmon_requests_total"].items())
        assert requests == sum(len(t["requests"]) for t in text)
        assert "steps" not in {dict(k).get("engine") for k in metrics["acceptmon_accepted_tokens_total"]}
    finally:
        serve.stop()


@pytest.mark.parametrize(
    ("text", "want"),
    [("3/4", 0.75), ("3/ 4", 0.75), ("0/0", None), ("5/0", None)],
)
def test_ratio_never_divides_by_zero(text, want):
    assert to_ratio(text) == want


def test_step_tokens_and_command_lines():
    assert to_step_tokens("0") == 1.0
    assert split_argv("-m a.gguf --draft-max=16 -c -1 --flash-attn --spec-type ngram-mod > out.log") == {
        "-m": "a.gguf",
        "--draft-max": "16",
        "-c": "-1",
        "--flash-attn": "true",
        "--spec-type": "ngram-mod",
    }


POSITIONS = re.compile(r"acc per pos = \(([^)]*)\)")
EVAL = re.compile(r"\|\s+eval time = +[\d.]+ ms / +\d+ tokens \( *[\d.]+ ms per token, +([\d.]+) tokens per second\)")


def _requests_with_positions() -> list[list[tuple[int, list[float]]]]:
    """Per run of the sample: each request's accepted tokens and its `acc per pos` rates (the line after)."""
    runs: list[list[tuple[int, list[float]]]] = []
    accepted = None
    for line in LOG.read_text().splitlines():
        if " build: " in line:
            runs.append([])
        m = REQUEST.search(line)
        if m:
            accepted = int(m.group(2))
        m = POSITIONS.search(line)
        if m and accepted is not None:
            runs[-1].append((accepted, [float(x) for x in m.group(1).split(",")]))
            accepted = None
    return runs


def test_acc_per_pos_lines_are_the_requests_per_position_rates_weighted_by_their_verify_steps(grammars):
    records = Parser(grammars, "x.log").feed(LOG.read_bytes())
    positions = [r for r in records if r.kind == "positions"]
    text = _requests_with_positions()
    assert [r.position_accept_rates for r in positions] == [rates for run in text for _, rates in run]
    assert len(positions) == 10 and {r.run for r in positions} == {2} and positions[0].rank is not None
    # Oracle: the rates sum to accepted drafts per verify step, so a request's steps are accepted / their sum.
    steps = [acc / sum(rates) for acc, rates in text[1]]
    want = [sum(s * rates[i] for s, (_, rates) in zip(steps, text[1], strict=True)) / sum(steps) for i in range(3)]
    runs = json.loads(_cli("runs", "--format", "json", str(LOG)).stdout)
    assert runs[0]["position_accept_rates"] is None  # run 1's release prints no per-position line
    assert runs[1]["position_accept_rates"] == pytest.approx(want, abs=1e-6)
    # The run's last statistics row counts every verify step since start: the same rates, to its 3 decimals.
    last = [x for x in LOG.read_text().splitlines() if "#acc rate/pos" in x][-1]
    logged = [float(x) for x in re.search(r"#acc rate/pos = \(([^)]*)\)", last).group(1).split(",")]  # type: ignore[union-attr]
    assert runs[1]["position_accept_rates"] == pytest.approx(logged, abs=0.001)
    doctor = json.loads(_cli("doctor", "--format", "json", str(LOG)).stdout)["runs"][1]["recommendation"]
    assert doctor["positions_from"] == "this run's per-position rates"
    assert [p["reached"] for p in doctor["positions"]] == [round(a, 4) for a in want]
    assert [p["conditional"] for p in doctor["positions"]] == [
        round(a / b, 4) for a, b in zip(want, [1.0, *want[:-1]], strict=True)
    ]


def _stats(grammars, text: str):  # type: ignore[no-untyped-def]
    from acceptmon.measure.aggregate import Stats

    stats = Stats()
    stats.update(Parser(grammars, "p.log").feed(text.encode()))
    return stats.summaries()


HEAD = "build: 7412 (9f7add1c) with cc (GCC) 13.3.0 for x86_64-linux-gnu\n"


def test_a_positions_line_weighs_by_the_request_before_it_on_its_slot(grammars):
    request = "slot print_timing: id  {slot} | task 1 | draft acceptance = 0.50000 ({acc:5d} accepted / {gen:5d} generated), mean len =  1.50\n"
    pos = "slot print_timing: id  {slot} | task 1 |      acc per pos = ({rates})\n"
    text = HEAD + "".join(
        [
            request.format(slot=0, acc=90, gen=120),  # 100 verify steps: 0.6 + 0.3 = 90 / 100
            request.format(slot=1, acc=0, gen=40),  # nothing accepted: 40 drafted / 2 positions = 20 steps
            pos.format(slot=1, rates="0.000, 0.000"),
            pos.format(slot=0, rates="0.600, 0.300"),
            pos.format(slot=0, rates="0.900, 0.900"),  # no request line before it on slot 0: no weight
        ]
    )
    (run,) = _stats(grammars, text)
    assert run.requests == 2
    assert run.position_accept_rates == [round(0.6 * 100 / 120, 6), round(0.3 * 100 / 120, 6)]
    bad = HEAD + request.format(slot=0, acc=90, gen=120) + pos.format(slot=0, rates="0.600, 1.300")
    (run,) = _stats(grammars, bad)
    assert (run.position_accept_rates, run.invalid_values) == (None, 1)


def test_each_requests_eval_time_is_a_load_line_of_its_decode_speed(grammars):
    records = Parser(grammars, "x.log").feed(LOG.read_bytes())
    loads = [r for r in records if r.kind == "throughput"]
    speeds = [[float(m.group(1)) for m in map(EVAL.search, part.splitlines()) if m] for part in _parts()]
    assert [r.gen_throughput for r in loads] == [s for run in speeds for s in run]
    assert {r.engine for r in loads} == {"requests"} and len(loads) == 24
    runs = json.loads(_cli("runs", "--format", "json", str(LOG)).stdout)
    assert [r["gen_throughput_per_rank"] for r in runs] == [round(sum(s) / len(s), 4) for s in speeds]


def _parts() -> list[str]:
    """The sample's text of each run (from one build line to the next)."""
    text = LOG.read_text()
    starts = [m.start() for m in re.finditer(r"^.*build: ", text, re.M)]
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def _plain_run(tmp_path, speed_ms: float = 15.9):  # type: ignore[no-untyped-def]
    """A llama-server without a draft: its requests' print_timings() lines only (the generator's plain step)."""
    make = _generator()
    log = make.Log(random.Random(3), pid=None)
    make.launch(log, 6780, "1a2b3c4d", "-m /m/a.gguf --port 8080", "/m/a.gguf", None)
    for i in range(30):
        n = 100 + 7 * i
        t = n * speed_ms
        log.slot(
            "I",
            "print_timing",
            i % 4,
            f"       eval time = {t:10.2f} ms / {n:5d} tokens ({t / n:8.2f} ms per token, {1e3 * n / t:8.2f} tokens per second)",
        )
        log.task += 1
    path = tmp_path / "plain.log"
    path.write_text("\n".join(log.lines) + "\n")
    return path


def test_a_run_without_a_draft_is_the_baseline_of_one_with_a_draft_by_its_decode_speed(tmp_path):
    plain = _plain_run(tmp_path)
    runs = json.loads(_cli("runs", "--format", "json", str(plain)).stdout)
    assert [(r["spec_algorithm"], r["batches"], r["gen_throughput_per_rank"]) for r in runs] == [(None, 0, 62.89)]
    out = _cli("compare", "--format", "json", str(plain), f"{LOG}#1")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    spec = [float(m.group(1)) for m in map(EVAL.search, _parts()[0].splitlines()) if m]
    assert result["b"]["gen_throughput"]["mean"] == pytest.approx(sum(spec) / len(spec), abs=0.01)
    assert result["a"]["gen_throughput"]["mean"] == pytest.approx(62.89)
    assert result["b"]["gen_throughput"]["mean"] > 3 * 62.89  # the draft model's 5.38 tokens a step pay
    doctor = _cli("doctor", "--baseline", str(plain), str(LOG))
    assert doctor.returncode == 0, doctor.stderr
    assert "run 1: /models/Qwen3-8B-Q4_K_M.gguf, draft steps 8, 14 batches, accept len 5.38" in doctor.stdout


LINES = {
    "request": "slot print_timing: id  3 | task 0 | draft acceptance = 0.71250 (  114 accepted /   160 generated), mean len =  2.90",
    "positions": "slot print_timing: id  3 | task 0 |      acc per pos = (0.900, 0.700, 0.500)",
    "throughput": "slot print_timing: id  3 | task 0 |        eval time =    3133.20 ms /   353 tokens (    8.88 ms per token,   112.66 tokens per second)",
    "spec": "0.01.003.606 I statistics draft: #calls(b,g,a) = 1 72 72, #gen drafts = 72, #acc drafts = 58, #gen tokens = 576, #acc tokens = 293",
    "launch": "[49965] 0.00.000.662 I srv    load_model: loading model '/models/Qwen3-8B-Q4_K_M.gguf'",
}
OWN = ("kind", "rank", "accept_len", "correct_drafts", "position_accept_rates", "gen_throughput", "accepted_tokens")
WRAPPERS = {  # what each tool puts before a line, and the stream fields it names
    "stern": ("llama-7d9f8-x2k4q llama-server {}", {"pod": "llama-7d9f8-x2k4q", "container": "llama-server"}),
    "stern -A": (
        "inference llama-7d9f8-x2k4q llama-server {}",
        {"namespace": "inference", "pod": "llama-7d9f8-x2k4q", "container": "llama-server"},
    ),
    "stern --timestamps": (
        "llama-7d9f8-x2k4q llama-server 2026-01-02T03:04:05.123456789Z {}",
        {"pod": "llama-7d9f8-x2k4q"},
    ),
    "CRI": ("2026-01-02T03:04:05.123456789Z stderr F {}", {}),
    "docker json-file": ('{{"log":"{}\\n","stream":"stderr","time":"2026-01-02T03:04:05.1Z"}}', {}),
    "kubectl --prefix": ("[pod/llama-7d9f8-x2k4q/llama-server] {}", {"pod": "llama-7d9f8-x2k4q"}),
    "kubectl --timestamps": ("2026-01-02T03:04:05.123456789Z {}", {}),
    "compose": ("llama-server-1  | {}", {"container": "llama-server-1"}),
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("kind", sorted(LINES))
def test_wrapped_lines_give_the_records_of_the_bare_ones(grammars, wrapper, kind):
    shape, stream = WRAPPERS[wrapper]
    bare = Parser(grammars, "x.log").parse_line(LINES[kind])
    got = Parser(grammars, "x.log").parse_line(shape.format(LINES[kind]))
    assert bare is not None and got is not None and bare.kind == kind
    assert {f: getattr(got, f, None) for f in OWN} == {f: getattr(bare, f, None) for f in OWN}
    assert getattr(got, "config", None) == getattr(bare, "config", None)
    assert {f: getattr(got, f) for f in stream} == stream


def test_prose_naming_a_slot_line_is_not_a_stern_stream(grammars):
    parser = Parser(grammars, "x.log")
    assert parser.parse_line("see the log slot print_timing: id  3 | task 0 | eval time") is None
    kind, _ = parser.classify(f"look at {LINES['request']}")
    assert kind == "other"


def test_the_sample_through_stern_gives_the_same_runs_under_its_pod(tmp_path):
    wrapped = tmp_path / "stern.log"
    lines = LOG.read_text().splitlines()
    wrapped.write_text("".join(f"llama-7d9f8-x2k4q llama-server {x}\n" for x in lines))
    plain = json.loads(_cli("runs", "--format", "json", str(LOG)).stdout)
    got = json.loads(_cli("runs", "--format", "json", str(wrapped)).stdout)
    assert [(r["source"], r["pod"], r["container"]) for r in got] == [
        ("llama-7d9f8-x2k4q llama-server", "llama-7d9f8-x2k4q", "llama-server")
    ] * 2
    keep = ("file", "source", "pod", "container")
    assert [{k: v for k, v in r.items() if k not in keep} for r in got] == [
        {k: v for k, v in r.items() if k not in keep} for r in plain
    ]


def _default_level(tmp_path, *, eval_lines: bool = True):  # type: ignore[no-untyped-def]
    """The sample as llama-server's default level logs it: no statistics rows, verify steps or `acc per pos`
    (and, ``eval_lines`` false, a log grepped down to its request lines and launches)."""
    drop = re.compile(
        r"statistics\s+[\w-]+: #calls|accepted \d+/\d+ draft tokens|acc per pos" + ("" if eval_lines else "|eval time")
    )
    path = tmp_path / ("info.log" if eval_lines else "requests.log")
    path.write_text("".join(x for x in LOG.read_text().splitlines(True) if not drop.search(x)))
    return path


LACKS = (
    "finished-request lines but no per-batch acceptance lines (llama-server prints its statistics rows at -lv 4 "
    "and each verify step with -v)"
)


def test_a_log_of_request_lines_alone_says_what_it_lacks_in_every_command(tmp_path):
    log = _default_level(tmp_path, eval_lines=False)
    parse = _cli("parse", str(log))
    assert (parse.returncode, parse.stdout.count("\n")) == (0, 1)  # the header row alone
    assert f"acceptmon: {log}: 24 {LACKS}; --kind request writes them as rows" in parse.stderr
    assert "is this an SGLang or vLLM server log" not in parse.stderr
    rows = _cli("parse", "--kind", "request", "--format", "jsonl", str(log)).stdout.splitlines()
    assert len(rows) == 24
    compare = json.loads(_cli("compare", "--format", "json", f"{log}#1", f"{log}#2").stdout)
    requests = _runs_of_text()
    rates = [[int(m[1]) / int(m[2]) for m in run["requests"]] for run in requests]
    lengths = [float(m[3]) for m in requests[1]["requests"]]
    assert (compare["a"]["batches"], compare["b"]["batches"]) == (14, 10)  # its finished requests
    assert compare["a"]["accept_rate"]["mean"] == pytest.approx(sum(rates[0]) / 14, abs=1e-4)
    assert compare["b"]["accept_len"]["mean"] == pytest.approx(sum(lengths) / 10, abs=1e-4)
    assert compare["a"]["accept_len"]["mean"] is None  # that release's request line gives no mean len
    table = _cli("compare", f"{log}#1", f"{log}#2").stdout
    assert "A  requests.log#1  draft steps 8; 14 finished requests" in table
    doctor = _cli("doctor", str(log))
    assert doctor.returncode == 0, doctor.stderr
    flat = " ".join(doctor.stdout.split())
    assert flat.count("nothing to judge: ") == 2
    assert f"nothing to judge: 14 {LACKS}" in flat and f"nothing to judge: 10 {LACKS}" in flat
    runs = json.loads(_cli("runs", "--format", "json", str(log)).stdout)
    means = sorted(float(m[3]) for m in _runs_of_text()[1]["requests"])
    assert [(r["requests"], r["batches"], r["request_accept_len_p50"]) for r in runs] == [
        (14, 0, None),
        (10, 0, _nearest_rank(means, 0.5)),
    ]


def test_compare_of_two_default_level_runs_compares_their_requests_and_decode_speed(tmp_path):
    log = _default_level(tmp_path)
    out = _cli("compare", f"{log}#1", f"{log}#2")
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    assert f"A: compared by its finished requests: 14 {LACKS}" in flat
    assert f"B: compared by its finished requests: 10 {LACKS}" in flat
    lengths = [float(m[3]) for m in _runs_of_text()[1]["requests"]]
    assert f"accept len - {sum(lengths) / len(lengths):.2f} [" in flat
    speeds = [[float(m.group(1)) for m in map(EVAL.search, part.splitlines()) if m] for part in _parts()]
    a, b = (sum(s) / len(s) for s in speeds)
    assert f"gen throughput tok/s/rank {a:.1f} [" in flat and f"] {b:.1f} [" in flat
    doctor = _cli("doctor", str(log))
    assert f"nothing to judge: 14 {LACKS}" in " ".join(doctor.stdout.split())


def test_speedup_against_a_run_without_a_draft_is_the_ratio_of_decode_speeds_said_unmatched(tmp_path):
    """llama.cpp logs no running requests, so there is no load to match: the doctor's break-even, its depth
    table and ``runs --baseline`` take S as the ratio of the runs' mean decode speeds, and say so."""
    plain = _plain_run(tmp_path)
    speeds = [[float(m.group(1)) for m in map(EVAL.search, part.splitlines()) if m] for part in _parts()]
    base = 62.89
    expected = [round(sum(s) / len(s) / base, 2) for s in speeds]
    doctor = json.loads(_cli("doctor", "--baseline", str(plain), str(LOG), "--format", "json").stdout)
    for run, want in zip(doctor["runs"], expected, strict=True):
        be = run["break_even"]
        assert be["verdict"] == "pays" and round(be["speedup"], 2) == want
        assert "unmatched (neither run logs its running requests" in be["statement"]
        rec = run["recommendation"]
        assert rec["parameter"] == "--draft-max" and rec["baseline"] is True
        assert rec["reference_tok_s"] == pytest.approx(base)
    text = _cli("doctor", "--baseline", str(plain), str(LOG)).stdout
    assert "the mean tok/s/rank of plain.log" in text and "recommended: --draft-max" in text
    runs = json.loads(_cli("runs", "--baseline", str(plain), str(LOG), "--format", "json").stdout)
    for r, want, be in zip(runs, expected, (x["break_even"] for x in doctor["runs"]), strict=True):
        assert r["speedup"] == pytest.approx(be["speedup"], abs=1e-4) and round(r["speedup"], 2) == want
        assert r["speedup_ci_low"] < r["speedup"] < r["speedup_ci_high"]
        assert r["speedup_note"].startswith("neither run logs its running requests")
    assert [r["best"] for r in runs] == [True, False]
    table = _cli("runs", "--baseline", str(plain), str(LOG))
    assert table.stderr.count("S unmatched: neither run logs its running requests") == 2


def test_no_year_note_where_no_timestamp_needed_a_year(tmp_path):
    """llama.cpp's `M.SS.mmm.uuu` stamps are times since start, not year-less dates: no command speaks of a year."""
    for command in (("runs",), ("parse", "-o", str(tmp_path / "out.csv")), ("doctor",)):
        out = _cli(*command, str(LOG))
        assert out.returncode == 0 and "year of year-less" not in out.stderr, out.stderr
