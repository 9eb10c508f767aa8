"""Parser: every variant in the reference, the noise a naive grep hits, and robustness."""

from __future__ import annotations

import copy
import pickle
import typing
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser, ParseState
from acceptmon.parse.records import DecodeStats, LaunchConfig, PrefillStats, ServerLaunch, build, prepare

# (line, expected subset of decode fields) — one row per documented variant
DECODE_VARIANTS = [
    (  # D0 0.4.1 spec off: a baseline record with null accept fields
        "[2025-01-07 20:16:05 TP0] Decode batch. #running-req: 64, #token: 21504, token usage: 0.05, "
        "gen throughput (token/s): 5123.77, #queue-req: 0",
        {
            "rank": "TP0",
            "running_req": 64,
            "accept_len": None,
            "accept_rate": None,
            "gen_throughput": 5123.77,
        },
    ),
    (  # D1 0.4.3
        "[2025-02-20 10:00:00 TP0] Decode batch. #running-req: 8, #token: 3180, token usage: 0.01, "
        "accept len: 3.42, gen throughput (token/s): 655.31, #queue-req: 0",
        {"accept_len": 3.42, "num_tokens": 3180},
    ),
    (  # D2 0.4.4 largest-len and trailing separator, spec off (verbatim)
        "[2025-03-14 02:16:14 TP0] Decode batch. #running-req: 509, #token: 180776, token usage: 0.43, "
        "gen throughput (token/s): 7897.87, largest-len: 0, #queue-req: 0, ",
        {"running_req": 509, "queue_req": 0, "token_usage": 0.43, "extra": {"largest-len": "0"}},
    ),
    (  # D3 0.4.5
        "[2025-04-10 09:00:00 TP0] Decode batch. #running-req: 16, #token: 7040, token usage: 0.03, "
        "accept len: 3.10, gen throughput (token/s): 1210.52, #queue-req: 0, ",
        {"accept_len": 3.1, "gen_throughput": 1210.52},
    ),
    (  # D4 0.4.6 pre-allocated usage must not be read as token usage
        "[2025-05-05 09:00:00 TP0] Decode batch. #running-req: 16, #token: 7040, token usage: 0.03, "
        "accept len: 3.10, pre-allocated usage: 0.05, gen throughput (token/s): 1210.52, #queue-req: 0",
        {"token_usage": 0.03, "pre_allocated_usage": 0.05},
    ),
    (  # D5 empty rank prefix at tp=1
        "[2025-06-01 12:00:00] Decode batch. #running-req: 16, #token: 7040, token usage: 0.03, accept len: 3.10, "
        "cuda graph: True, gen throughput (token/s): 1210.52, #queue-req: 0",
        {"rank": None, "cuda_graph": True},
    ),
    (  # D5 0.4.9 SWA full=/swa=
        "[2025-07-01 12:00:00 TP0] Decode batch. #running-req: 4, #token: full=8192, swa=4096, token usage: "
        "full=0.05, swa=0.12, accept len: 2.90, cuda graph: True, gen throughput (token/s): 310.22, #queue-req: 0",
        {"num_tokens": 8192, "token_usage": 0.05, "accept_len": 2.9},
    ),
    (  # D6 TP EP prefix with trailing separator
        "[2025-08-20 12:00:00 TP0 EP0] Decode batch. #running-req: 24, #token: 20480, token usage: 0.10, "
        "accept len: 3.21, cuda graph: True, gen throughput (token/s): 1830.40, #queue-req: 0, ",
        {"rank": "TP0 EP0", "accept_len": 3.21, "queue_req": 0},
    ),
    (  # D7 0.5.4 iteration number
        "[2025-10-20 12:00:00 TP0] Decode batch [5120], #running-req: 8, #token: 4000, token usage: 0.02, "
        "accept len: 3.05, accept rate: 0.76, cuda graph: True, gen throughput (token/s): 700.12, #queue-req: 0, ",
        {"iteration": 5120, "accept_rate": 0.76},
    ),
    (  # D8 DP PP TP EP order
        "[2025-12-01 12:00:00 DP0 PP0 TP0 EP0] Decode batch, #running-req: 8, #token: 4000, token usage: 0.02, "
        "accept len: 3.05, accept rate: 0.76, cuda graph: True, gen throughput (token/s): 700.12, #queue-req: 0, ",
        {"rank": "DP0 PP0 TP0 EP0"},
    ),
    (  # D8 ms timestamp and iterations
        "[2025-12-01 12:00:00.481 TP0] Decode batch [20480], #running-req: 8, #token: 4000, token usage: 0.02, "
        "accept len: 3.05, accept rate: 0.76, cuda graph: True, gen throughput (token/s): 700.12, #queue-req: 0, ",
        {"timestamp": datetime(2025, 12, 1, 12, 0, 0, 481000), "iteration": 20480},
    ),
    (  # D10 verbatim NPU
        "[2026-07-21 15:00:13 TP0 EP0] Decode batch, #running-req: 24, #token: 233600, token usage: 0.66, "
        "accept len: 3.05, accept rate: 0.68, npu graph: True, gen throughput (token/s): 239.06, #queue-req: 2",
        {"cuda_graph": True, "queue_req": 2, "accept_rate": 0.68},
    ),
    (  # D10 verbatim PD decode
        "[2026-08-14 14:02:47 TP0] Decode batch, #running-req: 3, #token: 266624, token usage: 0.43, accept len: "
        "1.67, accept rate: 0.13, pre-allocated usage: 0.22, #prealloc-req: 0, #transfer-req: 1, #retracted-req: 0, "
        "cuda graph: True, gen throughput (token/s): 183.10, #queue-req: 0",
        {"accept_len": 1.67, "transfer_req": 1, "pre_allocated_usage": 0.22, "token_usage": 0.43},
    ),
    (  # D10 spec off, verbatim
        "[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: "
        "True, gen throughput (token/s): 144.95, #queue-req: 0",
        {"accept_len": None, "gen_throughput": 144.95},
    ),
    (  # D11 est uncap acc len holds ', ' inside its value
        "[2026-09-01 12:00:00 TP0] Decode batch, #running-req: 8, #token: 4000, token usage: 0.02, accept len: 3.05, "
        "accept rate: 0.68, cap len: 3.40, block accept len: 3.20, est uncap acc len: 3.31 [3.12, 3.50], cuda graph: "
        "True, gen throughput (token/s): 700.12, #queue-req: 0, fwd occupancy: 91.20%, fwd+idle occupancy: 99.80%",
        {
            "est_uncap_accept_len": 3.31,
            "cuda_graph": True,
            "extra": {"fwd occupancy": "91.20%", "fwd+idle occupancy": "99.80%"},
        },
    ),
    (  # Ray actor prefix
        "(SchedulerActor pid=4242, ip=10.0.0.5) [2025-12-01 12:00:00 DP0 TP0] Decode batch, #running-req: 8, "
        "#token: 4000, token usage: 0.02, accept len: 3.05, accept rate: 0.76, cuda graph: True, "
        "gen throughput (token/s): 700.12, #queue-req: 0, ",
        {"rank": "DP0 TP0", "accept_len": 3.05},
    ),
    (  # ANSI colour codes around the prefix, CRLF line end
        "\x1b[32m[2026-02-26 14:09:45 TP0]\x1b[0m Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, "
        "accept len: 2.85, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\r",
        {"accept_len": 2.85, "queue_req": 0},
    ),
    (  # a future field SGLang has not released: kept in extra, the rest still read
        "[2027-01-01 00:00:00 DP0 SP1 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, "
        "accept len: 2.85, draft tree depth: 4, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0",
        {"rank": "DP0 SP1 TP0", "accept_len": 2.85, "extra": {"draft tree depth": "4"}},
    ),
    (  # a progress bar redrawn with carriage returns, then another process's line
        "Capturing batches (bs=4 avail_mem=20.1 GB):  45%|####5     | 10/22 [00:01<00:01]\r"
        "[2026-02-26 14:09:45 DP1 TP1] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, "
        "accept len: 2.85, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0",
        {"rank": "DP1 TP1", "accept_len": 2.85},
    ),
    (  # Docker's json-file log driver (/var/lib/docker/containers/<id>/<id>-json.log)
        '{"log":"[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, '
        'accept len: 2.85, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\\n",'
        '"stream":"stderr","time":"2026-02-26T14:09:45.123456789Z"}',
        {"rank": "TP0", "accept_len": 2.85, "queue_req": 0},
    ),
    (  # kubectl logs --prefix
        "[pod/sglang-decode-0/sglang] [2026-02-26 14:09:45 DP1 TP1 EP1] Decode batch, #running-req: 3, #token: 4521, "
        "token usage: 0.02, accept len: 2.85, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, "
        "#queue-req: 0",
        {"rank": "DP1 TP1 EP1", "accept_len": 2.85, "gen_throughput": 94.12},
    ),
    (  # pasted with leading white space
        "   [2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, accept len: 1.12, "
        "accept rate: 0.04, cuda graph: True, gen throughput (token/s): 71.5, #queue-req: 0",
        {"rank": "TP0", "accept_len": 1.12},
    ),
    (  # journalctl -o short-iso
        "2026-02-26T14:09:45+0000 gpu-node-3 python3[81234]: [2026-02-26 14:09:45.480 TP0] Decode batch, "
        "#running-req: 3, #token: 4521, token usage: 0.02, accept len: 2.85, cuda graph: True, "
        "gen throughput (token/s): 94.12, #queue-req: 2",
        {"timestamp": datetime(2026, 2, 26, 14, 9, 45, 480000), "queue_req": 2},
    ),
    (  # a wrapping logger's own prefix
        "2026-02-26 14:09:46,123 - launcher - INFO - [2026-02-26 14:09:45 TP3] Decode batch, #running-req: 3, "
        "#token: 4521, token usage: 0.02, accept len: 2.85, cuda graph: True, gen throughput (token/s): 94.12, "
        "#queue-req: 0",
        {"rank": "TP3", "timestamp": datetime(2026, 2, 26, 14, 9, 45)},
    ),
]


