"""Container log files: a line the runtime split into pieces, joined back, at the bytes-in stage.

Two runtimes split a long line (over 16 KiB) into pieces as they write it:

- the CRI format (kubelet's ``/var/log/pods/NS_POD_UID/CONTAINER/N.log``, containerd, CRI-O):
  ``TIME STREAM TAGS MSG`` per piece, TAGS ``P`` (partial: more follows) or ``F`` (full: the last
  piece), maybe followed by ``:``-joined tags of later versions;
- Docker's json-file driver: ``{"log":"...","stream":"stdout","time":"..."}`` per piece, a piece
  whose ``log`` does not end in ``\\n`` continuing in the next entry of its stream.

:class:`Joiner` takes blocks of complete lines and gives them back with each split line whole: for CRI
``TIME STREAM F MSG`` (the first piece's time), for Docker one json-file entry of the joined ``log``.
The parser then cuts the envelope off as it does for any line of those formats
(``acceptmon.parse.streams``, ``acceptmon.parse.pairs.docker_json``): this is framing, not parsing.
Pieces of stdout and stderr are joined separately; lines after a piece wait until its line is whole,
so lines keep their order and a follower's position (the first byte not handed on) stays exact. A
joined line longer than ``max_line`` is given as None (the line reader makes it its OVERSIZED marker,
as for any over-long line) and is not held: its further pieces are dropped as they come. A block
without any piece costs a few searches, and a stream whose first line is neither format nothing.
"""

from __future__ import annotations

import json
import re
from typing import Final

from acceptmon.inputs.journal import file_head

_CRI: Final = re.compile(
    rb"(\d{4}-\d\d-\d\dT[0-9:.]{8,24}+(?:Z|[+-]\d\d:\d\d)) (stdout|stderr) ([PF])(?::[^ \n]{0,64}+)? "
)
"""One CRI line's head: (time, stream, P or F). Linear: a bounded repeat of characters that stop at the space."""
_CRI_MARKS: Final = (b" stdout P", b" stderr P")
_DOCKER_HEAD: Final = b'{"log":'
_DOCKER_WHOLE: Final = b'\\n","stream":'
"""How a json-file entry whose ``log`` ends in a newline goes on (the driver writes ``log`` then ``stream``)."""
_DOCKER_ESCAPED: Final = b'\\\\n","stream":'
"""A ``log`` ending in a backslash before ``n``...: the count of whole entries is not sure, each line is read."""
HOLD_LIMIT: Final = 4
"""Lines after a piece are held at most this many times ``max_line`` bytes; then its line is given up."""


class _Line:
    """A line being joined: where it goes among the held lines, its pieces so far, its first piece's head."""

    def __init__(self, slot: int, head: bytes, stream: str, docker: bool) -> None:
        self.slot, self.head, self.stream, self.docker = slot, head, stream, docker
        self.parts: list[bytes] = []
        self.size = 0
        self.over = False
        """Longer than the line limit: its pieces are dropped as they come."""

    def add(self, msg: bytes, max_line: int) -> None:
        self.size += len(msg)
        if self.size > max_line:
            self.over, self.parts = True, []
        elif not self.over:
            self.parts.append(msg)

    def whole(self) -> bytes:
        """The line its pieces make, in its format: CRI's head with ``F``, or one json-file entry."""
        msg = b"".join(self.parts)
        if not self.docker:
            return self.head + b" " + self.stream.encode() + b" F " + msg + b"\n"
        log = msg.decode("utf-8", "surrogatepass")
        entry = {"log": log if log.endswith("\n") else log + "\n", "stream": self.stream, "time": self.head.decode()}
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


