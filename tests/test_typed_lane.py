"""The fast lane's records (``runs``, ``compare``, ``doctor``, the live state) against the general parser's.

A job that reads no record's ``extra`` gets the lane's stats lines as records (:mod:`acceptmon.parse.fast.typed`).
Each must equal the general parser's record of its line, field by field and type by type, but for ``extra``;
the tallies must be the parser's; and the commands' outputs must be byte for byte what they are without the
lane. Inputs: every sample log, generated SGLang and vLLM logs (every value spelling the lane tests use, unknown
keys, prefixes, New Year), sequentially and on small parallel ranges.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acceptmon.measure.aggregate import made
from acceptmon.parse.fast import lane as fastlane
from acceptmon.parse.fast import native, rows, typed
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import DecodeStats, Record
from acceptmon.parse.unmade import Unmade
from acceptmon.pipeline import batch, lanes
from tests.conftest import SAMPLES
from tests.test_fastlane import GRAMMARS, LINE, LOGS, _run
from tests.test_fastlane_vllm import _log as vllm_log

ALL = frozenset(KINDS)


class Collect:
    """Every record of the kinds wanted, in order; through the lane's records when ``from_lane``."""

    def __init__(self, from_lane: bool, kinds: frozenset[str] = ALL) -> None:
        self.from_lane, self.records_wanted = from_lane, kinds
        self.got: list[Record] = []

    def chunk(self, records: list[Record]) -> list[Record]:
        return records

    def collect(self, part: list[Record]) -> None:
        self.got.extend(part)


@pytest.fixture(autouse=True)
def _lane_on_small_inputs(monkeypatch):
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(fastlane, "LEARN_PIECE", 1 << 10)
    monkeypatch.delenv("ACCEPTMON_PURE_PYTHON", raising=False)
    assert native.load() is not None


def _read(path: Path, from_lane: bool, jobs: int = 1, kinds: frozenset[str] = ALL) -> tuple[list[Record], tuple]:
    job = Collect(from_lane, kinds)
    t = batch.run([str(path)], GRAMMARS, job, jobs=jobs).tally
    return job.got, (dict(t.kinds), t.accept_noise, t.unrecognized, t.lines)


def _built(monkeypatch) -> list[Record]:
    """The records the general parser builds from now on."""
    built: list[Record] = []
    feed = Parser.feed

    def spy(self, block):
        records = feed(self, block)
        built.extend(records)
        return records

    monkeypatch.setattr(Parser, "feed", spy)
    return built


def _same(path: Path, jobs: int = 1, kinds: frozenset[str] = ALL) -> list[Record]:
    want, want_tally = _read(path, False, kinds=kinds)
    got, tally = _read(path, True, jobs, kinds)
    assert tally == want_tally
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert typed.same_record(typed.without_extra(a), typed.without_extra(b)), (a, b)
    return want


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_every_sample_log(log):
    assert _same(log)


class CollectUnmade(Collect):
    """Every record, through the lane's rows handed on unmade (as ``runs`` takes them), made here."""

    takes_unmade = ALL  # every kind as tuples: one plan's part as columns, several plans' made from them

    def __init__(self) -> None:
        super().__init__(True, ALL)
        self.unmade = 0

    def chunk(self, records: list[Any]) -> list[Record]:
        self.unmade += sum(len(r) for r in records if type(r) is Unmade)
        return made(records)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_every_sample_log_through_rows_handed_on_unmade(log):
    """The lane's rows as records not made yet (tuples of their varying values, from plans of tuples) make the
    general parser's records, in order."""
    want, want_tally = _read(log, False)
    job = CollectUnmade()
    tally = batch.run([str(log)], GRAMMARS, job, jobs=1).tally
    UNMADE[log.stem] = job.unmade
    assert (dict(tally.kinds), tally.accept_noise, tally.unrecognized, tally.lines) == want_tally
    assert len(job.got) == len(want)
    for a, b in zip(job.got, want, strict=True):
        assert typed.same_record(typed.without_extra(a), typed.without_extra(b)), (a, b)


UNMADE: dict[str, int] = {}


def test_the_lane_handed_rows_on_unmade():
    """The test above had rows handed on unmade: the SGLang logs' decode lines (a part of rows of several plans, a vLLM
    log's spec and throughput lines, is made into records at once)."""
    if len(UNMADE) < len(LOGS):  # run apart (pytest -n): read them here
        for log in LOGS:
            test_every_sample_log_through_rows_handed_on_unmade(log)
    assert sum(UNMADE.values()) > 300 and sum(n > 0 for n in UNMADE.values()) > len(LOGS) // 2, UNMADE