@pytest.mark.parametrize(("line", "expect"), DECODE_VARIANTS)
def test_decode_variants(parser, line, expect):
    record = parser.parse_line(line)
    assert isinstance(record, DecodeStats)
    for key, value in expect.items():
        assert getattr(record, key) == value, key


NOISE = [
    "[2026-03-01 11:59:00] server_args=ServerArgs(speculative_accept_threshold_single=1.0, "  # truncated dump
    "speculative_accept_threshold_acc=1.0",
    "[2026-03-01 12:30:00 TP0] avg_spec_accept_length=3.0521",
    "[2026-03-01 12:30:01] Finish: obj=GenerateReqInput(rid='57'), out={'meta_info': {'spec_accept_rate': 0.61, "
    "'spec_accept_length': 2.83, 'spec_verify_ct': 147}}",
    "[2026-03-01 12:30:02 TP0] Grammar accept_token failed for req 57 with token 151643: invalid token",
    "[2026-03-01 12:30:03 TP0] Some requests timed out when bootstrapping. If a greater mean TTFT is acceptable, "
    "you can 'export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600'",
    "[2026-09-01 12:00:01 TP0] DFLASH Triton accept/bonus failed; falling back to eager path: out of resources",
    "Accept length:                           3.05      ",
    "Mean accept length (bench_serving): 2.85, accept rate: 0.47",
    '$ grep "Decode batch" server.log | grep "accept len: 1.12"',
    "i={i}, req={req}\\naccept_index=tensor([[0, 1, 2]])",
    'My log says "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, accept len: 1.12" after the upgrade',
    "> [2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, accept len: 1.12, #queue-req: 0",
    '[2025-01-07 20:16:02] INFO:     127.0.0.1:41452 - "GET /get_model_info HTTP/1.1" 200 OK',
    "[2025-12-01 12:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 64, token usage: 0.01, "
    "#running-req: 3, #queue-req: 0, ",
]


