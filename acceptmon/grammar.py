"""Grammar files: the data that says what a stats line looks like.

A grammar file (``grammars/*.toml``) is validated by :class:`GrammarFile` when it
loads, never mid-stream: the pattern must compile with ``regex``, its named groups
must be exactly the declared fields (plus ``body`` when the grammar reads a
body), every declared field must exist on the record it builds, every sample line
must match and yield the declared values, and every counter-sample must not
match. A failure raises :class:`~acceptmon.errors.GrammarError` naming the file,
the key and the reason.

Two kinds of grammar exist. An *envelope* grammar describes what comes before the
message (timestamp, rank prefix, process or container prefixes); all envelopes are
tried as alternatives. A *record* grammar describes one message family (decode
batch, prefill batch, server launch) and is matched after an envelope.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias

import regex
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from acceptmon.errors import GrammarError
from acceptmon.records import DecodeStats, PrefillStats, ServerLaunch

FieldKind: TypeAlias = Literal["int", "float", "bool", "str", "timestamp", "rank"]
RecordName: TypeAlias = Literal["decode", "prefill", "launch"]
BodyStyle: TypeAlias = Literal["none", "pairs", "kwargs", "dict"]

RECORD_MODELS: dict[str, type[DecodeStats] | type[PrefillStats] | type[ServerLaunch]] = {
    "decode": DecodeStats,
    "prefill": PrefillStats,
    "launch": ServerLaunch,
}
ENVELOPE_FIELDS = frozenset({"timestamp", "rank", "actor", "level", "source", "pid", "container", "prefix"})
"""Named groups an envelope may capture; only ``timestamp`` and ``rank`` reach records."""


class FieldSpec(BaseModel):
    """How one named group (or one body key) becomes a typed record field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FieldKind = "str"
    """Type the logged text is converted to."""
    field: str | None = None
    """Record field it fills (body keys only; named groups fill the field of their own name)."""
    value: str | None = None
    """Regex with one group, applied when the plain conversion fails (e.g. ``full=8192``)."""
    fallback: bool = False
    """Fill the field only if an earlier key has not (e.g. ``#full token`` for ``#token``)."""


