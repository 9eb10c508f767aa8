"""The rules as a list a person reads: ``doctor --list-rules`` and ``docs/rules.md``. Pure.

Both come from the loaded rules (built-in ``rules/*.toml`` plus any ``--rules`` files), so
the list is what this doctor judges by: id, severity, signature, thresholds (the rule's
validated parameters, defaults included) and its title, the one line of what it means.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from acceptmon.diagnose.model import Rule

__all__ = ["rule_rows", "rules_json", "rules_markdown", "rules_text"]


def _thresholds(rule: Rule) -> dict[str, Any]:
    params = rule.params
    return dict(params.model_dump()) if params is not None and hasattr(params, "model_dump") else {}


def _value(v: Any) -> str:
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(v) if isinstance(v, str) else str(v)


def rule_rows(rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """One dict per rule, in id order (P2 before P10)."""
    return [
        {
            "id": r.id,
            "severity": r.severity,
            "signature": r.signature,
            "title": r.title,
            "thresholds": _thresholds(r),
            "reads": sorted(r.reads),
        }
        for r in sorted(rules, key=_order)
    ]


def _order(rule: Rule) -> tuple[str, int, str]:
    head = rule.id.rstrip("0123456789")
    tail = rule.id[len(head) :]
    return (head, int(tail) if tail else -1, rule.id)


def rules_text(rules: Sequence[Rule]) -> str:
    """Two lines per rule: id, severity, signature and title; then its thresholds."""
    out = []
    for row in rule_rows(rules):
        out.append(f"{row['id']:<5} {row['severity']:<8} {row['signature']:<18} {row['title']}")
        thresholds = ", ".join(f"{k}={_value(v)}" for k, v in row["thresholds"].items())
        out.append(f"      {thresholds or '(no thresholds)'}")
    return "\n".join(out)


def rules_json(rules: Sequence[Rule]) -> str:
    return json.dumps(rule_rows(rules), indent=2)


def rules_markdown(rules: Sequence[Rule]) -> str:
    """``docs/rules.md``: a summary table, then each rule's meaning, fix, thresholds and sources."""
    rows = rule_rows(rules)
    by_id = {r.id: r for r in rules}
    out = [
        "# Doctor rules",
        "",
        "Generated from `rules/*.toml` by `python scripts/rules_doc.py` (a test keeps it current);",
        "`acceptmon doctor --list-rules` prints the same list, with any `--rules` files merged in.",
        "",
        "| id | severity | signature | what it means |",
        "|---|---|---|---|",
    ]
    out += [f"| {r['id']} | {r['severity']} | `{r['signature']}` | {r['title']} |" for r in rows]
    for row in rows:
        rule = by_id[row["id"]]
        reads = ", ".join(f"`{k}`" for k in row["reads"])
        what = f"Severity `{rule.severity}`, signature `{rule.signature}`, reads {reads}."
        out += ["", f"## {rule.id}: {rule.title}", "", what, "", rule.message, "", f"Fix: {rule.fix}"]
        if row["thresholds"]:
            out += ["", "Thresholds: " + ", ".join(f"`{k} = {_value(v)}`" for k, v in row["thresholds"].items()) + "."]
        if rule.cannot_check:
            out += ["", f"What the logs cannot show: {rule.cannot_check}"]
        if rule.sources:
            out += ["", "Sources: " + ", ".join(rule.sources) + "."]
    return "\n".join(out) + "\n"
