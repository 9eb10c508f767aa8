"""A quick start: a grammar set that passed its checks is not checked again, and ``parse`` loads only what it needs.

The record of passed sets lives in the user's cache folder; every test here points
``XDG_CACHE_HOME`` at its own temporary folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acceptmon.cli import main
from acceptmon.errors import GrammarError
from acceptmon.parse import cache as checkcache
from acceptmon.parse import load as loader
from acceptmon.parse.load import builtin_grammar_dir, load_grammars
from acceptmon.parse.values import VALUE_KINDS
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
DECODE = (
    "[2026-02-26 10:00:00 TP0] Decode batch, #running-req: 3, #token: 37048, token usage: 0.24, accept len: 2.86, "
    "accept rate: 0.62, cuda graph: True, gen throughput (token/s): 194.42, #queue-req: 0\n"
)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own cache folder; the path of the file of passed sets in it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "acceptmon" / "checked-grammars"


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


def test_a_set_that_passed_is_not_checked_again(cache, checks):
    names = [g.name for g in load_grammars().all]
    assert checks == [f"probe {n}" for n in names] + [f"samples {n}" for n in names]
    lines = cache.read_text().splitlines()
    assert lines[0] == checkcache.FORMAT and len(lines) == 2 and len(lines[1]) == 64
    checks.clear()
    again = load_grammars()
    assert checks == []
    assert [g.name for g in again.all] == names
    decode = next(g for g in again.records if g.name == "sglang_decode")
    assert decode.regex is not None and decode.regex.match(DECODE.rstrip("\n")) is not None


def test_an_edited_grammar_is_checked_again_and_refused_with_the_usual_error(tmp_path, cache, checks):
    mine = _mine(tmp_path)
    load_grammars([mine])
    assert "samples custom_decode" in checks
    mine.write_text(MINE.format(expect="9.99"))
    checks.clear()
    with pytest.raises(GrammarError) as info:
        load_grammars([mine])
    assert str(info.value) == f"{mine}: samples.0.expect.accept_len: expected 9.99, got 2.5"
    assert "samples custom_decode" in checks
    assert len(cache.read_text().splitlines()) == 2  # the failed set is not recorded
    with pytest.raises(GrammarError) as again:
        load_grammars([mine])
    assert str(again.value) == str(info.value)  # and is refused again, the same way


def test_each_set_is_remembered_on_its_own(tmp_path, cache, checks):
    load_grammars()
    load_grammars([_mine(tmp_path)])
    assert len(cache.read_text().splitlines()) == 3
    checks.clear()
    load_grammars([_mine(tmp_path)])
    load_grammars()
    load_grammars([builtin_grammar_dir() / "sglang_decode.toml"], replace=["sglang_decode"])
    assert checks[0] == "probe sglang_envelope"  # the same files, but one stands in for a built-in one: new set
    assert len(cache.read_text().splitlines()) == 4


def test_without_the_cache_the_checks_run(cache, checks):
    count = len(load_grammars().all)
    checks.clear()
    load_grammars(cached=False)
    assert len(checks) == 2 * count


def test_grammars_check_always_checks(tmp_path, checks, capsys):
    mine = _mine(tmp_path)
    for _ in range(2):
        checks.clear()
        assert main(["grammars", "check", str(mine)]) == 0
        assert "samples custom_decode" in checks
    assert capsys.readouterr().out == f"{mine}: ok\n{mine}: ok\n"


def test_an_unwritable_cache_folder_only_costs_the_checks(tmp_path, monkeypatch, checks):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the cache folder would go\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    for _ in range(2):
        checks.clear()
        assert len(load_grammars().all) > 0
        assert "probe sglang_envelope" in checks
    assert blocker.read_text() == "a file where the cache folder would go\n"


@pytest.mark.parametrize(
    "damage",
    [
        b"\xff\xfe\x00garbage",
        b"",
        checkcache.FORMAT.encode() + b"\nnot a digest\n" + b"z" * 64 + b"\n",
        b"an older layout\n" + b"0" * 64 + b"\n",
    ],
)
def test_a_damaged_cache_file_is_ignored_and_replaced(cache, checks, damage):
    cache.parent.mkdir(parents=True)
    cache.write_bytes(damage)
    load_grammars()
    assert "probe sglang_envelope" in checks
    lines = cache.read_text().splitlines()
    assert lines[0] == checkcache.FORMAT and len(lines) == 2
    assert sorted(os.listdir(cache.parent)) == ["checked-grammars", checkcache.TABLES_FILE]  # no temporary file left
    checks.clear()
    load_grammars()
    assert checks == []


def test_a_kind_registered_by_other_code_turns_the_cache_off(cache, checks, monkeypatch):
    monkeypatch.setitem(VALUE_KINDS, "tenths", lambda text: float(text) / 10)
    for _ in range(2):
        checks.clear()
        load_grammars()
        assert "probe sglang_envelope" in checks
    assert not cache.exists()
    monkeypatch.delitem(VALUE_KINDS, "tenths")
    load_grammars()
    checks.clear()
    load_grammars()
    assert checks == []


def test_the_cache_keeps_the_newest_digests(cache):
    digests = [f"{i:064x}" for i in range(checkcache.KEEP + 5)]
    for d in digests:
        checkcache.remember(d)
    checkcache.remember(digests[-3])  # seen again: moves to the end
    expected = [d for d in digests[-checkcache.KEEP :] if d != digests[-3]] + [digests[-3]]
    assert cache.read_text().splitlines() == [checkcache.FORMAT, *expected]
    assert checkcache.passed(digests[-1]) and not checkcache.passed(digests[0])


def test_the_digest_follows_the_grammars_and_the_code(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "parse.py").write_text("A = 1\n")
    monkeypatch.setattr(checkcache, "CODE", code)
    first = checkcache.set_digest([b"grammar one", b"grammar two"])
    assert checkcache.set_digest([b"grammar one", b"grammar two"]) == first
    assert checkcache.set_digest([b"grammar one", b"grammar tw", b"o"]) != first
    assert checkcache.set_digest([b"grammar two", b"grammar one"]) != first
    (code / "parse.py").write_text("A = 2\n")
    assert checkcache.set_digest([b"grammar one", b"grammar two"]) != first


def test_the_cache_folder_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert checkcache.cache_file() == tmp_path / "xdg" / "acceptmon" / "checked-grammars"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for relative_or_unset in ("relative/cache", ""):
        monkeypatch.setenv("XDG_CACHE_HOME", relative_or_unset)
        assert checkcache.cache_file() == tmp_path / "home" / ".cache" / "acceptmon" / "checked-grammars"


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


def test_parse_loads_no_live_doctor_or_run_statistics_module(tmp_path, cache):
    log = tmp_path / "two.log"
    log.write_text(DECODE + "hello\n")
    loaded = (
        "sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'prometheus_client', 'watchfiles')\n"
        "    or m.startswith(('acceptmon.diagnose', 'acceptmon.tui', 'acceptmon.cli.live', 'acceptmon.pipeline.live'))\n"
        "    or m in ('acceptmon.measure.aggregate', 'acceptmon.sinks.runs_table'))"
    )
    assert _parse_then_print(tmp_path, cache, [str(log), "-o", str(tmp_path / "two.csv")], loaded) == "[]\n"
    assert (tmp_path / "two.csv").read_text().count("\n") == 2
    assert cache.read_text().startswith(checkcache.FORMAT)  # and it remembered the shipped set


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the grammar files whose TOML was parsed, in order."""
    seen: list[str] = []
    table = loader.toml_table
    monkeypatch.setattr(
        loader, "toml_table", lambda path, data, error: seen.append(path.name) or table(path, data, error)
    )
    return seen


