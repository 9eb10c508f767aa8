"""Reading the ``meta_info`` of a finished-request log line, in one linear pass. Pure.

SGLang's request logger writes one line per finished request (``--log-requests``):
``Finish: obj=GenerateReqInput(...), out={..., 'meta_info': {...}, ...}`` (Python
reprs), or a JSON record ``{"timestamp": ..., "event": "request.finished", ...,
"out": {"meta_info": {...}}}``. The prompt and the output text are on that line, up
to hundreds of kB, and may quote anything, even another request's log line. So the
line is never given to ``ast`` or ``json`` whole, and no regex runs over it that
could backtrack: a tokenizer steps over it once (a quoted string, a bracket, or a run
of other characters per step; each token regex is possessive, so a step never re-reads
text), keeps the path of keys to the current container, and reads the members of the
one dict at ``out`` → ``meta_info``. Only those members' values are converted.

A list is read only for a ``count_list`` key (the acceptance histogram).
``None``/``null`` leaves a field unset; ``nan`` and ``inf`` (``NaN``/``Infinity`` in
JSON) leave a float field unset too, as a request's mean of nothing is no number. A
nested dict's members are read as ``parent.child`` keys (``finish_reason.type``).
Unknown keys with a short scalar value go to ``extra``, as logged.
"""

from __future__ import annotations

import json
import math
from typing import Any

import regex

from acceptmon.parse.grammar import Converter
from acceptmon.parse.pairs import literal_eval
from acceptmon.parse.values import to_count_list

_TOKEN = regex.compile(r"""[^'"()\[\]{}]++|'(?:[^'\\]++|\\.)*+'|"(?:[^"\\]++|\\.)*+"|[()\[\]{}]""", regex.DOTALL)
"""One step: a run of plain characters, a whole quoted string, or one bracket."""
_KWARG = regex.compile(r"(\w+)=\s*$")
_OPEN, _CLOSE = "([{", ")]}"
_PATHS = (("out", "meta_info"), (None, "out", "meta_info"))
"""Where ``meta_info`` sits: a kwarg ``out`` of the Finish line, or the JSON record's ``out``."""
EXTRA_MAX = 80
"""Longest unknown scalar (as logged) kept in ``extra``."""
STRING_MAX = 4096
"""Longest quoted value converted for a known key; a longer one is format drift."""
_ABSENT = frozenset({"None", "null"})

Span = tuple[int, int]


def read_meta_info(text: str, keys: dict[str, Converter], values: dict[str, Any], extra: dict[str, str]) -> None:
    """Fill ``values`` from the known keys of the line's ``meta_info`` (raise ValueError if it has none)."""
    start = find_meta_info(text)
    if start is None:
        raise ValueError("no out meta_info dict in the request line")
    members, _ = dict_members(text, start)
    nested = {k.partition(".")[0] for k in keys if "." in k}
    for key in nested & members.keys():
        s, _ = members[key]
        if text.startswith("{", s):
            inner, _ = dict_members(text, s + 1)
            members.update({f"{key}.{k}": span for k, span in inner.items() if f"{key}.{k}" in keys})
    for key, (s, e) in members.items():
        raw = text[s:e]
        conv = keys.get(key)
        if conv is None:
            if key not in nested and e - s <= EXTRA_MAX and raw[:1] not in ("{", "[", "("):
                extra[key] = _unquote(raw) if raw[:1] in ("'", '"') else raw
            continue
        value = _convert(conv, raw)
        if value is not None and not (conv.fallback and conv.field in values):
            values[conv.field] = value


def _convert(conv: Converter, raw: str) -> Any:
    if raw in _ABSENT:
        return None
    if raw[:1] in ("'", '"'):
        if len(raw) > STRING_MAX:
            raise ValueError(f"quoted value of {len(raw)} characters")
        raw = _unquote(raw)
    elif raw[:1] == "[" and conv.convert is to_count_list:
        if len(raw) > STRING_MAX:
            raise ValueError(f"a list of {len(raw)} characters")
    elif raw[:1] in ("{", "[", "("):
        raise ValueError(f"a container where a {conv.field} value was expected")
    value = conv(raw)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _unquote(raw: str) -> str:
    try:
        value = json.loads(raw) if raw[0] == '"' else literal_eval(raw)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"bad quoted value: {exc}") from None
    if not isinstance(value, str):
        raise ValueError("a quoted value is not text")
    return value


def find_meta_info(text: str) -> int | None:
    """Index just after the ``{`` of ``out``'s ``meta_info`` dict, or None."""
    keys: list[str | None] = []
    pending: str | None = None
    last_string = ""
    pos, n = 0, len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            return None  # an unterminated quote: not a line we can read
        tok, pos = m.group(), m.end()
        c = tok[0]
        if c in _OPEN:
            keys.append(pending)
            pending = None
            if c == "{" and tuple(keys) in _PATHS:
                return pos
        elif c in _CLOSE:
            if not keys:
                return None
            keys.pop()
            pending = None
        elif c in "'\"":
            last_string = tok
        else:
            pending = _key_of(tok, last_string)
            last_string = ""
    return None


def _key_of(run: str, last_string: str) -> str | None:
    """The key a plain run introduces: ``, out=`` (a kwarg) or ``: `` after a quoted key."""
    if last_string and run.lstrip().startswith(":"):
        return last_string[1:-1]
    if run.rstrip().endswith("="):
        m = _KWARG.search(run[-64:])
        return m.group(1) if m else None
    return None


def dict_members(text: str, start: int) -> tuple[dict[str, Span], int]:
    """Top-level members of the dict whose body starts at ``start``: key → span of its raw value.

    Returns the members and the index after the closing ``}``. String keys only (a
    dict with other keys is read as far as its string keys go).
    """
    members: dict[str, Span] = {}
    depth = 0
    key: str | None = None
    value_start = -1
    last_string: Span | None = None
    pos, n = start, len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise ValueError("unterminated quote in meta_info")
        tok, begin, pos = m.group(), m.start(), m.end()
        c = tok[0]
        if depth > 0:
            depth += (c in _OPEN) - (c in _CLOSE)
            if depth == 0 and key is not None:
                members[key], key = (value_start, pos), None
            continue
        if c in _OPEN:
            depth, value_start = 1, begin
        elif c in _CLOSE:
            return members, pos
        elif c in "'\"":
            if key is not None:
                members[key], key = (begin, pos), None
            else:
                last_string = (begin, pos)
        else:
            key, last_string = _member_run(text, tok, begin, last_string, key, members)
    raise ValueError("meta_info dict is not closed")


def _member_run(
    text: str, tok: str, begin: int, last_string: Span | None, key: str | None, members: dict[str, Span]
) -> tuple[str | None, Span | None]:
    """A plain run inside the dict: ``: value, `` after a key, or the ``: `` before a quoted/bracketed value."""
    head, colon, rest = tok.partition(":")
    if colon and last_string is not None and not head.strip():
        key = text[last_string[0] + 1 : last_string[1] - 1]
        scalar = rest.partition(",")[0].strip()
        if scalar:
            at = begin + len(head) + 1 + rest.index(scalar)
            members[key] = (at, at + len(scalar))
            key = None
        return key, None
    return None, None
