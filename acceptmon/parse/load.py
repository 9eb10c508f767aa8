"""Loading grammar files: read, schema-check, compile, and prove each one on its own samples.

The grammar schema and the compiled set are pure (:mod:`acceptmon.parse.grammar`); this is
where files are read. Loading checks everything before any log line is read: the
TOML and the schema, the declared fields against the pattern's named groups and the
record kind's model, then every sample through the real parser. A sample must be
matched *by its own grammar* (not by another one that happens to come first) and
yield every expected value; a counter-sample must not match.

Those pattern checks give the same answer for the same files under the same code, so
a set that passed them is remembered (:mod:`acceptmon.parse.cache`) and, loaded again
unchanged, is only read and schema-checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import regex
from pydantic import ValidationError

from acceptmon.data import read_toml, shipped_dir, toml_table
from acceptmon.errors import GrammarError
from acceptmon.parse import cache as checkcache
from acceptmon.parse.checks import check_grammar
from acceptmon.parse.grammar import ENVELOPE_FIELDS, Grammar, GrammarFile, GrammarSet
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Parser
from acceptmon.parse.records import LaunchConfig
from acceptmon.parse.values import VALUE_KINDS


def builtin_grammar_dir() -> Path:
    """The grammars shipped with acceptmon."""
    return shipped_dir("grammars")


def read_grammar_file(path: Path) -> GrammarFile:
    """Read and schema-check one file; raise GrammarError naming the file and key."""
    return _validate(path, read_toml(path, GrammarError))


def _validate(path: Path, data: dict[str, Any] | GrammarError, *, passed: bool = False) -> GrammarFile:
    """Schema-check one file's table (``data``: or the error reading the file, raised now).
    ``passed``: the set the file belongs to passed every check before; the schema's validators
    see it as the context ``passed_before`` (one may skip work that those checks repeat)."""
    if isinstance(data, GrammarError):
        raise data
    try:
        return GrammarFile.model_validate(data, context={"passed_before": passed})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "-"
        raise GrammarError(str(path), key, err["msg"].removeprefix("Value error, ")) from None


def load_grammars(
    extra: Iterable[Path] = (), *, builtin: bool = True, replace: Iterable[str] = (), cached: bool = True
) -> GrammarSet:
    """Load the built-in grammars plus ``extra`` files, checking each completely.

    ``replace``: names of built-in grammars left out because an ``extra`` file stands in for them.
    ``cached``: when the same files (and ``replace``) passed every check before, under the same
    code (:mod:`acceptmon.parse.cache`), check only their schema and names, not their patterns again;
    and take the files' TOML tables as parsed before when their bytes are the same.

    Raises:
        GrammarError: a file is unreadable, off-schema, or one of its samples fails.
    """
    own = sorted(builtin_grammar_dir().glob("*.toml")) if builtin else []
    files = _read_tables([*own, *map(Path, extra)], cached=cached)
    skip = sorted(set(replace))
    digest = None
    if all(isinstance(data, dict) for _, data in files) and _own_kinds():
        digest = checkcache.set_digest([repr(data).encode() for _, data in files] + [repr(skip).encode()])
    passed = cached and digest is not None and checkcache.passed(digest)
    grammars = [Grammar(_validate(p, data, passed=passed), str(p)) for p, data in files]
    grammars = [g for g in grammars[: len(own)] if g.name not in skip] + grammars[len(own) :]
    grammars.sort(key=lambda g: (g.spec.priority, g.name))
    names: dict[str, str] = {}
    for g in grammars:
        if g.name in names:
            raise GrammarError(g.source, "name", f"{g.name!r} is already loaded from {names[g.name]}")
        names[g.name] = g.source
        if not passed:
            _check_declarations(g)
    gset = GrammarSet(grammars)
    if not passed:
        check_set(gset)
        if digest is not None:
            checkcache.remember(digest)
    return gset


def _own_kinds() -> bool:
    """Whether every record and value kind is acceptmon's own, whose code the cache's digest covers."""
    kinds = [c for k in KINDS.values() for c in (k.model, k.derive) if c is not None]
    return checkcache.covers(*kinds, *VALUE_KINDS.values())


def _read_tables(paths: list[Path], *, cached: bool = True) -> list[tuple[Path, dict[str, Any] | GrammarError]]:
    """Each file's TOML table, or the error reading it, raised when its turn to be checked comes
    (so that, as when each file was read and checked in turn, the first bad file is the one named).

    ``cached``: files whose bytes are those of the tables kept (:func:`checkcache.known_tables`)
    are not parsed again. The tables are parsed from the very bytes digested, and kept only when
    every file parsed."""
    contents = _contents(paths)
    digest = None if contents is None else checkcache.tables_digest(contents)
    known = checkcache.known_tables(digest) if cached and digest is not None else None
    if known is not None and len(known) == len(paths):
        return list(zip(paths, known, strict=True))
    out: list[tuple[Path, dict[str, Any] | GrammarError]] = []
    for i, path in enumerate(paths):
        try:
            table = read_toml(path, GrammarError) if contents is None else toml_table(path, contents[i], GrammarError)
            out.append((path, table))
        except GrammarError as exc:
            out.append((path, exc))
    tables = [data for _, data in out if isinstance(data, dict)]
    if digest is not None and len(tables) == len(paths):
        checkcache.keep_tables(digest, tables)
    return out


def _contents(paths: list[Path]) -> list[bytes] | None:
    """The files' bytes; None if one cannot be read (then reading its table says why)."""
    try:
        return [path.read_bytes() for path in paths]
    except OSError:
        return None


def check_set(gset: GrammarSet) -> None:
    """The checks that run every pattern: the ReDoS probe of each, then the samples of each."""
    for g in gset.all:  # envelopes first; before the samples run, so that none can hang
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
