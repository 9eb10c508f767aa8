"""Loading rule files: the built-in ``rules/*.toml`` and the user's ``--rules FILE``, checked at load.

Each file is a list of ``[[rule]]`` tables (:class:`~acceptmon.diagnose.model.RuleFile`). A
table whose ``id`` is new defines a rule and must give every field; a table whose ``id`` is
already loaded changes that rule (given fields replace, ``params`` merge key by key), which is
how a user moves a threshold. Every rule's ``params`` are validated against its signature
type's parameter model. Errors name the file and the key, as grammar errors do.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from acceptmon.data import read_toml, shipped_dir
from acceptmon.diagnose.model import Rule, RuleEntry, RuleFile
from acceptmon.diagnose.signatures import SIGNATURES
from acceptmon.errors import GrammarError
from acceptmon.measure.speedup import LOSES_BELOW, MARGINAL_BELOW

REQUIRED = ("title", "signature", "reads", "severity", "message", "fix")


class RuleError(GrammarError):
    """A rule file is wrong; names the file, the key and the reason (as for a grammar file)."""


def builtin_rules_dir() -> Path:
    """The rules shipped with acceptmon."""
    return shipped_dir("rules")


def read_rule_file(path: Path) -> RuleFile:
    """Read and schema-check one file."""
    data = read_toml(path, RuleError)
    try:
        return RuleFile.model_validate(data)
    except ValidationError as exc:
        raise _error(str(path), exc, ()) from None


def _error(path: str, exc: ValidationError, prefix: tuple[str | int, ...]) -> RuleError:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in (*prefix, *err["loc"])) or "-"
    return RuleError(path, key, err["msg"].removeprefix("Value error, "))


def load_rules(extra: Iterable[Path] = (), *, builtin: bool = True) -> list[Rule]:
    """The built-in rules, then each ``extra`` file's additions and changes, every rule checked."""
    builtin_paths = sorted(builtin_rules_dir().glob("*.toml")) if builtin else []
    merged: dict[str, dict[str, Any]] = {}
    for path in [*builtin_paths, *(Path(p) for p in extra)]:
        is_builtin = path in builtin_paths
        for i, entry in enumerate(read_rule_file(path).rule):
            where = (str(path), f"rule.{i}")
            _merge(merged, entry, where, is_builtin)
    return [_check(spec) for spec in merged.values() if spec["enabled"]]


def _merge(merged: dict[str, dict[str, Any]], entry: RuleEntry, where: tuple[str, str], builtin: bool) -> None:
    given = {k: getattr(entry, k) for k in entry.model_fields_set}
    old = merged.get(entry.id)
    if old is not None:
        if builtin:
            raise RuleError(where[0], f"{where[1]}.id", f"{entry.id!r} is already defined in {old['source'][0]}")
        if "signature" in given and given["signature"] != old["signature"]:
            old["params"] = {}  # another detector: the old thresholds mean nothing to it
        params = {**old["params"], **given.pop("params", {})}
        old.update(given, params=params, source=where)
        return
    missing = [k for k in REQUIRED if k not in given]
    if missing:
        raise RuleError(where[0], f"{where[1]}.{missing[0]}", f"a new rule needs {', '.join(missing)}")
    merged[entry.id] = {**entry.model_dump(), "source": where}


def _check(spec: dict[str, Any]) -> Rule:
    path, key = spec["source"]
    signature = SIGNATURES.get(spec["signature"])
    if signature is None:
        raise RuleError(
            path, f"{key}.signature", f"unknown signature {spec['signature']!r}; known: {sorted(SIGNATURES)}"
        )
    try:
        params = signature.params.model_validate(spec["params"])
    except ValidationError as exc:
        raise _error(path, exc, (key, "params")) from None
    return Rule(
        id=spec["id"],
        title=spec["title"],
        signature=spec["signature"],
        reads=frozenset(spec["reads"]),
        severity=spec["severity"],
        message=spec["message"],
        fix=spec["fix"],
        sources=tuple(spec["sources"]),
        cannot_check=spec["cannot_check"],
        suppressed_by=frozenset(spec["suppressed_by"]),
        params=params,
        source=path,
    )


def describe_signatures() -> str:
    """One line per signature type and its parameters, for ``--help``."""
    lines = []
    for sig in SIGNATURES.values():
        names = ", ".join(sig.params.model_fields)
        lines.append(f"  {sig.name}: {sig.doc} [{names}]")
    return "\n".join(lines)


def speedup_thresholds(rules: Iterable[Rule]) -> tuple[float, float]:
    """(``loses_below``, ``marginal_below``) of the speedup rule (P18), where the doctor and ``runs --baseline``
    turn a speedup into pays / marginal / loses; the defaults without one."""
    params = next((r.params for r in rules if r.signature == "speedup"), None)
    return getattr(params, "loses_below", LOSES_BELOW), getattr(params, "marginal_below", MARGINAL_BELOW)