def test_the_toml_of_unchanged_grammar_files_is_parsed_once_and_kept_exactly(tmp_path, cache, parsed):
    paths = [*sorted(builtin_grammar_dir().glob("*.toml")), _mine(tmp_path)]
    first = loader._read_tables(paths)
    assert parsed == [p.name for p in paths]
    parsed.clear()
    again = loader._read_tables(paths)
    assert parsed == [] and repr(again) == repr(first)
    assert "datetime.datetime(2025, 12, 4, 20, 35, 53, 123000)" in repr(again)  # TOML dates come back as dates
    _mine(tmp_path, expect="2.6")
    assert [p for _, p in loader._read_tables(paths)][-1]["samples"][0]["expect"]["accept_len"] == 2.6
    assert parsed == [p.name for p in paths]  # one file changed: all are parsed, and kept again
    parsed.clear()
    loader._read_tables(paths, cached=False)
    assert parsed == [p.name for p in paths]


@pytest.mark.parametrize(
    "damage",
    [
        b"garbage",
        b"acceptmon grammar tables 1\n",
        b"acceptmon grammar tables 1\n{digest}\n[{{]\n",
        b"acceptmon grammar tables 1\n{digest}\n{{}}\n",
        b'acceptmon grammar tables 1\n{digest}\n[{{"a": {{"\\u0000toml": "date", "iso": "31.01.2026"}}}}]\n',
        b"acceptmon grammar tables 1\n{digest}\n" + b"[" * 5000 + b"\n",
    ],
    ids=["garbage", "no digest", "not json", "not a list", "a bad date", "too deep"],
)
def test_a_damaged_tables_file_is_ignored_and_replaced(cache, parsed, damage):
    paths = sorted(builtin_grammar_dir().glob("*.toml"))
    want = repr(loader._read_tables(paths))
    digest = checkcache.tables_digest(p.read_bytes() for p in paths)
    tables = cache.with_name(checkcache.TABLES_FILE)
    tables.write_bytes(damage.replace(b"{digest}", digest.encode()).replace(b"{{", b"{").replace(b"}}", b"}"))
    parsed.clear()
    assert repr(loader._read_tables(paths)) == want
    assert len(parsed) == len(paths)
    assert tables.read_bytes().startswith(f"{checkcache.TABLES}\n{digest}\n".encode())
    parsed.clear()
    loader._read_tables(paths)
    assert parsed == []


