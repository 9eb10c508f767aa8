"""The command line: parses arguments, wires one source to sinks, reports errors in one line.

Heavy or optional libraries (textual, prometheus_client, watchfiles) are imported
inside the command that needs them, and only the command's own module is imported
(all of them for ``--help`` or an unknown command), so ``parse`` and ``runs`` start fast.
"""

from __future__ import annotations

import argparse
import difflib
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from acceptmon.errors import AcceptmonError, Interrupt
from acceptmon.version import __version__

_MODULES = {"parse": "batch", "runs": "batch", "grammars": "batch", "compare": "compare"}
_MODULES.update(serve="live", tail="live", demo="live", doctor="doctor")
"""The module of each command; a command not named here needs them all."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acceptmon`` command; returns the exit code."""
    args_in = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in args_in if not a.startswith("-")), None)
    parser = _build_parser(_MODULES.get(command or ""))
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.unrecognized(args.command, unknown)
    if args.command is None:
        parser.print_help()
        return 0
    if threading.current_thread() is threading.main_thread():  # live commands set their own on start
        Interrupt.happened = False
        signal.signal(signal.SIGINT, Interrupt.handler)
        sys.unraisablehook = Interrupt.unraisable
    try:
        return int(args.func(args))
    except AcceptmonError as exc:
        print(f"acceptmon: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        sys.stderr.close()  # the reader (e.g. `head`) went away: not an error
        return 0
    except KeyboardInterrupt:
        return 130


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``acceptmon tail: error: ... (see acceptmon tail --help)``, exit code 2.

    A mistyped command, choice or flag names the closest one (``did you mean 'parse'?``), and an
    unknown flag of a command points at that command's help, not the top-level one."""

    commands: Mapping[str, _Parser]
    """The command parsers, by name (the top-level parser's; empty for a command's own)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = {}

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        hint = _closest(str(value), choices)
        listed = ", ".join(map(repr, choices))
        message = f"invalid choice: {value!r}{f'; did you mean {hint!r}?' if hint else ''} (choose from {listed})"
        raise argparse.ArgumentError(action, message)

    def unrecognized(self, command: str | None, unknown: list[str]) -> NoReturn:
        """Exit on arguments no parser took, with the command's parser (its prog and its flags)."""
        target = self.commands.get(command or "", self)
        flags = [s for action in target._actions for s in action.option_strings]
        hints = [(arg, hint) for arg in unknown if arg.startswith("-") and (hint := _closest(arg.split("=")[0], flags))]
        message = f"unrecognized argument{'s' if len(unknown) != 1 else ''}: {' '.join(unknown)}"
        if len(hints) == 1:
            message += f"; did you mean {hints[0][1]}?"
        elif hints:
            message += "; did you mean " + ", ".join(f"{hint} (for {arg})" for arg, hint in hints) + "?"
        target.error(message)


def _closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice most like ``word`` (difflib's ratio of at least 0.6), None when none is near."""
    found = difflib.get_close_matches(word, choices, n=1)
    return found[0] if found else None


def _build_parser(only: str | None = None) -> _Parser:
    """The argument parser, with the commands of module ``only`` (default: every command)."""
    p = _Parser(prog="acceptmon", description="Speculative-decoding acceptance from SGLang and vLLM server logs.")
    p.add_argument("--version", action="version", version=f"acceptmon {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p.commands = sub.choices

    if only in (None, "batch"):
        from acceptmon.cli import batch

        batch.add_parsers(sub)
    if only in (None, "compare"):
        from acceptmon.cli import compare

        compare.add_parsers(sub)
    if only in (None, "live"):
        from acceptmon.cli import live

        live.add_parsers(sub)
    if only in (None, "doctor"):
        from acceptmon.cli import doctor

        doctor.add_parsers(sub)
    return p
