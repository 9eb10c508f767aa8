"""Persisted follow positions (``--state-file``), so a restarted follower resumes exactly.

A position belongs to one file *identity*: device, inode and a fingerprint of the
file's first line (inodes are reused after a delete). It records the byte offset
of the first line not yet processed and the parser's state there (line number,
run index, the current launch's config fields without ``extra`` but :data:`KEPT_EXTRA`, so no server
argument such as an API key is ever written; the same for each stream a line
prefix names, two pods in one file), so the resumed parser is in the same state
as if it had never stopped.

The file is JSON, mode 0600, written atomically (temporary file + rename). A state
file that cannot be read, is damaged or of another version costs one warning and is
read as empty (a damaged one is kept as ``<state>.bad``); an invalid entry costs its
file's position only; a file acceptmon never used that holds something else is refused,
never overwritten. One process at a time uses a state file: :func:`lock` holds
``<state>.lock`` for the process lifetime.

Positions are a convenience, the metrics the product: when the state file's disk is
full (``ENOSPC``, ``EDQUOT``), a state file opened with :func:`open_state` costs one
warning, its positions stay in memory, and every later save tries again (one that
succeeds says so). Starting on a full disk is no error either.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_serializer

from acceptmon.errors import InputError
from acceptmon.inputs.files import BOM
from acceptmon.parse.parser import ParseState
from acceptmon.parse.records import LaunchConfig
from acceptmon.parse.state import StreamState

FINGERPRINT_BYTES = 1024
GZIP_MAGIC = b"\x1f\x8b"
VERSION: Final = 1
"""The state file format this code reads and writes; any other version is read as empty."""
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_notes: dict[Path, Callable[[str], None]] = {}
"""Where each state file opened with :func:`open_state` reports a full disk."""
_unsaved: set[Path] = set()
"""State files whose last save found their disk full (warned once; the next save that succeeds says so)."""


KEPT_EXTRA = ("decode_log_interval",)
"""Server arguments beside the config fields that a resumed follower needs, none of them a secret: SGLang's
``decode_log_interval`` (the verify-step and token counters are estimated from it)."""


def kept(launch: LaunchConfig | None) -> dict[str, Any] | None:
    """What a state file keeps of a launch config: its fields, and of ``extra`` only :data:`KEPT_EXTRA`."""
    if launch is None:
        return None
    extra = {k: launch.extra[k] for k in KEPT_EXTRA if k in launch.extra}
    return {**launch.model_dump(exclude={"extra"}), **({"extra": extra} if extra else {})}


class StreamPosition(BaseModel):
    """One stream's run in a file (a source a line prefix names, :mod:`acceptmon.parse.streams`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run: int = Field(0, ge=0)
    launch: LaunchConfig | None = None
    """As :attr:`FilePosition.launch`: never ``extra``."""
    launch_open: str | None = Field(None, max_length=64)

    @field_serializer("launch")
    def _no_extra(self, launch: LaunchConfig | None) -> dict[str, Any] | None:
        return kept(launch)

    @classmethod
    def of(cls, state: StreamState) -> StreamPosition:
        return cls(run=state.run, launch=state.launch, launch_open=state.launch_open)


StreamName = Annotated[str, StringConstraints(min_length=1, max_length=600)]