def test_the_lane_makes_the_records_it_writes_rows_for(monkeypatch):
    """Not vacuous: on every sample log the general parser builds the same stats records whether the lane writes
    table rows or records (the lane takes the same lines), and on the SGLang and vLLM logs few of them."""
    stats = ("decode", "spec", "throughput")
    built = _built(monkeypatch)
    total = slow = 0
    for log in LOGS:
        built.clear()
        _run(log, "csv", fast=True)
        rows = sorted(r.line for r in built if r.kind in stats)
        built.clear()
        got, _ = _read(log, True)
        assert sorted(r.line for r in built if r.kind in stats) == rows, log.name
        if not log.name.startswith("llamacpp"):  # llama.cpp's lines are the general parser's
            total += sum(1 for r in got if r.kind in stats)
            slow += len(rows)
    assert total > 1200 and slow < total // 8


def test_sample_logs_on_small_parallel_ranges(monkeypatch, tmp_path):
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 8 << 10)
    monkeypatch.setattr(batch, "FAST_BLOCK", 3 << 10)
    log = tmp_path / "all.log"
    log.write_bytes(b"".join(p.read_bytes() for p in LOGS if not p.name.startswith("vllm_")))
    assert len(_same(log, jobs=2)) > 1000


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_vllm_logs(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(GRAMMARS, "year_for", lambda file, stamp: 2025)
    path = vllm_log(tmp_path, seed)
    want = _same(path)
    built = _built(monkeypatch)
    _read(path, True)
    stats = [r for r in want if r.kind in ("spec", "throughput")]
    assert len(stats) > 1000 and sum(1 for r in built if r.kind in ("spec", "throughput")) < len(stats) // 4


def test_a_file_whose_path_names_its_pod(tmp_path, monkeypatch):
    """A Kubernetes log's records carry its namespace, pod and container, the lane's as the parser's."""
    path = tmp_path / "var/log/pods/infer_sglang-0_0a1b2c/sglang/0.log"
    path.parent.mkdir(parents=True)
    path.write_bytes((SAMPLES / "seed_eagle3_moe.log").read_bytes())
    want = _same(path)
    assert {(r.namespace, r.pod, r.container) for r in want} == {("infer", "sglang-0", "sglang")}
    built = _built(monkeypatch)
    got, _ = _read(path, True)
    assert sum(1 for r in built if r.kind == "decode") < sum(1 for r in got if r.kind == "decode") // 4


def test_unknown_keys_are_left_out_and_only_they(tmp_path):
    """SGLang's newest decode line ends in keys no grammar knows: the lane's record has every other field."""
    line = (
        "[2026-03-01 12:00:0{s}.{ms:03d} TP0] Decode batch [{i}], #running-req: {r}, #token: 4000, token usage: 0.02, "
        "accept len: 3.0{s}, accept rate: 0.76, cap len: 3.40, cuda graph: True, gen throughput (token/s): 70{s}.12, "
        "#queue-req: 0, fwd occupancy: 91.20%, fwd+idle occupancy: 99.80%\n"
    )
    path = tmp_path / "newest.log"
    head = (SAMPLES / "seed_eagle3_moe.log").read_text().splitlines(keepends=True)[:3]
    path.write_text("".join(head) + "".join(line.format(s=i % 10, ms=i % 999 + 1, i=i, r=i % 7) for i in range(400)))
    want = _same(path)
    decode = [r for r in want if isinstance(r, DecodeStats)]
    assert len(decode) == 400 and decode[5].extra == {"fwd occupancy": "91.20%", "fwd+idle occupancy": "99.80%"}
    got = [r for r in _read(path, True)[0] if isinstance(r, DecodeStats)]
    assert got[5].extra == {} and got[5].accept_len == 3.05 and got[5].cap_len == 3.4 and got[5].iteration == 5


def test_a_job_that_reads_extra_gets_the_parsers_records(tmp_path):
    """Without ``from_lane`` a job's records are the general parser's, ``extra`` and all."""
    got, _ = _read(SAMPLES / "seed_eagle3_moe.log", False)
    assert got == _read(SAMPLES / "seed_eagle3_moe.log", False)[0]
    assert lanes.job_lane(GRAMMARS, ALL) is not None  # the lane is there: the job chose the parser


def test_same_record_tells_types_apart():
    a = DecodeStats(accept_len=3.0, running_req=1)
    assert typed.same_record(a, DecodeStats(accept_len=3.0, running_req=1))
    assert a == DecodeStats(accept_len=3, running_req=1)  # what == alone would let pass
    assert not typed.same_record(a, DecodeStats.model_construct(**{**a.__dict__, "accept_len": 3}))
    assert not typed.same_record(a, DecodeStats(accept_len=3.0, running_req=1, extra={"x": "1"}))


def test_a_learned_template_whose_record_differs_is_not_learned(monkeypatch, tmp_path):
    """The proof of a template learned from the log is its record: where the lane's row reads back as another
    record, the lines stay the general parser's (here a shape no grammar sample shows: accept rate first)."""
    lines = [
        f"[2026-03-01 12:00:{i % 60:02d} TP0] Decode batch. #running-req: {i % 9}, #token: 4000, token usage: 0.02, "
        f"accept rate: 0.7{i % 10}, accept len: 3.{i % 10}1, cuda graph: True, gen throughput (token/s): 70.{i % 10}2, "
        "#queue-req: 0"
        for i in range(300)
    ]
    path = tmp_path / "learned.log"
    path.write_text("\n".join(lines) + "\n")
    built = _built(monkeypatch)
    assert len(_same(path)) == 300
    lane_built = sum(1 for r in built if r.kind == "decode") - 300  # the first read is the parser's alone
    assert lane_built < 30  # learned: the lane made the rest
    monkeypatch.setattr(typed, "same_record", lambda a, b: False)
    built.clear()
    got, _ = _read(path, True)
    assert len(got) == 300 and sum(1 for r in built if r.kind == "decode") == 300


def test_every_grammar_sample_line(tmp_path):
    lines = [s.line for g in GRAMMARS.all for s in g.spec.samples]
    lines += [c for g in GRAMMARS.all for c in g.spec.counter_samples]
    log = tmp_path / "samples.log"
    log.write_text("\n".join(lines + lines[::-1]) + "\n")
    assert len(_same(log)) > 50


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, min_size=5, max_size=40), crlf=st.booleans())
def test_generated_logs(tmp_path, lines, crlf):
    """Sample lines taken apart and put together again: key orders, number spellings, stamps, ranks, unknown keys."""
    end = "\r\n" if crlf else "\n"
    log = tmp_path / f"gen-{random.random()}.log"
    log.write_bytes((end.join(lines) + end).encode("utf-8", "surrogatepass"))
    _same(log)


