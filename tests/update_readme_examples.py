"""Rewrite the README's example outputs by running their commands (run after a deliberate output change).

    python -m tests.update_readme_examples

An example is a fenced block between ``<!-- example: ARGS -->`` and ``<!-- /example -->``: the line
``$ acceptmon ARGS``, then what that prints on stdout, run from the repository root. ARGS may end in
``| head -N`` (the first N lines). Trailing spaces are dropped from each line, nothing else is changed.
``tests/test_readme_examples.py`` fails when a block is not what its command prints now; this script
rewrites every block in place and says which ones changed (review the diff).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^<!-- example: (?P<args>[^\n]+?) -->\n(?P<body>.*?)^<!-- /example -->$", re.M | re.S)
HEAD = re.compile(r"^(?P<args>.+?) \| head -(?P<n>[0-9]+)$")
REFRESH = "python -m tests.update_readme_examples"


@dataclass(frozen=True)
class Example:
    args: str
    """What follows ``acceptmon`` (and an optional ``| head -N``)."""
    body: str
    """The block as the README has it, fences included."""


def examples(text: str) -> list[Example]:
    return [Example(m["args"], m["body"]) for m in BLOCK.finditer(text)]


def render(args: str) -> str:
    """The block for ``acceptmon ARGS``: the command, then its stdout (first N lines with ``| head -N``)."""
    head = HEAD.match(args)
    words = shlex.split(head["args"] if head else args)
    p = subprocess.run([sys.executable, "-m", "acceptmon", *words], cwd=ROOT, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"acceptmon {args}: exit {p.returncode}: {p.stderr.decode(errors='replace').strip()}")
    lines = [line.rstrip() for line in p.stdout.decode().splitlines()]
    if head:
        lines = lines[: int(head["n"])]
    return "\n".join(["```", f"$ acceptmon {args}", *lines, "```", ""])


def refresh(text: str) -> tuple[str, list[str]]:
    """The README with every example block rewritten, and the ARGS of the blocks that changed."""
    changed: list[str] = []

    def one(m: re.Match[str]) -> str:
        body = render(m["args"])
        if body != m["body"]:
            changed.append(m["args"])
        return f"<!-- example: {m['args']} -->\n{body}<!-- /example -->"

    return BLOCK.sub(one, text), changed


def main() -> None:
    text, changed = refresh(README.read_text())
    if changed:
        README.write_text(text)
    for args in changed:
        print(f"rewrote: acceptmon {args}")
    print(f"{len(examples(text))} README examples, {len(changed)} rewritten")


if __name__ == "__main__":
    main()
