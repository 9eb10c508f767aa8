"""Line shapes for ``bench_parse.py --shape``: a generated log of each, and the grep+awk that pulls its fields.

Each shape is a server's launch (as its sample log has it) and then stats lines of one release's format,
with fresh numbers, a few access lines between. The awk pulls the same fields acceptmon writes (values
as numbers: ``1250 tokens`` is 1250, ``57.3%`` is 57.3, compared with acceptmon's 0.573).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"


@dataclass(frozen=True)
class Shape:
    what: str
    lines: Callable[[random.Random], Iterator[str]]
    word: str
    """What grep -F looks for: the stats line's message head."""
    fields: tuple[tuple[str, str, float], ...]
    """(logged key, acceptmon column, scale of the logged number: 0.01 for a percentage)."""
    kind: str


def _head(name: str, until: str) -> list[str]:
    """A sample log's lines before the first that holds ``until``, without colour (as written to a file)."""
    lines = (SAMPLES / name).read_text().splitlines()
    first = next(i for i, x in enumerate(lines) if until in x)
    return [re.sub("\x1b\\[[0-9;]*m", "", x) for x in lines[:first]]


def _sglang_stamp(sec: int, millis: bool = False) -> str:
    stamp = f"2026-03-{1 + sec // 86400 % 28:02d} {sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"
    return stamp + (f".{sec * 7 % 1000:03d}" if millis else "")


def _vllm_stamp(sec: int) -> str:
    """Year-less, from 11-01 (a 256 MiB log spans days, not a New Year, and ends before :data:`WRITTEN`: ranges of
    ``-j`` guess no year wrong)."""
    sec += 304 * 86400
    day = sec // 86400 % 365
    month = next(m for m in range(12, 0, -1) if day >= _MONTH_START[m - 1])
    return f"{month:02d}-{day - _MONTH_START[month - 1] + 1:02d} {sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"


_MONTH_START = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334]


def _access(r: random.Random, head: str) -> str:
    return f'{head}INFO:     10.1.0.7:{r.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _decode_old(r: random.Random) -> Iterator[str]:
    """SGLang <= 0.4.6: ``Decode batch.``, ``cuda graph`` before ``gen throughput``, always a TP prefix."""
    yield from _head("old_0.4.4.log", "Decode batch")
    for sec in range(1 << 30):
        acc = r.uniform(1.5, 3.5)
        yield (
            f"[{_sglang_stamp(sec)} TP0] Decode batch. #running-req: {r.randint(1, 64)}, #token: {r.randint(100, 90000)}, "
            f"token usage: {r.random():.2f}, accept len: {acc:.2f}, accept rate: {(acc - 1) / 3:.2f}, cuda graph: True, "
            f"gen throughput (token/s): {r.uniform(10, 900):.2f}, #queue-req: {r.randint(0, 3)}"
        )
        if sec % 4 == 0:
            yield _access(r, f"[{_sglang_stamp(sec)}] ")


def _decode_newest(r: random.Random) -> Iterator[str]:
    """SGLang 0.5.23: iteration number, milliseconds, cap len, occupancy."""
    yield from _head("newest_0.5.23.log", "Decode batch")
    for sec in range(1 << 30):
        acc = r.uniform(1.5, 3.5)
        yield (
            f"[{_sglang_stamp(sec, True)} TP0] Decode batch [{40 * sec}], #running-req: {r.randint(1, 64)}, "
            f"#token: {r.randint(100, 90000)}, token usage: {r.random():.2f}, accept len: {acc:.2f}, "
            f"accept rate: {(acc - 1) / 3:.2f}, cap len: {acc + r.random():.2f}, cuda graph: True, "
            f"gen throughput (token/s): {r.uniform(10, 900):.2f}, #queue-req: {r.randint(0, 3)}, "
            f"fwd occupancy: {r.uniform(50, 99):.2f}%, fwd+idle occupancy: {r.uniform(90, 100):.2f}%"
        )


def _decode_ascend(r: random.Random) -> Iterator[str]:
    """DP attention on Ascend: ``DP1 TP4 EP4`` ranks, ``npu graph``, a trailing ``, ``."""
    yield from _head("dp_attention_0.5.7.log", "Decode batch")
    for sec in range(1 << 30):
        for d in range(8):
            acc = r.uniform(1.5, 3.5)
            yield (
                f"[{_sglang_stamp(sec)} DP{d} TP{d} EP{d}] Decode batch, #running-req: {r.randint(1, 64)}, "
                f"#token: {r.randint(100, 90000)}, token usage: {r.random():.2f}, accept len: {acc:.2f}, "
                f"accept rate: {(acc - 1) / 3:.2f}, npu graph: True, gen throughput (token/s): {r.uniform(10, 900):.2f}, "
                f"#queue-req: {r.randint(0, 3)}, "
            )