@pytest.mark.parametrize("line", NOISE)
def test_noise_yields_no_decode_record(parser, line):
    record = parser.parse_line(line)
    assert not isinstance(record, DecodeStats)


def test_noise_accept_lines_are_counted(parser):
    text = "\n".join(NOISE) + "\n"
    parser.feed(text.encode())
    k = parser.tally.kinds
    assert k["decode"] == 0
    assert k["prefill"] == 1
    assert k["unrecognized"] == 1  # the truncated server_args dump starts like a launch line
    # every NOISE line but the access line, the prefill line and 'Accept length:' contains 'accept'
    assert parser.tally.accept_noise == 10  # the Finish line is a request record, not grep bait


def test_prose_quoting_a_broken_stats_line_is_other_not_format_drift(parser):
    # Only the permissive prefixed envelope reaches the message here; it never reports drift.
    parser.feed(b"2026-02-26 14:10:00 me: look at [2026-02-26 14:09:45 TP0] Decode batch, #running-req: lots\n")
    assert parser.tally.kinds["unrecognized"] == 0 and parser.tally.kinds["other"] == 1


def test_unrecognized_stats_like_line_is_counted_and_kept(parser):
    parser.feed(b"[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, accept len: two\nok\n")
    assert parser.tally.kinds["unrecognized"] == 1
    assert parser.tally.kinds["other"] == 1
    assert parser.tally.unrecognized[0][:2] == ("test.log", 1)


