"""Value kinds: how logged text becomes a typed value (the ``kind`` of a grammar field).

A grammar field names one of :data:`VALUE_KINDS`; the loader rejects any other name. A
converter takes the text a named group (or a body key) captured and returns the value,
or raises ``ValueError`` (the line is then unrecognized, never an error). A new value
kind is one function and one :func:`register_value_kind` call. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import regex

Convert = Callable[[str], Any]
_isfinite = math.isfinite

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
    global _LAST_TIMESTAMP
    last = _LAST_TIMESTAMP  # lines in a row often share their time: the last one read is kept (immutable)
    if last[0] == text:
        return last[1]
    stamp = datetime.fromisoformat(text.replace(",", ".", 1))
    _LAST_TIMESTAMP = (text, stamp)
    return stamp


_LAST_TIMESTAMP: tuple[str | None, datetime] = (None, datetime.min)


def to_rank(text: str) -> str | None:
    """Rank tokens with their white space folded (``DP0 TP0``); None for none."""
    return " ".join(text.split()) or None


def to_str(text: str) -> str:
    return text


@dataclass(frozen=True, slots=True)
class Yearless:
    """A log time without a year (``MM-DD HH:MM:SS``, vLLM): the parser gives it the year."""

    month: int
    day: int
    hour: int
    minute: int
    second: int

    def at(self, year: int) -> datetime:
        """This time in ``year`` (ValueError for 02-29 in a common year)."""
        return datetime(year, self.month, self.day, self.hour, self.minute, self.second)


def to_yearless(text: str) -> Yearless:
    """``MM-DD HH:MM:SS``; pure: which year it is in is the parser's business."""
    global _LAST_YEARLESS
    last = _LAST_YEARLESS  # lines in a row often share their time: the last one read is kept (immutable)
    if last[0] == text:
        return last[1]
    date, _, clock = text.strip().partition(" ")
    month, _, day = date.partition("-")
    h, m, s = clock.split(":")
    stamp = Yearless(int(month), int(day), int(h), int(m), int(s))
    stamp.at(2000)  # a leap year: rejects only impossible dates
    _LAST_YEARLESS = (text, stamp)
    return stamp


_LAST_YEARLESS: tuple[str | None, Yearless] = (None, Yearless(1, 1, 0, 0, 0))


def year_not_after(stamp: Yearless, now: datetime) -> int:
    """The latest year in which ``stamp`` is not later than ``now`` (a log's first line is in the past)."""
    for year in range(now.year, now.year - 5, -1):
        if _not_after(stamp, year, now):
            return year
    return now.year


def _not_after(stamp: Yearless, year: int, now: datetime) -> bool:
    try:
        return stamp.at(year) <= now
    except ValueError:  # 02-29 in a common year
        return False


def to_number(text: str) -> float | None:
    """A number before an optional unit (``388.6 tokens/s``, ``0.642``, ``10616.``); ``nan`` (or inf) is empty."""
    words = text.split(None, 1)  # the first word; inline: once per number of every stats line
    if not words:
        raise ValueError("no value")
    value = float(words[0].rstrip("."))
    return value if _isfinite(value) else None


def _first_word(text: str) -> str:
    words = text.split(None, 1)
    if not words:
        raise ValueError("no value")
    return words[0]


def to_count(text: str) -> int:
    """An integer before an optional unit (``19 reqs``, ``1289 tokens``, ``10616.``)."""
    value = int(_first_word(text).rstrip("."))
    if value < 0:
        raise ValueError(f"a count cannot be negative: {text!r}")
    return value


PERCENT_DIGITS = 8
"""A percentage's fraction is rounded to this many decimal digits (the compiled matcher's ``PERCENT_DIGITS`` too)."""


def to_percent(text: str) -> float | None:
    """``65.7%`` as the fraction 0.657; ``nan%`` is empty."""
    value = float(text.strip().rstrip(".").removesuffix("%"))
    if not math.isfinite(value):
        return None
    if not 0 <= value <= 100:
        raise ValueError(f"a percentage from 0 to 100: {text!r}")
    return round(value / 100, PERCENT_DIGITS)


def to_float_list(text: str) -> list[float | None]:
    """``0.829, 0.654, 0.488`` as a list (``nan`` entries empty)."""
    parts = text.split(",")
    numbers = _plain_floats(parts)
    if numbers is not None:
        return [value if _isfinite(value) else None for value in numbers]
    if any(not part.strip() for part in parts):
        raise ValueError(f"an empty entry in a list: {text!r}")  # dropping it would shift the positions
    return [to_number(part) for part in parts]


def _plain_floats(parts: list[str]) -> list[float] | None:
    """The usual list: every entry a plain number, which ``float`` reads as :func:`to_number` does
    (a literal with no space inside is its own first word; a trailing '.' ends no other value)."""
    try:
        return [float(part) for part in parts]
    except ValueError:
        return None  # some entry has a unit, a space or nothing: to_number, entry by entry