def test_a_table_json_cannot_give_back_is_not_kept(tmp_path, cache, parsed):
    odd = tmp_path / "odd.toml"
    odd.write_text('name = "x"\n[a]\n"\\u0000toml" = "date"\niso = "2026-01-31"\n')  # reads back as a date
    assert loader._read_tables([odd])[0][1] == {"name": "x", "a": {"\x00toml": "date", "iso": "2026-01-31"}}
    assert not cache.with_name(checkcache.TABLES_FILE).exists()
    parsed.clear()
    loader._read_tables([odd])
    assert parsed == ["odd.toml"]


def test_parse_of_a_small_file_starts_no_process_pool(tmp_path, cache):
    log = tmp_path / "two.log"
    log.write_text(DECODE * 2)
    loaded = (
        "sorted({m.split('.')[0] for m in sys.modules} & {'concurrent', 'multiprocessing', 'textual',\n"
        "    'prometheus_client', 'watchfiles'}), 'acceptmon.pipeline.workers' in sys.modules"
    )
    args = [str(log), "-o", str(tmp_path / "two.csv"), "-j", "4"]
    assert _parse_then_print(tmp_path, cache, args, loaded) == "[] False\n"
    assert (tmp_path / "two.csv").read_text().count("\n") == 3


def _parse_then_print(tmp_path: Path, cache: Path, args: list[str], expression: str) -> str:
    """What a fresh interpreter prints of ``expression`` (about ``sys.modules``) after ``acceptmon parse ARGS``."""
    code = f"import sys\nfrom acceptmon.cli import main\nassert main(['parse', *{args!r}]) == 0\nprint({expression})\n"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parent.parent)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return done.stdout