def test_prefill_record(parser):
    r = parser.parse_line(
        "[2026-07-21 15:00:13 TP0 EP0] Prefill batch, #new-seq: 8, #new-token: 54400, #cached-token: 482304, "
        "token usage: 0.66, #running-req: 16, #queue-req: 2, #pending-token: 0, npu graph: False, "
        "input throughput (token/s): 2793.64"
    )
    assert isinstance(r, PrefillStats)
    assert (r.new_seq, r.new_token, r.cached_token, r.running_req, r.queue_req) == (8, 54400, 482304, 16, 2)
    assert r.input_throughput == 2793.64


def test_launch_starts_a_run_and_normalizes_accept_rate(parser):
    lines = [
        "[2026-02-26 14:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, accept len: 2.00, "
        "gen throughput (token/s): 1.0, #queue-req: 0",
        "[2026-02-26 14:00:01] server_args=ServerArgs(model_path='org/m', tp_size=8, cuda_graph_bs=[1, 2], "
        "speculative_algorithm='EAGLE3', speculative_num_steps=3, speculative_eagle_topk=1, "
        "speculative_num_draft_tokens=4, speculative_accept_threshold_single=1.0)",
        "[2026-02-26 14:00:02 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, accept len: 2.85, "
        "accept rate: 0.47, gen throughput (token/s): 1.0, #queue-req: 0",
    ]
    records = parser.feed(("\n".join(lines) + "\n").encode())
    before, launch, after = records
    assert isinstance(launch, ServerLaunch)
    assert launch.config.model_path == "org/m"
    assert launch.config.tp_size == 8
    assert launch.config.extra["cuda_graph_bs"] == "[1, 2]"
    assert launch.config.extra["speculative_accept_threshold_single"] == 1.0
    assert (before.run, before.draft_accept_rate, before.spec_algorithm) == (0, None, None)
    assert (after.run, after.spec_algorithm, after.spec_num_steps, after.spec_num_draft_tokens) == (
        1,
        "EAGLE3",
        3,
        4,
    )
    assert after.draft_accept_rate == round(1.85 / 3, 4)
    assert after.accept_rate == 0.47  # as logged, whatever its version's definition


