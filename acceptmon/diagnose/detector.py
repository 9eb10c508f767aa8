"""The detector contract: what a signature type is fed, what it answers, and what it may ask. Pure.

A detector is one rule's state for one run. The engine feeds it the records of the kinds its
rule reads (``launch``, ``steps`` for a stretch of decode-like lines as columns, ``prefill``, ``warning``), after
the run's :class:`~acceptmon.diagnose.state.RunState` has taken them in, and asks :meth:`hit`
whenever findings are wanted: a :class:`~acceptmon.diagnose.model.Hit` while the rule holds,
None otherwise. Detectors keep sums and counts, never every line, so the engine runs live.

:meth:`Detector.stats` says what one line does; :meth:`Detector.steps`, by default a call of it per line, is
what the engine calls. Each signature type overrides both, its ``steps`` with the interpreter's C loops over the
columns (the helpers below: masks, values picked by masks), and tests hold the two equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import reduce
from itertools import compress, repeat
from operator import and_, ge, gt, is_, is_not, le, lt, not_, truth
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from acceptmon.diagnose.breakeven import BreakEven
from acceptmon.diagnose.model import Evidence, Hit, Severity, Value
from acceptmon.diagnose.state import RunState, Step, Steps
from acceptmon.measure.plain import has_none
from acceptmon.parse.fast import native
from acceptmon.parse.records import Record, WarningRecord

MAX_LINES = 8
"""Line numbers kept as evidence per finding."""


class Params(BaseModel):
    """Base of every signature type's parameters: unknown keys are errors, and so are nan and inf."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


P = TypeVar("P", bound=Params)


class Context(Protocol):
    """What a detector may ask beyond its run: inputs from the command line and other runs."""

    @property
    def expected_accept_len(self) -> float | None: ...

    def same_config(self, run: RunState) -> list[RunState]:
        """Other runs of the same file with the same model and speculative settings."""
        ...

    def break_even(self, run: RunState) -> BreakEven | None:
        """The run's speedup against its baseline (None when it does not speculate)."""
        ...


class Detector(Generic[P]):
    """One rule's state for one run; subclasses override what their signature reads."""

    def __init__(self, params: P) -> None:
        self.p = params

    def launch(self, r: Record, run: RunState) -> None:
        """The run's launch line (the config is in ``run.launch``)."""

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        """A decode line (or a kind with decode-like fields: accept_len, running_req, ...)."""

    def steps(self, steps: Steps, run: RunState) -> None:
        """Consecutive stats lines of the run, as columns: what :meth:`stats` does with each, in order."""
        for i in range(len(steps)):
            self.stats(_Row(steps, i), run, steps.step(i))  # type: ignore[arg-type]  # its __dict__ is read

    def prefill(self, r: Record, run: RunState) -> None:
        """A prefill line."""

    def warning(self, r: WarningRecord, run: RunState) -> None:
        """A launch or serving warning of this run."""

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        """The finding while the rule holds, else None."""
        return None


class _Row:
    """A line of :class:`Steps` as :meth:`Detector.stats` reads a record: ``r.__dict__.get(name)``."""

    __slots__ = ("i", "steps")

    def __init__(self, steps: Steps, i: int) -> None:
        self.steps, self.i = steps, i

    @property
    def __dict__(self) -> _Row:  # type: ignore[override]
        return self

    def get(self, name: str) -> Any:
        return self.steps.value(name)[self.i]


@dataclass(frozen=True)
class Signature:
    """A signature type: its parameter schema, its detector, and what it is for."""

    name: str
    params: type[Params]
    detector: Callable[[Any], Detector[Any]]
    doc: str

    def before_launch(self, params: Params) -> tuple[str, ...]:
        """Warning codes printed before the launch line they belong to (server arguments resolve first):
        the ``codes`` and ``error_codes`` of parameters whose ``before_launch`` is true."""
        if not getattr(params, "before_launch", False):
            return ()
        return tuple(getattr(params, "codes", ()))


def r6(value: float) -> float:
    """A derived ratio rounded before it meets a threshold: logged values have two decimals, so a
    threshold on the boundary (5 of 100 lines is 5 %) must not flip on the last binary digit."""
    return round(value, 6)


class Lines:
    """The first few line numbers of something that happened, and how often it happened."""

    def __init__(self) -> None:
        self.count = 0
        self.lines: list[int] = []

    def add(self, line: int) -> None:
        self.count += 1
        if self.count <= MAX_LINES:
            self.lines.append(line)

    def extend(self, lines: Iterable[int]) -> None:
        """:meth:`add` of each of ``lines``, in order: every one counted, the first few kept."""
        new = list(lines)
        self.lines += new[: max(MAX_LINES - self.count, 0)]
        self.count += len(new)


# Columns of stats lines (:class:`Steps`), masks over them and values picked by masks, in the interpreter's C loops