class Sample(BaseModel):
    """A line the grammar must match, and the values it must yield."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    line: str
    expect: dict[str, Any] = Field(default_factory=dict)


class GrammarFile(BaseModel):
    """Schema of one ``grammars/*.toml`` file."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """Unique name, shown by ``acceptmon grammars``."""
    description: str = ""
    kind: Literal["envelope", "record"] = "record"
    """``envelope``: what precedes a message; ``record``: one message family."""
    priority: int = 100
    """Lower is tried first (envelopes and records are each ordered by priority, then name)."""
    server: str = "sglang"
    """Serving engine that writes these lines."""
    record: RecordName | None = None
    """Record type built from a match (record grammars only)."""
    anchor: str | None = None
    """Literal text every matching line contains; the cheap prefilter before the regex."""
    starts_like: str | None = None
    """Regex for a message that looks like this family; lines that start so but do not
    match ``pattern`` are counted ``unrecognized`` (format drift)."""
    drift: bool = True
    """Envelopes only: may a line that reaches a message only through this envelope be
    reported ``unrecognized``? ``false`` for a permissive envelope (any foreign prefix),
    where prose quoting a stats line would otherwise raise false format-drift alarms."""
    pattern: str
    """Regex (``regex`` syntax) for the envelope, or for the message after the envelope."""
    body: BodyStyle = "none"
    """How the named group ``body`` is read: ``key: value`` pairs, ``key=value`` kwargs or a dict repr."""
    fields: dict[str, FieldSpec] = Field(default_factory=dict)
    """Named groups of ``pattern`` and their types."""
    keys: dict[str, FieldSpec] = Field(default_factory=dict)
    """Body keys as logged and the record fields they fill; other keys are kept as extras."""
    samples: list[Sample] = Field(min_length=1)
    """Lines that must match (at least one)."""
    counter_samples: list[str] = Field(default_factory=list)
    """Lines that must not match this grammar."""

    @field_validator("pattern", "starts_like")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                regex.compile(value)
            except regex.error as exc:
                raise ValueError(f"does not compile: {exc}") from None
        return value


class Converter:
    """Turns logged text into one typed value, as a :class:`FieldSpec` says."""

    __slots__ = ("convert", "fallback", "field", "value_re")

    def __init__(self, name: str, spec: FieldSpec) -> None:
        self.field = spec.field or name
        self.fallback = spec.fallback
        self.value_re = regex.compile(spec.value) if spec.value else None
        self.convert: Callable[[str], Any] = _CONVERT[spec.kind]

    def __call__(self, text: str) -> Any:
        try:
            return self.convert(text)
        except ValueError:
            if self.value_re is None:
                raise
            m = self.value_re.search(text)
            if m is None:
                raise
            return self.convert(m.group(1))


_BOOLS = {"True": True, "False": False, "true": True, "false": False}


def _to_bool(text: str) -> bool:
    known = _BOOLS.get(text)
    if known is not None:
        return known
    low = text.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _to_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace(",", ".", 1))


def _to_rank(text: str) -> str | None:
    return " ".join(text.split()) or None


def _to_str(text: str) -> str:
    return text


_CONVERT: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "bool": _to_bool,
    "str": _to_str,
    "timestamp": _to_timestamp,
    "rank": _to_rank,
}


class Grammar:
    """A loaded, checked grammar file, ready for matching."""

    def __init__(self, spec: GrammarFile, path: Path) -> None:
        self.spec = spec
        self.path = path
        self.name = spec.name
        self.anchor = spec.anchor
        self.fields = {name: Converter(name, f) for name, f in spec.fields.items()}
        self.keys = {key: Converter(key, f) for key, f in spec.keys.items()}
        self.key_table = {key: (c.field, c.convert, c.fallback, c) for key, c in self.keys.items()}
        """The same converters as plain tuples, for the parser's hot loop."""
        self.regex: regex.Pattern[str] | None = None
        self.starts_like: regex.Pattern[str] | None = None

    def compile(self, envelope: str, drift_envelope: str | None = None) -> None:
        """Join the shared envelope alternatives with this grammar's message pattern.

        ``drift_envelope``: the envelopes that may report format drift (default: all).
        """
        self.regex = regex.compile(f"(?:{envelope})(?:{self.spec.pattern})")
        if self.spec.starts_like:
            self.starts_like = regex.compile(f"(?:{drift_envelope or envelope})(?:{self.spec.starts_like})")


class GrammarSet:
    """Every loaded grammar: envelopes combined, record grammars in load order."""

    def __init__(self, grammars: Sequence[Grammar]) -> None:
        self.envelopes = [g for g in grammars if g.spec.kind == "envelope"]
        self.records = [g for g in grammars if g.spec.kind == "record"]
        if not self.envelopes:
            raise GrammarError("<grammars>", "kind", "no envelope grammar is loaded")
        self.envelope_pattern = "|".join(f"(?:{g.spec.pattern})" for g in self.envelopes)
        drift = "|".join(f"(?:{g.spec.pattern})" for g in self.envelopes if g.spec.drift)
        for g in self.records:
            g.compile(self.envelope_pattern, drift or "(?!)")
        self.anchors = tuple(dict.fromkeys(g.anchor for g in self.records if g.anchor))

    @property
    def all(self) -> list[Grammar]:
        return [*self.envelopes, *self.records]


def builtin_grammar_dir() -> Path:
    """The grammars shipped with acceptmon (packaged copy first, then the source tree)."""
    here = Path(__file__).resolve().parent
    packaged = here / "_data" / "grammars"
    return packaged if packaged.is_dir() else here.parent / "grammars"


def read_grammar_file(path: Path) -> GrammarFile:
    """Read and schema-check one file; raise GrammarError naming the file and key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GrammarError(str(path), "-", f"cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise GrammarError(str(path), "-", f"not valid TOML: {exc}") from None
    try:
        return GrammarFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "-"
        raise GrammarError(str(path), key, err["msg"].removeprefix("Value error, ")) from None


def load_grammars(extra: Iterable[Path] = (), *, builtin: bool = True) -> GrammarSet:
    """Load the built-in grammars plus ``extra`` files, checking each completely.

    Raises:
        GrammarError: a file is unreadable, off-schema, or one of its samples fails.
    """
    paths = sorted(builtin_grammar_dir().glob("*.toml")) if builtin else []
    paths += [Path(p) for p in extra]
    grammars = [Grammar(read_grammar_file(p), p) for p in paths]
    grammars.sort(key=lambda g: (g.spec.priority, g.name))
    names: dict[str, Path] = {}
    for g in grammars:
        if g.name in names:
            raise GrammarError(str(g.path), "name", f"{g.name!r} is already loaded from {names[g.name]}")
        names[g.name] = g.path
        _check_declarations(g)
    gset = GrammarSet(grammars)
    from acceptmon.check import check_samples  # the checker uses the parser, which uses us

    for g in gset.all:
        check_samples(g, gset)
    return gset


def _check_declarations(g: Grammar) -> None:
    spec = g.spec
    where = str(g.path)
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
    model_fields = RECORD_MODELS[spec.record].model_fields
    config_fields = set(ServerLaunch.model_fields["config"].annotation.model_fields)  # type: ignore[union-attr]
    allowed = config_fields if spec.record == "launch" else set(model_fields)
    for table, entries in (("fields", g.fields), ("keys", g.keys)):
        for key, conv in entries.items():
            if conv.field not in allowed:
                raise GrammarError(where, f"{table}.{key}", f"{conv.field!r} is not a field of {spec.record} records")
