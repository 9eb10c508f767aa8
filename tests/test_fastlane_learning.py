"""Templates learned from the log: a line shape no grammar sample shows joins the fast lane once its row
is proven to be the general parser's, and everything unproven stays with the parser."""

from __future__ import annotations

import random
from collections import Counter

from acceptmon.parse.fast import lane as fastlane
from acceptmon.parse.fast import templates
from acceptmon.parse.fast.model import shape_of
from acceptmon.parse.parser import Parser
from tests.test_fastlane import GRAMMARS, _fast_lane_on_small_inputs, _run, _same  # noqa: F401

LAUNCH = (
    "[2025-03-01 10:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=1, "
    "speculative_algorithm='EAGLE3', speculative_num_steps=3, speculative_eagle_topk=1, "
    "speculative_num_draft_tokens=4)"
)


def _older_shape(i: int, r: random.Random) -> str:
    """SGLang's older decode line (``Decode batch.``, ``cuda graph`` before ``gen throughput``), in a key
    order no grammar sample shows: ``accept rate`` before ``accept len``."""
    return (
        f"[2025-03-01 10:{i // 60 % 60:02d}:{i % 60:02d} TP0] Decode batch. #running-req: {r.randint(1, 64)}, "
        f"#token: {r.randint(100, 90000)}, token usage: 0.{r.randint(10, 99)}, accept rate: {r.random():.2f}, "
        f"accept len: {r.uniform(1, 4):.2f}, cuda graph: True, gen throughput (token/s): {r.uniform(10, 900):.2f}, "
        f"#queue-req: {r.randint(0, 3)}"
    )


def _log(tmp_path, n: int = 3000, line=_older_shape):  # type: ignore[no-untyped-def]
    r = random.Random(7)
    path = tmp_path / "older.log"
    path.write_text("\n".join([LAUNCH, *(line(i, r) for i in range(n))]) + "\n")
    return path


def _slow_rows(monkeypatch, path, fmt="csv"):  # type: ignore[no-untyped-def]
    """Rows the general parser built while the lane read ``path``, and the lane's output."""
    built: list[object] = []
    feed = Parser.feed

    def spy(self, block):  # type: ignore[no-untyped-def]
        records = feed(self, block)
        built.extend(r for r in records if r.kind == "decode")
        return records

    monkeypatch.setattr(Parser, "feed", spy)
    out = _run(path, fmt, fast=True)
    monkeypatch.setattr(Parser, "feed", feed)
    return len(built), out


def test_a_shape_no_sample_shows_is_learned_from_the_log(tmp_path, monkeypatch):
    path = _log(tmp_path)
    text = path.read_text().splitlines()[1]
    shape, _ = templates.build_templates(GRAMMARS)
    assert shape is not None and templates.template_from_line(GRAMMARS, shape, text) is not None
    for fmt in ("csv", "jsonl"):
        _same(path, fmt)  # byte for byte the parser's rows and tallies
        slow, (rows, tally) = _slow_rows(monkeypatch, path, fmt)
        assert tally[3] == 3000 and rows.count(b"\n") == 3000 + (fmt == "csv")  # the CSV header
        first = fastlane.LEARN_PIECE // len(text) + 1
        assert 0 < slow <= first  # the parser read the first lines, the lane every other row


def test_without_learning_the_same_log_is_the_parsers_alone(tmp_path, monkeypatch):
    """The figure above is the learning's: with no tries, every row comes from the general parser."""
    path = _log(tmp_path, n=500)
    monkeypatch.setattr(fastlane, "LEARN_TRIES", 0)
    slow, (rows, _) = _slow_rows(monkeypatch, path)
    assert slow == 500 and rows.count(b"\n") == 501  # and the CSV header


def test_a_template_whose_row_is_not_the_parsers_is_not_kept(tmp_path, monkeypatch):
    """The proof, not the builder, decides: a template that matches the line but writes accept len and
    accept rate into each other's columns is dropped, and the parser keeps the lines."""
    path = _log(tmp_path, n=300)
    shape, _ = templates.build_templates(GRAMMARS)
    assert shape is not None
    lying = templates.template_from_line(GRAMMARS, shape, _older_shape(0, random.Random(1)))
    assert lying is not None
    f = lying.fields
    f["accept_len"], f["accept_rate"] = f["accept_rate"], f["accept_len"]
    kept: list[object] = []
    monkeypatch.setattr(fastlane, "template_from_line", lambda *a: lying)
    original = fastlane.FastLane._try_template

    def watch(self, *args):  # type: ignore[no-untyped-def]
        ok = original(self, *args)
        kept.append(ok)
        return ok

    monkeypatch.setattr(fastlane.FastLane, "_try_template", watch)
    _same(path, "csv")
    assert kept and not any(kept)
    slow, _ = _slow_rows(monkeypatch, path)
    assert slow == 300


def test_learning_is_bounded_by_shapes_tried(tmp_path, monkeypatch):
    """Each line shape (numbers masked) is tried at most SHAPE_TRIES times, at most LEARN_TRIES lines per lane."""
    tries: list[bytes] = []
    original = fastlane.FastLane._try_template

    def count(self, parser, raw, row, chunk):  # type: ignore[no-untyped-def]
        tries.append(raw)
        return original(self, parser, raw, row, chunk)

    monkeypatch.setattr(fastlane.FastLane, "_try_template", count)
    monkeypatch.setattr(fastlane, "LEARN_TRIES", 5)

    def many_shapes(i: int, r: random.Random) -> str:  # an unknown key of its own per line: a new shape each
        return _older_shape(i, r).replace("cuda graph", f"k{'x' * (i % 40)}")

    path = _log(tmp_path, n=400, line=many_shapes)
    _same(path, "csv")
    shapes = Counter(map(shape_of, tries))
    assert 0 < len(tries) <= 5 and max(shapes.values()) <= fastlane.SHAPE_TRIES
