"""Types of the compiled matcher (``cmatch*.c``): see :mod:`acceptmon.parse.fast.native`."""

from collections.abc import Sequence
from typing import Any

VERSION: int
SLOT: int
BOOL_SLOT: int
JSON_RANK: int
JSON_EXTRA: int
CONV_SLOT: int
CONV_PERCENT: int
CONV_FLOATS_CSV: int
CONV_FLOATS_JSON: int
PERCENT_DIGITS: int
DEP_TEXT: int
DEP_NUMBER: int
DEP_PERCENT: int
DEP_FLOATS: int
MAX_SLOTS: int
MAX_NEEDLES: int
MAX_DEPS: int
MAX_LEADS: int
OP_LIT: int
OP_ALT: int
OP_INT: int
OP_FLOAT: int
OP_BOOL: int
OP_STR: int
OP_LINT: int
OP_LFLOAT: int
OP_LSTR: int
OP_EXTRA: int
OP_LKEY: int
OP_VEND: int
OP_LIST: int
OP_BARE: int
ENV_DATED: int
ENV_YEARLESS: int
SPEC_DIGITS: int
MAX_OUTS: int
IN_DRAFTED: int
IN_ACCEPTED: int
IN_POSITIONS: int
IN_LOGGED: int
IN_SPEC_TOKENS: int
IN_EMITTED: int
NIN: int
OUT_RATE: int
OUT_LEN: int
OUT_SOURCE: int
OUT_CELL: int

class Program:
    def __init__(
        self,
        prefix: bytes,
        suffix: bytes,
        templates: Sequence[Sequence[tuple[int, int, Sequence[bytes]]]],
        needles: Sequence[bytes],
        nlaunch: int,
        envelope: int = ...,
        leads: Sequence[Sequence[tuple[int, int, Sequence[bytes]]]] = ...,
    ) -> None: ...
    def plan_ok(self, i: int, plan: object) -> bool: ...
    def scan(
        self,
        buf: bytes,
        s: int,
        e: int,
        base: int,
        plans: list[Any],
        year: int = ...,
        month: int = ...,
        stop: bool = ...,
        entries: list[tuple[int, int, Any]] | None = ...,
    ) -> tuple[int, Any, list[int], list[int], int, int, int, int, int, int] | None: ...

def find_any(buf: Any, start: int, end: int, words: Sequence[bytes]) -> int: ...
def newlines(buf: Any, start: int, end: int) -> int: ...
def pack_spans(rows: Any, width: int, cell: int, prefix: Any, counts: Any | None, n: int, length: int) -> None: ...
def block_totals_each(
    draws: list[bytes], n: int, rows: Any, counted: tuple[bool, ...]
) -> list[list[tuple[float, int | None]]]: ...
def random_bytes(state: tuple[int, ...], k: int, size: int) -> tuple[list[bytes], tuple[int, ...]]: ...
def prefix_sums(column: Any, upto: int, prefix: Any, counts: Any | None) -> None: ...
def nans(column: Any) -> int | None: ...
def doubles(values: Sequence[Any]) -> bytes | None: ...
def codes(values: Sequence[Any]) -> tuple[tuple[Any, ...], bytes] | None: ...
def decoded(values: tuple[Any, ...], codes: Any) -> list[Any]: ...
def spans(prefix: Any, n: int, width: int, out: Any) -> None: ...
def bounded(column: Sequence[Any], low: float, high: float) -> int: ...
def every(columns: Sequence[Any], tests: Sequence[tuple[int, Any, bool, bool] | None] | None = ...) -> bytes: ...
def added(values: Sequence[Any], start: float) -> float | None: ...
def log2_sums(
    seqs: Sequence[Any], lengths: Sequence[Any], totals: dict[int, float]
) -> list[tuple[int, int, float, int]] | None: ...
def intervals(
    accepted: Sequence[Any],
    drafted: Sequence[Any],
    emitted: Sequence[Any],
    widths: Sequence[Any],
    before: Any,
    known: bool,
) -> list[tuple[float | None, float | None]] | None: ...
def grouped(keys: Sequence[Any], values: Sequence[Any]) -> dict[Any, list[Any]] | None: ...
def woven(order: bytes, columns: Sequence[Sequence[Any]]) -> list[Any]: ...
def unwoven(order: bytes, values: Sequence[Any], n: int) -> list[list[Any]]: ...
def spread(order: bytes, values: Sequence[Any]) -> list[Any]: ...
def interleaved(
    order: bytes,
    units: Sequence[Any],
    loads: Sequence[tuple[Sequence[Any], Sequence[Any], Sequence[Any]] | None],
    state: dict[Any, list[Any]],
) -> tuple[list[Any], list[Any], list[bool]] | None: ...
def drafts_each(
    rates: Sequence[Any],
    cumulative: Sequence[Any],
    batch: Sequence[Any],
    tokens: Sequence[Any],
    steps: Sequence[Any],
    drafted: Sequence[Any],
) -> tuple[list[Any], list[Any]] | None: ...
def last_rates(
    warm: Sequence[Any], rates: Sequence[Any], lines: Sequence[Any]
) -> tuple[list[float], list[Any]] | None: ...
def masked(values: Sequence[Any], mask: Sequence[Any]) -> list[Any] | None: ...
def filled(mask: Sequence[Any], fill: Sequence[Any], values: Sequence[Any]) -> list[Any] | None: ...
def int_extremes(column: Any) -> tuple[int, int] | None: ...