class Test(NamedTuple):
    """A mask that :func:`every` asks of a column line by line (in C where the module is built): ``op(value, bound)``,
    ``absent`` for a None value, turned over where ``negate``; with no ``op``, whether the value is logged (not None),
    or turned over, whether it is None."""

    values: Sequence[Any]
    op: Callable[[Any, Any], Any] | None = None
    bound: Any = None
    absent: bool = False
    negate: bool = False

    def entries(self) -> Iterable[Any]:
        """The mask's entries, in Python."""
        if self.op is None:
            return map(is_ if self.negate else is_not, self.values, repeat(None))
        got = compared(self.values, self.op, self.bound, self.absent)
        return map(not_, got) if self.negate else got


_RICH = {lt: 0, le: 1, gt: 4, ge: 5}
"""The comparisons a :class:`Test` makes in C, as CPython's rich comparison codes (``Py_LT`` ...)."""


def known(values: Sequence[Any]) -> Test | Literal[True]:
    """Whether each value is logged (not None): True alone when every one is (a mask for :func:`every`)."""
    return True if not has_none(values) else Test(values)


def unlogged(values: Sequence[Any]) -> Test:
    """Whether each value is None (a mask for :func:`every`)."""
    return Test(values, negate=True)


def tested(values: Sequence[Any], op: Callable[[Any, Any], Any], bound: Any, negate: bool = False) -> Test:
    """``op(value, bound)`` of each value, False for a None, turned over where ``negate`` (a mask for :func:`every`)."""
    return Test(values, op, bound, False, negate)


def compared(values: Sequence[Any], op: Callable[[Any, Any], Any], bound: Any, absent: bool = False) -> Iterable[Any]:
    """``op(value, bound)`` of each value (in C when none is None), ``absent`` for a None."""
    if not has_none(values):
        return map(op, values, repeat(bound))
    return [absent if value is None else op(value, bound) for value in values]


T = TypeVar("T")


def picked(values: Sequence[T | None], mask: Iterable[Any]) -> list[T]:
    """The values where ``mask`` is true: a mask that holds only where a value is logged (not None)."""
    return cast(list[T], list(compress(values, mask)))


def logged(values: Sequence[T | None]) -> Sequence[T]:
    """The values that are not None, in order (``values`` itself when none is)."""
    return picked(values, map(is_not, values, repeat(None))) if has_none(values) else cast(Sequence[T], values)


def every(*masks: Iterable[Any] | Test | Literal[True]) -> Sequence[Any]:
    """Line by line, whether each mask's entry is true (as ``a and b and ...`` takes it; a :class:`Test`, whether the
    line passes it); a mask True holds on every line, and at least one must be a column, all of one length. A single
    column is the answer as it is, not a copy; several, bytes (1 true, 0 false): the compiled module's ``every``
    where it is built (it asks the tests itself), else :func:`marks`."""
    columns = [mask for mask in masks if mask is not True]
    if len(columns) == 1:
        only = columns[0]
        if type(only) is Test:
            return list(only.entries())
        return only if isinstance(only, Sequence) else list(only)
    module = native.load()
    if module is None:
        return marks([c.entries() if type(c) is Test else c for c in columns])
    tests = [_in_c(module, c) if type(c) is Test else None for c in columns]
    given = [
        c if type(c) is not Test else c.values if t is not None else list(c.entries())
        for c, t in zip(columns, tests, strict=True)
    ]
    return cast(bytes, module.every(given, tests))


def _in_c(module: Any, test: Test) -> tuple[int, Any, bool, bool] | None:
    """A test as the compiled ``every`` asks it, or None where it asks only an entry's truth (the test's entries are
    then made here: :meth:`Test.entries`)."""
    if test.op is None:
        return module.TEST_KNOWN, None, False, test.negate
    code = _RICH.get(test.op)
    return None if code is None else (code, test.bound, test.absent, test.negate)


def marks(columns: list[Iterable[Any]]) -> bytes:
    """Columns and-ed line by line as bytes, 1 where every entry is true, else 0 (:func:`every` of several)."""
    bits = [bytes(map(truth, column)) for column in columns]  # 1 where true: the masks and-ed as one integer each
    both = reduce(and_, (int.from_bytes(b, "little") for b in bits))
    return both.to_bytes(len(bits[0]), "little")


class Stretch(tuple[int, ...]):
    """The first and last line of a stretch of lines, as evidence (people read ``lines 8-158`` with an en dash)."""


def evidence(text: str, lines: list[int] | tuple[int, ...] = (), **values: Value) -> Evidence:
    """Evidence with its numbers rounded for people (4 decimals); ``lines`` a :class:`Stretch` or each line."""
    rounded = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in values.items()}
    stretch = isinstance(lines, Stretch)
    return Evidence(lines=sorted(set(lines))[:MAX_LINES], values=rounded, text=text, stretch=stretch)


def hit(
    text: str,
    lines: list[int] | tuple[int, ...] = (),
    severity: Severity | None = None,
    note: str = "",
    **values: Value,
) -> Hit:
    return Hit(severity=severity, evidence=evidence(text, lines, **values), note=note)


def matches(text: str | None, needles: list[str]) -> bool:
    """Case-insensitive: does ``text`` contain any of ``needles`` (an empty list matches anything)?"""
    if not needles:
        return True
    low = (text or "").lower()
    return any(n.lower() in low for n in needles)


def run_lines(run: RunState) -> Stretch:
    """The first and last accept-length line of a run, as evidence."""
    return Stretch(run.accept_lines or ())
