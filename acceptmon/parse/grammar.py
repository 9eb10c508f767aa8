"""Grammar files: the data that says what a stats line looks like.

A grammar file is validated by :class:`GrammarFile` and checked before any line is read
(a user's file each time it loads, the shipped ``grammars/*.toml`` by the tests): the
pattern must compile with ``regex``, its named groups must be exactly the declared
fields (plus ``body`` when the grammar reads a body), every declared field must exist
on the record it builds, every sample line must match and yield the declared values,
and every counter-sample must not match. A failure raises :class:`~acceptmon.errors.GrammarError` naming the file,
the key and the reason.

Two kinds of grammar exist. An *envelope* grammar describes what comes before the
message (timestamp, rank prefix, process or container prefixes); it belongs to one
server (or to ``any``), and the envelopes of a server are tried as alternatives. A
*record* grammar describes one message family (decode batch, prefill batch, server
launch) and is matched after its server's envelopes.

Pure: reading grammar files and checking their samples is :mod:`acceptmon.parse.load`'s job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, TypeAlias

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

from acceptmon.errors import GrammarError
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import BaseRecord
from acceptmon.parse.streams import STREAM_FIELDS
from acceptmon.parse.values import VALUE_KINDS, Convert, Yearless, year_not_after

BodyStyle: TypeAlias = Literal["none", "pairs", "kwargs", "dict", "meta_info", "argv"]
ANY_SERVER = "any"
"""An envelope with this ``server`` goes in front of every server's records."""
ENVELOPE_FIELDS = frozenset(
    {"timestamp", "logtime", "rank", "actor", "level", "source", "pid", "container", "prefix", "engine", "process"}
)
"""Named groups an envelope may capture; those that name a field every record has reach records (the
stream fields aside: an envelope's ``source`` is the logger's ``file.py:N``, its ``container`` a compose name)."""
RECORD_FIELDS = frozenset(BaseRecord.model_fields) - frozenset(STREAM_FIELDS)
"""Record fields an envelope group fills; the stream fields come from the stream prefix (:mod:`.streams`)."""
MATCH_TIMEOUT = 0.05
"""Seconds one match of a log line may take (``regex`` counts the process's CPU time, all threads)."""
RETRY_TIMEOUT = 2.0
"""A match that ran out of time without spending it itself (other threads did: ``serve`` under a
storm of scrapes) is tried once more with this much (:func:`bounded`)."""


def bounded(call: Callable[..., Any], text: str) -> Any:
    """``call(text, timeout=MATCH_TIMEOUT)``, tried once more with :data:`RETRY_TIMEOUT` if it timed out
    while this thread spent under half of the limit itself: the limit bounds a pattern that
    backtracks without end, not a busy process (a line lost that way was a decode batch uncounted)."""
    spent = time.thread_time()
    try:
        return call(text, timeout=MATCH_TIMEOUT)
    except TimeoutError:
        if time.thread_time() - spent >= MATCH_TIMEOUT / 2:
            raise
    return call(text, timeout=RETRY_TIMEOUT)


