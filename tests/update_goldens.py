"""Rewrite tests/golden/*.jsonl from sample_logs/*.log (run from the repo root; review the diff)."""

from __future__ import annotations

import io
import os
from pathlib import Path

from acceptmon.cli.args import YearSource
from acceptmon.parse.load import load_grammars
from acceptmon.pipeline.batch import run
from acceptmon.sinks.table import TableJob

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_YEAR = 2025
"""The year of the first year-less (vLLM) timestamp of every sample log (as ``--year 2025``)."""


def golden_text(log: Path) -> bytes:
    out = io.BytesIO()
    grammars = load_grammars()
    grammars.year_for = YearSource(GOLDEN_YEAR)
    run([os.path.relpath(log, ROOT)], grammars, TableJob("jsonl", out))
    return out.getvalue()


if __name__ == "__main__":
    os.chdir(ROOT)
    for log in sorted((ROOT / "sample_logs").glob("*.log")):
        (ROOT / "tests" / "golden" / f"{log.stem}.jsonl").write_bytes(golden_text(log))
        print("wrote", log.stem)
