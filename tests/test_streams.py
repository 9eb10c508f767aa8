"""Sources: a line's stream prefix names its process, whose runs are its own.

The logs are built from sample lines as the tools write them (``kubectl logs --prefix``, stern,
docker compose, a CRI file under ``/var/log/pods``): two pods interleaved, one speculative (accept
len ~2.8) and one without speculation, each with its own launch line. Each pod's lines keep their own
run (runs are numbered per file in launch order), in ``parse``'s columns, in ``runs --format json``,
with ``-j 2`` as with ``-j 1``, through the fast lane as through the general parser, and across a
state file. Prefixes are recognised conservatively (a message that starts with ``[`` or two words
is no prefix), and in linear time.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import time
from pathlib import Path

import pytest

from acceptmon.cli.args import YearSource
from acceptmon.inputs.files import OVERSIZED, iter_blocks
from acceptmon.parse import prescan, streams
from acceptmon.parse.checks import probes
from acceptmon.parse.fast import lane, native
from acceptmon.parse.fast.careful import careful_segment
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser, ParseState
from acceptmon.parse.state import EMPTY, StreamState
from acceptmon.parse.streams import NONE, STREAM_FIELDS, Origin, path_origin, split
from acceptmon.pipeline import batch, statefile
from acceptmon.sinks.table import TableJob
from tests.conftest import SAMPLES
from tests.test_cli import acceptmon

POD_A, POD_B, CTR = "sglang-eagle3-6d8f9c7b5d-x2k9p", "sglang-baseline-7b4c9d6f8-q8rmz", "sglang"
SOURCE_A, SOURCE_B = f"pod/{POD_A}/{CTR}", f"pod/{POD_B}/{CTR}"


def _lines(name: str) -> list[str]:
    return (SAMPLES / name).read_text().splitlines()


def _speculative() -> list[str]:
    """Run 2 of the EAGLE3 sample: its launch line, then accept len 2.76-2.92."""
    lines = _lines("seed_eagle3_moe.log")
    launches = [i for i, line in enumerate(lines) if "server_args=" in line]
    return lines[launches[1] : launches[2]]


def _no_spec() -> list[str]:
    return _lines("baseline_nospec.log")


def _launch_and_decode() -> tuple[str, str]:
    spec = _speculative()
    return spec[0], next(line for line in spec if "Decode batch" in line)


def _interleaved(a: list[str], b: list[str], wrap_a: str, wrap_b: str) -> str:
    """Pod A's lines and pod B's, one each in turn (``kubectl logs -f``: whole lines, any order)."""
    out = []
    for x, y in itertools.zip_longest(a, b):
        out += [wrap_a.format(x)] if x is not None else []
        out += [wrap_b.format(y)] if y is not None else []
    return "\n".join(out) + "\n"


def _kubectl() -> str:
    return _interleaved(_speculative(), _no_spec(), f"[pod/{POD_A}/{CTR}] {{}}", f"[pod/{POD_B}/{CTR}] {{}}")


def _rows(text: str, tmp_path: Path, *args: str) -> list[dict[str, str]]:
    log = tmp_path / "pods.log"
    log.write_text(text)
    p = acceptmon("parse", log, *args)
    assert p.returncode == 0, p.stderr
    return list(csv.DictReader(io.StringIO(p.stdout.decode())))


def _runs(path: Path) -> list[dict[str, object]]:
    p = acceptmon("runs", "--format", "json", path)
    assert p.returncode == 0, p.stderr
    runs: list[dict[str, object]] = json.loads(p.stdout)
    return runs


def test_two_pods_keep_their_own_runs_in_parse_columns(tmp_path):
    rows = _rows(_kubectl(), tmp_path)
    assert list(rows[0])[-4:] == list(STREAM_FIELDS)  # the last columns; the others keep their places
    by_pod: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_pod.setdefault(r["pod"], []).append(r)
    a, b = by_pod[POD_A], by_pod[POD_B]
    assert len(a) == 96 and len(b) == 120 and set(by_pod) == {POD_A, POD_B}
    assert {(r["source"], r["namespace"], r["container"], r["run"], r["spec_algorithm"]) for r in a} == {
        (SOURCE_A, "", CTR, "1", "EAGLE3")  # pod A launched first: run 1, before pod B's launch and after it
    }
    assert {(r["source"], r["container"], r["run"], r["spec_algorithm"]) for r in b} == {(SOURCE_B, CTR, "2", "")}
    assert 2.7 < sum(float(r["accept_len"]) for r in a) / len(a) < 2.9
    assert {r["accept_len"] for r in b} == {""}
    b_launch = next(i for i, line in enumerate(_kubectl().splitlines(), 1) if POD_B in line and "server_args" in line)
    assert int(a[0]["line"]) > b_launch  # pod A's lines after pod B's launch are still pod A's run


def test_two_pods_are_two_runs_in_runs_json(tmp_path):
    log = tmp_path / "pods.log"
    log.write_text(_kubectl())
    runs = _runs(log)
    got = [(r["run"], r["source"], r["pod"], r["container"], r["spec_algorithm"], r["batches"]) for r in runs]
    assert got == [(1, SOURCE_A, POD_A, CTR, "EAGLE3", 96), (2, SOURCE_B, POD_B, CTR, None, 120)]
    assert 2.8 <= runs[0]["accept_len_mean"] <= 2.9  # type: ignore[operator]
    assert runs[1]["accept_len_mean"] is None


def test_docker_compose_services_are_sources(tmp_path):
    names = ["sglang-eagle-1", "sglang-base-1"]
    width = max(map(len, names)) + 1  # docker compose v2: the longest name gets two spaces before '|'
    text = "Attaching to sglang-eagle-1, sglang-base-1\n" + _interleaved(
        _speculative(), _no_spec(), f"{names[0]:<{width}} | {{}}", f"{names[1]:<{width}} | {{}}"
    )
    text += "\r\x1b[Ksglang-base-1 exited with code 0\n"
    log = tmp_path / "compose.log"
    log.write_text(text)
    runs = _runs(log)
    assert [(r["run"], r["source"], r["pod"], r["container"], r["batches"]) for r in runs] == [
        (1, "sglang-eagle-1", "", "sglang-eagle-1", 96),
        (2, "sglang-base-1", "", "sglang-base-1", 120),
    ]


def test_compose_v1_and_its_timestamps(parser):
    launch, decode = _launch_and_decode()
    v1 = parser.parse_line("sglang-eagle_1  | " + launch)
    stamped = parser.parse_line("sglang-eagle-1  | 2026-02-26T13:50:00.412305121Z " + decode)
    assert v1 is not None and (v1.kind, v1.source, v1.container, v1.run) == (
        "launch",
        "sglang-eagle_1",
        "sglang-eagle_1",
        1,
    )
    assert stamped is not None and (stamped.kind, stamped.source, stamped.run) == ("decode", "sglang-eagle-1", 0)


def test_stern_pods_are_sources(tmp_path):
    events = f"+ {POD_A} › {CTR}\n+ {POD_B} › {CTR}\n"  # stern's stderr, with 2>&1
    text = events + _interleaved(_speculative(), _no_spec(), f"{POD_A} {CTR} {{}}", f"{POD_B} {CTR} {{}}")
    log = tmp_path / "stern.log"
    log.write_text(text)
    runs = _runs(log)
    assert [(r["run"], r["source"], r["pod"], r["container"], r["batches"]) for r in runs] == [
        (1, f"{POD_A} {CTR}", POD_A, CTR, 96),
        (2, f"{POD_B} {CTR}", POD_B, CTR, 120),
    ]


def test_stern_all_namespaces_in_colour_with_timestamps(parser):
    def coloured(code: int, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m"

    head = f"{coloured(96, 'inference')} {coloured(96, POD_A)} {coloured(36, CTR)} 2026-02-26T22:50:40.5+09:00 "
    launch, decode = (parser.parse_line(head + line) for line in _launch_and_decode())
    assert launch is not None and decode is not None and decode.kind == "decode"
    assert (decode.source, decode.namespace, decode.pod, decode.container, decode.run) == (
        f"inference {POD_A} {CTR}",
        "inference",
        POD_A,
        CTR,
        1,
    )
    assert decode.spec_algorithm == "EAGLE3"  # type: ignore[attr-defined]


def test_a_cri_file_names_its_pod_by_its_path(tmp_path):
    spec = _speculative()
    folder = tmp_path / "var" / "log" / "pods" / "inference_sglang-0_0f1e2d3c-aaaa-bbbb-cccc-1234567890ab" / CTR
    folder.mkdir(parents=True)
    lines = [f"2026-02-26T13:5{i % 10}:00.{i}Z stderr F {line}" for i, line in enumerate(spec[:60])]
    lines.append("2026-02-26T13:59:00.1Z stderr P " + spec[5][:40])  # a partial line: left to a later change
    (folder / "0.log").write_text("\n".join(lines) + "\n")
    link = tmp_path / "var" / "log" / "containers" / f"sglang-0_inference_{CTR}-{'ab' * 32}.log"
    link.parent.mkdir(parents=True)
    link.symlink_to(folder / "0.log")
    for path in (folder / "0.log", link):
        rows = list(csv.DictReader(io.StringIO(acceptmon("parse", path).stdout.decode())))
        decodes = [line for line in spec[:60] if "Decode batch" in line]
        assert len(rows) == len(decodes) > 10
        assert {(r["source"], r["namespace"], r["pod"], r["container"], r["run"]) for r in rows} == {
            ("", "inference", "sglang-0", CTR, "1")
        }
        assert [float(r["accept_len"]) for r in rows] == [
            float(re.findall(r"accept len: ([\d.]+)", d)[0]) for d in decodes
        ]


@pytest.mark.parametrize(
    ("path", "origin"),
    [
        ("/var/log/pods/ns_pod-0_0f1e2d3c-aaaa/sglang/0.log", Origin("", "ns", "pod-0", "sglang")),
        ("var/log/pods/ns_p_u/c-1/12.log.20260901-120000.gz", Origin("", "ns", "p", "c-1")),  # rotated
        (f"/var/log/containers/pod-0_ns_sglang-{'0a' * 32}.log", Origin("", "ns", "pod-0", "sglang")),  # pod first
        ("/var/log/pods/ns_pod_uid/sglang/0.txt", NONE),
        ("/srv/logs/server.log", NONE),
        ("-", NONE),
    ],
)
def test_path_origin(path, origin):
    assert path_origin(path) == origin


@pytest.mark.parametrize(
    ("line", "source", "rest"),
    [
        (f"[pod/{POD_A}/{CTR}] [2026-02-26 13:51:10 TP0] Decode", SOURCE_A, "[2026-02-26 13:51:10 TP0] Decode"),
        ("[pod/p-0/c] 2026-02-26T13:50:00.412305121Z [2026-02-26 13:50:00] x", "pod/p-0/c", "[2026-02-26 13:50:00] x"),
        ("[pod/p-0/] [2026-02-26 13:50:00] x", "pod/p-0/", "[2026-02-26 13:50:00] x"),  # no container field path
        ("[pod/a/c] [pod/b/c] [2026-02-26 13:50:00] x", "pod/a/c", "[pod/b/c] [2026-02-26 13:50:00] x"),  # glued
        ("[2026-02-26 13:51:10 TP0] Decode batch", "", "[2026-02-26 13:51:10 TP0] Decode batch"),  # SGLang's own
        ("[pod-0/c] [2026-02-26 13:50:00] x", "", "[pod-0/c] [2026-02-26 13:50:00] x"),  # a tag, not kubectl's
        ("[pod/Upper/c] [2026-02-26 13:50:00] x", "", "[pod/Upper/c] [2026-02-26 13:50:00] x"),  # not a pod name
        ("[pod/p/c][2026-02-26 13:50:00] x", "", "[pod/p/c][2026-02-26 13:50:00] x"),  # no space after it
        ("web-1  | [2026-02-26 13:50:00] x", "web-1", "[2026-02-26 13:50:00] x"),
        ("web_1 | 2026-02-26T13:50:00Z[2026-02-26 13:50:00] x", "web_1", "[2026-02-26 13:50:00] x"),  # compose < 2.39
        ("web-1 [2026-02-26 13:50:00] x", "", "web-1 [2026-02-26 13:50:00] x"),  # no '|': not compose, one word
        ("vllm-0-abc vllm INFO 09-20 11:51:35 [m.py:96] x", "vllm-0-abc vllm", "INFO 09-20 11:51:35 [m.py:96] x"),
        ("p-0 c (APIServer pid=1) INFO 09-20 x", "p-0 c", "(APIServer pid=1) INFO 09-20 x"),
        ("ns p-0 c 01-02 15:04:05 [2026-02-26 13:50:00] x", "ns p-0 c", "[2026-02-26 13:50:00] x"),  # short time
        ("look at [2026-02-26 14:09:45 TP0] Decode batch", "", "look at [2026-02-26 14:09:45 TP0] Decode batch"),
        ("p-0 c some words [2026-02-26 13:50:00] x", "", "p-0 c some words [2026-02-26 13:50:00] x"),  # no envelope
        ("p-0 c [error] [2026-02-26 13:50:00] x", "", "p-0 c [error] [2026-02-26 13:50:00] x"),  # stern's error line
        ("INFO 09-20 11:51:35 [metrics.py:96] x", "", "INFO 09-20 11:51:35 [metrics.py:96] x"),  # vLLM's own
        ("2025-12-04 20:35:53 INFO 1 [s.py:2] x", "", "2025-12-04 20:35:53 INFO 1 [s.py:2] x"),  # Python logging
        ("2026-09-01T11:59:40.5Z stderr F [2026-09-01 11:59:40] x", "", "[2026-09-01 11:59:40] x"),  # CRI: cut
        ("2026-09-01T11:59:40+00:00 stdout F:x [2026-09-01 11:59:40] x", "", "[2026-09-01 11:59:40] x"),  # CRI-O
        (
            "2026-09-01T11:59:40Z stderr P [2026-09-01 11:59:40] x",
            "",
            "2026-09-01T11:59:40Z stderr P [2026-09-01 11:59:40] x",
        ),
    ],
)
def test_split(line, source, rest):
    origin, got = split(line)
    assert (origin.source, got) == (source, rest)


def test_a_message_that_starts_with_a_bracket_is_no_prefix(parser):
    """SGLang's own bracket, a bracketed tag, and a kubectl prefix glued before another one."""
    _, decode = _launch_and_decode()
    plain = parser.parse_line(decode)
    tagged = parser.parse_line("[sglang-0] " + decode)  # the permissive envelope's, as before
    glued = parser.parse_line(f"[pod/{POD_A}/{CTR}] [pod/{POD_B}/{CTR}] " + decode)
    assert plain is not None and tagged is not None and glued is not None
    assert (plain.source, plain.pod, tagged.source, tagged.pod) == ("", "", "", "")
    assert (glued.source, glued.pod) == (SOURCE_A, POD_A)  # only the first prefix is trustworthy
    assert plain.accept_len == tagged.accept_len == glued.accept_len is not None  # type: ignore[attr-defined]


