"""Reading a message body: ``key: value`` pairs, a kwargs or dict repr, a Docker json-file line. Pure.

The parser matches a line's envelope and message with a grammar's regex; what the
``body`` group captured is read here, in one pass, without regexes that could
backtrack.
"""

from __future__ import annotations

import ast
import json
import warnings
from collections.abc import Callable
from typing import Any

import regex

from acceptmon.parse.grammar import Converter

_KEYLIKE = regex.compile(r"[#A-Za-z][\w .()/+%#'-]*")
_MAY_WARN = regex.compile(r"\\|\d\.?[A-Za-z_\x80-\U0010ffff]")
"""What Python's tokenizer warns of: an escape (``'\\d'``) or a number run into a word (``1if``, ``1.if``)."""


def docker_json(text: str) -> str:
    """The message of a Docker json-file log line (``{"log":"...\\n","stream":...}``), else the line."""
    try:
        entry = json.loads(text)
    except ValueError:
        return text
    log = entry.get("log") if isinstance(entry, dict) else None
    return log.rstrip("\n") if isinstance(log, str) else text


JOURNAL_HEAD = ('{"__', '{ "__')
"""How a ``journalctl -o json`` line starts (``{"__CURSOR":...``, before systemd 246 ``{ "__CURSOR" : ...``);
:mod:`acceptmon.inputs.journal` gives ``-o export`` entries as such lines too."""


def journal_entry(text: str) -> tuple[str, str, int | None] | None:
    """A journald entry line's ``MESSAGE`` (text, or an array of byte values as journalctl writes a
    value that is not printable UTF-8), its ``_SYSTEMD_UNIT`` ('' if none) and ``__REALTIME_TIMESTAMP``
    (microseconds since the epoch, or None); None if the line is not a JSON entry with a message."""
    try:
        entry = json.loads(text)
    except ValueError:
        return None
    message = entry.get("MESSAGE") if isinstance(entry, dict) else None
    if isinstance(message, list):
        if not all(isinstance(b, int) and 0 <= b < 256 for b in message):
            return None
        message = bytes(message).decode("utf-8", "replace")
    if not isinstance(message, str):
        return None
    unit = entry.get("_SYSTEMD_UNIT")
    stamp = entry.get("__REALTIME_TIMESTAMP")
    micros = int(stamp) if isinstance(stamp, str) and stamp.isdigit() and len(stamp) <= 18 else None
    return message.rstrip("\n"), unit if isinstance(unit, str) else "", micros


Table = dict[str, tuple[str, Callable[[str], Any], bool, Converter]]
"""Body key -> (field, plain converter, fallback, the converter itself): :attr:`Grammar.key_table`."""


def read_pairs(body: str, table: Table, values: dict[str, Any], extra: dict[str, str]) -> None:
    """Read ``key: value, key: value`` at known keys (``table``), in any order, into ``values``;
    unknown keys into ``extra`` (empty when called).

    Fast path: every piece is one pair. A piece without ``: `` means a value itself
    holds ', ' (``est uncap acc len: 3.3 [3.1, 3.5]``, ``#token: full=1, swa=2``);
    then the careful reader reads the body instead (:func:`_read_pairs_careful`), or,
    when it would read the pieces before as the fast path did, only the rest (:func:`_read_rest`).
    """
    pieces = body.rstrip(", \t").split(", ")
    found: dict[str, Any] = {}
    get = table.get
    fallbacks = False
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if not sep:  # the first piece without ': ' (every one before has it, so none is equal to it)
            stop = pieces.index(piece)
            if stop and not fallbacks and all(map(_keylike, extra)):
                values.update(found)  # what the careful reader makes of pieces[:stop]: one pair each
                _read_rest(pieces, stop, table, values, extra)
            else:
                _read_pairs_careful(pieces, table, values, extra)
            return
        entry = get(key)
        if entry is None:
            extra[key] = value
            continue
        field_name, convert, fallback, conv = entry
        if fallback:
            if field_name in found:
                continue
            fallbacks = True
        try:
            found[field_name] = convert(value)
        except (ValueError, ArithmeticError, IndexError, KeyError, TypeError):
            found[field_name] = conv(value)  # the careful call: a value pattern, or one ValueError
    values.update(found)


