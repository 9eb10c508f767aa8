"""Persisted follow positions (``--state-file``), so a restarted follower resumes exactly.

A position belongs to one file *identity*: device, inode and a fingerprint of the
file's first line (inodes are reused after a delete). It records the byte offset
of the first line not yet processed and the parser's state there (line number,
run index, current launch config), so the resumed parser is in the same state
as if it had never stopped: nothing lost, nothing counted twice.

The file is JSON, written atomically (temporary file + rename).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from acceptmon.errors import InputError
from acceptmon.parse import ParseState
from acceptmon.records import LaunchConfig

FINGERPRINT_BYTES = 1024


class FilePosition(BaseModel):
    model_config = ConfigDict(frozen=True)

    dev: int
    ino: int
    fingerprint: str | None
    offset: int
    skipping: bool = False
    """The offset is inside an over-long line being skipped."""
    line: int = 0
    run: int = 0
    launch: LaunchConfig | None = None

    @property
    def parse_state(self) -> ParseState:
        return ParseState(self.line, self.run, self.launch)


class FollowState(BaseModel):
    version: int = 1
    files: dict[str, FilePosition] = {}


def fingerprint(path: str) -> str | None:
    """Hash of the first line (up to 1 KiB); None while the file has no complete first line."""
    try:
        with open(path, "rb") as f:
            head = f.read(FINGERPRINT_BYTES)
    except OSError:
        return None
    nl = head.find(b"\n")
    if nl >= 0:
        head = head[: nl + 1]
    elif len(head) < FINGERPRINT_BYTES:
        return None
    return hashlib.sha256(head).hexdigest()[:32]


def load(path: Path) -> FollowState:
    """Read a state file; a missing one is empty, a corrupt one is a one-line error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return FollowState()
    except OSError as exc:
        raise InputError(str(path), f"cannot read state file: {exc.strerror}") from None
    try:
        return FollowState.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        reason = str(exc).splitlines()[0]
        raise InputError(str(path), f"not an acceptmon state file ({reason}); delete it to start afresh") from None


def save(path: Path, state: FollowState) -> None:
    """Write atomically: readers see the old state or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(state.model_dump_json(indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(str(path), f"cannot write state file: {exc.strerror}") from None