ADVERSARIAL = [
    "[pod/" + "a" * 100_000 + "/c] x",
    "[pod/" + "a." * 50_000 + "/" + "b" * 50_000 + "] x",
    "[pod/a/" + "b" * 100_000,
    "a" * 100_000 + " " * 50_000 + "| x",
    "a" * 200 + " " * 100_000 + "x",
    ("a-" * 30_000 + " ") * 3 + "x",
    "ns " + "a-b " * 40_000 + "[2026-",
    "a-b c " + "01-02 15:04:05 " * 20_000,
    "2026-09-01T11:59:40." + "1" * 100_000 + "Z stderr F x",
    "2026-09-01T11:59:40Z stderr F:" + "x" * 100_000,
    "a-b c (" + "x" * 100_000 + " pid=1",
]


@pytest.mark.parametrize("line", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_a_long_adversarial_prefix_line_is_parsed_quickly(parser, line):
    started = time.perf_counter()
    split(line)
    parser.parse_line(line + " Decode batch, #running-req: 3, accept len: 2.5")
    assert time.perf_counter() - started < 0.5


def test_every_stream_pattern_is_linear_on_near_misses_of_its_samples():
    """Each pattern on the inputs the grammar check builds (repeated, pumped, cut, a bad character)."""
    samples = [
        f"[pod/{POD_A}/{CTR}] 2026-02-26T13:50:00.412305121Z [2026-02-26 13:50:00] x",
        "sglang-eagle-1  | 2026-02-26T13:50:00Z [2026-02-26 13:50:00] x",
        f"inference {POD_A} {CTR} 2026-02-26T22:50:40.5+09:00 [2026-02-26 13:50:00] x",
        "2026-09-01T11:59:40.5Z stderr F [2026-09-01 11:59:40] x",
    ]
    patterns = [v for k, v in vars(streams).items() if k.isupper() and isinstance(v, re.Pattern)]
    assert len(patterns) >= 4
    for label, text in probes(samples):
        for pattern in patterns:
            started = time.perf_counter()
            pattern.match(text)
            pattern.search(text[-700:])
            assert time.perf_counter() - started < 0.05, (pattern.pattern, label)


def _two_servers() -> bytes:
    """Two pods of two servers, interleaved: pod B's vLLM logs two launch lines per start (they merge into one
    run), with pod A's stats lines between them, which must not end pod B's launch group."""
    vllm = _lines("vllm_v1_0.8.5.log")
    text = _interleaved(_speculative() * 3, vllm * 2, f"[pod/{POD_A}/{CTR}] {{}}", "[pod/vllm-0/vllm] {}")
    return (text + "\n".join(_no_spec()) + "\n").encode()  # and the file's own (plain) lines


@pytest.fixture(scope="module")
def dated():
    grammars = load_grammars()
    grammars.year_for = YearSource(2025)
    return grammars


def _truth(grammars, data: bytes) -> ParseState:
    parser = Parser(grammars, "t.log")
    for block in iter_blocks(io.BytesIO(data)):
        if block is OVERSIZED:
            parser.skip_oversized()
        else:
            parser.feed(block)  # type: ignore[arg-type]
    return parser.state


def _key(state: ParseState) -> tuple[object, ...]:
    """What the chained states are made of; a source met but with nothing to carry is as one never met."""
    streams = {k: (s.run, s.launch, s.launch_open, s.closed, s.lead) for k, s in state.streams.items() if s != EMPTY}
    return (state.line, state.run, state.launch, state.launch_open, state.closed, state.lead, streams)


def test_each_pod_keeps_its_launch_group(dated):
    records = Parser(dated, "t.log").feed(_two_servers())
    launches = [(r.source, r.run) for r in records if r.kind == "launch"]
    assert launches[:3] == [(SOURCE_A, 1), ("pod/vllm-0/vllm", 2), ("pod/vllm-0/vllm", 2)]  # args + engine: one run
    assert [r.run for r in records if r.source == "pod/vllm-0/vllm" and r.kind == "spec"][:1] == [2]
    assert {r.run for r in records if r.source == "" and r.kind == "decode"} == {max(r.run for r in records)}


@pytest.mark.parametrize("finder", ["python", "compiled"])
def test_a_range_of_a_prefixed_log_ends_in_the_state_a_full_parse_ends_in(dated, finder):
    data = _two_servers()
    find = native.finder() if finder == "compiled" else prescan.BYTES
    assert find is not None
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10]
    cuts = sorted({*starts[::23], len(data)})
    for start, end in [(0, c) for c in cuts[::3]] + [(c, len(data)) for c in cuts[::3]]:
        if start >= len(data):
            continue
        parser = Parser(dated, "t.log")
        prescan.scan(parser, data[start:end], (0, end - start), find)
        assert _key(parser.state) == _key(_truth(dated, data[start:end])), (start, end)


