"""The command line: parses arguments, wires one source to sinks, reports errors in one line.

Heavy or optional libraries (textual, prometheus_client, watchfiles) are imported
inside the command that needs them, so ``parse`` and ``runs`` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from acceptmon import __version__
from acceptmon.cli import batch, live
from acceptmon.cli.args import duration, grammar_option, live_options, positive, tail_options
from acceptmon.errors import AcceptmonError
from acceptmon.pipeline.batch import default_jobs


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acceptmon`` command; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
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


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="acceptmon", description="Speculative-decoding acceptance from SGLang server logs.")
    p.add_argument("--version", action="version", version=f"acceptmon {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    parse = sub.add_parser("parse", help="convert logs to one CSV/JSONL row per decode-batch line")
    parse.add_argument("files", nargs="+", metavar="FILE", help="log files, .gz files, or - for stdin")
    parse.add_argument("-o", "--output", help="output file (default: stdout)")
    parse.add_argument("--format", choices=("csv", "jsonl"), help="default: from -o's suffix, else csv")
    grammar_option(parse)
    parse.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    parse.set_defaults(func=batch.cmd_parse)

    runs = sub.add_parser("runs", help="one summary per server launch (config, accept len, throughput)")
    runs.add_argument("files", nargs="+", metavar="FILE")
    runs.add_argument("--format", choices=("table", "json", "csv"), default="table")
    grammar_option(runs)
    runs.add_argument("-j", "--jobs", type=int, default=default_jobs(), help="processes for large files")
    runs.add_argument("--max-bytes", type=int, metavar="N", help="read only the first N bytes of each file")
    runs.set_defaults(func=batch.cmd_runs)

    serve = sub.add_parser("serve", help="follow live logs and export Prometheus metrics at /metrics")
    serve.add_argument("files", nargs="+", metavar="FILE", help="log files or globs ('/var/log/sglang/*.log')")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, default=9464, help="port to bind (default: 9464)")
    serve.add_argument("--web-config", type=Path, metavar="FILE", help="exporter-toolkit web config: TLS, basic auth")
    serve.add_argument("--stale-after", type=duration, default=300.0, metavar="DURATION",
                       help="drop a rank's gauges after this long without a line (default: 5m)")  # fmt: skip
    serve.add_argument("--max-series", type=int, default=512, help="cap on (file, rank) series (default: 512)")
    live_options(serve)
    grammar_option(serve)
    serve.set_defaults(func=live.cmd_serve)

    tail = sub.add_parser("tail", help="live dashboard of a server log (or one line per record with --plain)")
    tail.add_argument("files", nargs="+", metavar="FILE", help="log files or globs")
    tail_options(tail)
    live_options(tail)
    grammar_option(tail)
    tail.set_defaults(func=live.cmd_tail)

    demo = sub.add_parser("demo", help="replay the bundled sample log (broken config, fix, steps sweep) live")
    demo.add_argument("--speed", type=positive, default=10.0, help="replay speed against log time (default: 10x)")
    demo.add_argument("--sample", default="seed_eagle3_moe.log", help="bundled sample log to replay")
    tail_options(demo)
    demo.set_defaults(func=live.cmd_demo, files=[], from_start=True, poll=False, poll_interval=0.1, state_file=None,
                      grammar=[])  # fmt: skip

    gram = sub.add_parser("grammars", help="list loaded grammars; 'grammars check FILE' validates one")
    gram.add_argument("action", nargs="?", choices=("list", "check"), default="list")
    gram.add_argument("files", nargs="*", metavar="FILE")
    grammar_option(gram)
    gram.set_defaults(func=batch.cmd_grammars)
    return p
