"""Errors that reach the user as one line, never as a traceback.

AcceptmonError
├── GrammarError   a grammar file is unreadable, off-schema or fails its samples
└── InputError     a log file or argument cannot be used
"""

from __future__ import annotations

import sys


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


class Interrupt:
    """Ctrl-C during a batch command: :exc:`KeyboardInterrupt` at once, and remembered.

    Python's own handler raises it wherever the main thread is; raised inside a ``__del__`` run by the garbage
    collector it is printed as "Exception ignored" and lost, and the command would go on to its end. This
    handler remembers it, and the batch pipeline asks :meth:`check` between blocks; :meth:`unraisable` keeps
    Python from printing the lost one's traceback (the user sees one line and exit 130, nothing else)."""

    happened = False

    @classmethod
    def handler(cls, _signum: int, _frame: object) -> None:
        cls.happened = True
        raise KeyboardInterrupt

    @classmethod
    def unraisable(cls, unraisable: sys.UnraisableHookArgs) -> None:
        """``sys.unraisablehook``: a Ctrl-C raised inside a ``__del__`` is remembered, not printed; anything else
        goes to Python's own hook."""
        if cls.happened and isinstance(unraisable.exc_value, KeyboardInterrupt):
            return
        sys.__unraisablehook__(unraisable)

    @classmethod
    def check(cls) -> None:
        """Raise :exc:`KeyboardInterrupt` if a Ctrl-C came (and was lost where it was raised)."""
        if cls.happened:
            raise KeyboardInterrupt