class FilePosition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    dev: int = Field(ge=0)
    ino: int = Field(ge=0)
    fingerprint: str | None = Field(max_length=64)
    offset: int = Field(ge=0)
    skipping: bool = False
    """The offset is inside an over-long line being skipped."""
    line: int = Field(0, ge=0)
    run: int = Field(0, ge=0)
    launch: LaunchConfig | None = None
    """Only the config fields the parser reports on, and of ``extra`` (every other server argument) only
    :data:`KEPT_EXTRA`."""
    year: int | None = Field(None, ge=1, le=9999)
    """Year of the last year-less (vLLM) timestamp, so a resumed parser dates like one that never stopped."""
    month: int | None = Field(None, ge=1, le=12)
    launch_open: str | None = Field(None, max_length=64)
    """Server of a launch no stats line has followed yet (its next launch line continues the same run)."""
    streams: dict[StreamName, StreamPosition] = Field(default_factory=dict, max_length=10_000)
    """The runs of the file's other sources, by ``source`` (a state file written before there were
    sources has none: its file had one)."""

    @field_serializer("launch")
    def _no_extra(self, launch: LaunchConfig | None) -> dict[str, Any] | None:
        return kept(launch)

    @property
    def parse_state(self) -> ParseState:
        streams = {k: StreamState(s.run, s.launch, s.launch_open) for k, s in self.streams.items()}
        return ParseState(self.line, self.run, self.launch, self.year, self.month, self.launch_open, streams=streams)


class FollowState(BaseModel):
    version: Literal[1] = VERSION
    files: dict[str, FilePosition] = {}


def fingerprint(path: str) -> str | None:
    """Hash of the first line (up to 1 KiB); None while the file has no complete first line."""
    try:
        with open(path, "rb") as f:
            head = f.read(FINGERPRINT_BYTES)
    except OSError:
        return None
    return _hash_head(head)


def is_gzip(path: str) -> bool:
    """Whether ``path`` starts like a gzip stream (a compressed rotation)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(GZIP_MAGIC)) == GZIP_MAGIC
    except OSError:
        return False


def content_fingerprint(path: str) -> str | None:
    """As :func:`fingerprint`, of the decompressed text when ``path`` is gzip: a compressed rotation of a
    file has that file's fingerprint. None while there is no complete first line (or the stream is damaged)."""
    if not is_gzip(path):
        return fingerprint(path)
    try:
        with gzip.open(path, "rb") as f:
            head = f.read(FINGERPRINT_BYTES)
    except (OSError, EOFError, zlib.error):  # still being written, or not gzip after all
        return None
    return _hash_head(head)


def _hash_head(head: bytes) -> str | None:
    nl = head.find(b"\n")
    if nl >= 0:
        head = head[: nl + 1]
    elif len(head) < FINGERPRINT_BYTES:
        return None
    return hashlib.sha256(head).hexdigest()[:32]


def at_line_start(path: str, offset: int) -> bool:
    """Whether ``offset`` starts a line of ``path``: 0, just after a newline, or just after a leading BOM."""
    if offset == 0:
        return True
    try:
        with open(path, "rb") as f:
            before = os.pread(f.fileno(), 1, offset - 1)
            return before == b"\n" or (offset == len(BOM) and os.pread(f.fileno(), len(BOM), 0) == BOM)
    except OSError:
        return False


