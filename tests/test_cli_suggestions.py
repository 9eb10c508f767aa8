"""Mistyped commands, choices and flags: one line naming the closest one, the right --help, exit 2."""

from __future__ import annotations

import pytest

from acceptmon.cli import main
from tests.test_cli import acceptmon


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["pars", "x.log"],
            "acceptmon: error: argument COMMAND: invalid choice: 'pars'; did you mean 'parse'? (choose from 'parse', "
            "'runs', 'grammars', 'compare', 'serve', 'tail', 'demo', 'doctor') (see acceptmon --help)",
        ),
        (
            ["parse", "--formt", "csv", "x.log"],
            "acceptmon parse: error: unrecognized argument: --formt; did you mean --format? "
            "(see acceptmon parse --help)",
        ),
        (
            ["doctor", "x.log", "--formt=json"],
            "acceptmon doctor: error: unrecognized argument: --formt=json; did you mean --format? "
            "(see acceptmon doctor --help)",
        ),
        (
            ["runs", "x.log", "--formt", "json", "--jbs", "2"],
            "acceptmon runs: error: unrecognized arguments: --formt json --jbs 2; did you mean --format (for --formt), "
            "--jobs (for --jbs)? (see acceptmon runs --help)",
        ),
        (
            ["parse", "x.log", "--format", "jsn"],
            "acceptmon parse: error: argument --format: invalid choice: 'jsn'; did you mean 'json'? "
            "(choose from 'csv', 'jsonl', 'json', 'parquet') (see acceptmon parse --help)",
        ),
        (
            ["grammars", "chek"],
            "acceptmon grammars: error: argument action: invalid choice: 'chek'; did you mean 'check'? "
            "(choose from 'list', 'check') (see acceptmon grammars --help)",
        ),
        (
            ["--verson"],
            "acceptmon: error: unrecognized argument: --verson; did you mean --version? (see acceptmon --help)",
        ),
        (
            ["frobnicate"],
            "acceptmon: error: argument COMMAND: invalid choice: 'frobnicate' (choose from 'parse', 'runs', "
            "'grammars', 'compare', 'serve', 'tail', 'demo', 'doctor') (see acceptmon --help)",
        ),
        (
            ["tail", "x.log", "--zzz"],
            "acceptmon tail: error: unrecognized argument: --zzz (see acceptmon tail --help)",
        ),
    ],
)
def test_a_mistyped_name_gets_the_closest_one_and_its_commands_help(args, line, capsys):
    with pytest.raises(SystemExit) as stop:
        main(args)
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == ""
    assert err.splitlines() == [line]


def test_the_command_exits_2_with_the_one_line():
    p = acceptmon("parse", "sample_logs/seed_eagle3_moe.log", "--formt", "csv")
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode() == (
        "acceptmon parse: error: unrecognized arguments: --formt csv; did you mean --format? (see acceptmon parse --help)\n"
    )
