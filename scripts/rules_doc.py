"""Write docs/rules.md from the built-in rules (run after changing rules/*.toml)."""

from __future__ import annotations

from pathlib import Path

from acceptmon.diagnose.catalog import rules_markdown
from acceptmon.diagnose.rules import load_rules

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    (ROOT / "docs" / "rules.md").write_text(rules_markdown(load_rules()))
    print("wrote docs/rules.md")
