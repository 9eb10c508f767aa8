from __future__ import annotations

from pathlib import Path

import pytest

from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="session")
def grammars() -> GrammarSet:
    """The shipped grammars, put through every check a user's grammar file gets: commands load them
    unchecked because every test session checks them here (and in test_startup)."""
    return load_grammars(check_builtin=True)


@pytest.fixture
def parser(grammars: GrammarSet) -> Parser:
    return Parser(grammars, "test.log")
