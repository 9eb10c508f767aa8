"""The command line: parses arguments, wires one source to sinks, reports errors in one line.

Heavy or optional libraries (textual, prometheus_client, watchfiles) are imported
inside the command that needs them, and only the command's own module is imported
(all of them for ``--help`` or an unknown command), so ``parse`` and ``runs`` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from acceptmon import __version__
from acceptmon.errors import AcceptmonError

_MODULES = {"parse": "batch", "runs": "batch", "grammars": "batch", "compare": "compare"}
_MODULES.update(serve="live", tail="live", demo="live", doctor="doctor")
"""The module of each command; a command not named here needs them all."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acceptmon`` command; returns the exit code."""
    args_in = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in args_in if not a.startswith("-")), None)
    parser = _build_parser(_MODULES.get(command or ""))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
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
    """argparse with one-line errors: ``acceptmon tail: error: ... (see --help)``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, with the commands of module ``only`` (default: every command)."""
    p = _Parser(prog="acceptmon", description="Speculative-decoding acceptance from SGLang and vLLM server logs.")
    p.add_argument("--version", action="version", version=f"acceptmon {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

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
