"""The deploy files against a real Prometheus (Debian's `prometheus` package) scraping `acceptmon serve`.

Every query of every Grafana panel must return data, the alert rules must load,
and `promtool` must accept the rules and the scrape config.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from tests.serving import Serve, decode_line, free_port, launch_line, wait_for

pytestmark = pytest.mark.integration
DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
INSTALL_HINT = "install Debian's prometheus package (apt-get install prometheus), or run ./scripts/test which does"


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: {INSTALL_HINT}")
    return path


def test_promtool_accepts_rules_and_config():
    promtool = _binary("promtool")
    rules = subprocess.run([promtool, "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml")],
                           capture_output=True, text=True)  # fmt: skip
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 8 rules found" in rules.stdout
    config = subprocess.run([promtool, "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
                            capture_output=True, text=True)  # fmt: skip
    assert config.returncode == 0, config.stdout + config.stderr


def vllm_lines(stamp: str) -> str:
    """One vLLM v1 logging interval: the engine's throughput line and its spec line."""
    return (
        f"INFO {stamp} [loggers.py:123] Engine 000: Avg prompt throughput: 120.4 tokens/s, Avg generation "
        "throughput: 812.9 tokens/s, Running: 8 reqs, Waiting: 1 reqs, GPU KV cache usage: 3.1%, Prefix cache hit "
        f"rate: 41.7%\nINFO {stamp} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.72, Accepted "
        "throughput: 412.50 tokens/s, Drafted throughput: 720.00 tokens/s, Accepted: 4125 tokens, Drafted: 7200 "
        "tokens, Per-position acceptance rate: 0.812, 0.566, 0.341, Avg Draft acceptance rate: 57.3%\n"
    )


def panel_queries() -> list[tuple[str, str]]:
    dash = json.loads((DEPLOY / "grafana" / "acceptmon.json").read_text())
    out = []
    for panel in dash["panels"]:  # the collapsed fleet row's panels: tests/test_fleet_rules.py
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "30s").replace("$instance", ".*").replace("$file", ".*")
            out.append((panel["title"], expr))
    return out


def query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def test_real_prometheus_scrapes_serve_and_every_panel_has_data(tmp_path):
    prometheus = _binary("prometheus")
    log = tmp_path / "server.log"
    now = datetime.now().replace(microsecond=0)
    log.write_text(launch_line(ts=now.isoformat(sep=" ")) + "\n")
    vllm = tmp_path / "vllm.log"  # the dashboard and rules serve both servers
    vllm.write_text("")
    serve = Serve(str(log), str(vllm))
    prom_port = free_port()
    for rules_file in ("alerts.yml", "fleet.yml"):
        (tmp_path / rules_file).write_text((DEPLOY / "prometheus" / rules_file).read_text())
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files: [alerts.yml, fleet.yml]\n"
        f"scrape_configs:\n  - job_name: acceptmon\n    static_configs:\n      - targets: ['127.0.0.1:{serve.port}']\n"
    )
    prom = subprocess.Popen(
        [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        serve.wait_listening()
        i = 0
        deadline = time.monotonic() + 60
        missing: list[str] = ["(not queried yet)"]
        while time.monotonic() < deadline and missing:
            with log.open("a") as f:  # a live log: a few batches per rank each round
                for rank in ("DP0 TP0", "DP1 TP1"):
                    stamp = datetime.now().replace(microsecond=0).isoformat(sep=" ")
                    f.write(decode_line(i, rank=rank, acc=2.5 + (i % 5) / 10, queued=i % 3, ts=stamp) + "\n")
                    i += 1
            with vllm.open("a") as f:
                f.write(vllm_lines(datetime.now().strftime("%m-%d %H:%M:%S")))
            time.sleep(0.5)
            try:
                missing = [f"{title}: {expr}" for title, expr in panel_queries() if not query(prom_port, expr)]
            except OSError:
                missing = ["(prometheus not answering yet)"]
        assert not missing, "panels without data:\n" + "\n".join(missing)
        up = query(prom_port, 'up{job="acceptmon"}')
        assert up and up[0]["value"][1] == "1"
        mean = wait_for(lambda: query(prom_port, "acceptmon:accept_length:mean5m"), timeout=20, interval=0.5)
        assert mean and 2.5 <= float(mean[0]["value"][1]) <= 2.9
        with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/rules", timeout=10) as resp:
            rules = [r for group in json.load(resp)["data"]["groups"] for r in group["rules"]]
        assert {r["name"] for r in rules} >= {"AcceptLengthBelowThreshold", "AcceptLengthDropped",
                                               "DecodeLogStaleWhileQueued", "LogFormatDrift", "SpecDecodingDoctorError",
                                               "AcceptLengthBelowFleetMedian", "acceptmon_fleet:accept_length:ratio5m"}  # fmt: skip
        assert all(r["health"] == "ok" for r in rules), rules
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=15)
        except subprocess.TimeoutExpired:
            prom.kill()
        assert serve.stop() == 0
    assert wait_for(lambda: prom.poll() is not None)
