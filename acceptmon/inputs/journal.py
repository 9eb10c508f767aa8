"""journald's ``journalctl`` output as one line per entry, at the bytes-in stage.

Two of journalctl's formats are read, told by a file's (or stdin's) first bytes:

- ``-o export`` (``__CURSOR=...`` first): ``KEY=value`` lines, an entry ending at a blank line; a field
  whose value is not plain text is ``KEY\\n``, its length as 64-bit little endian, the bytes and ``\\n``
  (systemd's "Journal Export Format"). An entry spans several lines, and a binary value may hold
  newlines (its length bytes too), so no line reader may cut it. That is why it is turned into lines
  here, before lines are cut, and not in the parser (which sees blocks of lines, and on ``-j N`` byte
  ranges that may start inside an entry): :class:`ExportReader` makes each entry the line
  ``journalctl -o json`` writes for it (a JSON object of its fields, values as UTF-8 text, undecodable
  bytes replaced). This is framing, not parsing: the parser reads journal JSON lines whichever format
  they came in (``acceptmon.parse.pairs.journal_entry``), as it reads Docker's json-file lines.
- ``-o json`` (``{"__CURSOR":`` first, or systemd's older ``{ "__CURSOR" :``): one entry per line
  already. journalctl writes a value that is not printable UTF-8 (ANSI colour, invalid bytes) as an
  array of byte values, in which no anchor can be found; :class:`JsonReader` rewrites just those lines
  with the value as text. Other lines pass as they are.

An ``-o export`` value longer than :data:`MAX_VALUE` is dropped unread (its entry keeps its other
fields). Such files are read whole, from their start (``acceptmon.pipeline.batch`` makes no byte ranges
of them). Blocks of converted lines go on to the line reader as any file's do.
"""

from __future__ import annotations

import json
import os
import re
from typing import BinaryIO, Final

EXPORT_HEAD: Final = b"__CURSOR="
JSON_HEAD: Final = re.compile(rb'\{\s?"__CURSOR"\s?:')
"""``{"__CURSOR":`` (systemd 246 and later) or ``{ "__CURSOR" :`` (before)."""
HEAD_BYTES: Final = 16
_ARRAY: Final = re.compile(rb'"\s?:\s?\[')
CHUNK: Final = 1 << 20
MAX_VALUE: Final = 1 << 20
"""A longer export value is skipped, not held."""


def wrap(stream: BinaryIO) -> BinaryIO:
    """``stream``, or a reader of its journal entries as JSON lines if its first bytes say it is one.

    The stream must be at its start; its first bytes are looked at with ``peek`` (files, gzip files
    and stdin have it), so nothing is consumed."""
    peek = getattr(stream, "peek", None)
    if peek is not None:
        head = peek(HEAD_BYTES)[:HEAD_BYTES]  # a read error (a corrupt gzip file) is the caller's to name
        if head.startswith(EXPORT_HEAD):
            return ExportReader(stream)  # type: ignore[return-value]
        if JSON_HEAD.match(head):
            return JsonReader(stream)  # type: ignore[return-value]
    return stream


def is_journal(path: str) -> bool:
    """True for a plain file that starts as journalctl's export or JSON output does."""
    head = file_head(path, HEAD_BYTES)
    return head.startswith(EXPORT_HEAD) or JSON_HEAD.match(head) is not None


def is_export(path: str) -> bool:
    """True for a plain file that starts as journalctl's ``-o export`` output does."""
    return file_head(path, HEAD_BYTES).startswith(EXPORT_HEAD)


def file_head(path: str, n: int) -> bytes:
    """The first ``n`` bytes of a regular file; empty for anything else (opening a FIFO would wait for a writer)."""
    try:
        if not os.path.isfile(path):
            return b""
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