@pytest.mark.parametrize(
    ("config", "tokens"),
    [
        ({"spec_algorithm": "EAGLE", "spec_num_steps": 3, "spec_eagle_topk": 1}, 4),  # chain: steps + 1
        (
            {
                "spec_algorithm": "EAGLE",
                "spec_num_steps": 5,
                "spec_eagle_topk": 8,
                "spec_num_draft_tokens": 64,
            },
            64,
        ),
        ({"spec_algorithm": "EAGLE", "spec_num_steps": 5, "spec_eagle_topk": 4}, None),  # tree, size unknown
        ({"spec_algorithm": None, "spec_num_steps": 5, "spec_num_draft_tokens": 64}, None),  # spec off
    ],
)
def test_draft_tokens(config, tokens):
    assert LaunchConfig(**config).draft_tokens == tokens


def test_state_carries_line_and_run(grammars):
    p = Parser(
        grammars,
        "f",
        ParseState(line=100, run=2, launch=LaunchConfig(spec_algorithm="EAGLE", spec_num_steps=1)),
    )
    r = p.parse_line(
        "[2026-02-26 14:00:02 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, accept len: 1.50, "
        "gen throughput (token/s): 1.0, #queue-req: 0"
    )
    assert (r.line, r.run, r.draft_accept_rate) == (101, 2, 0.5)


def test_built_record_equals_validated_record(parser):
    for line, _ in DECODE_VARIANTS:
        fast = parser.parse_line(line)
        assert fast == DecodeStats.model_validate(fast.model_dump())
    assert build(DecodeStats, {"line": 3}) == DecodeStats(line=3)
    assert build(DecodeStats, {"line": 3}).model_fields_set == {"line"}  # the names given, as validation has it


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_prepared_record_is_the_validated_record(name):
    model = KINDS[name].model
    prepared = prepare(model)
    assert prepared.names == tuple(model.model_fields)
    made = prepared.make({**prepared.defaults, "extra": {}} if prepared.extra else dict(prepared.defaults), None)
    assert made == model() and made.model_dump() == model().model_dump()
    assert made.model_dump_json() == model().model_dump_json()
    assert made.model_fields_set == set(model.model_fields)
    assert prepare(model) is prepared


def test_records_share_a_fields_set_no_one_can_change():
    prepared = prepare(DecodeStats)
    a, b = (prepared.make({**prepared.defaults, "extra": {}, "line": n}, None) for n in (1, 2))
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    with pytest.raises(TypeError):
        a.model_fields_set.add("line")
    with pytest.raises(TypeError):
        a.model_fields_set.update({"line"})
    with pytest.raises(TypeError):
        a.model_fields_set |= {"line"}
    copied = a.model_copy(update={"line": 7})  # pydantic adds the names to a copy of the set
    assert (copied.line, a.line, type(copied.model_fields_set)) == (7, 1, set)
    assert a.model_fields_set == set(DecodeStats.model_fields)
    for other in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert other == a and type(other.model_fields_set) is set
        assert other.model_fields_set == set(DecodeStats.model_fields)
    assert a.model_dump(exclude_unset=True) == a.model_dump()


def test_a_field_that_may_hold_none_defaults_to_none():
    """What lets ``unpack`` put a packed None back as it is: it is the field's default too."""
    for kind in KINDS.values():
        for name, f in kind.model.model_fields.items():
            if type(None) in typing.get_args(f.annotation):
                assert f.default is None, (kind.name, name)


def test_line_numbers_count_every_line(parser):
    block = b"a\n\nb\n[2026-02-26 14:00:02 TP0] Decode batch, #running-req: 1, #token: 1, #queue-req: 0\nc"
    (r,) = parser.feed(block)
    assert r.line == 4
    assert parser.line == 5
    assert parser.tally.lines == 5


