"""The README's example outputs are what the commands print: each block is run and compared."""

from __future__ import annotations

import difflib

import pytest

from tests.update_readme_examples import README, REFRESH, examples, refresh, render

EXAMPLES = examples(README.read_text())


def test_the_readme_shows_runs_the_sweep_doctor_and_compare_on_the_seed_sample():
    assert [e.args.split()[0] for e in EXAMPLES] == ["runs", "runs", "doctor", "compare"]
    assert "--baseline" in EXAMPLES[1].args
    assert all("sample_logs/seed_eagle3_moe.log" in e.args for e in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.args.split()[0] for e in EXAMPLES])
def test_a_readme_example_is_what_its_command_prints(example):
    got = render(example.args)
    diff = "".join(difflib.unified_diff(example.body.splitlines(True), got.splitlines(True), "README", "now"))
    assert got == example.body, (
        f"README.md's example of `acceptmon {example.args}` is not what it prints now: run `{REFRESH}` "
        f"to rewrite the blocks between the <!-- example --> markers, and review the diff.\n{diff}"
    )


def test_the_refresh_rewrites_a_stale_block_between_its_markers_only():
    args = "runs sample_logs/seed_eagle3_moe.log | head -2"
    stale = f"before\n<!-- example: {args} -->\n```\n$ acceptmon {args}\nold output\n```\n<!-- /example -->\nafter\n"
    text, changed = refresh(stale)
    body = render(args)
    assert changed == [args] and body.splitlines()[3].startswith("seed_eagle3_moe.log  1 ")
    assert text == f"before\n<!-- example: {args} -->\n{body}<!-- /example -->\nafter\n"
    assert refresh(text) == (text, [])