class _Converted:
    """A read-only stream of converted bytes (``read`` only; it cannot ``tell``: read from its start)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.out, self.eof = raw, bytearray(), False
        self.live = bool(getattr(raw, "live", False))
        """A stream read as it comes (``acceptmon.inputs.files.Pipe``): what is converted is handed on at once."""

    def read(self, n: int = -1) -> bytes:
        while not self.eof and (n < 0 or len(self.out) < n) and not (self.live and self.out):
            data = self.raw.read(CHUNK)
            if not data:
                self.eof = True
                self.finish()
            else:
                self.convert(data)
        take = len(self.out) if n < 0 else n
        got = bytes(self.out[:take])
        del self.out[:take]
        return got

    def tell(self) -> int:
        raise OSError("a converted journal stream cannot tell")

    def convert(self, data: bytes) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def json_line(entry: dict[str, str]) -> bytes:
    """One entry as ``journalctl -o json`` writes it (text values)."""
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class ExportReader(_Converted):
    """``journalctl -o export`` as ``-o json`` lines, one per entry."""

    def __init__(self, raw: BinaryIO | None = None) -> None:
        """``raw``: the stream read; None when bytes are pushed in (:meth:`convert`, then taken from ``out``)."""
        super().__init__(raw)  # type: ignore[arg-type]
        self.buf = b""
        self.entry: dict[str, str] = {}
        self.skip = 0  # bytes of an over-long binary value (and its newline) still to drop
        self.fed = 0
        self.entry_start = 0
        """Where the entry being read began, in bytes converted."""

    @property
    def pending(self) -> int:
        """Bytes converted since the last entry ended (an entry's line comes out only once it is whole)."""
        return self.fed - self.entry_start

    def convert(self, data: bytes) -> None:
        self.fed += len(data)
        if self.skip:
            drop = min(self.skip, len(data))
            self.skip -= drop
            data = data[drop:]
        buf = self.buf + data
        pos = self._fields(buf, self.fed - len(buf))
        self.buf = buf[pos:]

    def _fields(self, buf: bytes, origin: int = 0) -> int:
        """Read whole fields from ``buf`` (at byte ``origin`` of the input); the position of the first byte not read."""
        pos, n = 0, len(buf)
        while pos < n and not self.skip:
            if buf[pos] == 0x0A:  # a blank line: the entry ends
                self._emit()
                pos += 1
                self.entry_start = origin + pos
                continue
            nl = buf.find(b"\n", pos)
            if nl < 0:
                return pos
            key, eq, value = buf[pos:nl].partition(b"=")
            if eq:
                self.entry[_text(key)] = _text(value)
                pos = nl + 1
                continue
            if n - nl - 1 < 8:
                return pos
            size = int.from_bytes(buf[nl + 1 : nl + 9], "little")
            start = nl + 9
            if size > MAX_VALUE:
                self.skip = size + 1 - min(size + 1, n - start)
                return n if self.skip else start + size + 1
            if n - start < size + 1:
                return pos
            self.entry[_text(key)] = _text(buf[start : start + size])
            pos = start + size + 1
        return pos

    def _emit(self) -> None:
        if self.entry:
            self.out += json_line(self.entry)
        self.entry = {}

    def finish(self) -> None:
        if self.buf.strip(b"\n"):
            self._fields(self.buf + b"\n")
        self.buf = b""
        self._emit()


class JsonReader(_Converted):
    """``journalctl -o json`` with array values (bytes) turned into text, so a line's anchors show."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__(raw)
        self.carry = b""

    def convert(self, data: bytes) -> None:
        buf = self.carry + data
        cut = buf.rfind(b"\n") + 1
        self.carry = buf[cut:]
        self._lines(buf[:cut])

    def _lines(self, block: bytes) -> None:
        if _ARRAY.search(block) is None:
            self.out += block
            return
        for line in block.splitlines(keepends=True):
            self.out += _as_text(line) if _ARRAY.search(line) else line

    def finish(self) -> None:
        if self.carry:
            self._lines(self.carry)
        self.carry = b""


def _as_text(line: bytes) -> bytes:
    """A JSON entry line with each byte-array value as text; the line unchanged if it is not one."""
    try:
        entry = json.loads(line)
    except ValueError:
        return line
    if not isinstance(entry, dict):
        return line
    for key, value in entry.items():
        if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
            entry[key] = _text(bytes(value))
    return json_line(entry)