def test_chained_ranges_give_the_state_one_reader_has(dated):
    """:meth:`ParseState.then` of the ranges' scans, in order, at every cut: the runs one reader numbers,
    each source's launch (a launch group continued across a cut included) and open group."""

    def carried(state: ParseState) -> tuple[object, ...]:
        streams = {k: (v.run, v.launch, v.launch_open) for k, v in state.streams.items() if v.run or v.launch_open}
        return state.line, state.run, state.launch, state.launch_open, streams

    data = _two_servers()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10]
    for step in (17, 61, 150):
        cuts = [*starts[::step], len(data)]
        state, reader = ParseState(), Parser(dated, "t.log")
        for s, e in itertools.pairwise(cuts):
            scanner = Parser(dated, "t.log")
            prescan.scan(scanner, data[s:e], (0, e - s))
            state = state.then(scanner.state)
            reader.feed(data[s:e])
            assert carried(state) == carried(reader.state), (step, e)


@pytest.mark.parametrize("compiled", [True, False])
def test_two_workers_write_what_one_reader_writes_on_a_prefixed_log(dated, tmp_path, monkeypatch, compiled):
    if not compiled:
        monkeypatch.setenv("ACCEPTMON_PURE_PYTHON", "1")
    path = tmp_path / "pods.log"
    path.write_bytes(_two_servers() * 2)
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)

    def parse(jobs: int) -> tuple[bytes, dict[str, int]]:
        out = io.BytesIO()
        result = batch.run([str(path)], dated, TableJob("csv", out), jobs=jobs, fast="csv")
        return out.getvalue(), dict(result.tally.kinds)

    one = parse(1)
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 8 << 10)
    assert parse(2) == one
    rows = list(csv.DictReader(io.StringIO(one[0].decode())))
    assert {r["source"] for r in rows} == {SOURCE_A, "pod/vllm-0/vllm", ""}
    assert len({r["run"] for r in rows}) >= 6


