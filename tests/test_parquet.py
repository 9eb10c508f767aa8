"""Parquet output: `parse -o rows.parquet` and `runs -o runs.parquet`, typed, with the CSV's rows."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLES
from tests.test_api import _cell
from tests.test_cli import ROOT, acceptmon

LOGS = [SAMPLES / n for n in ("seed_eagle3_moe.log", "vllm_v1_0.10.2_dp.log", "request_0.5.23.log")]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_parse_writes_the_csv_rows_as_typed_parquet(log, tmp_path):
    acceptmon("parse", log, "-o", tmp_path / "rows.csv")
    p = acceptmon("parse", log, "-o", tmp_path / "rows.parquet")
    assert p.returncode == 0, p.stderr
    rows = list(csv.reader(io.StringIO((tmp_path / "rows.csv").read_text())))
    table = pq.read_table(tmp_path / "rows.parquet")
    assert table.schema.names == rows[0]
    assert str(table.schema.field("timestamp").type) == "timestamp[ms]"
    assert str(table.schema.field("running_req").type) == "int64"
    assert [[_cell(v) for v in r.values()] for r in table.to_pylist()] == rows[1:]


def test_parse_parquet_on_parallel_ranges_keeps_the_order(tmp_path, monkeypatch):
    from acceptmon.parse.load import load_grammars
    from acceptmon.pipeline import batch
    from acceptmon.sinks.atomic import atomic_output
    from acceptmon.sinks.parquet import ParquetJob

    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 8 << 10)
    log = SAMPLES / "seed_eagle3_moe.log"
    for jobs, name in ((1, "one.parquet"), (2, "two.parquet")):
        with atomic_output(str(tmp_path / name)) as out:
            job = ParquetJob(out)
            batch.run([str(log)], load_grammars(), job, jobs=jobs)
            job.finish()
    one, two = (pq.read_table(tmp_path / n) for n in ("one.parquet", "two.parquet"))
    assert one.num_rows == 384 and one.equals(two)


def test_runs_writes_its_json_rows_as_parquet(tmp_path):
    log = SAMPLES / "seed_eagle3_moe.log"
    want = json.loads(acceptmon("runs", log, "--format", "json").stdout)
    p = acceptmon("runs", log, "-o", tmp_path / "runs.parquet")
    assert p.returncode == 0 and p.stderr.decode().strip() == f"acceptmon: 5 runs -> {tmp_path / 'runs.parquet'}"
    table = pq.read_table(tmp_path / "runs.parquet")
    assert table.schema.names == list(want[0]) and str(table.schema.field("start").type) == "timestamp[ms]"
    got = table.to_pylist()
    assert [r["accept_len_mean"] for r in got] == [r["accept_len_mean"] for r in want]
    assert [r["start"].isoformat() for r in got] == [r["start"] for r in want]
    acceptmon("runs", log, "-o", tmp_path / "runs.json")
    assert json.loads((tmp_path / "runs.json").read_text()) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("parse", "-o", "rows.parquet.gz"), "rows.parquet.gz: Parquet compresses its own columns"),
        (("parse", "--format", "parquet"), "-o: Parquet is written to a file: -o rows.parquet"),
        (("runs", "-o", "runs.txt"), "runs.txt: runs -o writes .csv, .json, .parquet"),
    ],
)
def test_wrong_parquet_outputs_are_one_line(tmp_path, args, message):
    p = acceptmon(*args[:1], SAMPLES / "seed_eagle3_moe.log", *args[1:], cwd=tmp_path)
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and message in err[0], err


def test_without_pyarrow_it_says_how_to_install_it(tmp_path):
    """A user without the extra: pyarrow cannot be imported (a stand-in package that refuses)."""
    blocked = tmp_path / "blocked" / "pyarrow"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocked.parent}{os.pathsep}{ROOT}"}
    p = subprocess.run(
        [sys.executable, "-m", "acceptmon", "parse", str(SAMPLES / "seed_eagle3_moe.log"), "-o", "rows.parquet"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2
    assert p.stderr.strip() == (
        "acceptmon: error: pyarrow: Parquet needs pyarrow, which is not installed: pip install 'acceptmon[parquet]'"
    )
    assert not (tmp_path / "rows.parquet").exists()


def test_the_lanes_rows_not_made_yet_give_the_records_table(monkeypatch):
    """Every sample log's Arrow table from the lane's rows not made yet (their columns, no record made) equals the
    one from the general parser's records, column by column and type by type; many rows came unmade."""
    from acceptmon.parse.load import load_grammars
    from acceptmon.parse.unmade import Unmade
    from acceptmon.pipeline import batch
    from acceptmon.sinks.parquet import ArrowJob

    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    unmade = [0]
    chunk = ArrowJob.chunk

    def counted(self, records):
        unmade[0] += sum(len(r) for r in records if type(r) is Unmade)
        return chunk(self, records)

    monkeypatch.setattr(ArrowJob, "chunk", counted)
    grammars = load_grammars()
    total = 0
    for log in sorted(SAMPLES.glob("*.log")):
        tables = []
        for pure in (False, True):
            if pure:
                monkeypatch.setenv("ACCEPTMON_PURE_PYTHON", "1")
            else:
                monkeypatch.delenv("ACCEPTMON_PURE_PYTHON", raising=False)
            job = ArrowJob()
            batch.run([str(log)], grammars, job, jobs=1)
            tables.append(job.table())
        lane, parser = tables
        assert lane.equals(parser), log.name
        total += parser.num_rows
    assert unmade[0] > total // 3, (unmade, total)
