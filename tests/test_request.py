"""The request kind end to end: per-request values from the sample logs, never a decode line, live histogram.

``tests/golden/requests/*.jsonl`` holds the request rows of each ``sample_logs/request_*.log`` in the
request kind's own columns (what ``parse --kind request`` writes); rewrite them with
``python -m tests.test_request`` from the repository root and review the diff.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from acceptmon.exporter.metrics import MetricsPage
from acceptmon.live.state import LiveStats
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import RequestStats
from acceptmon.pipeline.batch import run
from acceptmon.sinks.table import TableJob, columns, row
from tests.conftest import GOLDEN, ROOT, SAMPLES

REQUEST_LOGS = sorted(p.stem for p in SAMPLES.glob("request_*.log"))
REQUEST_GOLDEN = GOLDEN / "requests"
LAUNCH = (
    "[2026-09-01 11:59:00] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
    "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)\n"
)


def request_rows(log: Path) -> bytes:
    """The request rows of a log, as JSON Lines in the request kind's columns."""
    cols = columns((KINDS["request"],))  # as the table writes them: the stream columns last
    parser = Parser(load_grammars(), os.path.relpath(log, ROOT))
    lines = []
    for r in parser.feed(log.read_bytes()):
        if r.kind == "request":
            obj = dict(zip(cols, row(r, cols), strict=True))
            obj["extra"] = getattr(r, "extra", {})
            lines.append(json.dumps(obj, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def _requests(grammars, name: str) -> tuple[list[RequestStats], Parser]:
    parser = Parser(grammars, name)
    records = parser.feed((SAMPLES / f"{name}.log").read_bytes())
    return [r for r in records if isinstance(r, RequestStats)], parser


def test_there_are_request_sample_logs():
    assert REQUEST_LOGS == ["request_0.5.10", "request_0.5.23", "request_json_0.5.23"]


@pytest.mark.parametrize("name", REQUEST_LOGS)
def test_request_rows_match_golden(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    got = request_rows(SAMPLES / f"{name}.log").decode().splitlines()
    want = (REQUEST_GOLDEN / f"{name}.jsonl").read_text().splitlines()
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        assert json.loads(g) == json.loads(w)


@pytest.mark.parametrize("name", REQUEST_LOGS)
def test_every_finish_line_with_spec_fields_is_one_request(grammars, name):
    lines = (SAMPLES / f"{name}.log").read_text().splitlines()
    messages = [line.partition("] ")[2] for line in lines]  # after the request logger's '[time] '
    finished = [
        i + 1
        for i, msg in enumerate(messages)
        if (msg.startswith("Finish: obj=") or (msg.startswith('{"timestamp"') and '"request.finished"' in msg[:80]))
        and "spec_verify_ct" in msg
    ]
    requests, parser = _requests(grammars, name)
    assert [r.line for r in requests] == finished
    assert parser.tally.kinds["request"] == len(finished)
    assert parser.tally.kinds["unrecognized"] == 0
    # accept length is completion tokens per verify step, as SGLang computes it
    assert all(r.accept_len == pytest.approx(r.completion_tokens / r.verify_ct) for r in requests)
    assert all(r.accept_len != 9.99 for r in requests)  # the prompts that quote another request's line


def test_values_per_request(grammars):
    requests, _ = _requests(grammars, "request_0.5.23")
    first = requests[0]
    assert (first.line, first.rid, first.finish_reason) == (9, "611244c06c7ab5c94e86c4fa978f18a7", "length")
    assert (first.accept_len, first.accept_rate, first.verify_ct) == (3.3378378378378377, 0.7792792792792793, 74)
    assert (first.correct_drafts, first.proposed_drafts, first.completion_tokens) == (173, 222, 247)
    assert (first.run, first.spec_algorithm, first.spec_num_draft_tokens) == (1, "EAGLE3", 4)
    assert first.extra == {"weight_version": "default", "num_retractions": "0", "reasoning_tokens": "0"}
    aborted = requests[-1]
    assert (aborted.rid, aborted.finish_reason, aborted.e2e_latency, aborted.accept_len) == (
        "abort-1",
        "abort",
        None,
        1.0,
    )


def test_old_key_names(grammars):
    requests, _ = _requests(grammars, "request_0.5.10")
    r = requests[0]
    assert (r.verify_ct, r.correct_drafts, r.proposed_drafts) == (90, 178, 270)
    assert r.accept_rate == pytest.approx(r.correct_drafts / r.proposed_drafts)


def test_json_nan_is_empty(grammars):
    requests, _ = _requests(grammars, "request_json_0.5.23")
    assert [r.e2e_latency is None for r in requests].count(True) == 1
    assert requests[7].e2e_latency is None and requests[7].accept_len is not None
    assert {r.spec_num_draft_tokens for r in requests} == {6}


def test_finish_lines_without_spec_fields_are_other_lines(grammars):
    requests, parser = _requests(grammars, "request_0.5.23")
    non_spec = [r for r in requests if r.run == 2]
    assert non_spec == []  # the second launch serves without speculative decoding
    assert parser.tally.kinds["decode"] == 36


def test_a_request_line_is_never_a_decode_row(grammars, tmp_path):
    log = tmp_path / "r.log"
    text = (SAMPLES / "request_0.5.23.log").read_text()
    log.write_text(text)
    out = io.BytesIO()
    job = TableJob("jsonl", out)
    result = run([str(log)], grammars, job)
    rows = [json.loads(line) for line in out.getvalue().decode().splitlines()]
    assert {r["kind"] for r in rows} == {"decode"}
    assert job.records == len(rows) == 36
    assert result.tally.kinds["request"] == 31
    assert "rid" not in columns() and "verify_ct" not in columns()  # parse's columns are unchanged


def test_a_spec_key_quoted_in_a_prompt_of_a_non_spec_request_gives_an_empty_request(grammars):
    line = (
        "[2026-09-01 12:00:00] Finish: obj=GenerateReqInput(rid='q', text=\"what is 'spec_verify_ct'?\"), "
        "out={'meta_info': {'id': 'q', 'finish_reason': {'type': 'stop'}, 'completion_tokens': 8}}"
    )
    r = Parser(grammars, "t.log").parse_line(line)
    assert isinstance(r, RequestStats)
    assert (r.rid, r.completion_tokens, r.accept_len, r.verify_ct) == ("q", 8, None, None)


def test_a_finish_line_without_meta_info_is_unrecognized(grammars):
    parser = Parser(grammars, "t.log")
    assert (
        parser.parse_line("[2026-09-01 12:00:00] Finish: obj=GenerateReqInput(rid='q', text='spec_verify_ct')") is None
    )
    assert parser.tally.kinds["unrecognized"] == 1


def test_a_200_kb_finish_line_without_spec_fields_never_reaches_a_grammar(grammars):
    line = f"[2026-09-01 12:00:00] Finish: obj=GenerateReqInput(rid='q', text={'w ' * 100_000!r}), out={{}}\n"
    parser = Parser(grammars, "t.log")
    assert not parser._candidates(line.encode())
    assert parser.feed(line.encode()) == []
    assert parser.tally.kinds == {"other": 1}


def test_run_and_launch_values(grammars):
    finish = (
        "[2026-09-01 12:00:00] Finish: obj=GenerateReqInput(rid='a'), out={'meta_info': {'id': 'a', "
        "'completion_tokens': 30, 'spec_accept_length': 3.0, 'spec_verify_ct': 10}}\n"
    )
    records = Parser(grammars, "t.log").feed((finish + LAUNCH + finish).encode())
    before, _, after = records
    assert (before.run, before.spec_algorithm, before.spec_num_draft_tokens) == (0, None, None)
    assert (after.run, after.spec_algorithm, after.spec_num_draft_tokens) == (1, "EAGLE3", 4)


def test_request_accept_length_histogram_on_the_metrics_page(grammars):
    live = LiveStats()
    parser = Parser(grammars, "r.log")
    records = parser.feed((SAMPLES / "request_0.5.10.log").read_bytes())
    live.update("r.log", records, parser.tally)
    page = MetricsPage(live).render().decode()
    accept = sorted(r.accept_len for r in records if isinstance(r, RequestStats))
    assert (
        f'acceptmon_request_accept_length_count{{container="",file="r.log",namespace="",pod="",rank=""}} {float(len(accept))}'
        in page
    )
    below_3 = sum(1 for a in accept if a <= 3.0)
    assert (
        f'acceptmon_request_accept_length_bucket{{container="",file="r.log",le="3.0",namespace="",pod="",rank=""}} {float(below_3)}'
        in page
    )
    assert 'acceptmon_lines_total{container="",file="r.log",kind="request",namespace="",pod=""} 24.0' in page
    assert 'acceptmon_requests_total{container="",file="r.log",namespace="",pod="",rank=""} 24.0' in page


if __name__ == "__main__":
    from tests.update_goldens import golden_text

    os.chdir(ROOT)
    REQUEST_GOLDEN.mkdir(exist_ok=True)
    for stem in REQUEST_LOGS:
        (GOLDEN / f"{stem}.jsonl").write_bytes(golden_text(SAMPLES / f"{stem}.log"))
        (REQUEST_GOLDEN / f"{stem}.jsonl").write_bytes(request_rows(SAMPLES / f"{stem}.log"))
        print("wrote", stem)


@pytest.mark.parametrize("name", ["request_0.5.23", "request_0.5.10", "request_json_0.5.23"])
def test_parse_kind_request_writes_the_request_rows(name, monkeypatch):
    from tests.test_cli import acceptmon

    p = acceptmon("parse", f"sample_logs/{name}.log", "--kind", "request", "--format", "jsonl")
    assert p.returncode == 0, p.stderr
    assert p.stdout == (ROOT / "tests" / "golden" / "requests" / f"{name}.jsonl").read_bytes()
    rows = len(p.stdout.splitlines())
    assert f"; {rows} request rows; " in p.stderr.decode()
