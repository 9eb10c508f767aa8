"""deploy/prometheus/fleet.yml under promtool: syntax, its unit tests, and the dashboard's fleet row.

tests/data/prometheus/fleet_rules_test.yml is a small fleet (three nodes, six pods, SGLang and vLLM, two
models) with the figures each rule must give, worked out by hand in its header. The same series feed the
fleet row of deploy/grafana/acceptmon.json: each of its queries, with the dashboard's variables filled
in, is evaluated by promtool and compared with the figures below.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = ROOT / "deploy" / "prometheus"
FLEET_TEST = Path(__file__).resolve().parent / "data" / "prometheus" / "fleet_rules_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "acceptmon.json"


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install Debian's prometheus package, or run ./scripts/test which does")
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_promtool_accepts_the_fleet_rules_and_the_config_loads_them():
    rules = promtool("check", "rules", str(PROMETHEUS / "fleet.yml"))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 10 rules found" in rules.stdout
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml", "fleet.yml"]
    checked = promtool("check", "config", str(PROMETHEUS / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 2 rule files found" in checked.stdout


def test_fleet_rules_unit_tests_pass():
    result = promtool("test", "rules", str(FLEET_TEST))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    spec = yaml.safe_load(FLEET_TEST.read_text())
    (case,) = spec["tests"]
    assert {t["expr"] for t in case["promql_expr_test"]} == {
        "acceptmon_fleet:accept_length:ratio5m",
        "acceptmon_fleet:draft_acceptance:ratio5m",
        "acceptmon_fleet:generated_tokens:rate5m",
        "acceptmon_pod:accept_length:ratio5m",
        "acceptmon_model:pod_accept_length:median5m",
    }
    fired = [a for t in case["alert_rule_test"] for a in t["exp_alerts"]]
    assert [a["exp_labels"]["pod"] for a in fired] == ["sglang-2"]


def test_a_wrong_figure_fails_the_unit_tests(tmp_path):
    """The unit tests compare values: the prod fleet's 2.35 changed to 2.36 fails."""
    text = FLEET_TEST.read_text()
    assert text.count("value: 2.35\n") == 1
    wrong = tmp_path / "wrong.yml"
    wrong.write_text(text.replace("value: 2.35\n", "value: 2.36\n").replace("../../../deploy", str(ROOT / "deploy")))
    result = promtool("test", "rules", str(wrong))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "acceptmon_fleet:accept_length:ratio5m" in result.stdout + result.stderr


M1 = ('model="Qwen/Qwen3-8B", spec_algorithm="EAGLE3", spec_num_steps="3", spec_eagle_topk="1", '
      'spec_num_draft_tokens="4"')  # fmt: skip
M2 = 'model="meta-llama/Llama-3.1-8B-Instruct", spec_algorithm="eagle3", spec_num_steps="3", spec_num_draft_tokens="3"'
S0 = 'namespace="prod", pod="sglang-0"'
PANEL_FIGURES: dict[tuple[str, str], list[tuple[str, float]]] = {
    # with $namespace = prod and $pod = all: staging's pod, finding and requests are left out
    ("Fleet accept length by model and config", "A"): [
        (f'{{namespace="prod", {M1}}}', 2.35),
        (f'{{namespace="prod", {M2}}}', 3.25),
    ],
    ("Fleet draft acceptance from token counts", "A"): [(f'{{namespace="prod", {M2}}}', 0.75)],
    ("Fleet generated tokens/s", "A"): [(f'{{namespace="prod", {M1}}}', 47), (f'{{namespace="prod", {M2}}}', 13)],
    ("Accept length per pod", "A"): [
        (f'{{namespace="prod", pod="sglang-0", container="server", {M1}}}', 2.5),
        (f'{{namespace="prod", pod="sglang-1", container="server", {M1}}}', 3),
        (f'{{namespace="prod", pod="sglang-2", container="server", {M1}}}', 1.5),
        (f'{{namespace="prod", pod="vllm-0", container="vllm", {M2}}}', 3.25),
    ],
    ("Accept length per pod", "B"): [(f"{{{M1}}}", 2.75), (f"{{{M2}}}", 3.25)],
    ("Doctor findings", "A"): [
        (
            '{namespace="prod", pod="sglang-2", container="server", file="/var/log/pods/prod_sglang-2_9d3a/server/0.log",'
            ' rule="P2", severity="error"}',
            1,
        ),
    ],
    # sglang-0's requests: 1/s at accept length <= 2, 1/s in (2, 2.5], 2/s in (2.5, 3]
    ("Per-request accept length", "A"): [
        *((f'{{le="{le}"}}', 0) for le in ("1.0", "1.25", "1.5", "1.75")),
        ('{le="2.0"}', 1),
        ('{le="2.5"}', 2),
        *((f'{{le="{le}"}}', 4) for le in ("3.0", "3.5", "4.0", "5.0", "6.0", "7.0", "8.0", "+Inf")),
    ],
    # 10th: 0.4 of 4 requests, in the (1.75, 2] bucket: 1.75 + 0.25 x 0.4; 50th: 2 of 4, top of (2, 2.5];
    # 90th: 3.6 of 4, in (2.5, 3]: 2.5 + 0.5 x 1.6 / 2
    ("Per-request accept length quantiles", "A"): [(f"{{{S0}}}", 1.85)],
    ("Per-request accept length quantiles", "B"): [(f"{{{S0}}}", 2.5)],
    ("Per-request accept length quantiles", "C"): [(f"{{{S0}}}", 2.9)],
}


def fleet_panel_targets() -> list[tuple[str, dict[str, Any]]]:
    dashboard = json.loads(DASHBOARD.read_text())
    (row,) = [p for p in dashboard["panels"] if p["type"] == "row" and p["title"].startswith("Fleet")]
    return [(panel["title"], target) for panel in row["panels"] for target in panel["targets"]]


def test_fleet_row_queries_give_the_fleets_figures(tmp_path):
    fleet = yaml.safe_load(FLEET_TEST.read_text())
    (case,) = fleet["tests"]
    expr_tests = []
    for title, target in fleet_panel_targets():
        expr = (target["expr"].replace('"$namespace"', '"prod"').replace('"$pod"', '".*"')
                .replace("$__rate_interval", "5m"))  # fmt: skip
        assert "$" not in expr, expr
        figures = PANEL_FIGURES[(title, target["refId"])]
        selector = re.match(r"(acceptmon[\w:]*)(\{|$)", expr)  # a bare selector keeps the series' name
        name = selector.group(1) if selector else ""
        expr_tests.append({"expr": expr, "eval_time": "20m",
                           "exp_samples": [{"labels": name + labels, "value": value} for labels, value in figures]})  # fmt: skip
    assert len(expr_tests) == len(PANEL_FIGURES)
    spec = {
        "rule_files": [str(PROMETHEUS / "fleet.yml")],
        "evaluation_interval": fleet["evaluation_interval"],
        "tests": [{"interval": case["interval"], "input_series": case["input_series"], "promql_expr_test": expr_tests}],
    }
    path = tmp_path / "panels_test.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
