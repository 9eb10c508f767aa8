"""A quick start: the shipped grammars load without their checks, a user's grammar file is checked
every time it loads, and ``parse`` loads only what it needs.

The shipped grammars (``grammars/*.toml``) are trusted at run time because the tests check them:
here, and in every session through the ``grammars`` fixture (``load_grammars(check_builtin=True)``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acceptmon.cli import main
from acceptmon.errors import GrammarError
from acceptmon.parse import load as loader
from acceptmon.parse.load import load_grammars
from tests.conftest import ROOT

MINE = """
name = "custom_decode"
record = "decode"
anchor = "DECODE"
pattern = '''DECODE al=(?P<accept_len>[\\d.]+)'''
[fields]
accept_len = {{ kind = "float" }}
[[samples]]
line = "[2026-01-01 00:00:00 TP3] DECODE al=2.50"
expect = {{ accept_len = {expect}, rank = "TP3" }}
"""
SLOW = """
name = "slow_decode"
record = "decode"
anchor = "DECODE"
pattern = '''DECODE (?P<body>(a|a)+)$'''
body = "pairs"
[[samples]]
line = "[2026-01-01 00:00:00 TP3] DECODE aaaa"
"""
DECODE = (
    "[2026-02-26 10:00:00 TP0] Decode batch, #running-req: 3, #token: 37048, token usage: 0.24, accept len: 2.86, "
    "accept rate: 0.62, cuda graph: True, gen throughput (token/s): 194.42, #queue-req: 0\n"
)


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the grammars whose patterns were probed and whose samples were run, in order."""
    seen: list[str] = []
    probe, samples = loader.check_grammar, loader.check_samples
    monkeypatch.setattr(loader, "check_grammar", lambda g: seen.append(f"probe {g.name}") or probe(g))
    monkeypatch.setattr(loader, "check_samples", lambda g, s: seen.append(f"samples {g.name}") or samples(g, s))
    return seen


def _mine(tmp_path: Path, expect: str = "2.5") -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(MINE.format(expect=expect))
    return path


def test_the_shipped_grammars_load_without_their_checks(checks):
    gset = load_grammars()
    assert checks == []
    decode = next(g for g in gset.records if g.name == "sglang_decode")
    assert decode.regex is not None and decode.regex.match(DECODE.rstrip("\n")) is not None


def test_the_shipped_grammars_pass_every_check(checks):
    names = [g.name for g in load_grammars(check_builtin=True).all]
    assert checks == [f"probe {n}" for n in names] + [f"samples {n}" for n in names]


def test_a_user_grammar_is_probed_and_the_samples_of_the_whole_set_run(tmp_path, checks):
    names = [g.name for g in load_grammars([_mine(tmp_path)]).all]
    assert checks == ["probe custom_decode"] + [f"samples {n}" for n in names]


def test_a_user_grammar_is_checked_every_time_and_refused_with_the_usual_error(tmp_path, checks):
    mine = _mine(tmp_path)
    load_grammars([mine])
    mine.write_text(MINE.format(expect="9.99"))
    for _ in range(2):
        checks.clear()
        with pytest.raises(GrammarError) as info:
            load_grammars([mine])
        assert str(info.value) == f"{mine}: samples.0.expect.accept_len: expected 9.99, got 2.5"
        assert "samples custom_decode" in checks


def test_parse_refuses_a_user_grammar_whose_sample_fails_or_whose_pattern_backtracks(tmp_path, capsys):
    log = tmp_path / "two.log"
    log.write_text(DECODE + "hello\n")
    wrong, slow = _mine(tmp_path, expect="9.99"), tmp_path / "slow.toml"
    slow.write_text(SLOW)
    for grammar, words in ((wrong, "samples.0.expect.accept_len: expected 9.99"), (slow, "pattern: pattern takes")):
        assert main(["parse", str(log), "--grammar", str(grammar), "-o", str(tmp_path / "two.csv")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"acceptmon: error: {grammar}: {words}") and err.count("\n") == 1
    assert not (tmp_path / "two.csv").exists()


def test_grammars_check_always_checks(tmp_path, checks, capsys):
    mine = _mine(tmp_path)
    for _ in range(2):
        checks.clear()
        assert main(["grammars", "check", str(mine)]) == 0
        assert "probe custom_decode" in checks and "samples custom_decode" in checks
    assert capsys.readouterr().out == f"{mine}: ok\n{mine}: ok\n"


def test_grammars_check_of_a_shipped_file_checks_it(checks, capsys):
    shipped = loader.builtin_grammar_dir() / "sglang_decode.toml"
    assert main(["grammars", "check", str(shipped)]) == 0
    assert checks[0] == "probe sglang_decode" and "probe sglang_envelope" not in checks
    assert capsys.readouterr().out == f"{shipped}: ok\n"


def test_the_first_bad_file_is_named_whatever_is_wrong_with_the_next(tmp_path):
    off_schema = tmp_path / "a.toml"
    off_schema.write_text('colour = "red"\n' + MINE.format(expect="2.5"))
    not_toml = tmp_path / "b.toml"
    not_toml.write_text("name = \n")
    with pytest.raises(GrammarError) as info:
        load_grammars([off_schema, not_toml])
    assert (info.value.file, info.value.key) == (str(off_schema), "colour")
    with pytest.raises(GrammarError) as info:
        load_grammars([not_toml, off_schema])
    assert (info.value.file, info.value.key) == (str(not_toml), "-")


def test_parse_loads_no_live_doctor_or_run_statistics_module(tmp_path):
    log = tmp_path / "two.log"
    log.write_text(DECODE + "hello\n")
    loaded = (
        "sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'prometheus_client', 'watchfiles')\n"
        "    or m.startswith(('acceptmon.diagnose', 'acceptmon.tui', 'acceptmon.cli.live', 'acceptmon.pipeline.live'))\n"
        "    or m in ('acceptmon.measure.aggregate', 'acceptmon.sinks.runs_table')),\n"
        "    sys.modules['acceptmon.parse.grammar'].GrammarFile.__pydantic_complete__"  # no grammar validator built
    )
    assert _parse_then_print(tmp_path, [str(log), "-o", str(tmp_path / "two.csv")], loaded) == "[] False\n"
    assert (tmp_path / "two.csv").read_text().count("\n") == 2
    assert not (tmp_path / "cache").exists()  # and it wrote nothing to the user's cache folder


def test_parse_of_a_small_file_starts_no_process_pool(tmp_path):
    log = tmp_path / "two.log"
    log.write_text(DECODE * 2)
    loaded = (
        "sorted({m.split('.')[0] for m in sys.modules} & {'concurrent', 'multiprocessing', 'textual',\n"
        "    'prometheus_client', 'watchfiles'}), 'acceptmon.pipeline.workers' in sys.modules"
    )
    args = [str(log), "-o", str(tmp_path / "two.csv"), "-j", "4"]
    assert _parse_then_print(tmp_path, args, loaded) == "[] False\n"
    assert (tmp_path / "two.csv").read_text().count("\n") == 3


def _parse_then_print(tmp_path: Path, args: list[str], expression: str) -> str:
    """What a fresh interpreter prints of ``expression`` (about ``sys.modules``) after ``acceptmon parse ARGS``."""
    code = f"import sys\nfrom acceptmon.cli import main\nassert main(['parse', *{args!r}]) == 0\nprint({expression})\n"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return done.stdout
