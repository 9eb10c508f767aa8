from __future__ import annotations

from pathlib import Path

import pytest

from acceptmon.grammar import GrammarSet
from acceptmon.loader import load_grammars
from acceptmon.parse import Parser

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="session")
def grammars() -> GrammarSet:
    return load_grammars()


@pytest.fixture
def parser(grammars: GrammarSet) -> Parser:
    return Parser(grammars, "test.log")
