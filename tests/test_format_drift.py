"""Format drift is said by every command, not only `parse`: a line that starts like a stats line but that no
grammar reads is counted per run, and the first is shown, file and line number."""

from __future__ import annotations

import json

from acceptmon.parse.load import load_grammars
from acceptmon.pipeline import batch
from acceptmon.sinks.runs_table import StatsJob
from tests.serving import decode_line, launch_line
from tests.test_cli import acceptmon

DRIFT = "[2026-02-26 14:09:00 TP0] Decode batch; running=3 acc=2.85"


def _log(tmp_path, drifted_runs=(2,), per_run: int = 3):  # type: ignore[no-untyped-def]
    lines = []
    for run in (1, 2):
        lines.append(launch_line(ts=f"2026-02-26 1{run}:00:00"))
        lines += [decode_line(i) for i in range(4)]
        lines += [DRIFT] * (per_run if run in drifted_runs else 0)
    path = tmp_path / "drift.log"
    path.write_text("\n".join(lines) + "\n")
    return path, lines.index(DRIFT) + 1 if DRIFT in lines else 0


def test_runs_counts_unrecognized_lines_per_run_and_shows_the_first(tmp_path):
    path, first = _log(tmp_path)
    p = acceptmon("runs", path, "--format", "json")
    runs = json.loads(p.stdout)
    assert [(r["run"], r["unrecognized"]) for r in runs] == [(1, 0), (2, 3)]
    err = p.stderr.decode().splitlines()
    assert (
        "acceptmon: 3 unrecognized lines: they start like a stats line but no grammar reads it (a format change?)"
        in err
    )
    assert f"acceptmon: unrecognized {path}:{first}: {DRIFT}" in err
    parse = acceptmon("parse", path, "-o", tmp_path / "rows.csv").stderr.decode().splitlines()
    assert f"acceptmon: unrecognized {path}:{first}: {DRIFT}" in parse  # the same line as parse shows
    assert ", 3 unrecognized, " in parse[0]


def test_a_log_without_drift_says_nothing_of_it(tmp_path):
    path, _ = _log(tmp_path, drifted_runs=())
    p = acceptmon("runs", path, "--format", "json")
    assert "unrecognized" not in p.stderr.decode()
    assert all(r["unrecognized"] == 0 for r in json.loads(p.stdout))


def test_parallel_ranges_count_each_runs_drift_as_one_reader(tmp_path, monkeypatch):
    path, _ = _log(tmp_path, drifted_runs=(1, 2), per_run=400)
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 4 << 10)
    grammars = load_grammars()
    one, many = StatsJob(), StatsJob()
    a = batch.run([str(path)], grammars, one, jobs=1)
    b = batch.run([str(path)], grammars, many, jobs=2)
    assert a.tally.unrecognized_runs == b.tally.unrecognized_runs == {(str(path), "", 1): 400, (str(path), "", 2): 400}


def test_doctor_and_compare_say_the_drift_and_count_it_per_run(tmp_path):
    path, first = _log(tmp_path)
    shown = f"acceptmon: unrecognized {path}:{first}: {DRIFT}"
    d = acceptmon("doctor", path, "--format", "json")
    assert [(r["run"], r["unrecognized"]) for r in json.loads(d.stdout)["runs"]] == [(1, 0), (2, 3)]
    assert shown in d.stderr.decode().splitlines()
    c = acceptmon("compare", f"{path}#1", f"{path}#2", "--format", "json")
    sides = json.loads(c.stdout)
    assert (sides["a"]["unrecognized"], sides["b"]["unrecognized"]) == (0, 3)
    assert c.stderr.decode().splitlines().count(shown) == 1  # one file: said once
    whole = json.loads(acceptmon("compare", path, f"{path}#1", "--format", "json").stdout)
    assert whole["a"]["unrecognized"] == 3
