"""`serve --state-file` as a real process when the state file is nested too deeply for json."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.serving import Serve, decode_line, launch_line, value, wait_for

pytestmark = pytest.mark.integration


def write(path: Path, *lines: str) -> None:
    with path.open("a") as f:
        f.write("".join(line + "\n" for line in lines))


def decoded(serve: Serve) -> float:
    return value(serve.metrics(), "acceptmon_decode_batches_total") or 0.0


# -- a state file nested too deeply for json ------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000


def test_a_deeply_nested_state_file_is_kept_aside_and_read_as_new(tmp_path):
    log, state = tmp_path / "s.log", tmp_path / "state.json"
    write(log, launch_line(), *(decode_line(i) for i in range(10)))
    state.write_bytes(DEEP)
    (tmp_path / "state.json.lock").write_text("")  # acceptmon used this state file before
    for restart, expected in enumerate((10, 3)):
        serve = Serve(str(log), "--state-file", str(state))
        try:
            serve.wait_listening()
            assert wait_for(lambda s=serve, n=expected: decoded(s) == n)
        finally:
            code = serve.stop()
        assert code == 0 and "Traceback" not in serve.stderr, serve.stderr
        warned = [line for line in serve.stderr.splitlines() if "not an acceptmon state file" in line]
        if restart == 0:
            assert warned == [
                f"acceptmon: {state}: not an acceptmon state file (nested too deeply to read); "
                "kept as state.json.bad; every file is read as new"
            ]
            write(log, *(decode_line(i) for i in range(10, 13)))
        else:  # the damage was not saved back: a clean resume
            assert warned == [] and "resuming at byte" in serve.stderr
    assert (tmp_path / "state.json.bad").read_bytes() == DEEP


def test_a_deeply_nested_file_acceptmon_never_used_is_refused_in_one_line(tmp_path):
    log, state = tmp_path / "s.log", tmp_path / "state.json"
    write(log, launch_line())
    state.write_bytes(DEEP)
    cmd = [sys.executable, "-m", "acceptmon", "serve", str(log), "--port", "0", "--state-file", str(state)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"acceptmon: error: {state}: not an acceptmon state file (nested too deeply to read); "
        "delete it or name another file"
    ]
    assert state.read_bytes() == DEEP
