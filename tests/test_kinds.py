"""Record kinds are open: a toy kind (a model registered in one place plus a grammar file) reaches every sink."""

from __future__ import annotations

import io
from typing import Literal

import pytest
from pydantic import Field

from acceptmon.errors import GrammarError
from acceptmon.exporter.metrics import MetricsPage
from acceptmon.live.state import LiveStats
from acceptmon.parse.kinds import KINDS, RecordKind, line_kinds, register, unregister
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import BaseRecord, DecodeStats
from acceptmon.parse.streams import STREAM_FIELDS
from acceptmon.parse.values import VALUE_KINDS, register_value_kind
from acceptmon.pipeline.batch import run
from acceptmon.sinks.table import TableJob, columns

TOY_GRAMMAR = """
name = "toy_stats"
record = "toy"
anchor = "Toy stats:"
starts_like = '''Toy stats:'''
pattern = '''Toy stats: (?P<wobble>\\d+(?:\\.\\d+)?)%, (?P<body>.*)$'''
body = "pairs"

[fields]
wobble = { kind = "toy_percent" }

[keys]
"#spins" = { kind = "int", field = "spins" }

[[samples]]
line = "[2026-01-02 03:04:05 TP1] Toy stats: 42.5%, #spins: 7"
expect = { wobble = 0.425, spins = 7, rank = "TP1" }
"""
LOG = (
    "[2026-01-02 03:04:00] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE', "
    "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)\n"
    "[2026-01-02 03:04:05 TP1] Toy stats: 42.5%, #spins: 7, colour: red\n"
    "[2026-01-02 03:04:06 TP0] Decode batch, #running-req: 3, #token: 10, token usage: 0.01, accept len: 2.50, "
    "gen throughput (token/s): 90.00, #queue-req: 0\n"
    "[2026-01-02 03:04:07 TP1] Toy stats: 7%, #spins: 8\n"
)


class ToyStats(BaseRecord):
    """A kind no server logs: proof that a new kind needs no sink changes."""

    kind: Literal["toy"] = "toy"
    run: int = 0
    wobble: float | None = None
    spins: int | None = None
    extra: dict[str, str] = Field(default_factory=dict)


@pytest.fixture
def toy(tmp_path):
    register(RecordKind("toy", ToyStats, table=True))
    register_value_kind("toy_percent", lambda text: round(float(text) / 100, 6))
    path = tmp_path / "toy.toml"
    path.write_text(TOY_GRAMMAR)
    log = tmp_path / "toy.log"
    log.write_text(LOG)
    yield load_grammars([path]), log
    unregister("toy")
    del VALUE_KINDS["toy_percent"]


def test_a_toy_kind_is_parsed_with_its_value_kind_and_run(toy):
    grammars, _ = toy
    records = Parser(grammars, "t.log").feed(LOG.encode())
    assert [r.kind for r in records] == ["launch", "toy", "decode", "toy"]
    first = records[1]
    assert isinstance(first, ToyStats)
    assert (first.wobble, first.spins, first.run, first.rank, first.extra) == (0.425, 7, 1, "TP1", {"colour": "red"})


def test_a_toy_kind_appears_in_parse_output_without_touching_a_sink(toy):
    grammars, log = toy
    assert columns()[-6:] == ("wobble", "spins", *STREAM_FIELDS)  # after every other kind's, before the stream's
    out = io.BytesIO()
    job = TableJob("csv", out)
    run([str(log)], grammars, job)
    rows = out.getvalue().decode().splitlines()
    assert job.records == 3
    cols = columns()
    toy_rows = [dict(zip(cols, r.split(","), strict=True)) for r in rows if ",toy," in r]
    assert [(r["line"], r["wobble"], r["spins"], r["accept_len"]) for r in toy_rows] == [
        ("2", "0.425", "7", ""),
        ("4", "0.07", "8", ""),
    ]


def test_a_toy_kind_is_counted_on_the_metrics_page(toy):
    grammars, _ = toy
    live = LiveStats()
    parser = Parser(grammars, "t.log")
    live.update("t.log", parser.feed(LOG.encode()), parser.tally)
    page = MetricsPage(live).render().decode()
    assert 'acceptmon_lines_total{container="",file="t.log",kind="toy",namespace="",pod=""} 2.0' in page
    assert 'acceptmon_lines_total{container="",file="t.log",kind="decode",namespace="",pod=""} 1.0' in page
    assert "toy" in line_kinds()


def test_an_unknown_record_or_value_kind_is_a_load_error(tmp_path):
    path = tmp_path / "toy.toml"
    path.write_text(TOY_GRAMMAR)
    with pytest.raises(GrammarError, match="unknown record kind 'toy'"):
        load_grammars([path])
    register(RecordKind("toy", ToyStats, table=True))
    try:
        with pytest.raises(GrammarError, match="unknown value kind 'toy_percent'"):
            load_grammars([path])
    finally:
        unregister("toy")


def test_a_kind_must_match_its_models_kind_literal():
    with pytest.raises(ValueError, match="defaults to 'toy'"):
        register(RecordKind("other", ToyStats))
    assert "other" not in KINDS


def test_decode_columns_are_the_models_fields():
    assert KINDS["decode"].columns == tuple(f for f in DecodeStats.model_fields if f != "extra")
    assert columns()[:6] == ("file", "line", "timestamp", "rank", "server", "kind")