class FieldSpec(BaseModel):
    """How one named group (or one body key) becomes a typed record field."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    # defer_build (here, on Sample and on GrammarFile): the validator is built when a user's file is first
    # validated, not at import; the shipped files are built without it (loader.read_grammar_file).

    kind: str = "str"
    """Value kind the logged text is converted to (see :mod:`acceptmon.parse.values`)."""
    field: str | None = None
    """Record field it fills (body keys only; named groups fill the field of their own name)."""
    value: str | None = None
    """Regex with one group, applied when the plain conversion fails (e.g. ``full=8192``)."""
    fallback: bool = False
    """Fill the field only if an earlier key has not (e.g. ``#full token`` for ``#token``)."""

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in VALUE_KINDS:
            raise ValueError(f"unknown value kind {value!r}; known: {sorted(VALUE_KINDS)}")
        return value


class Sample(BaseModel):
    """A line the grammar must match, and the values it must yield."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    line: str
    expect: dict[str, Any] = Field(default_factory=dict)


class GrammarFile(BaseModel):
    """Schema of one ``grammars/*.toml`` file."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    # The attribute docstrings are the schema's descriptions: grammarschema.grammar_schema() reads them (pydantic's
    # use_attribute_docstrings would read this file's source at every start-up).

    name: str
    """Unique name, shown by ``acceptmon grammars``."""
    description: str = ""
    kind: Literal["envelope", "record"] = "record"
    """``envelope``: what precedes a message; ``record``: one message family."""
    priority: int = 100
    """Lower is tried first (envelopes and records are each ordered by priority, then name)."""
    server: str = "sglang"
    """Serving engine that writes these lines; ``any`` for an envelope every server's lines may have."""
    record: str | None = None
    """Record kind built from a match (record grammars only; see :mod:`acceptmon.parse.kinds`)."""
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
    """How the named group ``body`` is read: ``key: value`` pairs, ``key=value`` kwargs, a dict repr, a
    finished-request line's ``out`` ``meta_info`` (:mod:`acceptmon.parse.meta_info`), or a command line's
    options (``argv``: ``-m a.gguf --draft-max 16``, launch grammars)."""
    fields: dict[str, FieldSpec] = Field(default_factory=dict)
    """Named groups of ``pattern`` and their types."""
    keys: dict[str, FieldSpec] = Field(default_factory=dict)
    """Body keys as logged and the record fields they fill; other keys are kept as extras."""
    samples: list[Sample] = Field(min_length=1)
    """Lines that must match (at least one)."""
    counter_samples: list[str] = Field(default_factory=list)
    """Lines that must not match this grammar."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    """Values every record of this grammar carries unless its line gives them (a launch grammar: its config)."""
    merge: bool = False
    """Launch grammars: a match continues the current launch (one run, configs merged, later values
    winning) when it follows a launch of the same server with no stats line in between, as one
    server start logs several launch lines."""

    @field_validator("record")
    @classmethod
    def _known_record(cls, value: str | None) -> str | None:
        if value is not None and value not in KINDS:
            raise ValueError(f"unknown record kind {value!r}; known: {sorted(KINDS)}")
        return value

    @field_validator("pattern", "starts_like")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        """The pattern compiles with ``regex`` (the set compiles it again, joined, on first use)."""
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
        self.convert: Convert = VALUE_KINDS[spec.kind]

    def __call__(self, text: str) -> Any:
        try:
            return self.convert(text)
        except (ArithmeticError, IndexError, KeyError, TypeError) as exc:  # a converter's slip never stops a parse
            raise ValueError(f"cannot convert {text[:40]!r}: {exc}") from None
        except ValueError:
            if self.value_re is None:
                raise
            try:
                m = bounded(self.value_re.search, text)
            except TimeoutError:
                raise ValueError(f"value pattern took over {MATCH_TIMEOUT} s") from None
            if m is None:
                raise
            return self.convert(m.group(1))


class Grammar:
    """A checked grammar file, ready for matching once its set has compiled it."""

    def __init__(self, spec: GrammarFile, source: str) -> None:
        """``source``: where the grammar came from (a file path), for error messages."""
        self.spec = spec
        self.source = source
        self.name = spec.name
        self.anchor = spec.anchor
        self.fields = {name: Converter(name, f) for name, f in spec.fields.items()}
        self.keys = {key: Converter(key, f) for key, f in spec.keys.items()}
        self.key_table = {key: (c.field, c.convert, c.fallback, c) for key, c in self.keys.items()}
        """The same converters as plain tuples, for the parser's hot loop."""
        self.regex: regex.Pattern[str] | None = None
        """This grammar's pattern behind its envelopes; compiled on first use (see :meth:`__getattr__`)."""
        self.starts_like: regex.Pattern[str] | None = None
        self._joined: dict[str, str] = {}
        """The joined patterns of :meth:`compile` not compiled yet, by attribute."""
        self.envelope_fields: dict[str, Converter] = {}
        """Named groups of this grammar's envelopes that fill record fields (timestamp, rank)."""

    def compile(self, envelopes: Sequence[Grammar]) -> None:
        """Join this server's envelope alternatives with this grammar's message pattern."""
        self._joined = {"regex": f"(?:{_alternatives(envelopes)})(?:{self.spec.pattern})"}
        if self.spec.starts_like:
            drift = _alternatives([e for e in envelopes if e.spec.drift])
            self._joined["starts_like"] = f"(?:{drift})(?:{self.spec.starts_like})"
        self.__dict__.pop("regex", None)  # from now on read through __getattr__, until compiled
        self.__dict__.pop("starts_like", None)
        self.envelope_fields = {}
        for env in envelopes:
            for name, conv in env.fields.items():
                if conv.field in RECORD_FIELDS:
                    self.envelope_fields.setdefault(name, conv)

    def __getattr__(self, name: str) -> Any:
        """``regex`` or ``starts_like`` on first use after :meth:`compile`: compiled then, and
        kept as a plain attribute (later reads cost nothing), so that a command compiles only the
        patterns its lines need; compiling them all is most of loading the grammars."""
        if name not in ("regex", "starts_like") or "_joined" not in self.__dict__:
            raise AttributeError(name)
        text = self._joined.get(name)
        compiled = None if text is None else regex.compile(text)
        setattr(self, name, compiled)
        return compiled


def _alternatives(grammars: Sequence[Grammar]) -> str:
    return "|".join(f"(?:{g.spec.pattern})" for g in grammars) or "(?!)"


YearFor = Callable[[str, Yearless], int]
"""The year of a file's first year-less timestamp (file name, that timestamp)."""


def current_year(file: str, stamp: Yearless) -> int:
    """Default :data:`YearFor`: the latest year in which the timestamp is not in the future."""
    return year_not_after(stamp, datetime.now())


class GrammarSet:
    """Every loaded grammar: each record grammar compiled behind its server's envelopes."""

    def __init__(self, grammars: Sequence[Grammar]) -> None:
        self.year_for: YearFor = current_year
        """How parsers date year-less timestamps; the command line sets it (``--year``, the file's mtime)."""
        self.envelopes = [g for g in grammars if g.spec.kind == "envelope"]
        self.records = [g for g in grammars if g.spec.kind == "record"]
        if not self.envelopes:
            raise GrammarError("<grammars>", "kind", "no envelope grammar is loaded")
        _check_envelope_kinds(self.envelopes)
        for g in self.records:
            g.compile(self.envelopes_of(g.spec.server))
        self.anchors = tuple(dict.fromkeys(g.anchor for g in self.records if g.anchor))

    def envelopes_of(self, server: str) -> list[Grammar]:
        """The envelopes a record grammar of ``server`` is matched behind."""
        return [e for e in self.envelopes if e.spec.server in (server, ANY_SERVER)]

    @property
    def all(self) -> list[Grammar]:
        return [*self.envelopes, *self.records]


def _check_envelope_kinds(envelopes: Sequence[Grammar]) -> None:
    """One group name, one value kind: a record's field must not change type with the envelope."""
    seen: dict[str, tuple[str, str]] = {}
    for env in envelopes:
        for name, spec in env.spec.fields.items():
            kind = (spec.kind, spec.field or name)
            first = seen.setdefault(name, (*kind,))
            if first != kind:
                raise GrammarError(
                    env.source,
                    f"fields.{name}",
                    f"declared {kind[0]!r} (for {kind[1]!r}) here but {first[0]!r} (for {first[1]!r}) in another "
                    "envelope: give the group another name",
                )