def test_cli_j2_equals_j1_on_two_pods(tmp_path):
    one_file = _kubectl()
    copies = (batch.PARALLEL_MIN_BYTES + (1 << 20)) // len(one_file) + 1  # big enough for workers
    log = tmp_path / "pods.log"
    log.write_text(one_file * copies)
    one = acceptmon("parse", log, "-j", "1")
    two = acceptmon("parse", log, "-j", "2")
    assert one.returncode == two.returncode == 0
    assert one.stdout == two.stdout
    runs = {(r["run"], r["source"]) for r in csv.DictReader(io.StringIO(one.stdout.decode()))}
    assert len(runs) == 2 * copies and {s for _, s in runs} == {SOURCE_A, SOURCE_B}


def test_the_fast_lane_writes_what_the_general_parser_writes_on_5_mib_of_prefixed_lines(
    grammars, tmp_path, monkeypatch
):
    """Prefixed lines fall to the general parser through the lane's anchor-count proof; plain lines between
    them are the lane's own matches, in the plain source's run."""
    spec, plain = _speculative(), _no_spec()
    chunk = _kubectl() + "\n".join(plain) + "\n" + _interleaved(spec, plain, f"[pod/{POD_A}/{CTR}] {{}}", "{}")
    path = tmp_path / "pods.log"
    path.write_text(chunk * (5 * (1 << 20) // len(chunk) + 1))
    assert path.stat().st_size >= 5 << 20 >= batch.FAST_MIN_BYTES
    fast_matches = []

    def careful(*args, **kwargs):
        fast_matches.append(len(args[3]))
        return careful_segment(*args, **kwargs)

    monkeypatch.setattr(lane, "careful_segment", careful)

    def parse(fast: bool, fmt: str) -> bytes:
        out = io.BytesIO()
        batch.run([str(path)], grammars, TableJob(fmt, out), jobs=1, fast=fmt if fast else None)  # type: ignore[arg-type]
        return out.getvalue()

    written = {}
    for fmt in ("csv", "jsonl"):
        fast_matches.clear()
        written[fmt] = parse(True, fmt)
        assert written[fmt] == parse(False, fmt)
        assert sum(fast_matches) > 1000  # the lane's own rows, between the prefixed lines it hands on
    rows = list(csv.DictReader(io.StringIO(written["csv"].decode())))
    assert {r["source"] for r in rows} == {SOURCE_A, SOURCE_B, ""}
    assert all(r["pod"] == "" for r in rows if r["source"] == "")


def test_a_state_file_carries_each_source_and_an_old_one_still_loads(grammars, tmp_path):
    data = _kubectl().encode()
    cut = data.index(b"\n", len(data) // 2) + 1
    first = Parser(grammars, "t.log")
    first.feed(data[:cut])
    st = first.state
    assert set(st.streams) == {SOURCE_A, SOURCE_B}
    pos = statefile.FilePosition(
        dev=1,
        ino=2,
        fingerprint=None,
        offset=cut,
        line=st.line,
        run=st.run,
        launch=st.launch,
        launch_open=st.launch_open,
        streams={k: statefile.StreamPosition.of(v) for k, v in st.streams.items()},
    )
    path = tmp_path / "state.json"
    statefile.save(path, statefile.FollowState(files={"t.log": pos}))
    resumed = statefile.load(path).files["t.log"].parse_state
    rest = Parser(grammars, "t.log", resumed).feed(data[cut:])
    whole = Parser(grammars, "t.log").feed(data)
    assert [r.model_dump() for r in rest] == [r.model_dump() for r in whole[len(whole) - len(rest) :]]
    assert {(r.source, r.run) for r in rest if r.kind == "decode"} == {(SOURCE_A, 1), (SOURCE_B, 2)}

    old = json.loads(path.read_text())  # as written before there were sources
    del old["files"]["t.log"]["streams"]
    path.write_text(json.dumps(old))
    notes: list[str] = []
    loaded = statefile.load(path, notes.append).files["t.log"]
    assert notes == [] and loaded.streams == {} and loaded.parse_state.streams == {}


def test_a_state_with_streams_gives_the_next_run_after_all_of_them(grammars):
    state = ParseState(run=1, streams={"pod/a/c": StreamState(run=3), "pod/b/c": StreamState(run=2)})
    assert state.last_run == 3
    launch = Parser(grammars, "t.log", state).parse_line(_speculative()[0])
    assert launch is not None and (launch.source, launch.run) == ("", 4)