def _read_rest(pieces: list[str], stop: int, table: Table, values: dict[str, Any], extra: dict[str, str]) -> None:
    """The careful reader from the pair of ``pieces[stop - 1]`` on, the pairs before already in ``values``.

    Exact where every key before ``stop`` starts a pair (known, or key-like) and none is a
    fallback: the careful reader then leaves what the fast path read of them, and the fast
    path's conversion of ``pieces[stop - 1]`` alone raised what it would raise.
    """
    key, _, value = pieces[stop - 1].partition(": ")
    _read_pieces([(key, [value])], pieces[stop:], table, values, extra)


def _read_pairs_careful(pieces: list[str], table: Table, values: dict[str, Any], extra: dict[str, str]) -> None:
    """A piece starts a new pair only if its key is known or looks like a key."""
    _read_pieces([], pieces, table, values, extra)


def _read_pieces(
    pairs: list[tuple[str, list[str]]], pieces: list[str], table: Table, values: dict[str, Any], extra: dict[str, str]
) -> None:
    """Pairs from ``pieces`` after ``pairs`` (a piece starts one if its key is known or key-like, else
    joins the one before), then their values: parts joined once at the end, linear in the body's length."""
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if sep and (key in table or _keylike(key)):
            pairs.append((key, [value]))
        elif pairs:
            pairs[-1][1].append(piece)
    for key, parts in pairs:
        entry = table.get(key)
        if entry is None:
            extra[key] = ", ".join(parts)
        elif not (entry[2] and entry[0] in values):
            values[entry[0]] = entry[3](", ".join(parts))


def _keylike(key: str) -> bool:
    known = _KEYLIKE_SEEN.get(key)
    if known is None:
        known = _KEYLIKE.fullmatch(key) is not None
        if len(_KEYLIKE_SEEN) < 4096:  # keys repeat line after line; a bound against a log of ever-new ones
            _KEYLIKE_SEEN[key] = known
    return known


_KEYLIKE_SEEN: dict[str, bool] = {}
keylike = _keylike
"""Whether the careful reader takes ``key`` (one it does not know) for a key: the fast lane asks it too."""


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


def split_argv(body: str) -> dict[str, str]:
    """A command line's options as raw values: ``-m a.gguf --draft-max 16 --flag`` gives ``{'-m': 'a.gguf',
    '--draft-max': '16', '--flag': 'true'}``; ``--key=value`` is split; the first word that is not an option
    and follows no option ends the options (a redirection, a second command). A later option wins."""
    out: dict[str, str] = {}
    words = body.split()
    i, n = 0, len(words)
    while i < n:
        word = words[i]
        if not word.startswith("-") or word in ("-", "--"):
            break
        key, eq, value = word.partition("=")
        if not eq:
            nxt = words[i + 1] if i + 1 < n else ""
            if nxt and (not nxt.startswith("-") or _is_number(nxt)):
                value, i = nxt, i + 1
            else:
                value = "true"
        out[key] = value.strip("'\"")
        i += 1
    return out


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def literal_eval(text: str) -> Any:
    """``ast.literal_eval`` that lets no Python warning out (a logged value is data, not the user's code).

    The tokenizer prints a ``SyntaxWarning`` for ``1if`` or ``'\\d'`` (on stderr, into serve's
    journal), once per value. Where one could come, it is silenced, and the value is what it would
    have been. ``catch_warnings`` swaps the process's filters: parsing runs on one thread per process
    (the pool's workers are processes), and two threads at once could at worst leave warnings ignored.
    """
    if not _MAY_WARN.search(text):
        return ast.literal_eval(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


def literal(text: str) -> Any:
    try:
        value = literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return text
