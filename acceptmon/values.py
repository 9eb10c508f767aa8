"""Value kinds: how logged text becomes a typed value (the ``kind`` of a grammar field).

A grammar field names one of :data:`VALUE_KINDS`; the loader rejects any other name. A
converter takes the text a named group (or a body key) captured and returns the value,
or raises ``ValueError`` (the line is then unrecognized, never an error). A new value
kind is one function and one :func:`register_value_kind` call. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

Convert = Callable[[str], Any]

_BOOLS = {"True": True, "False": False, "true": True, "false": False}


def to_bool(text: str) -> bool:
    known = _BOOLS.get(text)
    if known is not None:
        return known
    low = text.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def to_timestamp(text: str) -> datetime:
    """ISO date and time, with ``,`` or ``.`` before the fraction (Python logging writes ``,``)."""
    return datetime.fromisoformat(text.replace(",", ".", 1))


def to_rank(text: str) -> str | None:
    """Rank tokens with their white space folded (``DP0 TP0``); None for none."""
    return " ".join(text.split()) or None


def to_str(text: str) -> str:
    return text


VALUE_KINDS: dict[str, Convert] = {
    "int": int,
    "float": float,
    "bool": to_bool,
    "str": to_str,
    "timestamp": to_timestamp,
    "rank": to_rank,
}
"""Every value kind a grammar may name, with its converter."""


def register_value_kind(name: str, convert: Convert) -> None:
    """Add a value kind (or replace one: a test's toy kind)."""
    VALUE_KINDS[name] = convert
