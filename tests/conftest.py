from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
GOLDEN = ROOT / "tests" / "golden"


def pytest_configure(config: pytest.Config) -> None:
    """Grammar-check results go to this session's own folder, never the user's ~/.cache: each session
    checks the shipped grammars afresh (a hook, not a fixture: some test modules load grammars when
    they are collected)."""
    path = tempfile.mkdtemp(prefix="acceptmon-test-cache-")
    os.environ["XDG_CACHE_HOME"] = path
    config.add_cleanup(lambda: shutil.rmtree(path, ignore_errors=True))


@pytest.fixture(scope="session")
def grammars() -> GrammarSet:
    return load_grammars()


@pytest.fixture
def parser(grammars: GrammarSet) -> Parser:
    return Parser(grammars, "test.log")
