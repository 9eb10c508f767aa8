"""Grammar files: the shipped ones load; each bad file fails with file, key and reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from acceptmon.errors import GrammarError
from acceptmon.parse.load import builtin_grammar_dir, load_grammars, read_grammar_file

BAD = Path(__file__).parent / "data" / "bad_grammars"


def test_builtin_grammars_load_with_all_samples(grammars):
    names = [g.name for g in grammars.all]
    assert names[:4] == ["sglang_envelope", "python_logging_envelope", "bare_envelope", "prefixed_sglang_envelope"]
    assert {"sglang_decode", "sglang_prefill", "sglang_launch", "sglang_launch_dict"} <= set(names)
    decode = next(g for g in grammars.records if g.name == "sglang_decode")
    assert len(decode.spec.samples) >= 15


@pytest.mark.parametrize(
    ("filename", "key", "words"),
    [
        ("not_toml.toml", "-", "not valid TOML"),
        ("bad_regex.toml", "pattern", "does not compile"),
        ("undeclared_group.toml", "fields", "undeclared ['queue']"),
        ("unknown_field.toml", "keys.accept len", "'acceptance' is not a field of decode records"),
        ("sample_mismatch.toml", "samples.0", "does not match"),
        ("wrong_value.toml", "samples.0.expect.accept_len", "expected 9.99, got 2.85"),
        ("counter_matches.toml", "counter_samples.0", "must not match"),
        ("extra_key.toml", "colour", "Extra inputs are not permitted"),
        ("no_samples.toml", "samples", "at least 1 item"),
        ("no_anchor.toml", "anchor", "needs a literal anchor"),
        ("record_drift.toml", "drift", "only an envelope can be kept from reporting format drift"),
    ],
)
def test_bad_grammar_names_file_key_and_reason(filename, key, words):
    path = BAD / filename
    with pytest.raises(GrammarError) as info:
        load_grammars([path])
    err = info.value
    assert err.file == str(path)
    assert err.key == key
    assert words in err.reason
    assert str(err).startswith(f"{path}: {key}: " if key != "-" else f"{path}: {words}")  # "-": the whole file


def test_a_shipped_file_built_unchecked_is_the_file_validation_gives():
    """Commands build the shipped files without validating them (``trusted=True``)."""
    for path in sorted(builtin_grammar_dir().glob("*.toml")):
        checked, unchecked = read_grammar_file(path), read_grammar_file(path, trusted=True)
        assert unchecked == checked, path.name
        for a, b in [(unchecked, checked), *zip(unchecked.samples, checked.samples, strict=True)]:
            assert (type(a), a.model_fields_set) == (type(b), b.model_fields_set), path.name
        pairs = [(unchecked.fields, checked.fields), (unchecked.keys, checked.keys)]
        for a, b in [(x[k], y[k]) for x, y in pairs for k in y]:
            assert (type(a), a.model_fields_set, a) == (type(b), b.model_fields_set, b), path.name


def test_duplicate_name_is_refused():
    with pytest.raises(GrammarError, match="already loaded"):
        load_grammars([builtin_grammar_dir() / "sglang_decode.toml"])


def test_user_grammar_adds_a_family(tmp_path):
    g = tmp_path / "mine.toml"
    g.write_text(
        """
name = "custom_decode"
record = "decode"
anchor = "DECODE"
pattern = '''DECODE al=(?P<accept_len>[\\d.]+)'''
[fields]
accept_len = { kind = "float" }
[[samples]]
line = "[2026-01-01 00:00:00 TP3] DECODE al=2.50"
expect = { accept_len = 2.5, rank = "TP3" }
"""
    )
    gset = load_grammars([g])
    assert gset.records[-1].name == "custom_decode"


def test_schema_json_is_current():
    """Every grammar names ./schema.json for editors; it must match the model (scripts/write_grammar_schema.py)."""
    import json

    from acceptmon.parse.schema import grammar_schema

    committed = json.loads((builtin_grammar_dir() / "schema.json").read_text())
    assert committed == grammar_schema()
    assert all(p.read_text().startswith("#:schema ./schema.json\n") for p in builtin_grammar_dir().glob("*.toml"))