def _acceptmon(*args: str, pure: bool) -> bytes:
    env = (
        {**os.environ, "ACCEPTMON_PURE_PYTHON": "1"}
        if pure
        else {k: v for k, v in os.environ.items() if k != "ACCEPTMON_PURE_PYTHON"}
    )
    done = subprocess.run([sys.executable, "-m", "acceptmon", *args], capture_output=True, env=env, check=True)
    return done.stdout


def test_runs_compare_and_doctor_print_the_same_through_the_lane(tmp_path):
    """On inputs large enough for the lane (repeated sample logs, over its least input of 4 MiB; over the 8 MiB of
    parallel reading for ``-j 2``, where vLLM's parts are aggregated apart from their first line naming an engine)."""

    def repeated(name: str, mib: int) -> str:
        text = (SAMPLES / name).read_bytes()
        path = tmp_path / f"{mib}-{name}"
        path.write_bytes(text * ((mib << 20) // len(text) + 1))
        return str(path)

    seed, vllm = repeated("seed_eagle3_moe.log", 4), repeated("vllm_v1_0.10.2_dp.log", 4)
    for args in (
        ("runs", seed, vllm, "--format", "json"),
        ("doctor", seed, "--format", "json"),
        ("doctor", vllm),
        ("compare", f"{seed}#1", f"{seed}#2", "--format", "json"),
        ("runs", seed, "--format", "csv"),
        ("runs", repeated("seed_eagle3_moe.log", 9), "--format", "json", "-j", "2"),
        ("runs", repeated("vllm_v1_0.10.2_dp.log", 9), repeated("vllm_v1_0.8.5.log", 9), "--format", "json", "-j", "2"),
    ):
        assert _acceptmon(*args, pure=False) == _acceptmon(*args, pure=True), args
    summaries = json.loads(_acceptmon("runs", seed, "--format", "json", pure=False))
    assert sum(s["batches"] for s in summaries) > 10_000


def test_the_records_of_a_part_share_its_file_name_and_a_fields_set_but_not_extra(monkeypatch):
    """One string for the file's name (a worker's pickle sends it once), one fields set of every field; each its
    own ``extra`` (a plan's rows hold the values that vary, the rest is the plan's)."""
    lane = lanes.job_lane(GRAMMARS, ALL)
    assert lane is not None
    parser = Parser(GRAMMARS, "a.log")
    lines = (SAMPLES / "seed_eagle3_moe.log").read_bytes().splitlines(keepends=True)
    launch = next(i for i, x in enumerate(lines) if b"server_args=" in x)
    decode = [x for x in lines[launch:] if b"Decode batch" in x][:2]
    reference = Parser(GRAMMARS, "a.log")
    assert lane.records(parser, b"".join(lines[: launch + 1])) == reference.feed(b"".join(lines[: launch + 1]))
    built = _built(monkeypatch)
    got = lane.records(parser, b"".join(decode))
    assert built == []  # the lane's records, not the parser's
    want = reference.feed(b"".join(decode))
    assert len(got) == 2 and [typed.without_extra(r) for r in want] == got
    assert got[0].file == "a.log" and got[0].file is got[1].file
    assert got[0].model_fields_set is got[1].model_fields_set == set(DecodeStats.model_fields)
    assert got[0].extra == {} and got[0].extra is not got[1].extra
    assert list(got[0].__dict__) == list(DecodeStats.model_fields)  # a record's __dict__ is in the model's order


def test_blocks_are_read_with_the_collector_off_and_young_garbage_collected_after_each(monkeypatch):
    """The cyclic collector is off while a file's blocks are read (collections walking a block's records were
    18 % of ``runs``), back on after; a cycle a block leaves behind is gone by the next block."""
    import gc
    import weakref

    from acceptmon.pipeline import inplace

    class Cycle:
        pass

    states: list[bool] = []
    left: list[weakref.ref[Cycle]] = []

    class Watch(Collect):
        def chunk(self, records: list[Record]) -> list[Record]:
            states.append(gc.isenabled())
            if left:
                assert left[-1]() is None, "the previous block's cycle was not collected"
            c = Cycle()
            c.me = c  # type: ignore[attr-defined]
            left.append(weakref.ref(c))
            return records

    monkeypatch.setattr(batch, "FAST_BLOCK", 4 << 10)
    monkeypatch.setattr(inplace, "iter_blocks", _small_blocks(inplace.iter_blocks))
    assert gc.isenabled()
    batch.run([str(SAMPLES / "seed_eagle3_moe.log")], GRAMMARS, Watch(True))
    assert len(states) > 3 and not any(states)
    assert gc.isenabled()
    gc.disable()
    try:
        with inplace.collected_per_block():
            pass
        assert not gc.isenabled()  # a caller's choice is left as it was
    finally:
        gc.enable()


def test_a_blocks_parts_are_freed_before_its_collection(monkeypatch):
    """Once the job has collected a block's parts, they are gone before the young collection that follows: it
    would otherwise walk every row they hold (a second of ``runs -j 1`` on 256 MiB of vLLM v0)."""
    import weakref

    from acceptmon.pipeline import inplace

    class Part:
        pass

    made: list[weakref.ref[Part]] = []
    alive: list[int] = []

    class Parts(Collect):
        def chunk(self, records: list[Record]) -> Any:
            part = Part()
            made.append(weakref.ref(part))
            return part

        def collect(self, part: Any) -> None:
            pass

    def young() -> None:
        alive.append(sum(ref() is not None for ref in made))

    monkeypatch.setattr(batch, "FAST_BLOCK", 4 << 10)
    monkeypatch.setattr(inplace, "iter_blocks", _small_blocks(inplace.iter_blocks))
    monkeypatch.setattr(inplace, "_collect_young", young)
    batch.run([str(SAMPLES / "seed_eagle3_moe.log")], GRAMMARS, Parts(True))
    assert len(made) > 3 and len(alive) > 3 and alive == [0] * len(alive)


def _small_blocks(iter_blocks):
    def small(stream, **kw):
        kw["block_size"] = 4 << 10
        return iter_blocks(stream, **kw)

    return small


def test_a_typed_field_is_built_in_c_only_where_its_json_cell_reads_back_exactly():
    """The compiled matcher alone says which typed fields it builds (``Program.plan_ok``, read as a scan reads
    plans): a plan with any other field is False (``native.compiled``), its template's rows the parser's."""
    lane = lanes.job_lane(GRAMMARS, ALL)
    assert lane is not None
    parser = Parser(GRAMMARS, "a.log")
    lines = (SAMPLES / "seed_eagle3_moe.log").read_bytes().splitlines(keepends=True)
    lane.records(parser, b"".join(lines[: 1 + next(i for i, x in enumerate(lines) if b"server_args=" in x)]))
    program, ordered = lane.lane.native, lane.lane._plans(parser)[2]
    typed_plans = [(k, p) for k, p in enumerate(ordered) if isinstance(p, tuple)]
    assert typed_plans and all(program.plan_ok(k, p) for k, p in typed_plans)
    k, p = typed_plans[0]
    refused = [(b"7",), (b'"', b"\\", 1, b'"'), (b'"', b"\x01", b'"'), (b'"',), (1, b'"'), (b'"', rows.JSON_RANK, b'"')]
    refused += [(rows.SLOT + 200,), (rows.BOOL_SLOT + 200,)]
    for field in refused:
        bad = ((field, *p[0][1:]), *p[1:])
        assert not program.plan_ok(k, bad), field
        assert native.compiled(program, k, _Refused(bad)) is False
    assert native.compiled(program, k, _Refused(p)) == p


class _Refused(rows.Plan):
    """A plan whose compiled form is given (to ask the compiled matcher about it)."""

    def __init__(self, compiled: tuple) -> None:  # no template: only compiled() is asked
        self._compiled = compiled

    def compiled(self) -> tuple:
        return self._compiled


class KeepUnmade(CollectUnmade):
    """:class:`CollectUnmade`, keeping each part of records not made yet as the lane handed it."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[Unmade] = []

    def chunk(self, records: list[Any]) -> list[Record]:
        self.parts += [r for r in records if type(r) is Unmade]
        return super().chunk(records)


def _decode_lines(n: int, length: Any = None, rank: Any = None) -> list[str]:
    """SGLang decode lines; ``length(i)``, ``rank(i)``: the i th line's accept len and rank, as spelled."""
    return [
        f"[2026-03-01 00:00:{i % 60:02d}.{i:03d}{'' if rank is None else rank(i)}] Decode batch. #running-req: {i % 7},"
        f" #token: {1000 + i}, token usage: 0.{i % 90 + 10}, accept len: {2.5 if length is None else length(i)},"
        f" accept rate: 0.5{i % 10}, cuda graph: True, gen throughput (token/s): {100 + i}.25, #queue-req: 0"
        for i in range(n)
    ]


def _unmade_parts(tmp_path: Path, lines: list[str]) -> list[Unmade]:
    """The parts of records not made yet the lane hands on for ``lines`` (checked against the general parser's
    records, field by field and type by type)."""
    log = tmp_path / f"u-{random.random()}.log"
    log.write_text("\n".join(lines) + "\n")
    want, want_tally = _read(log, False)
    job = KeepUnmade()
    tally = batch.run([str(log)], GRAMMARS, job, jobs=1).tally
    assert (dict(tally.kinds), tally.accept_noise, tally.unrecognized, tally.lines) == want_tally
    assert len(job.got) == len(want)
    for a, b in zip(job.got, want, strict=True):
        assert typed.same_record(typed.without_extra(a), typed.without_extra(b)), (a, b)
    return job.parts


def test_the_lane_keeps_a_column_of_numbers_as_machine_values_while_they_are_of_one_type(tmp_path):
    """A columnar scan keeps floats as doubles and ints as 64-bit ints (an ``array``), which ``column`` reads as the
    list of the values the records hold; a text the same as the row before's is that same object."""
    parts = _unmade_parts(tmp_path, _decode_lines(300, rank=lambda i: " TP0"))
    assert sum(p.size for p in parts) > 250
    for p in parts:
        raw = p.columns
        assert (raw["accept_len"].typecode, raw["line"].typecode, raw["num_tokens"].typecode) == ("d", "q", "q")
        lines = p.column("line")
        assert type(lines) is list and lines == list(range(lines[0], lines[0] + p.size))
        assert set(map(type, p.column("accept_len"))) == {float} and set(p.column("accept_len")) == {2.5}
        ranks = p.column("rank")
        assert ranks == ["TP0"] * p.size and all(r is ranks[0] for r in ranks)


def test_a_rank_missing_on_some_lines_is_none_in_its_column(tmp_path):
    """Lines with and without a rank, in turn: the rank column is None where a line has none (a list, not the same
    object as a rank before), and each made record is the general parser's."""
    parts = _unmade_parts(tmp_path, _decode_lines(300, rank=lambda i: "" if i % 3 else " TP1"))
    ranks = [r for p in parts for r in p.column("rank")]
    assert len(ranks) > 250 and ranks.count(None) == 2 * ranks.count("TP1")
    assert all(type(p.columns["accept_len"]) is array for p in parts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, min_size=5, max_size=40))
def test_generated_logs_through_rows_handed_on_unmade(tmp_path, lines):
    """Sample lines taken apart and put together again, their rows kept as columns: each made record is the general
    parser's, type for type."""
    _unmade_parts(tmp_path, lines)