def to_count_list(text: str) -> list[int]:
    """``[2, 3, 5, 10]`` (or without brackets) as a list of counts: a histogram's bins, in order."""
    inner = text.strip()
    if inner[:1] == "[" and inner[-1:] == "]":
        inner = inner[1:-1]
    if not inner.strip():
        return []
    values = [int(part) for part in inner.split(",")]
    if any(v < 0 for v in values):
        raise ValueError(f"a negative count in a list: {text[:40]!r}")
    return values


def to_engine(text: str) -> str:
    """An engine index as logged (``000``), or ``all`` for an aggregated line (``2 Engines Aggregated``)."""
    text = text.strip()
    if text.isdigit():
        return text
    if text.endswith("Engines Aggregated"):
        return "all"
    raise ValueError(f"not an engine: {text!r}")


class Fields(dict[str, Any]):
    """Several record fields from one logged value (a launch key whose value is itself a config)."""


_REPR_ITEM = regex.compile(r"""(?<![\w'"])['"]?(\w++)['"]?\s*+[=:]\s*+('[^']*+'|"[^"]*+"|[\w.+-]++)""")
"""``key=value`` or ``'key': value`` in a repr; starts only where a word starts, so the scan stays linear."""
_NAMES = {"draft_model": "model", "num_spec_tokens": "k", "num_speculative_tokens": "k", "method": "method"}


def to_speculative_config(text: str) -> Fields:
    """vLLM's speculative config, as a ``SpeculativeConfig(...)`` repr or the dict the user gave.

    A repr's method is the one vLLM resolved (``spec_algorithm``, source ``logged``); a dict's
    is the user's (``spec_method_given``), which vLLM may replace, as the parser then works
    out (:mod:`acceptmon.parse.vllm_method`). ``[ngram]`` as the draft model (<= 0.7), or
    ``ngram`` in a dict, is the ngram method and no draft model.
    """
    text = text.strip()
    if text in ("None", "", "{}"):
        return Fields()
    if len(text) > 4000 or not text.startswith(("SpeculativeConfig(", "{")):
        raise ValueError(f"not a speculative config: {text[:60]!r}")
    found: dict[str, str] = {}
    for m in _REPR_ITEM.finditer(text):
        key = _NAMES.get(m.group(1), m.group(1))
        found.setdefault(key, m.group(2).strip("'\""))
    out = Fields()
    model, method = found.get("model"), found.get("method")
    resolved = text.startswith("SpeculativeConfig(")
    if model == "[ngram]" or (model == "ngram" and not resolved):
        model, method = None, "ngram"
    if method is not None and method != "None":
        if resolved:
            out.update(spec_algorithm=method, spec_algorithm_source="logged")
        else:
            out["spec_method_given"] = method
    if model is not None and model != "None":
        out["spec_draft_model_path"] = model
    if "k" in found and found["k"] != "None":
        out.update(to_num_spec_tokens(found["k"]))
    return out


def to_draft_model(text: str) -> Fields:
    """``--speculative-model`` (<= 0.7): a draft model, or ``[ngram]`` for prompt lookup."""
    text = text.strip().strip("'\"")
    if text in ("None", ""):
        return Fields()
    return Fields(spec_method_given="ngram") if text == "[ngram]" else Fields(spec_draft_model_path=text)


def to_num_spec_tokens(text: str) -> Fields:
    """vLLM's k: draft tokens per step; a step verifies k + 1 tokens (the chain and the bonus token)."""
    k = int(text)
    return Fields(spec_num_steps=k, spec_num_draft_tokens=k + 1)


def to_ratio(text: str) -> float | None:
    """``a/b`` (``3/4``, ``3/ 4``) as a / b to six places; empty when b is 0 (a server that logged no
    denominator: counted, never divided by)."""
    num, sep, den = text.partition("/")
    if not sep:
        raise ValueError(f"not a ratio: {text!r}")
    a, b = int(num), int(den)
    if a < 0 or b < 0:
        raise ValueError(f"a ratio of counts cannot be negative: {text!r}")
    return round(a / b, 6) if b else None


def to_step_tokens(text: str) -> float:
    """The accepted draft tokens of one verify step as the tokens that step emitted: n + 1 (the bonus token)."""
    n = int(text)
    if n < 0:
        raise ValueError(f"a count cannot be negative: {text!r}")
    return float(n + 1)


def to_float(text: str) -> float | None:
    """A number; ``nan`` and ``inf`` are empty (a server's 0/0), never a value that spoils every mean."""
    value = float(text)
    return value if _isfinite(value) else None


VALUE_KINDS: dict[str, Convert] = {
    "int": int,
    "float": to_float,
    "bool": to_bool,
    "str": to_str,
    "timestamp": to_timestamp,
    "rank": to_rank,
    "monthday": to_yearless,
    "number": to_number,
    "count": to_count,
    "percent": to_percent,
    "float_list": to_float_list,
    "count_list": to_count_list,
    "engine": to_engine,
    "speculative_config": to_speculative_config,
    "draft_model": to_draft_model,
    "num_spec_tokens": to_num_spec_tokens,
    "ratio": to_ratio,
    "step_tokens": to_step_tokens,
}
"""Every value kind a grammar may name, with its converter."""


def register_value_kind(name: str, convert: Convert) -> None:
    """Add a value kind (or replace one: a test's toy kind)."""
    VALUE_KINDS[name] = convert
