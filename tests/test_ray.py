"""``parse --ray`` and ``acceptmon.ray.read_logs`` on a real local Ray cluster (one for the module: 2 CPUs).

Six inputs, SGLang and vLLM, plain and ``.gz``: two cut into many small byte ranges (launches and a New
Year inside and across them), the rest one task each. The Parquet dataset Ray's tasks write, and the
Dataset ``read_logs`` returns, hold the rows local ``parse -o rows.parquet`` writes, with its types.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLES
from tests.test_cli import ROOT

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
import ray

from acceptmon.cli import main
from acceptmon.pipeline import batch

RANGE = 16 << 10
"""Range size for these tests: the two large inputs become 4 and 20-odd ranges."""


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("logs")
    seed = (SAMPLES / "seed_eagle3_moe.log").read_bytes()
    (d / "sglang_x3.log").write_bytes(seed * 3)  # 15 launches over ~23 ranges
    vllm = (SAMPLES / "vllm_v1_0.8.5.log").read_text()
    new_year = d / "vllm_new_year.log"  # year-less timestamps: Dec 31 then Jan 1, the file dated Dec 31
    new_year.write_text((vllm.replace("INFO 05-02", "INFO 12-31") + vllm.replace("INFO 05-02", "INFO 01-01")) * 2)
    stamp = datetime(2025, 12, 31, 23, 0).timestamp()
    os.utime(new_year, (stamp, stamp))
    for name in ("old_0.4.4.log", "vllm_v1_0.10.2_dp.log"):
        (d / f"{name}.gz").write_bytes(gzip.compress((SAMPLES / name).read_bytes()))
    return [d / "sglang_x3.log", new_year, d / "old_0.4.4.log.gz", d / "vllm_v1_0.10.2_dp.log.gz",
            SAMPLES / "newest_0.5.23.log", SAMPLES / "vllm_v0_0.6.log"]  # fmt: skip


def _sorted(table: pa.Table) -> list[dict[str, object]]:
    return table.sort_by([("file", "ascending"), ("line", "ascending")]).to_pylist()


@pytest.fixture(scope="module")
def local(logs, tmp_path_factory) -> pa.Table:
    out = tmp_path_factory.mktemp("local") / "rows.parquet"
    assert main(["parse", *map(str, logs), "-j", "1", "-o", str(out)]) == 0
    return pq.read_table(out)


def test_parse_on_ray_writes_the_local_rows_as_a_dataset_one_file_per_range(
    cluster, logs, local, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(batch, "RANGE_BYTES", RANGE)
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 2 * RANGE)
    out = tmp_path / "dataset"
    assert main(["parse", "--ray", *map(str, logs), "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    ranges = [n for n in names if n.startswith("sglang_x3-")]
    assert len(ranges) >= 20 and f"sglang_x3-{len(ranges) - 1}.parquet" in names
    assert [n for n in names if not n.startswith(("sglang_x3-", "vllm_new_year-"))] == [
        "newest_0.5.23-0.parquet", "old_0.4.4.log-0.parquet", "vllm_v0_0.6-0.parquet", "vllm_v1_0.10.2_dp.log-0.parquet"
    ]  # fmt: skip
    table = pads.dataset(out, format="parquet").to_table()
    assert table.schema == local.schema
    got, want = _sorted(table), _sorted(local)
    assert len(got) == len(want) > 1000 and got == want
    runs = {r["run"] for r in got if r["file"].endswith("sglang_x3.log")}
    assert runs == set(range(1, 16))  # the runs of 15 launches, numbered across ranges as one reader numbers them
    years = {r["timestamp"].year for r in got if r["file"].endswith("vllm_new_year.log") and r["timestamp"]}
    assert years == {2025, 2026}
    err = capsys.readouterr().err
    assert "3,287 lines read, 1,252 decode, 354 spec, 398 throughput, 392 prefill, 33 launch, 11 request, " in err
    assert f"{len(want):,} rows -> {out} ({len(names)} Parquet files)" in err  # the lines read as one reader reads


def test_read_logs_is_a_ray_dataset_of_the_same_rows(cluster, logs, local):
    import acceptmon.ray

    ds = acceptmon.ray.read_logs([str(p) for p in logs], range_bytes=RANGE)
    assert isinstance(ds, ray.data.Dataset) and ds.num_blocks() > 24  # a block per range
    table = pa.concat_tables(ray.get(ds.to_arrow_refs()))
    assert table.schema == local.schema and _sorted(table) == _sorted(local)
    assert ray.__name__ == "ray" and acceptmon.ray.__name__ == "acceptmon.ray"


def test_an_address_after_ray_is_the_address_and_a_file_is_the_first_input(cluster, tmp_path):
    log = SAMPLES / "newest_0.5.23.log"
    want = pq.read_table(_local_parquet(log, tmp_path)).to_pylist()
    for address in ("auto", None):  # the process has joined its cluster already: an address is not used again
        out = tmp_path / f"rows-{address}"
        assert main(["parse", "--ray", *([address] if address else []), str(log), "-o", str(out)]) == 0
        assert [p.name for p in out.iterdir()] == ["newest_0.5.23-0.parquet"]
        assert pq.read_table(out / "newest_0.5.23-0.parquet").to_pylist() == want


def _local_parquet(log: Path, tmp_path: Path) -> Path:
    out = tmp_path / "local.parquet"
    assert main(["parse", str(log), "-o", str(out)]) == 0
    return out


def test_a_directory_with_other_parquet_files_is_refused(cluster, tmp_path, capsys):
    out = tmp_path / "dataset"
    out.mkdir()
    (out / "old-7.parquet").write_bytes(b"")
    assert main(["parse", "--ray", str(SAMPLES / "newest_0.5.23.log"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"acceptmon: error: {out}: holds 1 .parquet file(s) this run would not write (old-7.parquet, ...): empty it first"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["old-7.parquet"]


@pytest.mark.parametrize("name", ["missing.log", "-"])
def test_a_missing_file_or_stdin_is_one_line_before_any_task(cluster, tmp_path, capsys, name):
    log = str(tmp_path / name) if name != "-" else name
    assert main(["parse", "--ray", log, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"acceptmon: error: {log}: "), err
    assert "stream cannot be cut" in err[0] if name == "-" else "stream" not in err[0]
    assert not (tmp_path / "out").exists()


def test_without_ray_it_says_how_to_install_it(tmp_path):
    """A user without the extra: ray cannot be imported (a stand-in package that refuses)."""
    blocked = tmp_path / "blocked" / "ray"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocked.parent}{os.pathsep}{ROOT}"}
    log = str(SAMPLES / "newest_0.5.23.log")
    p = subprocess.run(
        [sys.executable, "-m", "acceptmon", "parse", "--ray", log, "-o", "out"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2
    assert (
        p.stderr.strip() == "acceptmon: error: --ray: needs Ray, which is not installed: pip install 'acceptmon[ray]'"
    )
    assert not (tmp_path / "out").exists()
