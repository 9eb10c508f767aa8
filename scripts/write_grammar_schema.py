"""Write grammars/schema.json from the grammar model (run after changing acceptmon/parse/grammar.py's GrammarFile)."""

from __future__ import annotations

import json
from pathlib import Path

from acceptmon.parse.schema import grammar_schema

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    (ROOT / "grammars" / "schema.json").write_text(json.dumps(grammar_schema(), indent=2, sort_keys=True) + "\n")
    print("wrote grammars/schema.json")
