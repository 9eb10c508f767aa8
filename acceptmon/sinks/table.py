"""CSV and JSON Lines output of decode records.

Column order is part of the interface (scripts and spreadsheets depend on it):
:data:`COLUMNS` first, then :data:`EXTRA_COLUMNS`; JSON Lines adds ``extra``, the
``key: value`` pairs no grammar knows. Formatting is a pure function of a list of
records, so a parallel worker can format its own chunk.
"""

from __future__ import annotations

import csv
import io
import json
import operator
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

from acceptmon.records import DecodeStats

TableFormat: TypeAlias = Literal["csv", "jsonl"]

COLUMNS: Final = (
    "file", "line", "timestamp", "rank", "server", "kind", "accept_len", "accept_rate",
    "draft_accept_rate", "gen_throughput", "running_req", "queue_req", "token_usage", "num_tokens",
    "cuda_graph", "run", "spec_algorithm", "spec_num_steps", "spec_num_draft_tokens",
)  # fmt: skip
EXTRA_COLUMNS: Final = (
    "iteration", "cap_len", "block_accept_len", "est_uncap_accept_len", "pre_allocated_usage",
    "prealloc_req", "transfer_req", "retracted_req", "swa_token_usage", "mamba_usage",
)  # fmt: skip
ALL_COLUMNS: Final = COLUMNS + EXTRA_COLUMNS


def infer_format(output: str | None, given: str | None) -> TableFormat:
    """``--format`` if given, else from the output suffix (``.jsonl``/``.json``), else CSV."""
    if given in ("csv", "jsonl"):
        return given  # type: ignore[return-value]
    if output and output.endswith((".jsonl", ".json", ".jsonl.gz", ".ndjson")):
        return "jsonl"
    return "csv"


def fmt_number(value: float | int | None, digits: int = 2) -> str:
    """A number for people (tables, plain lines): fixed decimals, '-' for none."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def header(fmt: TableFormat) -> bytes:
    if fmt == "csv":
        return (",".join(ALL_COLUMNS) + "\r\n").encode()
    return b""


def _iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    return ts.isoformat(timespec="milliseconds" if ts.microsecond else "seconds")


_VALUES = operator.itemgetter(*ALL_COLUMNS)


def row(record: DecodeStats) -> list[Any]:
    """The record's values in :data:`ALL_COLUMNS` order (timestamps as ISO text)."""
    values = list(_VALUES(record.__dict__))
    values[2] = _iso(record.timestamp)
    return values


def format_records(records: Sequence[object], fmt: TableFormat) -> bytes:
    """Format the decode records among ``records``; other kinds are left out."""
    decode = [r for r in records if isinstance(r, DecodeStats)]
    if fmt == "csv":
        buf = io.StringIO()
        csv.writer(buf).writerows(row(r) for r in decode)
        return buf.getvalue().encode()
    lines = []
    for r in decode:
        obj = dict(zip(ALL_COLUMNS, row(r), strict=True))
        obj["extra"] = r.extra
        lines.append(json.dumps(obj, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode() if lines else b""
