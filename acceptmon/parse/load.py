"""Loading grammar files: read, schema-check, compile, and prove each one on its own samples.

The grammar schema and the compiled set are pure (:mod:`acceptmon.parse.grammar`); this is
where files are read. Loading a user's grammar file checks everything before any log line
is read: the TOML and the schema, the declared fields against the pattern's named groups
and the record kind's model, the ReDoS probe of its patterns, then every sample of the set
through the real parser. A sample must be matched *by its own grammar* (not by another one
that happens to come first) and yield every expected value; a counter-sample must not match.

The grammars acceptmon ships are trusted at run time: the tests put them through those same
checks (``check_builtin=True``) on every change, so a command only reads their TOML, builds them
without validating it (``read_grammar_file(trusted=True)``), and compiles their patterns when a line
first needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import regex
from pydantic import BaseModel, ValidationError

from acceptmon.data import read_toml, shipped_dir
from acceptmon.errors import GrammarError
from acceptmon.parse.checks import check_grammar
from acceptmon.parse.grammar import ENVELOPE_FIELDS, FieldSpec, Grammar, GrammarFile, GrammarSet, Sample
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import LaunchConfig

_Model = TypeVar("_Model", bound=BaseModel)


def builtin_grammar_dir() -> Path:
    """The grammars shipped with acceptmon."""
    return shipped_dir("grammars")


def read_grammar_file(path: Path, *, trusted: bool = False) -> GrammarFile:
    """Read and schema-check one file; raise GrammarError naming the file and key.

    ``trusted``: a shipped file, which the tests validate: only read, and built from its table unvalidated."""
    data = read_toml(path, GrammarError)
    if trusted:
        return _unchecked(data)
    try:
        return GrammarFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "-"
        raise GrammarError(str(path), key, err["msg"].removeprefix("Value error, ")) from None


def _unchecked(table: dict[str, Any]) -> GrammarFile:
    """The file whose TOML table is ``table``, built without validating it: its nested tables become
    :class:`FieldSpec` and :class:`Sample` as validation makes them (the tests hold it to validation)."""
    data = dict(table)
    for key in ("fields", "keys"):
        if key in data:
            data[key] = {name: _construct(FieldSpec, spec) for name, spec in data[key].items()}
    if "samples" in data:
        data["samples"] = [_construct(Sample, sample) for sample in data["samples"]]
    return _construct(GrammarFile, data)


def _construct(model: type[_Model], data: dict[str, Any]) -> _Model:
    """``model.model_construct(**data)``, but with the default factories called here: pydantic inspects
    a factory's signature each time it calls one (it made building the shipped files cost more than
    validating them)."""
    given = set(data)
    for name, field in model.model_fields.items():
        if name not in given and field.default_factory is not None:
            data = {**data, name: cast("Callable[[], Any]", field.default_factory)()}
    return model.model_construct(given, **data)


def load_grammars(
    extra: Iterable[Path] = (), *, builtin: bool = True, replace: Iterable[str] = (), check_builtin: bool = False
) -> GrammarSet:
    """Load the built-in grammars plus ``extra`` files, checking each ``extra`` file completely.

    The built-in grammars are only read (see the module's docstring); each ``extra`` file gets every
    check: its schema, its declarations, the ReDoS probe of its patterns, and then the samples of every
    grammar in the set, the built-in ones too, which a user's grammar tried before them could take
    lines from.

    ``replace``: names of built-in grammars left out because an ``extra`` file stands in for them.
    ``check_builtin``: check the built-in grammars as ``extra`` files are checked (the tests do).

    Raises:
        GrammarError: a file is unreadable, off-schema, or one of its checks fails.
    """
    trusted = not check_builtin
    own = sorted(builtin_grammar_dir().glob("*.toml")) if builtin else []
    skip = set(replace)
    grammars = [Grammar(read_grammar_file(p, trusted=trusted), str(p)) for p in own]
    grammars = [g for g in grammars if g.name not in skip]
    checked: set[Grammar] = set() if trusted else set(grammars)
    for p in extra:
        grammars.append(Grammar(read_grammar_file(Path(p)), str(p)))
        checked.add(grammars[-1])
    grammars.sort(key=lambda g: (g.spec.priority, g.name))
    names: dict[str, str] = {}
    for g in grammars:
        if g.name in names:
            raise GrammarError(g.source, "name", f"{g.name!r} is already loaded from {names[g.name]}")
        names[g.name] = g.source
        if g in checked:
            _check_declarations(g)
    gset = GrammarSet(grammars)
    if checked:
        check_set(gset, [g for g in gset.all if g in checked])
    return gset


def check_set(gset: GrammarSet, probed: Iterable[Grammar]) -> None:
    """The checks that run patterns: the ReDoS probe of each ``probed`` grammar, then the samples of
    every grammar in the set."""
    for g in probed:  # envelopes first; before the samples run, so that none can hang
        problem = check_grammar(g)
        if problem is not None:
            raise GrammarError(g.source, *problem)
    for g in gset.all:
        check_samples(g, gset)


def _check_declarations(g: Grammar) -> None:
    spec = g.spec
    where = g.source
    groups = set(regex.compile(spec.pattern).groupindex)
    declared = set(spec.fields)
    if spec.body != "none":
        declared.add("body")
    if groups != declared:
        missing, undeclared = sorted(declared - groups), sorted(groups - declared)
        raise GrammarError(
            where,
            "fields",
            f"named groups and declared fields differ: undeclared {undeclared}, missing {missing}",
        )
    if spec.kind == "envelope":
        unknown = sorted(declared - ENVELOPE_FIELDS)
        if unknown:
            raise GrammarError(where, "fields", f"envelope fields must be among {sorted(ENVELOPE_FIELDS)}: {unknown}")
        return
    if not spec.drift:
        raise GrammarError(where, "drift", "only an envelope can be kept from reporting format drift")
    if spec.record is None:
        raise GrammarError(where, "record", "a record grammar must say which record it builds")
    if spec.anchor is None:
        raise GrammarError(where, "anchor", "a record grammar needs a literal anchor")
    kind = KINDS[spec.record]
    allowed = set(LaunchConfig.model_fields) if kind.starts_run else set(kind.model.model_fields)
    for table, entries in (("fields", g.fields), ("keys", g.keys)):
        for key, conv in entries.items():
            if conv.field not in allowed:
                raise GrammarError(where, f"{table}.{key}", f"{conv.field!r} is not a field of {spec.record} records")
    for key in spec.defaults:
        if key not in allowed:
            raise GrammarError(where, f"defaults.{key}", f"{key!r} is not a field of {spec.record} records")
    if spec.merge and not kind.starts_run:
        raise GrammarError(where, "merge", "only a launch grammar can continue a launch")


def check_samples(g: Grammar, gset: GrammarSet) -> None:
    """Raise GrammarError unless every sample and counter-sample of ``g`` behaves."""
    if g.spec.kind == "envelope":
        _check_envelope(g, gset)
        return
    for i, sample in enumerate(g.spec.samples):
        where = f"samples.{i}"
        assert g.regex is not None
        if g.regex.match(sample.line) is None:
            raise GrammarError(g.source, where, "sample line does not match the pattern")
        record = Parser(gset).parse_line(sample.line)
        if record is None:
            raise GrammarError(g.source, where, "sample line yields no record (a value did not convert)")
        if record.kind != g.spec.record:
            raise GrammarError(g.source, where, f"sample line yields a {record.kind} record")
        _compare(g, where, _values(record), sample.expect)
    for i, line in enumerate(g.spec.counter_samples):
        assert g.regex is not None
        if g.regex.match(line) is not None:
            raise GrammarError(g.source, f"counter_samples.{i}", "line must not match, but does")


def _check_envelope(g: Grammar, gset: GrammarSet) -> None:
    served = [r for r in gset.records if g in gset.envelopes_of(r.spec.server)]
    messages = "|".join(r.spec.starts_like for r in served if r.spec.starts_like) or "(?!)"
    pattern = regex.compile(f"(?:{g.spec.pattern})(?:{messages})")
    for i, sample in enumerate(g.spec.samples):
        m = pattern.match(sample.line)
        if m is None:
            raise GrammarError(g.source, f"samples.{i}", "sample line does not start with this envelope")
        got = {name: g.fields[name](raw) for name, raw in m.groupdict().items() if raw is not None}
        _compare(g, f"samples.{i}", got, sample.expect)
    for i, line in enumerate(g.spec.counter_samples):
        if pattern.match(line) is not None:
            raise GrammarError(g.source, f"counter_samples.{i}", "line must not match, but does")


def _values(record: Any) -> dict[str, Any]:
    values = dict(record.__dict__)
    config = values.get("config")
    if isinstance(config, LaunchConfig):
        values.update(config.__dict__)
    return values


def _compare(g: Grammar, where: str, got: dict[str, Any], expect: dict[str, Any]) -> None:
    for key, want in expect.items():
        have = got.get(key)
        if isinstance(have, datetime) and isinstance(want, str):
            have = have.isoformat()
        if have != want:
            raise GrammarError(g.source, f"{where}.expect.{key}", f"expected {want!r}, got {have!r}")