class Joiner:
    """Joins the pieces of container log lines in blocks of complete lines; other lines pass unchanged.

    Out come blocks of lines, and None for a joined line over ``max_line`` (skipped)."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.reset()

    def reset(self) -> None:
        self.on: bool | None = None
        """Whether the stream is a container log, as its first line fed says (None before it came): other
        streams pass unlooked at, so a plain log costs nothing here."""
        self._open: dict[tuple[bool, str], _Line] = {}
        self._held: list[bytes | bool] = []
        """Lines taken but not handed on, in order: a line, False for one being joined, True for one given up."""
        self._starts: list[int] = []
        """Where each held line began, in bytes fed since nothing was held."""
        self._fed = 0

    @property
    def held(self) -> int:
        """Raw bytes taken but not handed on yet: from the first piece of the first line being joined."""
        return self._fed - self._starts[0] if self._starts else 0

    def feed(self, block: bytes) -> list[bytes | None]:
        if self.on is None:
            first = block.lstrip(b"\n")
            self.on = None if not first else is_container(first[: first.find(b"\n") + 1])
        if not self.on or (not self._open and not _has_pieces(block)):
            return [block]
        out: list[bytes | None] = []
        start = 0
        if not self._open:  # the lines before the first piece pass as they are
            start = _first_piece_line(block)
            if start:
                out.append(block[:start])
        plain: list[bytes] = []
        for line in block[start:].split(b"\n")[:-1]:  # only \n ends a line (a progress bar's \r does not)
            self._line(line + b"\n", out, plain)
        if plain:
            out.append(b"".join(plain))
        return out

    def finish(self) -> list[bytes | None]:
        """At the end of input: lines still being joined are handed on as far as they came."""
        out: list[bytes | None] = []
        plain: list[bytes] = []
        for line in list(self._open.values()):
            self._close(line)
        self._release(out, plain)
        if plain:
            out.append(b"".join(plain))
        self.reset()
        return out

    def _line(self, line: bytes, out: list[bytes | None], plain: list[bytes]) -> None:
        at = self._fed
        self._fed += len(line)
        if not self._open and _whole_entry(line):  # most json-file lines: no decoding needed
            plain.append(line)
            return
        piece = _piece(line)
        joined = None if piece is None else self._open.get((piece[0], piece[1]))
        if joined is None and (piece is None or not piece[4]):  # a whole line
            if self._open:
                self._keep(line, at)
                self._check(out, plain)
            else:
                plain.append(line)
            return
        assert piece is not None
        docker, stream, head, msg, partial = piece
        if joined is None:
            joined = self._open[docker, stream] = _Line(len(self._held), head, stream, docker)
            self._keep(False, at)
        joined.add(msg, self.max_line)
        if not partial:
            self._close(joined)
            self._release(out, plain)
        self._check(out, plain)

    def _keep(self, line: bytes | bool, at: int) -> None:
        self._held.append(line)
        self._starts.append(at)

    def _close(self, line: _Line) -> None:
        del self._open[line.docker, line.stream]
        self._held[line.slot] = True if line.over else line.whole()

    def _check(self, out: list[bytes | None], plain: list[bytes]) -> None:
        """Past :data:`HOLD_LIMIT`, the lines being joined are given up (skipped) and the rest handed on."""
        if self.held > HOLD_LIMIT * self.max_line:
            for line in list(self._open.values()):
                line.over = True
                self._close(line)
            self._release(out, plain)

    def _release(self, out: list[bytes | None], plain: list[bytes]) -> None:
        """Hand on the held lines up to the first line still being joined."""
        stop = next((i for i, x in enumerate(self._held) if x is False), len(self._held))
        if not stop:
            return
        ready = self._held[:stop]
        del self._held[:stop], self._starts[:stop]
        for x in ready:
            if isinstance(x, bytes):
                plain.append(x)
                continue
            if plain:
                out.append(b"".join(plain))
                plain.clear()
            out.append(None)
        for line in self._open.values():
            line.slot -= stop
        if not self._held:
            self._fed = 0


def _has_pieces(block: bytes) -> bool:
    """Whether ``block`` may hold a piece of a split line (a cheap test; each line is then read)."""
    if any(mark in block for mark in _CRI_MARKS):
        return True
    if _DOCKER_HEAD not in block:
        return False
    return _DOCKER_ESCAPED in block or block.count(_DOCKER_HEAD) != block.count(_DOCKER_WHOLE)


def _whole_entry(line: bytes) -> bool:
    """A json-file line whose ``log`` surely ends in a newline."""
    return line.startswith(_DOCKER_HEAD) and _DOCKER_WHOLE in line and _DOCKER_ESCAPED not in line


def _first_piece_line(block: bytes) -> int:
    """The start of the first line that may be a piece (0 if unsure)."""
    hits = [i for i in (block.find(m) for m in (*_CRI_MARKS, _DOCKER_HEAD)) if i >= 0]
    if not hits or min(hits) == block.find(_DOCKER_HEAD):
        return 0  # json-file: every line starts so; which one is a piece is known only by reading them
    return block.rfind(b"\n", 0, min(hits)) + 1


def _piece(line: bytes) -> tuple[bool, str, bytes, bytes, bool] | None:
    """(docker?, stream, head, message, partial?) of a CRI or json-file line; None for another line."""
    if line[:1].isdigit():
        m = _CRI.match(line)
        if m is None:
            return None
        return False, m.group(2).decode(), m.group(1), line[m.end() :].rstrip(b"\n"), m.group(3) == b"P"
    if not line.startswith(_DOCKER_HEAD):
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    log = entry.get("log") if isinstance(entry, dict) else None
    if not isinstance(log, str):
        return None
    stream, time = entry.get("stream"), entry.get("time")
    head = time.encode() if isinstance(time, str) else b""
    msg = log.encode("utf-8", "surrogatepass")
    return True, stream if isinstance(stream, str) else "", head, msg, not log.endswith("\n")


def is_container(head: bytes) -> bool:
    """Whether a file's first bytes are a CRI or json-file line."""
    return head.startswith(_DOCKER_HEAD) or (head[:1].isdigit() and _CRI.match(head) is not None)


def is_container_file(path: str) -> bool:
    """Whether a regular file starts as a CRI or json-file log does (read whole: no byte range cuts a split line)."""
    return is_container(file_head(path, 128))
