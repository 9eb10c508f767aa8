"""A fleet on one machine: three `acceptmon serve` "nodes", each over its own /var/log/pods tree of CRI
files (SGLang and vLLM pods, different speculative configs, kubelet rotation, a container restart),
scraped by one real Prometheus that evaluates deploy/prometheus/fleet.yml.

The expected figures are worked out here from the lines written, with the definitions of the README's
"Counters a fleet can sum": an SGLang decode line covers decode_log_interval x #running-req verify steps
of accept len tokens each; a vLLM spec line drafted / k drafts (steps), accepted + drafts tokens. Each
run's config is grouped as its server names it (SGLang `EAGLE3`, vLLM `eagle3`).
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from tests.serving import Serve, free_port, parse_metrics

pytestmark = pytest.mark.integration
DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
INTERVAL = 10  # decode_log_interval in the SGLang launches below
CONFIG = ("model", "spec_algorithm", "spec_num_steps")


def _now(fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return datetime.now().strftime(fmt)


def _cri(message: str) -> str:
    return f"{datetime.now().strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z stdout F {message}\n"


@dataclass
class Container:
    """One container's log directory under a node's /var/log/pods, and what was written to it."""

    root: Path
    namespace: str
    pod: str
    name: str
    server: str  # "sglang" or "vllm"
    model: str
    steps: int  # speculative_num_steps / num_speculative_tokens
    acc: float  # the accept length its lines log (constant: a window of any lines has this ratio)
    restarts: int = 0
    written: dict[str, list[float]] = field(default_factory=dict)
    """Per log file (N.log): [lines with acceptance, verify steps, generated tokens]."""

    @property
    def dir(self) -> Path:
        return (
            self.root / f"{self.namespace}_{self.pod}_0a1b2c3d-{zlib.crc32(self.pod.encode()) % 10**4:04d}" / self.name
        )

    @property
    def log(self) -> Path:
        return self.dir / f"{self.restarts}.log"

    def write(self, lines: list[str]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as f:
            f.write("".join(_cri(line) for line in lines))

    def launch(self) -> None:
        if self.server == "sglang":
            self.write([f"[{_now()}] server_args=ServerArgs(model_path='{self.model}', tp_size=1, "
                        f"speculative_algorithm='EAGLE3', speculative_draft_model_path='d/e3', "
                        f"speculative_num_steps={self.steps}, speculative_eagle_topk=1, "
                        f"speculative_num_draft_tokens={self.steps + 1}, decode_log_interval={INTERVAL})"])  # fmt: skip
        else:
            self.write([f"INFO {_now('%m-%d %H:%M:%S')} [utils.py:328] non-default args: {{'model': '{self.model}', "
                        f"'speculative_config': {{'method': 'eagle3', 'model': 'd/e3', "
                        f"'num_speculative_tokens': {self.steps}}}}}"])  # fmt: skip

    def batch(self, i: int) -> None:
        """One logging interval: an SGLang decode line, or a vLLM throughput and spec line."""
        w = self.written.setdefault(str(self.log), [0, 0.0, 0.0])
        if self.server == "sglang":
            running, acc = 2 + i % 5, self.acc
            self.write([f"[{_now()} TP0] Decode batch, #running-req: {running}, #token: 4521, token usage: 0.02, "
                        f"accept len: {acc:.2f}, accept rate: 0.47, cuda graph: True, gen throughput (token/s): "
                        f"94.12, #queue-req: 0"])  # fmt: skip
            steps = INTERVAL * running
            w[0], w[1], w[2] = w[0] + 1, w[1] + steps, w[2] + acc * steps
            return
        drafts = 100 + 10 * (i % 4)
        accepted = round(drafts * (self.acc - 1))
        stamp = _now("%m-%d %H:%M:%S")
        self.write([f"INFO {stamp} [loggers.py:123] Engine 000: Avg prompt throughput: 120.4 tokens/s, Avg generation "
                    "throughput: 812.9 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix "
                    "cache hit rate: 41.7%",
                    f"INFO {stamp} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
                    f"{1 + accepted / drafts:.2f}, Accepted throughput: 41.25 tokens/s, Drafted throughput: 72.00 "
                    f"tokens/s, Accepted: {accepted} tokens, Drafted: {drafts * self.steps} tokens, Per-position "
                    f"acceptance rate: {', '.join('0.500' for _ in range(self.steps))}, Avg Draft acceptance rate: "
                    f"{100 * accepted / (drafts * self.steps):.1f}%"])  # fmt: skip
        w[0], w[1], w[2] = w[0] + 1, w[1] + drafts, w[2] + accepted + drafts

    def rotate(self) -> None:
        """The kubelet's rotation: 0.log -> 0.log.<timestamp>; a new 0.log; the older rotated file gzipped."""
        for old in self.dir.glob(f"{self.restarts}.log.*"):
            if not old.name.endswith(".gz"):
                with old.open("rb") as src, gzip.open(f"{old}.gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                old.unlink()
        self.log.rename(self.dir / f"{self.log.name}.{datetime.now().strftime('%Y%m%d-%H%M%S')}")
        self.log.touch()

    def restart(self) -> None:
        """The container restarts: the kubelet opens N+1.log, and the server launches again."""
        self.restarts += 1
        self.launch()


def _fleet(base: Path) -> list[list[Container]]:
    """Three nodes; prod runs model A with 3 steps on three pods (one vLLM), model A with 5 steps on one;
    staging runs model B on vLLM with 4 tokens and on SGLang with 3 steps."""
    a, b = "Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct"
    roots = [base / f"node{n}" / "var" / "log" / "pods" for n in (1, 2, 3)]
    return [
        [Container(roots[0], "prod", "sglang-a", "server", "sglang", a, 3, 2.4),
         Container(roots[0], "prod", "vllm-a", "engine", "vllm", a, 3, 2.9)],
        [Container(roots[1], "prod", "sglang-b", "server", "sglang", a, 3, 2.7),
         Container(roots[1], "prod", "sglang-c", "server", "sglang", a, 5, 3.3)],
        [Container(roots[2], "staging", "vllm-b", "engine", "vllm", b, 4, 3.1),
         Container(roots[2], "staging", "sglang-d", "server", "sglang", b, 3, 2.2),
         Container(roots[2], "staging", "sglang-e", "server", "sglang", b, 3, 1.6)],
    ]  # fmt: skip


def _query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _eventually(check, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    """``check()`` once it returns without an AssertionError; its last error after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _by_file(serve: Serve, name: str) -> dict[str, float]:
    return {dict(k)["file"]: v for k, v in parse_metrics(serve.get()).get(name, {}).items()}


def _expected_groups(nodes: list[list[Container]]) -> dict[tuple[str, ...], list[float]]:
    """(namespace, model, algorithm, steps) -> [steps, tokens]: the counters of every file, under its
    current run's config (each file here has one launch)."""
    out: dict[tuple[str, ...], list[float]] = {}
    for c in (c for node in nodes for c in node):
        for steps, tokens in ((w[1], w[2]) for w in c.written.values()):
            algorithm = "EAGLE3" if c.server == "sglang" else "eagle3"  # as each server names it
            g = out.setdefault((c.namespace, c.model, algorithm, str(c.steps)), [0.0, 0.0])
            g[0] += steps
            g[1] += tokens
    return out


def test_a_fleet_of_three_nodes_sums_to_the_lines_written(tmp_path):
    prometheus = shutil.which("prometheus")
    assert prometheus, "install Debian's prometheus package, or run ./scripts/test which does"
    nodes = _fleet(tmp_path)
    for c in (c for node in nodes for c in node):
        c.launch()
        for i in range(3):
            c.batch(i)
    serves = [Serve(str(node[0].root / "*" / "*" / "*.log"), "--poll", "--poll-interval", "100ms",
                    "--host", "127.0.0.1") for node in nodes]  # fmt: skip
    prom_port = free_port()
    (tmp_path / "fleet.yml").write_text((DEPLOY / "prometheus" / "fleet.yml").read_text())
    targets = ", ".join(f"'127.0.0.1:{s.port}'" for s in serves)
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [fleet.yml]\n"
        f"scrape_configs:\n  - job_name: acceptmon\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: [{targets}]\n"
    )
    prom = subprocess.Popen(
        [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for s in serves:
            s.wait_listening()
        _eventually(lambda: _assert_scraped(prom_port, len(serves)))
        for serve, node in zip(serves, nodes, strict=True):  # the first scrape's values: these lines
            _eventually(lambda s=serve, nd=node: _assert_node_counted(s, nd), timeout=30)
        first = _expected_groups(nodes)
        # scraped (1 s interval) before any other line is written: Prometheus holds these lines' counters
        _eventually(lambda: _assert_fleet_sums(prom_port, first), timeout=30)
        for rnd in range(3, 12):  # the pods write at different rates; rotation and a restart midway
            for n, node in enumerate(nodes):
                for k, c in enumerate(node):
                    for i in range((n + k) % 3 + 1):
                        c.batch(rnd * 10 + i)
            if rnd == 6:
                nodes[2][1].rotate()  # staging/sglang-d: 0.log -> 0.log.<time>, a new 0.log
            if rnd == 8:
                nodes[2][1].rotate()  # again: the first rotated file is gzipped
                nodes[1][0].restart()  # prod/sglang-b: 1.log, a new launch
            time.sleep(0.4)
        for serve, node in zip(serves, nodes, strict=True):
            _eventually(lambda s=serve, nd=node: _assert_node_counted(s, nd), timeout=30)
        want = _expected_groups(nodes)
        _eventually(lambda: _assert_fleet_sums(prom_port, want))
        _eventually(lambda: _assert_fleet_rule(prom_port, want, first))
    finally:
        prom.terminate()
        prom.wait(timeout=15)
        for s in serves:
            s.stop()


def _assert_scraped(port: int, targets: int) -> None:
    up = _query(port, 'up{job="acceptmon"}')
    assert len(up) == targets and all(u["value"][1] == "1" for u in up), up
    assert len(_query(port, "acceptmon_verify_steps_total")) >= 7


def _assert_node_counted(serve: Serve, node: list[Container]) -> None:
    """Every line written counted once: per file, batches, verify steps and tokens as written (a rotated
    file's lines count under the file the kubelet wrote them as)."""
    batches = _by_file(serve, "acceptmon_decode_batches_total")
    steps, tokens = _by_file(serve, "acceptmon_verify_steps_total"), _by_file(serve, "acceptmon_generated_tokens_total")
    for c in node:
        for path, (lines, s, t) in c.written.items():
            if c.server == "sglang":
                assert batches.get(path) == lines, (path, batches.get(path), lines)
            assert steps.get(path) == pytest.approx(s, rel=1e-9), (path, steps.get(path), s)
            assert tokens.get(path) == pytest.approx(t, rel=1e-9), (path, tokens.get(path), t)


def _assert_fleet_sums(port: int, want: dict[tuple[str, ...], list[float]]) -> None:
    """The fleet's counters through Prometheus, grouped by namespace and the run's config as the rules join them."""
    join = ("* on (instance, file, namespace, pod, container) group_left (model, spec_algorithm, spec_num_steps) "
            "acceptmon_run_info")  # fmt: skip
    got: dict[tuple[str, ...], list[float]] = {}
    for i, name in enumerate(("acceptmon_verify_steps_total", "acceptmon_generated_tokens_total")):
        for r in _query(port, f"sum by (namespace, {', '.join(CONFIG)}) ({name} {join})"):
            key = (r["metric"]["namespace"], *(r["metric"][k] for k in CONFIG))
            got.setdefault(key, [0.0, 0.0])[i] = float(r["value"][1])
    assert set(got) == set(want), (got, want)
    for key, (s, t) in want.items():
        assert got[key][0] == pytest.approx(s, rel=1e-9) and got[key][1] == pytest.approx(t, rel=1e-9), key


def _assert_fleet_rule(
    port: int, want: dict[tuple[str, ...], list[float]], first: dict[tuple[str, ...], list[float]]
) -> None:
    """The recording rule's fleet accept length for every group: the group's tokens over its steps since
    Prometheus's first scrape (what rate() sees), each replica weighing by its steps."""
    rows = _query(port, "acceptmon_fleet:accept_length:ratio5m")
    got = {(r["metric"]["namespace"], *(r["metric"][k] for k in CONFIG)): float(r["value"][1]) for r in rows}
    assert set(got) == set(want), (got, want)
    for key, (s, t) in want.items():
        s0, t0 = first.get(key, [0.0, 0.0])
        # rate() extrapolates each target's increase by its own scrape times (a per cent or two apart)
        assert got[key] == pytest.approx((t - t0) / (s - s0), rel=0.03), (key, got[key], (t - t0) / (s - s0))
