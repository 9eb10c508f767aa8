"""Reading a message body: ``key: value`` pairs, a kwargs or dict repr, a Docker json-file line. Pure.

The parser matches a line's envelope and message with a grammar's regex; what the
``body`` group captured is read here, in one pass, without regexes that could
backtrack.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import Any

import regex

from acceptmon.grammar import Converter

_KEYLIKE = regex.compile(r"[#A-Za-z][\w .()/+%#'-]*")


def docker_json(text: str) -> str:
    """The message of a Docker json-file log line (``{"log":"...\\n","stream":...}``), else the line."""
    try:
        entry = json.loads(text)
    except ValueError:
        return text
    log = entry.get("log") if isinstance(entry, dict) else None
    return log.rstrip("\n") if isinstance(log, str) else text


def read_pairs(
    body: str,
    table: dict[str, tuple[str, Callable[[str], Any], bool, Converter]],
    keys: dict[str, Converter],
    values: dict[str, Any],
    extra: dict[str, str],
) -> None:
    """Read ``key: value, key: value`` at known keys, in any order.

    Fast path: every piece is one pair. A piece without ``: `` means a value itself
    holds ', ' (``est uncap acc len: 3.3 [3.1, 3.5]``, ``#token: full=1, swa=2``);
    then the careful reader reads the body instead.
    """
    pieces = body.rstrip(", \t").split(", ")
    found: dict[str, Any] = {}
    get = table.get
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if not sep:
            _read_pairs_careful(pieces, keys, values, extra)
            return
        entry = get(key)
        if entry is None:
            extra[key] = value
            continue
        field_name, convert, fallback, conv = entry
        if fallback and field_name in found:
            continue
        try:
            found[field_name] = convert(value)
        except (ValueError, ArithmeticError, IndexError, KeyError, TypeError):
            found[field_name] = conv(value)  # the careful call: a value pattern, or one ValueError
    values.update(found)


def _read_pairs_careful(
    pieces: list[str], keys: dict[str, Converter], values: dict[str, Any], extra: dict[str, str]
) -> None:
    """A piece starts a new pair only if its key is known or looks like a key."""
    pairs: list[tuple[str, list[str]]] = []  # parts joined once at the end: linear in the body's length
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if sep and (key in keys or _KEYLIKE.fullmatch(key)):
            pairs.append((key, [value]))
        elif pairs:
            pairs[-1][1].append(piece)
    for key, parts in pairs:
        value = ", ".join(parts)
        conv = keys.get(key)
        if conv is None:
            extra[key] = value
        elif not (conv.fallback and conv.field in values):
            values[conv.field] = conv(value)


def split_top_level(body: str, sep: str) -> dict[str, str]:
    """Split a repr of kwargs (``a=1, b='x, y'``) or a dict (``'a': 1``) into raw values."""
    out: dict[str, str] = {}
    depth, quote, start = 0, "", 0
    items: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    items.append(body[start:])
    for item in items:
        key, found, value = item.partition(sep)
        key = key.strip().strip("'\"")
        if found and key.isidentifier():
            out[key] = value.strip()
    return out


def literal(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return text