def test_invalid_utf8_and_random_bytes_do_not_hide_good_lines(parser):
    good = b"[2026-02-26 14:00:02 TP0] Decode batch, #running-req: 1, #token: 1, accept len: 2.00, #queue-req: 0\n"
    block = b"\xff\xfe\x00garbage\x80\n" + good + b"Decode batch\xff\xfe #running\n" + good
    records = parser.feed(block)
    assert [r.line for r in records] == [2, 4]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400))
def test_parse_never_raises_on_text(grammars, text):
    p = Parser(grammars, "fuzz")
    stats_like = "[2026-02-26 14:00:02 TP0] Decode batch, #running-req: " + text
    for chunk in (text, stats_like):
        data = chunk.encode("utf-8", "surrogatepass")
        p.feed(data)
    expected = sum(c.count("\n") + (0 if not c or c.endswith("\n") else 1) for c in (text, stats_like))
    assert p.line == p.tally.lines == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_parse_never_raises_on_bytes(grammars, data):
    p = Parser(grammars, "fuzz")
    p.feed(data)
    assert p.line == data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)


def test_a_value_that_does_not_convert_never_stops_the_parse(grammars):
    """A converter slip (an empty field, a stray token) makes its line unrecognized or other, never a traceback."""
    p = Parser(grammars, "v.log")
    lines = [
        "INFO 09-20 11:51:35 [metrics.py:96] SpecDecoding metrics: Mean acceptance length:  , Accepted: tokens, "
        "Drafted: 7200 tokens",
        "INFO 09-20 11:51:35 [loggers.py:123] Engine 000: Avg prompt throughput:  tokens/s, Avg generation "
        "throughput: x tokens/s, Running: reqs, Waiting: 0 reqs, GPU KV cache usage: %",
        "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: , accept len: , gen throughput (token/s): ",
    ]
    records = p.feed(("\n".join(lines) + "\n").encode())
    assert p.tally.lines == 3
    assert all(r.kind in ("spec", "throughput", "decode") for r in records)


# The body reader: a piece without ': ' (a list value) makes it read the rest as the careful reader does.
def _body_keys():
    from acceptmon.parse.grammar import Converter, FieldSpec

    keys = {
        "#token": Converter("#token", FieldSpec(kind="count", field="num_tokens", value=r"full=(\d+)")),
        "#full token": Converter("#full token", FieldSpec(kind="count", field="num_tokens", fallback=True)),
        "rates": Converter("rates", FieldSpec(kind="float_list", field="position_accept_rates")),
        "len": Converter("len", FieldSpec(kind="number", field="accept_len")),
    }
    return {k: (c.field, c.convert, c.fallback, c) for k, c in keys.items()}, keys


def _read(body, pre=None):
    from acceptmon.parse.pairs import read_pairs

    table, _ = _body_keys()
    values, extra = dict(pre or {}), {}
    read_pairs(body, table, values, extra)
    return values, extra


