"""Catastrophic backtracking: slow grammar patterns are refused, and a match that runs too long costs one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import regex

from acceptmon.parse.checks import BAD_CHAR, CHECK_TIMEOUT, PROBE_CHARS, check_grammar, check_pattern, probes
from acceptmon.parse.grammar import Grammar, GrammarSet
from acceptmon.parse.load import builtin_grammar_dir, read_grammar_file
from acceptmon.parse.parser import Parser

CATASTROPHIC_RECORD = """
name = "catastrophic_decode"
record = "decode"
anchor = "Decode batch"
{starts_like}
pattern = '''{pattern}'''
body = "pairs"
[[samples]]
line = "Decode batch, aaaa"
"""


def _record_file(tmp_path: Path, pattern: str, starts_like: str = "") -> Path:
    path = tmp_path / "catastrophic.toml"
    path.write_text(CATASTROPHIC_RECORD.format(pattern=pattern, starts_like=starts_like))
    return path


def _unchecked_set(*paths: Path) -> GrammarSet:
    """A grammar set built without the loader, so none of its load-time checks run."""
    return GrammarSet([Grammar(read_grammar_file(p), str(p)) for p in paths])


@pytest.mark.parametrize(
    ("pattern", "samples"),
    [
        (r"Decode batch, (?P<body>(a|a)+)$", ["[2026-02-26 14:09:45 TP0] Decode batch, aaaa"]),
        (r"(a+)+$", ["aaaa"]),
        (r"(\w+\s?)*$", ["foo bar"]),
        (r"Decode batch, (?P<body>.*.*=.*)$", ["Decode batch, a=1"]),
        (r"Decode batch. (?P<body>(?:[\w #-]+:\s*[\d.]+,?\s*)*)$", ["Decode batch. #running-req: 8, accept len: 3.42"]),
    ],
)
def test_catastrophic_pattern_is_refused_with_the_input_that_shows_it(grammars, pattern, samples):
    envelopes = "|".join(f"(?:{e.spec.pattern})" for e in grammars.envelopes_of("sglang"))
    compiled = regex.compile(f"(?:{envelopes})(?:{pattern})")
    reason = check_pattern(compiled, samples)
    assert reason is not None
    assert reason.startswith(f"pattern takes over {CHECK_TIMEOUT:g} s on a ")
    assert " input built from samples.0" in reason
    assert reason.endswith(": nested or overlapping repeats?")


def test_every_builtin_grammar_passes_as_the_loader_compiles_it(grammars):
    assert [(g.name, check_grammar(g)) for g in grammars.all] == [(g.name, None) for g in grammars.all]


def test_linear_patterns_pass():
    assert (
        check_pattern(regex.compile(r"Decode batch, (?P<body>#running-req:\s\d++,\s.*)$"), ["Decode batch, a"]) is None
    )
    assert check_pattern(regex.compile(r"(?:[a-z]++\s?)*+$"), ["foo bar"]) is None


def test_check_grammar_names_the_slow_key(tmp_path):
    bare = builtin_grammar_dir() / "envelope_bare.toml"
    gset = _unchecked_set(
        bare, _record_file(tmp_path, "Decode batch, (?P<body>a+)$", "starts_like = '''Decode batch, (a|a)+!'''")
    )
    key, reason = check_grammar(gset.records[0]) or ("", "")
    assert key == "starts_like"
    assert "built from samples.0" in reason
    assert check_grammar(gset.envelopes[0]) is None


def test_a_slow_envelope_is_refused_on_its_own(tmp_path):
    envelope = tmp_path / "slow_envelope.toml"
    envelope.write_text(
        "name = 'slow'\nkind = 'envelope'\npattern = '''(?:\\w+\\s?)*>\\s'''\n"
        "counter_samples = ['x']\n[[samples]]\nline = 'pod one > Decode batch, #running-req: 1'\n"
    )
    gset = _unchecked_set(envelope)
    key, reason = check_grammar(gset.envelopes[0]) or ("", "")
    assert key == "pattern"
    assert "built from samples.0" in reason


def test_probes_are_the_lines_then_near_misses_built_from_them():
    built = list(probes({"samples.0": "ab 12", "counter_samples.0": "x"}))
    labels = [label for label, _ in built]
    texts = [text for _, text in built]
    assert built[0] == ("samples.0", "ab 12")
    assert ("samples.0 (repeated)", "ab 12" * ((PROBE_CHARS + 4) // 5) + BAD_CHAR) in built
    assert (
        "samples.0 ('2' repeated at its end, then a bad character)",
        "ab 1" + "2" * (PROBE_CHARS - 4) + BAD_CHAR,
    ) in built
    pumped = "ab" * (PROBE_CHARS // 2) + BAD_CHAR
    assert ("samples.0 ('ab' repeated after character 2, then a bad character)", pumped) in built
    assert ("samples.0 ('ab' repeated after character 2, then a bad character and the rest)", pumped + " 12") in built
    assert ("counter_samples.0", "x") in built
    assert "'[a] ' repeated" in labels
    assert all(BAD_CHAR in text and len(text) > PROBE_CHARS for text in texts if text not in ("ab 12", "x"))


def test_a_list_of_samples_is_named_by_position():
    assert [label for label, _ in probes(["a", "b"])][:2] == ["samples.0", "samples.0 (repeated)"]
    assert "samples.1" in [label for label, _ in probes(["a", "b"])]


def test_a_match_that_runs_out_of_time_counts_the_line_unrecognized(tmp_path):
    # The load-time check would refuse this grammar, so the set is built without it. Without
    # a time bound the match takes seconds and then fails: the line would be 'other' (the
    # grammar has no starts_like); bounded, it is cut short and counted unrecognized.
    envelopes = sorted(builtin_grammar_dir().glob("envelope_*.toml"))
    gset = _unchecked_set(*envelopes, _record_file(tmp_path, r"Decode batch, (?P<body>(a|a)+)$"))
    parser = Parser(gset, "slow.log")
    line = "Decode batch, " + "a" * 26 + "!"
    assert parser.feed(f"first\n{line}\nDecode batch, aaaa\n".encode()) != []
    assert parser.tally.kinds == {"other": 1, "unrecognized": 1, "decode": 1}
    assert parser.tally.unrecognized == [("slow.log", 2, line)]
    assert parser.line == 3


@pytest.mark.parametrize(
    "line",
    [
        "[a] " * 16_000 + "Decode batch, x",
        "2025-01-01 00:00:00" + " " * 2_000 + "Decode batchX",
    ],
)
def test_crafted_lines_are_classified_not_cut_short(parser, line):
    # These lines once made the built-in envelopes backtrack for seconds (or hours): a
    # time-bounded match would now call them unrecognized. Linear patterns reach 'other'.
    assert parser.classify(line) == ("other", None)


def test_after_the_anchor_only_the_message_is_pumped():
    sample = "[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3"
    anchor_at = sample.index("Decode batch")

    def cuts(**kwargs: str) -> list[int]:
        found = (regex.search(r"repeated after character (\d+)", label) for label, _ in probes([sample], **kwargs))
        return [int(m.group(1)) for m in found if m]

    assert min(cuts(after="Decode batch")) == anchor_at + len("Decode")
    assert min(cuts()) == len("[2026")


def test_a_match_out_of_time_it_did_not_spend_itself_is_tried_again():
    """regex counts the whole process's CPU time: under a storm of scrapes other threads use up a
    line's limit, and the line (a decode batch) was lost as unrecognized."""
    from acceptmon.parse.grammar import MATCH_TIMEOUT, RETRY_TIMEOUT, bounded

    limits: list[float] = []

    def match(text: str, timeout: float) -> str:
        limits.append(timeout)
        if len(limits) == 1:
            raise TimeoutError
        return text

    assert bounded(match, "line") == "line" and limits == [MATCH_TIMEOUT, RETRY_TIMEOUT]


def test_a_match_that_spent_its_time_itself_is_not_tried_again():
    import time

    from acceptmon.parse.grammar import bounded

    limits: list[float] = []

    def match(text: str, timeout: float) -> str:
        limits.append(timeout)
        start = time.thread_time()
        while time.thread_time() - start < timeout:
            pass
        raise TimeoutError

    with pytest.raises(TimeoutError):
        bounded(match, "line")
    assert len(limits) == 1
