"""Rules and findings as data: the rule-file schema and what a rule reports. Pure.

A rule (``rules/*.toml``, or a user file given with ``--rules``) names a signature type (a
detector the engine knows, :mod:`acceptmon.diagnose.signatures`), the record kinds it reads,
its parameters (thresholds), a severity, and the words people read: title, cause, fix,
sources, and what the logs cannot show. A :class:`Finding` is one rule holding for one run.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator

from acceptmon.parse.kinds import KINDS

Severity: TypeAlias = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
Value: TypeAlias = float | int | str | bool | None


class RuleEntry(BaseModel):
    """One ``[[rule]]`` table. A new rule gives every field but ``sources``, ``cannot_check`` and
    ``params``; an entry whose ``id`` names a loaded rule changes only what it gives (its
    ``params`` are merged key by key), so a user file can move one threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, strict=True)

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
    """The pattern id findings carry (``P1`` ... ``P18`` for the built-in rules)."""
    title: str | None = None
    """The pattern in a few words."""
    signature: str | None = None
    """Detector type (see ``acceptmon doctor --help``)."""
    reads: list[str] | None = None
    """Record kinds the rule reads; the engine feeds it nothing else."""
    severity: Severity | None = None
    """Severity when the detector does not grade the finding itself."""
    message: str | None = None
    """The likely cause, for people."""
    fix: str | None = None
    """What to try."""
    sources: list[str] = Field(default_factory=list)
    """Issue, pull-request or document references the cause and fix come from."""
    cannot_check: str = ""
    """What the rule would also need and the logs cannot show."""
    enabled: bool = True
    suppressed_by: list[str] = Field(default_factory=list)
    """Rule ids that, holding for the same run, explain this one better (P1 over P2)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Thresholds and options of the signature type; checked against its parameter schema."""

    @field_validator("reads")
    @classmethod
    def _known_kinds(cls, value: list[str] | None) -> list[str] | None:
        unknown = sorted(set(value or ()) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown record kind(s) {unknown}; known: {sorted(KINDS)}")
        return value


class RuleFile(BaseModel):
    """Schema of one rule file: a list of ``[[rule]]`` tables."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: list[RuleEntry] = Field(min_length=1)


class Rule(BaseModel):
    """A complete, checked rule: an entry with every field, and its parameters validated."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    title: str
    signature: str
    reads: frozenset[str]
    severity: Severity
    message: str
    fix: str
    sources: tuple[str, ...] = ()
    cannot_check: str = ""
    suppressed_by: frozenset[str] = frozenset()
    params: Any = None
    """The signature type's parameter model, filled from the rule file."""
    source: str = ""
    """The file that last defined or changed the rule."""


class Evidence(BaseModel):
    """What in the log shows it: line numbers, the values that crossed a threshold, a sentence."""

    model_config = ConfigDict(frozen=True)

    lines: list[int] = Field(default_factory=list)
    values: dict[str, Value] = Field(default_factory=dict)
    text: str = ""
    stretch: bool = Field(default=False, exclude=True)
    """``lines`` are the first and last line of a stretch of lines, not each line (JSON gives the two)."""

    def where(self) -> str:
        """The lines for people: ``line 8``, ``lines 8-158`` (a stretch; an en dash), ``lines 6, 9, 10``."""
        if len(self.lines) < 2:
            return f"line {self.lines[0]}" if self.lines else ""
        if self.stretch:
            return f"lines {self.lines[0]}–{self.lines[-1]}"
        return "lines " + ", ".join(map(str, self.lines))


class Finding(BaseModel):
    """One rule holding for one run. The JSON shape is pinned: these seven keys."""

    model_config = ConfigDict(frozen=True)

    rule: str
    severity: Severity
    file: str
    run: int
    evidence: Evidence
    message: str
    fix: str

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.file, self.run, self.rule)


class Hit(BaseModel):
    """What a detector reports when its rule holds; the engine adds the rule's words."""

    model_config = ConfigDict(frozen=True)

    severity: Severity | None = None
    """Overrides the rule's severity (graded detectors)."""
    evidence: Evidence
    note: str = ""
    """Run-specific cause text, placed after the rule's message."""


def plural(n: float, one: str, many: str) -> str:
    """``1 batch``, ``2 batches``, ``26.25 running requests``: the count and the word that goes with it."""
    return f"{n if isinstance(n, int) else format(n, 'g')} {one if n == 1 else many}"
