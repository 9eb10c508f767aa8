"""The library API: the same records, runs and table as the commands, and the documented examples run."""

from __future__ import annotations

import csv
import doctest
import gzip
import importlib
import io
import json
import pkgutil
from datetime import datetime
from pathlib import Path

import pytest

import acceptmon
from tests.conftest import SAMPLES
from tests.test_cli import acceptmon as cli

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted(SAMPLES.glob("*.log"))


def test_the_documented_examples_run():
    for result in (
        doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False, optionflags=doctest.ELLIPSIS),
        doctest.testmod(importlib.import_module("acceptmon.api")),
    ):
        assert result.failed == 0 and result.attempted >= 3


def test_the_functions_survive_every_submodule_being_imported():
    """A submodule binds its name on the package: none may be called read, runs, compare, doctor or to_arrow."""
    for info in pkgutil.walk_packages(acceptmon.__path__, "acceptmon."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    assert len(list(acceptmon.read(SAMPLES / "seed_eagle3_moe.log", kinds=["launch"]))) == 5
    assert [r.run for r in acceptmon.runs(SAMPLES / "seed_eagle3_moe.log")] == [1, 2, 3, 4, 5]
    assert acceptmon.to_arrow(SAMPLES / "seed_eagle3_moe.log").num_rows == 384
    seed = SAMPLES / "seed_eagle3_moe.log"
    assert acceptmon.compare(f"{seed}#1", f"{seed}#2").verdict == "better"
    assert len(acceptmon.doctor(seed).runs) == 5
    with pytest.raises(AttributeError):
        acceptmon.nothing_of_the_kind  # noqa: B018


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_runs_are_the_commands_json(log):
    want = json.loads(cli("runs", log, "--format", "json").stdout)
    assert [r.model_dump(mode="json") for r in acceptmon.runs(str(log))] == want


def _cell(value: object) -> str:
    """A typed value as the CSV writes it."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds" if value.microsecond else "seconds")
    if isinstance(value, list):
        return ";".join(_cell(v) for v in value)
    return str(value)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_the_arrow_table_holds_the_csv_rows_typed(log, tmp_path):
    out = tmp_path / "rows.csv"
    cli("parse", log, "-o", out)
    rows = list(csv.reader(io.StringIO(out.read_text())))
    table = acceptmon.to_arrow(log)
    assert table.schema.names == rows[0]
    got = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    assert got == rows[1:]


def test_read_reads_gzip_and_refuses_unknown_kinds(tmp_path):
    gz = tmp_path / "seed.log.gz"
    gz.write_bytes(gzip.compress((SAMPLES / "seed_eagle3_moe.log").read_bytes()))
    plain = [r.model_dump() for r in acceptmon.read(SAMPLES / "seed_eagle3_moe.log", kinds=["decode"])]
    packed = [r.model_dump() for r in acceptmon.read(gz, kinds=["decode"])]
    assert [{**r, "file": ""} for r in packed] == [{**r, "file": ""} for r in plain] and len(plain) == 384
    with pytest.raises(acceptmon.errors.InputError, match="unknown record kind"):
        list(acceptmon.read(gz, kinds=["decod"]))


def test_compare_and_doctor_are_the_commands_json():
    seed, base = SAMPLES / "seed_eagle3_moe.log", SAMPLES / "baseline_nospec.log"
    want = json.loads(cli("compare", f"{seed}#1", f"{seed}#2", "--format", "json").stdout)
    assert acceptmon.compare(f"{seed}#1", f"{seed}#2").model_dump(mode="json") == want
    want = json.loads(cli("doctor", seed, "--baseline", base, "--format", "json").stdout)
    got = acceptmon.doctor(seed, baseline=str(base))
    assert got.model_dump(mode="json") == want
    assert {f.rule for f in got.findings} >= {"P2"} and [r.run for r in got.runs] == [1, 2, 3, 4, 5]