def _decode_hybrid(r: random.Random) -> Iterator[str]:
    """A hybrid (Mamba) model's ``#full token`` decode line, no rank, a trailing ``, ``."""
    yield from _head("hybrid_mamba_swa.log", "Decode batch")
    for sec in range(1 << 30):
        acc = r.uniform(1.5, 3.5)
        yield (
            f"[{_sglang_stamp(sec)}] Decode batch, #running-req: {r.randint(1, 64)}, #full token: {r.randint(100, 90000)}, "
            f"full token usage: {r.random():.2f}, mamba num: {r.randint(1, 60)}, mamba usage: {r.random():.2f}, "
            f"accept len: {acc:.2f}, accept rate: {(acc - 1) / 3:.2f}, cuda graph: True, "
            f"gen throughput (token/s): {r.uniform(10, 900):.2f}, #queue-req: {r.randint(0, 3)}, "
        )


def _spec_v1(r: random.Random, k: int) -> str:
    first = r.uniform(0.6, 0.95)
    positions = [round(first * r.uniform(0.6, 0.9) ** i, 3) for i in range(k)]
    drafted = k * r.randint(700, 950)
    accepted = round(drafted * sum(positions) / k)
    rates = ", ".join(f"{p:.3f}" for p in positions)
    return (
        f"SpecDecoding metrics: Mean acceptance length: {1 + k * accepted / drafted:.2f}, Accepted throughput: "
        f"{accepted / 10:.2f} tokens/s, Drafted throughput: {drafted / 10:.2f} tokens/s, Accepted: {accepted} tokens, "
        f"Drafted: {drafted} tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: "
        f"{100 * accepted / drafted:.1f}%"
    )


def _vllm_dp(r: random.Random, k: int = 3, engines: int = 4) -> Iterator[str]:
    # the sample's launch is on 12-31 (it is the New Year sample): moved to 10-31, before the first stamp
    head = [x.replace(" 12-31 ", " 10-31 ") for x in _head("vllm_v1_0.10.2_dp.log", "Engine 000:")]
    yield from (x.replace("'num_speculative_tokens': 3", f"'num_speculative_tokens': {k}") for x in head)
    for sec in range(0, 1 << 30, 10):
        ts = _vllm_stamp(sec)
        for e in range(engines):
            yield (
                f"(APIServer pid=3051) INFO {ts} [loggers.py:123] Engine {e:03d}: Avg prompt throughput: "
                f"{r.uniform(0, 1500):.1f} tokens/s, Avg generation throughput: {r.uniform(90, 300):.1f} tokens/s, "
                f"Running: {r.randint(0, 48)} reqs, Waiting: {r.randint(0, 3)} reqs, GPU KV cache usage: "
                f"{r.uniform(0, 40):.1f}%, Prefix cache hit rate: {r.uniform(0, 60):.1f}%"
            )
            yield f"(APIServer pid=3051) INFO {ts} [metrics.py:96] " + _spec_v1(r, k)
        for _ in range(r.randint(0, 3)):
            yield _access(r, "(APIServer pid=3051) ")


def _vllm_new(r: random.Random) -> Iterator[str]:
    """vLLM 0.20+ (the 0.10.2 message, unchanged since) drafting 15 tokens: 15 per-position rates, one engine."""
    yield from _vllm_dp(r, k=15, engines=1)


def _vllm_v0(r: random.Random) -> Iterator[str]:
    """vLLM v0 (0.6): every 5 s the throughput line, the prefix-cache line and ``Speculative metrics``."""
    yield from _head("vllm_v0_0.6.log", "Avg prompt throughput")
    accepted = drafted = emitted = 0
    for sec in range(0, 1 << 30, 5):
        ts = _vllm_stamp(sec)
        yield (
            f"INFO {ts} metrics.py:345] Avg prompt throughput: {r.uniform(0, 900):.1f} tokens/s, Avg generation "
            f"throughput: {r.uniform(50, 400):.1f} tokens/s, Running: {r.randint(0, 40)} reqs, Swapped: 0 reqs, "
            f"Pending: {r.randint(0, 5)} reqs, GPU KV cache usage: {r.uniform(0, 90):.1f}%, CPU KV cache usage: 0.0%."
        )
        yield f"INFO {ts} metrics.py:361] Prefix cache hit rate: GPU: {r.uniform(0, 90):.2f}%, CPU: 0.00%"
        step = 3 * r.randint(400, 900)
        took = round(step * r.uniform(0.5, 0.8))
        drafted, accepted, emitted = drafted + step, accepted + took, emitted + took + step // 3
        yield (
            f"INFO {ts} metrics.py:367] Speculative metrics: Draft acceptance rate: {accepted / drafted:.3f}, "
            f"System efficiency: {emitted / (drafted + drafted // 3):.3f}, Number of speculative tokens: 3, "
            f"Number of accepted tokens: {accepted}, Number of draft tokens: {drafted}, "
            f"Number of emitted tokens: {emitted}."
        )
        yield _access(r, "")