def load(path: Path, note: Callable[[str], None] = lambda _msg: None, *, used: bool = False) -> FollowState:
    """Read a state file; a missing, unreadable, empty or invalid one reads as empty, with one warning.

    An invalid entry drops that file's position only (its file is read as new). Content
    that is no acceptmon state at all (not a JSON object with ``version`` and ``files``)
    is moved aside to ``<path>.bad`` if acceptmon used this path before (``used``: its
    lock file was there), else refused: a mistyped ``--state-file`` overwrites nobody's file.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return FollowState()
    except OSError as exc:
        note(f"{path}: cannot read state file ({exc.strerror}); every file is read as new")
        return FollowState()
    doc, reason = _document(raw)
    if doc is None and raw.strip() and not used:
        raise InputError(str(path), f"not an acceptmon state file ({reason}); delete it or name another file")
    if doc is None:
        kept = ""
        if raw.strip():
            aside = path.with_name(path.name + ".bad")
            try:
                os.replace(path, aside)
                kept = f"; kept as {aside.name}"
            except OSError as exc:
                kept = f"; cannot keep it as {aside.name} ({exc.strerror})"
        note(f"{path}: not an acceptmon state file ({reason}){kept}; every file is read as new")
        return FollowState()
    if doc["version"] != VERSION:
        note(f"{path}: state file version {doc['version']!r}, not {VERSION}; every file is read as new")
        return FollowState()
    return FollowState(files=_entries(path, doc["files"], note))


def _document(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """The state document, or None and why not."""
    if not raw.strip():
        return None, "empty"
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # invalid UTF-8 or JSON
        return None, str(exc).splitlines()[0]
    except RecursionError:  # json reads nested arrays and objects by recursion
        return None, "nested too deeply to read"
    if not isinstance(doc, dict) or "version" not in doc or not isinstance(doc.get("files"), dict):
        return None, "no version and files"
    return doc, ""


def _entries(path: Path, entries: dict[str, Any], note: Callable[[str], None]) -> dict[str, FilePosition]:
    """The valid positions; one warning names the invalid ones."""
    files, bad = {}, []
    for name, entry in entries.items():
        try:
            files[name] = FilePosition.model_validate(entry, strict=True)
        except ValidationError as exc:
            err = exc.errors()[0]
            bad.append(f"{name} ({'.'.join(map(str, err['loc'])) or 'entry'}: {err['msg']})")
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        note(f"{path}: invalid position for {bad[0]}{more}; read as new")
    return files


def save(path: Path, state: FollowState) -> None:
    """Write atomically and privately (0600): readers see the old state or the new one, never half of one.

    A full disk under a state file opened with :func:`open_state` is a warning (once), not an error:
    the state is not written, and the next save tries again.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # a stale one may have another mode: create it afresh
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(fd, 0o600)  # whatever the umask
            f.write(state.model_dump_json(indent=1).encode())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # a half-written copy would only keep the disk full
        note = _notes.get(path)
        if exc.errno not in DISK_FULL or note is None:
            raise InputError(str(path), f"cannot write state file: {exc.strerror}") from None
        if path not in _unsaved:
            _unsaved.add(path)
            note(f"{path}: cannot save positions ({exc.strerror}); keeping them in memory and trying again")
        return
    if path in _unsaved:
        _unsaved.discard(path)
        _notes[path](f"{path}: positions saved again")


def unsaved(path: Path) -> bool:
    """Whether the last save of ``path`` found its disk full (so the file holds older positions)."""
    return path in _unsaved


def lock(path: Path) -> tuple[int, bool]:
    """Hold ``<path>.lock`` exclusively (until the descriptor returned is closed); refuse if another process has it.

    Two followers sharing one state file would overwrite each other's positions. Also
    returns whether the lock file was there already (acceptmon used this path before).
    """
    lock_path = path.with_name(path.name + ".lock")
    existed = True
    try:
        try:
            fd = os.open(lock_path, os.O_RDWR)
        except FileNotFoundError:
            fd, existed = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), False
    except OSError as exc:
        raise InputError(str(path), f"cannot write state file: {exc.strerror} ({lock_path.name})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise InputError(str(path), f"in use by another acceptmon process (pid {holder})") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:  # the pid only names the holder to a second process; the flock is the lock
        if exc.errno not in DISK_FULL:
            os.close(fd)
            if not existed:
                with contextlib.suppress(OSError):
                    os.unlink(lock_path)
            raise InputError(str(path), f"cannot write state file: {exc.strerror} ({lock_path.name})") from None
    return fd, existed


def open_state(path: Path, note: Callable[[str], None]) -> tuple[int, FollowState]:
    """Lock the state file, read it and write it back at once: the lock's descriptor and the positions.

    Writing at once makes an unwritable state file an error now, not at exit, and drops
    whatever was invalid in it; a full disk is a warning (see the module docstring). A path
    refused leaves no lock file behind.
    """
    fd, used = lock(path)
    _notes[path] = note
    _unsaved.discard(path)
    try:
        state = load(path, note, used=used)
        save(path, state)
    except BaseException:
        _notes.pop(path, None)
        if not used:
            with contextlib.suppress(OSError):
                os.unlink(path.with_name(path.name + ".lock"))
        os.close(fd)
        raise
    return fd, state
