"""Numbers, durations and names for people: the one formatter every table and screen uses. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any


def number(value: float | int | None, digits: int = 2, suffix: str = "") -> str:
    """Fixed decimals (integers as they are), ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value}{suffix}"
    return f"{value:.{digits}f}{suffix}"


def plural(n: int, noun: str) -> str:
    """``1 row``, ``2 rows``, ``1,024 rows`` (``noun`` a regular English noun)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


COUNTED = ("decode", "spec", "throughput", "prefill", "launch", "unrecognized", "oversized")
"""The line kinds a summary names, in this order, for every server (a kind a server never logs is 0)."""
WHEN_SEEN = ("request", "positions", "warning")
"""Line kinds a summary names only when a log has them (after ``launch``)."""


def line_counts(kinds: Mapping[str, int]) -> str:
    """``N lines read, a decode, b spec, c throughput, ...``: one wording for SGLang and vLLM logs
    (``parse``'s summary and ``serve``'s stop line)."""
    named = [*COUNTED[:5], *(k for k in WHEN_SEEN if kinds.get(k)), *COUNTED[5:]]
    return ", ".join([f"{plural(sum(kinds.values()), 'line')} read", *(f"{kinds.get(k, 0):,} {k}" for k in named)])


PER_BATCH_LINES = (
    "per-batch acceptance lines (llama-server prints its statistics rows at -lv 4 and each verify step with -v)"
)
"""What a log of finished-request lines alone lacks, and how to have it (llama-server's default log is such)."""


def requests_only(requests: int) -> str:
    """``24 finished-request lines but no per-batch acceptance lines (...)``: the same words for every command."""
    return f"{plural(requests, 'finished-request line')} but no {PER_BATCH_LINES}"


def duration(seconds: float | None) -> str:
    """``1h05m`` or ``4m09s``; ``-`` for none."""
    if seconds is None:
        return "-"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def short_model(model: str | None) -> str:
    """The last part of a model path (``meta-llama/Llama-3.1-8B`` -> ``Llama-3.1-8B``); ``-`` for none."""
    return model.rstrip("/").split("/")[-1] if model else "-"


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (inf, nan) inside dicts, lists and tuples as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def strict_json(value: Any, **options: Any) -> str:
    """JSON that every reader takes (``jq`` too): a non-finite number is ``null``, never ``Infinity`` or ``NaN``."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False, **options)


def number_ranges(numbers: Sequence[int]) -> str:
    """Sorted whole numbers as ranges: ``1-3, 5, 7-8``."""
    parts: list[list[int]] = []
    for n in numbers:
        if parts and n == parts[-1][-1] + 1:
            parts[-1].append(n)
        else:
            parts.append([n])
    return ", ".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts)