_DECODE = (
    ("accept len", "accept_len", 1.0),
    ("accept rate", "accept_rate", 1.0),
    ("gen throughput (token/s)", "gen_throughput", 1.0),
    ("#running-req", "running_req", 1.0),
    ("#queue-req", "queue_req", 1.0),
)
SHAPES: dict[str, Shape] = {
    "sglang-old": Shape("SGLang <= 0.4.6 `Decode batch.`", _decode_old, "Decode batch", _DECODE, "decode"),
    "sglang-newest": Shape("SGLang 0.5.23 decode", _decode_newest, "Decode batch", _DECODE, "decode"),
    "dp-ascend": Shape("DP attention, Ascend, trailing `, `", _decode_ascend, "Decode batch", _DECODE, "decode"),
    "hybrid": Shape("hybrid `#full token`", _decode_hybrid, "Decode batch", _DECODE, "decode"),
    "vllm-dp": Shape(
        "vLLM 0.10 DP, 4 engines",
        _vllm_dp,
        "SpecDecoding metrics: ",
        (
            ("Mean acceptance length", "accept_len", 1.0),
            ("Accepted", "accepted_tokens", 1.0),
            ("Drafted", "drafted_tokens", 1.0),
            ("Per-position acceptance rate", "position_accept_rates", 1.0),
        ),
        "spec",
    ),
    "vllm-15": Shape(
        "vLLM 0.20+, 15 per-position rates",
        _vllm_new,
        "SpecDecoding metrics: ",
        (
            ("Mean acceptance length", "accept_len", 1.0),
            ("Accepted", "accepted_tokens", 1.0),
            ("Drafted", "drafted_tokens", 1.0),
        ),
        "spec",
    ),
    "vllm-v0": Shape(
        "vLLM v0 `Speculative metrics`",
        _vllm_v0,
        "Speculative metrics: ",
        (
            ("Number of accepted tokens", "accepted_tokens", 1.0),
            ("Number of draft tokens", "drafted_tokens", 1.0),
            ("Number of emitted tokens", "emitted_tokens", 1.0),
            ("System efficiency", "system_efficiency", 1.0),
        ),
        "spec",
    ),
}


WRITTEN = datetime(2026, 12, 31, 23, 59, 59).timestamp()
"""The generated logs' modification time: after their last line, as a server's log's is. vLLM's stamps have no
year: acceptmon dates the first by it (2026), and each range of ``-j`` its own first stamp (the latest year in
which the stamp is not after it). Left at the time of writing, a log dated past that day would have its later
ranges guessed a year early and read twice, so that the figures depended on the day the benchmark ran."""


def generate(shape: Shape, path: Path, mib: float) -> None:
    """``path``: the shape's log of about ``mib`` MiB."""
    target, size = int(mib * (1 << 20)), 0
    with path.open("w") as f:
        lines = shape.lines(random.Random(42))
        while size < target:
            chunk = "\n".join(next(lines) for _ in range(256)) + "\n"
            f.write(chunk)
            size += len(chunk)
    os.utime(path, (WRITTEN, WRITTEN))


def awk(shape: Shape, log: Path, out: Path, program: str) -> str:
    """The grep+awk pipeline that pulls the shape's fields, one line per stats line (``-,v1,v2,...``)."""
    keys = ' "," '.join(f'v["{key}"] + 0' for key, _, _ in shape.fields)
    head = shape.word + ("[^#]*" if shape.kind == "decode" else "")  # up to SGLang's first key, #running-req
    return (
        f"grep -F '{shape.word}' {log} | {program} -F', ' '{{ sub(/.*{head}/, \"\"); "
        f'for (i = 1; i <= NF; i++) {{ n = split($i, kv, ": "); if (n == 2) v[kv[1]] = kv[2] }} '
        f'print "-," {keys}; delete v }}\' > {out}'
    )
