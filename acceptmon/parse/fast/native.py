"""The fast lane's compiled matcher: the templates handed to C (``cmatch*.c``), where one is built.

``pip install`` compiles ``acceptmon/parse/fast/cmatch*.c`` when a C compiler is there
(``hatch_build.py``); without it, or with ``ACCEPTMON_PURE_PYTHON=1`` set, there is no fast
lane and the general parser reads every line. The C matcher reads each template as steps
(:attr:`Template.ops`) and matches a step greedily, without backtracking; :func:`steps` gives a
template's steps only where greedy reading accepts exactly what the template's regular expression
accepts: a value is never followed by a step that could start with a byte of the value,
alternatives are never prefixes of each other, and the envelope's suffix cannot continue a
timestamp or a rank. The lines of any other template are the general parser's. Same bytes either
way (``tests/test_fastlane.py``).

The numbers of the protocol (step codes, recipe codes, limits) are the C module's: this module names
steps and takes each code from the module it loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from acceptmon.parse.derive import SPEC_DIGITS
from acceptmon.parse.fast import built, compiled_derive
from acceptmon.parse.fast.model import ACCEPT, Shape, Template
from acceptmon.parse.fast.pieces import ENVELOPE_KINDS
from acceptmon.parse.fast.rows import (
    BOOL_SLOT,
    CONV_FLOATS_CSV,
    CONV_FLOATS_JSON,
    CONV_PERCENT,
    CONV_SLOT,
    JSON_EXTRA,
    JSON_RANK,
    SLOT,
    Plan,
)
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.values import PERCENT_DIGITS

STRICT = {
    "int": "INT",
    "float": "FLOAT",
    "bool": "BOOL",
    "str": "STR",
    "count": "INT",
    "number": "FLOAT",
    "percent": "LFLOAT",
    "float_list": "LIST",
    "engine": "LINT",
    "lstr": "LSTR",
    "lnumber": "LFLOAT",
    "lint": "LINT",
}
LOOSE = {
    "int": "LINT",
    "float": "LFLOAT",
    "bool": "BOOL",
    "str": "LSTR",
    "lstr": "LSTR",
    "lnumber": "LFLOAT",
    "lint": "LINT",
}
"""Value steps of a template whose rows are written (strict, captured) or only counted (loose), by name:
a step's code is the module's ``OP_<name>`` (the numbers of the protocol are the C module's own)."""
RECIPE_CODES = {
    "SLOT": SLOT,
    "BOOL_SLOT": BOOL_SLOT,
    "JSON_RANK": JSON_RANK,
    "JSON_EXTRA": JSON_EXTRA,
    "CONV_SLOT": CONV_SLOT,
    "CONV_PERCENT": CONV_PERCENT,
    "CONV_FLOATS_CSV": CONV_FLOATS_CSV,
    "CONV_FLOATS_JSON": CONV_FLOATS_JSON,
    "PERCENT_DIGITS": PERCENT_DIGITS,
    "SPEC_DIGITS": SPEC_DIGITS,
    "IN_DRAFTED": compiled_derive.IN_DRAFTED,
    "IN_ACCEPTED": compiled_derive.IN_ACCEPTED,
    "IN_POSITIONS": compiled_derive.IN_POSITIONS,
    "IN_LOGGED": compiled_derive.IN_LOGGED,
    "IN_SPEC_TOKENS": compiled_derive.IN_SPEC_TOKENS,
    "IN_EMITTED": compiled_derive.IN_EMITTED,
    "NIN": len(compiled_derive.INPUTS),
    "OUT_RATE": compiled_derive.OUT_RATE,
    "OUT_LEN": compiled_derive.OUT_LEN,
    "OUT_SOURCE": compiled_derive.OUT_SOURCE,
    "OUT_CELL": compiled_derive.OUT_CELL,
}
"""The recipe codes :mod:`rows` writes, the digits of a percentage's fraction (:mod:`acceptmon.parse.values`) and
of a spec line's derived values (:mod:`acceptmon.parse.derive`), and a compiled derive's codes
(:mod:`compiled_derive`): a module that reads them otherwise is not used."""

_DIGITS = frozenset(b"0123456789")
_PRINTABLE = frozenset(range(0x20, 0x7F))
_ANY = frozenset(range(256))
CLASSES: dict[str, frozenset[int]] = {
    "INT": _DIGITS,
    "LINT": _DIGITS,
    "FLOAT": _DIGITS | {ord(".")},
    "LFLOAT": _DIGITS | {ord(".")},
    "BOOL": frozenset(),
    "STR": _PRINTABLE - frozenset(b'",\\'),
    "LSTR": _ANY - frozenset(b",\r\n\x1b"),
    "EXTRA": _ANY - frozenset(b",\r\n\t\x1b"),
    "LIST": _DIGITS | {ord(".")},
}
"""Bytes a greedy step may go on reading: the next step must not start with one of them."""
END = frozenset(b",\r\n")
"""First bytes of the end of a line: ``(?:, )?\\r*\\n``."""
ENVELOPE_STOP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789 .")
"""Bytes that could continue a timestamp or rank: the envelope's suffix must not start with one."""
Step = tuple[str, int, tuple[bytes, ...]]
"""(name, capture group or -1, texts): the module's ``OP_<name>`` is the step's code."""


def load() -> ModuleType | None:
    """The compiled module, or None (not built, another version, pure Python asked for, or other recipe codes)."""
    cmatch = built.module()
    if cmatch is None:
        return None
    return cmatch if all(getattr(cmatch, k, None) == v for k, v in RECIPE_CODES.items()) else None


def codes(module: Any, steps: Sequence[Step]) -> list[tuple[int, int, tuple[bytes, ...]]]:
    """Steps as the module reads them: each name as its ``OP_<name>`` code."""
    return [(getattr(module, f"OP_{name}"), slot, texts) for name, slot, texts in steps]


class _Finder:
    """The pre-scan's searches (:class:`acceptmon.parse.prescan.Finder`) in C: every word in one pass (a table of
    pairs), and ``memchr``."""

    def __init__(self, module: Any) -> None:
        self.find_any, self.newlines = module.find_any, module.newlines


def finder() -> Any | None:
    """The compiled :class:`acceptmon.parse.prescan.Finder`, or None."""
    module = load()
    return None if module is None else _Finder(module)


def order(templates: Sequence[Template]) -> list[int]:
    """Template indexes in the order the compiled matcher tries them: those of one head together, in order."""
    heads: dict[bytes, list[int]] = {}
    for i, t in enumerate(templates):
        heads.setdefault(t.head, []).append(i)
    return [i for members in heads.values() for i in members]


def program(
    shape: Shape,
    templates: Sequence[Template],
    counted: Sequence[bytes],
    launch: Sequence[bytes],
    written: frozenset[str] | None = None,
) -> Any | None:
    """The compiled matcher for ``templates`` (in :func:`order`), or None where there is none.

    Its ``scan`` counts the ``counted`` anchors, and gives up (None) on lines that hold a ``launch`` anchor.
    ``written``: the kinds whose values are captured (see :func:`steps`).
    """
    scan = load()
    needles = [*counted, *launch, ACCEPT]
    if scan is None or not _envelope_ok(shape) or len(needles) > scan.MAX_NEEDLES or any(len(a) < 2 for a in needles):
        return None
    each = [
        steps(t, None if written is None else t.kind in written) for t in map(templates.__getitem__, order(templates))
    ]
    if any(s is None for s in each):
        return None
    compiled = [codes(scan, s) for s in each if s is not None]
    leads = [codes(scan, s) for s in map(lead_steps, shape.leads, [shape.prefix] * len(shape.leads)) if s is not None]
    return scan.Program(shape.prefix, shape.suffix, compiled, needles, len(launch), scan.ENV_DATED, leads)


def lead_steps(lead: Sequence[tuple[str, Any]], prefix: bytes) -> list[Step] | None:
    """A lead's steps (:attr:`Shape.leads`: literals and loose digits), or None if greedy reading could differ
    from the pattern (a run of digits followed by a digit, the prefix's first byte too)."""
    out: list[Step] = []
    for op, arg in lead:
        if op not in ("lit", "lint") or (op == "lit" and not arg):
            return None
        out.append(("LIT", -1, (arg,)) if op == "lit" else ("LINT", -1, ()))
    for here, after in zip(out, [*out[1:], ("LIT", -1, (prefix,))], strict=True):
        if here[0] in CLASSES and _starts(after) & CLASSES[here[0]]:
            return None
    return out


def max_deps() -> int:
    """Capture groups a derived cell may depend on in the loaded module (0 without one)."""
    module = load()
    return 0 if module is None else int(module.MAX_DEPS)


def plans(plans: Sequence[Plan | bool | None], at: Sequence[int], program: Any) -> list[Any]:
    """Per template in C order: None (counted), False (the parser writes it), or the plan as C takes it
    (:meth:`Plan.compiled`), if ``program`` takes it (:func:`compiled`)."""
    return [compiled(program, k, plan) for k, plan in enumerate(map(plans.__getitem__, at))]


def compiled(program: Any, k: int, plan: Plan | bool | None) -> Any:
    """Template ``k``'s plan as ``program`` (its compiled matcher) takes it, or False where it writes no row or
    ``program`` refuses the plan (a typed field it does not build): that template's rows are the parser's."""
    if not isinstance(plan, Plan):
        return plan if plan is None else False
    got = plan.compiled()
    return got if got is False or program.plan_ok(k, got) else False


def _envelope_ok(shape: Shape) -> bool:
    inner = ENVELOPE_KINDS["timestamp"] + ENVELOPE_KINDS["rank"]
    return shape.inner == inner and bool(shape.prefix) and bool(shape.suffix) and shape.suffix[0] not in ENVELOPE_STOP


def steps(t: Template, written: bool | None = None) -> list[Step] | None:
    """The template's steps for C, or None if greedy reading could differ from the pattern.

    ``written``: its values are captured (strict steps) for a row, or only counted (loose); by default as its
    kind is a table kind (a typed lane, :mod:`acceptmon.parse.fast.typed`, writes the kinds its job wants)."""
    table = KINDS[t.kind].table if written is None else written
    steps: list[Step] = []
    for op, arg in t.ops:
        step = _step(op, arg, table)
        if step is None:
            return None
        if step[0] != "LIT" or step[2][0]:
            steps.append(step)
    read = [step for step in steps if step[0] != "VEND"]  # a value's end reads nothing
    for at, (here, after) in enumerate(zip(read, [*read[1:], None], strict=True)):
        if here[0] in CLASSES and _starts(after) & CLASSES[here[0]]:
            return None
        if here[0] == "ALT" and any(a != b and b.startswith(a) for a in here[2] for b in here[2]):
            return None
        if here[0] == "LIST" and after is not None and _goes_on_list(read[at + 1 : at + 3]):
            return None
    return steps


def _goes_on_list(after: list[Step]) -> bool:
    """Whether what follows a list could be read as the list going on (', ' then a digit): the list reads
    ', ' only before a digit, so the literal after it must not have one there."""
    texts = [b""]
    for code, _, options in after:
        if code not in ("LIT", "ALT", "LKEY"):
            return True
        texts = [t + o for t in texts for o in options]
        if all(len(t) >= 3 for t in texts):
            break
    return any(t[:2] == b", " and (len(t) < 3 or t[2:3].isdigit() or t[2:3] == b".") for t in texts)


def _step(op: str, arg: Any, table: bool) -> Step | None:
    if op == "lit":
        return ("LIT", -1, (arg,))
    if op == "alt":
        return ("ALT", -1, tuple(arg))
    if op == "extra":  # captures the key in its group, the value in the next
        keys, group = arg
        return ("EXTRA", group if table else -1, tuple(keys))
    if op == "lkey":  # "key: ", the key captured in its group, its value in the next up to "vend"
        key, group = arg
        return ("LKEY", group if table else -1, (key,))
    if op == "vend":
        return ("VEND", arg if table else -1, ())
    if op == "bare":
        return ("BARE", -1, ())
    code = (STRICT if table else LOOSE).get(op)
    if code is None:
        return None
    return (code, arg if table else -1, ())


def _starts(step: Step | None) -> frozenset[int]:
    """Bytes the step after a value may start with."""
    if step is None:
        return END
    code, _, texts = step
    if code in ("LIT", "ALT", "LKEY"):
        return frozenset(t[0] for t in texts if t) | (END if any(not t for t in texts) else frozenset())
    return _ANY
