"""Write every user-visible output of acceptmon on the sample logs into one folder, to diff two versions.

Used to prove that a restructuring changes no behaviour: run it before and after, then
``diff -r BEFORE AFTER``. It goes through the command line only (``parse``, ``runs``, ``compare``,
``doctor``, ``grammars``, ``tail --plain`` and ``serve``'s /metrics page), so it works across
internal moves (and can be copied into an older checkout to take its "before").

    python scripts/snapshot_outputs.py OUTDIR
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _acceptmon(*args: str, check: bool = True) -> bytes:
    cmd = [sys.executable, "-m", "acceptmon", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, check=check).stdout


def _plain(log: str) -> bytes:
    """``tail --plain --from-start``: every line it prints within a few seconds (it follows until stopped)."""
    cmd = [sys.executable, "-m", "acceptmon", "tail", "--plain", "--from-start", log]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=4)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, _ = proc.communicate()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics(log: str) -> bytes:
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "acceptmon",
        "serve",
        log,
        "--from-start",
        "--port",
        str(port),
        "--stale-after",
        "1000000h",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        body, last = b"", None
        for _ in range(100):
            time.sleep(0.2)
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            except OSError:
                continue
            if body == last:
                return body
            last = body
        return body
    finally:
        proc.terminate()
        proc.wait(10)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    logs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "sample_logs").glob("*.log"))
    for log in logs:
        name = Path(log).stem
        (out / f"{name}.csv").write_bytes(_acceptmon("parse", log, "--format", "csv"))
        (out / f"{name}.jsonl").write_bytes(_acceptmon("parse", log, "--format", "jsonl"))
        for fmt in ("table", "json", "csv"):
            (out / f"{name}.runs.{fmt}").write_bytes(_acceptmon("runs", log, "--format", fmt))
        (out / f"{name}.metrics").write_bytes(_metrics(log))
        for fmt in ("text", "json"):
            (out / f"{name}.doctor.{fmt}").write_bytes(_acceptmon("doctor", log, "--format", fmt, check=False))
        for fmt in ("table", "json"):
            both = (f"{log}#1", f"{log}#2")
            (out / f"{name}.compare.{fmt}").write_bytes(_acceptmon("compare", *both, "--format", fmt, check=False))
        (out / f"{name}.plain").write_bytes(_plain(log))
    (out / "all.runs.table").write_bytes(_acceptmon("runs", *logs))
    listing = _acceptmon("grammars").decode().replace(os.fspath(ROOT), "ROOT")
    (out / "grammars.txt").write_text(listing)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
