"""Errors that reach the user as one line, never as a traceback.

AcceptmonError
├── GrammarError   a grammar file is unreadable, off-schema or fails its samples
└── InputError     a log file or argument cannot be used
"""

from __future__ import annotations


class AcceptmonError(Exception):
    """Base of every error acceptmon reports as a one-line message (exit code 2)."""


class GrammarError(AcceptmonError):
    """A grammar file is wrong; names the file, the key and the reason."""

    def __init__(self, file: str, key: str, reason: str) -> None:
        self.file, self.key, self.reason = file, key, reason
        super().__init__(f"{file}: {reason}" if key == "-" else f"{file}: {key}: {reason}")  # "-": the whole file


class InputError(AcceptmonError):
    """A path or argument cannot be used; names it and says why."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"{path}: {reason}")