@pytest.mark.parametrize(
    ("body", "pre", "values", "extra"),
    [
        (  # a list, then more pairs: each value whole, the unknown key kept as an extra
            "len: 2.5, rates: 0.8, 0.6, nan, Accepted throughput: 9 tokens/s, #token: 7",
            {},
            {"accept_len": 2.5, "position_accept_rates": [0.8, 0.6, None], "num_tokens": 7},
            {"Accepted throughput": "9 tokens/s"},
        ),
        ("est len: 3.3 [3.1, 3.5], len: 2", {}, {"accept_len": 2.0}, {"est len": "3.3 [3.1, 3.5]"}),
        (  # a key that does not look like one joins the pair before (and stays an extra of its own)
            "a: 1, 1x: 3, rates: 0.5, 0.25",
            {},
            {"position_accept_rates": [0.5, 0.25]},
            {"a": "1, 1x: 3", "1x": "3"},
        ),
        (  # a fallback key before a list: a later #token wins, a value already there stays
            "#full token: 9, rates: 0.5, 0.25, #token: full=4, swa=2",
            {},
            {"num_tokens": 4, "position_accept_rates": [0.5, 0.25]},
            {},
        ),
        (
            "#full token: 9, rates: 0.5, 0.25",
            {"num_tokens": 1},
            {"num_tokens": 1, "position_accept_rates": [0.5, 0.25]},
            {},
        ),
        ("rates: 0.5 x, 0.25", {}, {"position_accept_rates": [0.5, 0.25]}, {}),
        ("0.5, rates: 0.25", {}, {"position_accept_rates": [0.25]}, {}),
    ],
)
def test_a_body_with_a_list_value_reads_every_pair_whole(body, pre, values, extra):
    assert _read(body, pre) == (values, extra)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("rates: 0.5, , 0.25", "an empty entry in a list: '0.5, , 0.25'"),
        ("len: 2, 1x: 3, rates: 0.5, 0.25", "could not convert string to float: '2,'"),
        ("len: x, rates: 0.5, 0.25", "could not convert string to float: 'x'"),
    ],
)
def test_a_body_with_a_list_value_rejects_what_does_not_convert(body, message):
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[") + "$"):
        _read(body)


def _careful_reference(body, pre):
    """The body reader's contract, read the slow way: pairs as the fast path reads them while every piece
    has ': ', then (after the first piece without) the whole body again by the careful rule."""
    import regex

    _, keys = _body_keys()
    values, extra, found = dict(pre), {}, {}
    pieces = body.rstrip(", \t").split(", ")
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if not sep:
            break
        if key not in keys:
            extra[key] = value
        elif not (keys[key].fallback and keys[key].field in found):
            found[keys[key].field] = keys[key](value)
    else:
        values.update(found)
        return values, extra
    pairs = []
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if sep and (key in keys or regex.fullmatch(r"[#A-Za-z][\w .()/+%#'-]*", key)):
            pairs.append((key, [value]))
        elif pairs:
            pairs[-1][1].append(piece)
    for key, parts in pairs:
        if key not in keys:
            extra[key] = ", ".join(parts)
        elif not (keys[key].fallback and keys[key].field in values):
            values[keys[key].field] = keys[key](", ".join(parts))
    return values, extra


_PIECES = ["#token: 5", "#token: full=7", "#token: x", "#full token: 9", "rates: 0.5", "rates: 0.1,0.2", "0.3", "",
           "len: 2.5", "len: nan", "len: -", "foo: 1", "Foo bar: 2", "1x: 3", "9: 9", "[a: b]", "a: b: c", "swa=2",
           "rates:", "x"]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=7), st.sampled_from([{}, {"num_tokens": 1}]))
def test_the_body_reader_reads_as_its_careful_reference(pieces, pre):
    body = ", ".join(pieces)
    try:
        expected = _careful_reference(body, pre)
    except ValueError:
        with pytest.raises(ValueError):
            _read(body, pre)
        return
    assert _read(body, pre) == expected


def test_the_kept_last_time_gives_the_same_values_and_the_same_errors():
    from acceptmon.parse.values import to_float_list, to_timestamp, to_yearless

    assert to_yearless("01-02 03:04:05") is to_yearless("01-02 03:04:05")
    assert (to_yearless("01-02 03:04:05").month, to_yearless("12-31 23:59:58").second) == (1, 58)
    for _ in range(2):
        with pytest.raises(ValueError):
            to_yearless("02-30 00:00:00")
        with pytest.raises(ValueError):
            to_timestamp("2026-02-30 00:00:00")
    assert to_timestamp("2026-02-26 14:00:05,250") == datetime(2026, 2, 26, 14, 0, 5, 250000)
    assert to_timestamp("2026-02-26 14:00:05,250") == datetime(2026, 2, 26, 14, 0, 5, 250000)
    assert to_float_list("0.8, 0.6, nan, inf, 5.") == [0.8, 0.6, None, None, 5.0]
    assert to_float_list("0.8 x, 10616., 0.5") == [0.8, 10616.0, 0.5]
