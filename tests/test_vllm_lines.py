"""Every vLLM line shape (tests/data/vllm_lines.jsonl: 0.5 - 0.33, read from vLLM's format strings) and its pinned values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acceptmon.parse.parser import Parser, ParseState
from acceptmon.parse.records import Record

LINES = [json.loads(line) for line in (Path(__file__).parent / "data" / "vllm_lines.jsonl").read_text().splitlines()]
SPEC = ("engine", "accepted_tokens", "drafted_tokens", "emitted_tokens", "system_efficiency", "num_spec_tokens",
        "cumulative")  # fmt: skip
THROUGHPUT = ("engine", "prompt_throughput", "gen_throughput", "running_req", "queue_req", "swapped_req",
              "token_usage", "prefix_cache_hit_rate")  # fmt: skip
LAUNCH = {"version": "version", "spec_method": "spec_algorithm", "spec_draft_model": "spec_draft_model_path",
          "num_speculative_tokens": "spec_num_steps", "model": "model_path", "tp_size": "tp_size", "dp_size": "dp_size"}  # fmt: skip


def _kind(case: dict[str, Any]) -> str:
    # v0's separate prefix-cache line is a throughput row carrying only the hit rate
    return "throughput" if "Prefix cache hit rate: GPU" in case["line"] else case["kind"]


def _parse(grammars, line: str) -> tuple[str, Record | None]:
    parser = Parser(grammars, "v.log", ParseState(year=2025, month=1))
    record = parser.parse_line(line)
    (kind,) = [k for k, n in parser.tally.kinds.items() if n]
    return kind, record


@pytest.mark.parametrize("case", LINES, ids=[f"{i}-{c['kind']}-{c['version']}" for i, c in enumerate(LINES)])
def test_line_shape(grammars, case):
    kind, record = _parse(grammars, case["line"])
    assert kind == _kind(case)
    want = case["fields"]
    if kind == "other":
        assert record is None
        return
    assert record is not None
    stamp = record.timestamp.strftime("%m-%d %H:%M:%S") if record.timestamp else None
    assert stamp == want["timestamp"]
    assert record.server == "vllm"
    if kind == "spec":
        _check_spec(record, want)
    elif kind == "throughput":
        for name in THROUGHPUT:
            if name in want:
                assert getattr(record, name) == pytest.approx(want[name]), name
    else:
        config = record.config  # type: ignore[attr-defined]
        for theirs, ours in LAUNCH.items():
            assert getattr(config, ours) == want[theirs], theirs


def _check_spec(record: Any, want: dict[str, Any]) -> None:
    for name in SPEC:
        assert getattr(record, name) == want[name], name
    for name in ("accept_rate", "accept_len"):
        assert getattr(record, name) == pytest.approx(want[name], abs=1e-6), name
    assert record.draft_accept_rate == record.accept_rate
    assert record.position_accept_rates == want["position_accept_rates"]
    source = "logged" if want["accept_len_logged"] else ("derived" if want["accept_len"] is not None else None)
    assert record.accept_len_source == source
    if record.accept_rate is not None:
        assert 0.0 <= record.accept_rate <= 1.0


def test_every_kind_and_release_family_is_covered():
    kinds = {_kind(c) for c in LINES}
    assert kinds == {"spec", "throughput", "launch", "other"}
    assert len(LINES) >= 46
