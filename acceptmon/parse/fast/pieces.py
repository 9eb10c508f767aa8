"""Fast-lane pieces: the logged text each value kind may have, and how a value becomes an output cell.

A template captures a value (the compiled matcher reads its pattern as a step) only in a
form whose bytes are exactly what the table writer prints for the converted value: an ``int``
without leading zeros, a ``float`` with at most 15 significant digits and without its trailing
zeros (``2.50`` is captured as ``2.5``, which is ``repr(2.5)``), ``True``/``False``, a string
that needs no quoting or escaping. Anything else does not match, and the general parser takes the line. Timestamps
and ranks come from the envelope and are checked once per distinct envelope text.
Pure: no I/O.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

Format: TypeAlias = Literal["csv", "jsonl"]

INT = rb"(0|[1-9][0-9]{0,17})"
FLOAT = rb"(0\.(?!0000)[0-9]{0,5}[1-9]|[1-9][0-9]{0,8}\.[0-9]{0,5}[1-9]|(?:0|[1-9][0-9]{0,8})\.0)0*"
"""Group 1 is the shortest repr of the value: <= 15 significant digits, 1e-4 <= x < 1e9 or 0."""
BOOL = rb"(True|False)"
STR = rb"([ !#-+\--\[\]-~]*)"
"""Printable ASCII without '"', ',' and backslash: neither CSV quoting nor JSON escaping applies."""
NUMBER = rb"([0-9]{1,30}(?:\.[0-9]{1,30})?)"
"""A number as the compiled matcher's loose step reads it (a converted value's text: see :data:`CONVERTED`)."""
NUMBER_LIST = rb"([0-9]{1,30}(?:\.[0-9]{1,30})?(?:, [0-9]{1,30}(?:\.[0-9]{1,30})?)*)"
VALUE: dict[str, bytes] = {
    "int": INT,
    "float": FLOAT,
    "bool": BOOL,
    "str": STR,
    "count": INT,
    "number": FLOAT,
    "percent": NUMBER,
    "float_list": NUMBER_LIST,
    "engine": rb"([0-9]{1,30})",
}
"""Value kinds a fast template may capture; a grammar value of another kind has no fast lane. A ``count`` or
``number`` is captured as the int's or float's own text; the :data:`CONVERTED` kinds are not."""
CONVERTED = frozenset({"percent", "float_list"})
"""Kinds whose cell is not the logged text (``57.3`` is 0.573, a list is written ``a;b;c``): the compiled matcher
converts them (``cmatch_convert.c``, :data:`acceptmon.parse.fast.rows.CONV_SLOT`). An engine's digits are its
text (``000``)."""
UNITS: dict[str, bytes] = {"count": rb" [A-Za-z/]{1,20}", "number": rb" [A-Za-z/]{1,20}", "percent": rb"%"}
"""What may follow a value of these kinds as literal text (``1250 tokens``, ``412.5 tokens/s``, ``57.3%``):
their converters read the number alone, so the value and its unit read as the number does."""
EXTRA_KEY = rb"([^:,\r\n\x1b]+)"
EXTRA_VALUE = rb"([^,\r\n\t\x1b]*)(?<![ \t])"
"""An unknown key's text: no ', ' (pieces stay pieces), no trailing blank (the parser strips it)."""

LOOSE: dict[bytes, bytes] = {
    INT: rb"[0-9]{1,30}",
    FLOAT: rb"[0-9]{1,30}(?:\.[0-9]{1,30})?",
    BOOL: rb"(?:True|False)",
    STR: rb"[^,\r\n\x1b]*",
    EXTRA_KEY: rb"[^:,\r\n\x1b]+",
    EXTRA_VALUE: rb"[^,\r\n\t\x1b]*(?<![ \t])",
}
"""For kinds that are only counted: any text the converter takes, captured by no group."""


def loosen(pattern: bytes) -> bytes:
    """A template pattern with every capture replaced by its loose, uncaptured form."""
    for strict, loose in LOOSE.items():
        pattern = pattern.replace(strict, loose)
    return pattern


DATE = (
    rb"((?!0000)[0-9]{4}-"
    rb"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31))"
)
"""Only dates every year has (no 29 February): ``datetime.fromisoformat`` accepts each."""
TIME = rb"((?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9])"
FRACTION = rb"((?:\.(?!000)[0-9]{3})?)(?:\.000)?"
"""Milliseconds as the writer prints them (``isoformat(timespec="milliseconds")``); .000 is read and prints none."""
TIMESTAMP = DATE + rb"[ T]" + TIME + FRACTION
RANK = rb"(?: (?=[A-Z][A-Z_]*[0-9]))?((?<= )[A-Z][A-Z_]*[0-9]+(?: [A-Z][A-Z_]*[0-9]+)*|)"
"""Rank tokens, each behind a space as the envelope's ``(?:\\s[A-Z][A-Z_]*+\\d++)*+`` has them; group 1
is the folded rank (empty for none). The space is taken only when a token follows it, and a token only
behind it (a timestamp ends in a digit): ``12:00:00TP0]`` is no envelope, here as in the grammar."""
ENVELOPE_KINDS = {"timestamp": TIMESTAMP, "rank": RANK}


class _Sink:
    """Where :func:`csv_cell`'s one writer puts its text."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text = text


_SINK = _Sink()
_PLAIN = re.compile(r"[\w.;:/+-]*", re.ASCII)
"""Text the csv writer writes as it is (no delimiter, quote, line break or space)."""
_CELL_WRITER = csv.writer(_SINK, lineterminator="")


def csv_cell(value: Any) -> bytes:
    """One value as the csv module writes it in a row of several cells (a list ``;``-joined, as the table does)."""
    kind = type(value)
    if value is None:
        return b""
    if kind is int or kind is bool or kind is float:
        return str(value).encode()  # what the writer's str() gives: no quoting, ever
    if kind is list:
        value = ";".join("" if v is None else str(v) for v in value)
        kind = str
    if kind is str and _PLAIN.fullmatch(value):
        return str(value).encode()  # nothing the writer quotes
    _CELL_WRITER.writerow(["", value])
    return _SINK.text[1:].encode()


def json_cell(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def float_cell(fmt: Format) -> Callable[[float], bytes]:
    """What writes a float's cell as :func:`cell` does: its ``str`` in CSV, ``json.dumps`` in JSONL."""
    return _str_bytes if fmt == "csv" else json_cell


def _str_bytes(value: float) -> bytes:
    return str(value).encode()


def cell(value: Any, fmt: Format) -> bytes:
    return csv_cell(value) if fmt == "csv" else json_cell(value)
