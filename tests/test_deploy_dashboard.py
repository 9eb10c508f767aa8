"""deploy/grafana/acceptmon.json without a Grafana: units, variables, the fleet row, and that every query names
only series that exist: families the exporter renders, or recording rules in deploy/prometheus.

tests/test_prometheus.py runs the top-level panels against a real Prometheus; tests/test_fleet_rules.py
evaluates the fleet row's queries with promtool over a small fleet.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from acceptmon.cli.wiring import make_doctor
from acceptmon.exporter.metrics import MetricsPage
from acceptmon.live.state import LiveStats

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
DASHBOARD = json.loads((DEPLOY / "grafana" / "acceptmon.json").read_text())
RULE_FILES = ("alerts.yml", "fleet.yml")
FLEET_COUNTERS = {"acceptmon_verify_steps_total", "acceptmon_generated_tokens_total"}
"""The counters an SGLang fleet can sum (verify steps, generated tokens per source): part of the exporter's
interface the fleet rules are written against, named here until every build of the exporter renders them."""


def all_panels(panels: list[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in DASHBOARD["panels"] if panels is None else panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def fleet_row() -> dict[str, Any]:
    (row,) = [p for p in DASHBOARD["panels"] if p["type"] == "row" and p["title"].startswith("Fleet")]
    return row


def exported_series() -> set[str]:
    """Series names /metrics can hold, read from the exporter's own rendering (HELP and TYPE lines come
    without samples): gauges and counters as named, histograms as their _bucket, _sum and _count."""
    live = LiveStats(doctor=make_doctor(argparse.Namespace(rules=[])))
    names = set()
    for line in MetricsPage(live).render().decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return names


def rules() -> list[dict[str, Any]]:
    out = []
    for name in RULE_FILES:
        for group in yaml.safe_load((DEPLOY / "prometheus" / name).read_text())["groups"]:
            out += group["rules"]
    return out


def series_named(expr: str) -> set[str]:
    unquoted = re.sub(r'"[^"]*"', '""', expr)
    return set(re.findall(r"\bacceptmon[a-zA-Z0-9_:]*", unquoted))


def test_log_lines_panel_is_in_lines_per_second():
    (panel,) = [p for p in all_panels() if p["title"] == "Log lines by kind"]
    assert panel["fieldConfig"]["defaults"]["unit"] == "suffix: lines/s"
    assert "rate(acceptmon_lines_total" in panel["targets"][0]["expr"]


def test_namespace_and_pod_variables_come_from_run_info():
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["namespace"]["definition"] == "label_values(acceptmon_run_info, namespace)"
    assert variables["pod"]["definition"] == 'label_values(acceptmon_run_info{namespace=~"$namespace"}, pod)'
    for name in ("namespace", "pod"):
        v = variables[name]
        assert v["query"]["query"] == v["definition"]
        assert v["includeAll"] and v["multi"] and v["allValue"] == ".*"


def test_fleet_row_has_the_fleet_doctor_and_request_panels():
    row = fleet_row()
    titles = [p["title"] for p in row["panels"]]
    assert titles == [
        "Fleet accept length by model and config",
        "Fleet draft acceptance from token counts",
        "Fleet generated tokens/s",
        "Accept length per pod",
        "Doctor findings",
        "Per-request accept length",
        "Per-request accept length quantiles",
    ]
    exprs = " ".join(t["expr"] for p in row["panels"] for t in p["targets"])
    for series in ("acceptmon_doctor_finding", "acceptmon_request_accept_length_bucket",
                   "acceptmon_fleet:accept_length:ratio5m", "acceptmon_pod:accept_length:ratio5m"):  # fmt: skip
        assert series in exprs
    assert "$namespace" in exprs and "$pod" in exprs
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in DASHBOARD["panels"] if p is not row)
    assert row["gridPos"]["y"] >= bottom and row["collapsed"] is True
    assert all(p["gridPos"]["y"] > row["gridPos"]["y"] for p in row["panels"])


def test_panel_ids_are_unique():
    ids = [p["id"] for p in all_panels()]
    assert len(ids) == len(set(ids))


def test_every_query_and_rule_names_only_series_that_exist():
    recorded = {r["record"] for r in rules() if "record" in r}
    known = exported_series() | recorded | FLEET_COUNTERS
    used: dict[str, set[str]] = {}
    for panel in all_panels():
        for target in panel.get("targets", []):
            used[f"panel {panel['title']!r}"] = series_named(target["expr"])
    for variable in DASHBOARD["templating"]["list"]:
        if variable["type"] == "query":
            used[f"variable {variable['name']}"] = series_named(variable["definition"])
    for rule in rules():
        used[f"rule {rule.get('record') or rule['alert']}"] = series_named(rule["expr"])
    unknown = {where: sorted(names - known) for where, names in used.items() if names - known}
    assert unknown == {}
    assert sum(len(n) for n in used.values()) > 40  # the check read the queries


def test_the_name_check_knows_what_the_exporter_renders():
    names = exported_series()
    assert {"acceptmon_lines_total", "acceptmon_run_info", "acceptmon_doctor_finding",
            "acceptmon_request_accept_length_bucket", "acceptmon_accepted_tokens_total"} <= names  # fmt: skip
    assert "acceptmon_request_accept_length" not in names  # a histogram has no bare series
    assert series_named('rate(acceptmon_lines_total{kind="acceptmon_x"}[5m]) / acceptmon:a:b') == {
        "acceptmon_lines_total",
        "acceptmon:a:b",
    }
