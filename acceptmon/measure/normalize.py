"""The one step between the parser and every consumer: records in file order become facts. Pure.

``runs``, ``compare``, ``doctor``, ``tail`` and ``serve`` all read what :class:`Normalizer`
gives; only ``parse`` writes the records as logged. Each cross-line rule is written here
once, and which records it applies to is their kind's declared role
(:mod:`acceptmon.parse.kinds`), never their class:

- **Units.** A record belongs to a unit: its rank, or (``unit_field = "engine"``) its engine;
  a record without one belongs to the unit its file and source named last (a vLLM spec line
  follows its engine's throughput line), and it is given that engine.
- **Intervals.** A record that counts tokens since server start (vLLM v0: ``cumulative``)
  is turned into the interval it closes (:class:`~acceptmon.measure.tokens.Intervals`).
- **Batches.** A record with the ``acceptance`` role is one :class:`Batch`: its accept length
  and draft accept rate, and the load of its unit (its own fields when its kind also has the
  ``load`` role, else the unit's latest load line, fields a line lacks kept from earlier ones).
  A batch is ``steady`` when nothing is queued and no prefill line came since its unit's
  previous batch or load line (a unit's first line is not steady), and ``warmup`` for the first
  :data:`WARMUP_BATCHES` of its run (the doctor leaves those out of what it judges).
- **Load.** A record with the ``load`` role also gives one :class:`Load`: its unit's logged rate.
- **Per-position lines.** A record with the ``positions`` role (a request's per-position rates on a line of
  their own) belongs to its unit's finished request just before it, whose verify steps weigh its rates.
- **Impossible values.** Values from a log are untrusted. A value outside what its field can mean
  (:data:`VALID`, decode batches and finished requests alike: an accept length under 1, bonus token
  included, or over 1000; a rate outside 0..1; a negative count, throughput or latency; anything not
  finite) is left out: the fact's record has None there and :attr:`Fact.invalid` counts it. A launch
  whose speculative or parallel sizes no real server runs (:data:`CONFIG_LIMITS`) has them as None
  (unknown), :attr:`Fact.refused` names them, and a batch loses a draft accept rate derived from a
  refused draft-token count, which its record carries (the parser gives a decode record its launch's sizes):
  the rule needs no earlier line, so a part of a file read on its own applies it as the whole file does.

Runs are keyed by (file, source, run): runs are numbered per file in launch order, and a
stream with several processes (``source``) keeps each one's runs apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from acceptmon.measure.amend import amended
from acceptmon.measure.tokens import Intervals, counters
from acceptmon.parse.kinds import KINDS, RecordKind
from acceptmon.parse.records import LaunchConfig, Record

WARMUP_BATCHES = 2
"""Batches at the start of each run that the doctor's accept-length rules leave out (doctor.md §4)."""

RunKey = tuple[str, str, int]
"""(file, source, run): one run of one process in one file."""


VALID: dict[str, tuple[float, float]] = {
    "accept_len": (1.0, 1000.0),
    "accept_rate": (0.0, 1.0),
    "draft_accept_rate": (0.0, 1.0),
    "gen_throughput": (0.0, math.inf),
    "running_req": (0, math.inf),
    "queue_req": (0, math.inf),
    "num_tokens": (0, math.inf),
    "accepted_tokens": (0, math.inf),
    "drafted_tokens": (0, math.inf),
    "emitted_tokens": (0, math.inf),
    "verify_ct": (0, math.inf),
    "correct_drafts": (0, math.inf),
    "proposed_drafts": (0, math.inf),
    "prompt_tokens": (0, math.inf),
    "completion_tokens": (0, math.inf),
    "cached_tokens": (0, math.inf),
    "e2e_latency": (0.0, math.inf),
}
"""What a stats or finished-request record's value can mean, inclusive: accept length is tokens per verify
step with the bonus token (at least 1; 1000 is far past any draft length a server allows), rates are
fractions, counts, throughput and latency are not negative."""

CONFIG_LIMITS: dict[str, tuple[int, int]] = {
    "spec_num_steps": (1, 64),
    "spec_eagle_topk": (1, 64),
    "spec_num_draft_tokens": (1, 1024),
    "tp_size": (1, 65536),
    "dp_size": (1, 65536),
    "ep_size": (1, 65536),
}
"""Launch sizes a real server runs, inclusive. Steps and topk: SGLang's EAGLE and vLLM's
``num_speculative_tokens`` are single digits in practice (every sample log: 1 to 8); 64 leaves room.
Draft tokens of a tree are up to steps x topk + 1; the sample logs go to 64. Outside these a value is
a corrupt or crafted line, and a loop over it (the doctor's depth advice) would never end."""


def refused(config: Any) -> list[str]:
    """The fields of a launch config outside :data:`CONFIG_LIMITS` (an empty list for a plausible one)."""
    if config is None:
        return []
    return [name for name in CONFIG_LIMITS if refuses_size(name, getattr(config, name, None))]


def refuses_size(name: str, v: Any) -> bool:
    """Whether :data:`CONFIG_LIMITS` refuse this value of a launch size (None: not given, not refused)."""
    low, high = CONFIG_LIMITS[name]
    return v is not None and not (isinstance(v, int) and low <= v <= high)


def valid_bounds(model: type) -> tuple[tuple[str, float, float], ...]:
    """(field, low, high) of each :data:`VALID` field a record model has."""
    return _CHECKED.get(model) or _bounds(model)


def _valid(name: str, v: Any) -> bool:
    low, high = VALID[name]
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and low <= v <= high


_CHECKED: dict[type, tuple[tuple[str, float, float], ...]] = {}
"""Per record model: (field, low, high) of the :data:`VALID` fields it has (the others are never set)."""
_PLAIN: dict[type, Callable[[Callable[[str], Any]], bool]] = {}
"""Per record model: :func:`_plain_of`'s test."""


def _bounds(model: type) -> tuple[tuple[str, float, float], ...]:
    fields = getattr(model, "model_fields", {})
    found = _CHECKED[model] = tuple((n, low, high) for n, (low, high) in VALID.items() if n in fields)
    return found


def _plain_of(model: type) -> Callable[[Callable[[str], Any]], bool]:
    """Whether every :data:`VALID` field of a record of ``model`` (its values' ``get``) is None or the usual value, a
    plain int or float in bounds (finite): one function per model, its fields and bounds written out (a loop over
    them was a third of the normalize step, per stats line); any other value is :func:`_checked`'s to judge."""
    tests = []
    for name, low, high in _CHECKED.get(model) or _bounds(model):
        upper = "v < INF" if high == math.inf else f"v <= {high!r}"
        ints = f"{low!r} <= v" + ("" if high == math.inf else f" <= {high!r}")
        usual = f"(type(v) is float and {low!r} <= v and {upper}) or (type(v) is int and {ints})"
        tests.append(f"    v = get({name!r})\n    if v is not None and not ({usual}):\n        return False\n")
    source = "def plain(get):\n" + "".join(tests) + "    return True\n"
    scope: dict[str, Any] = {"INF": math.inf}
    exec(source, scope)  # the source is made of VALID's names and numbers alone
    found: Callable[[Callable[[str], Any]], bool] = scope["plain"]
    _PLAIN[model] = found
    return found


def _from_refused(get: Callable[[str], Any]) -> bool:
    """Whether a record's draft accept rate was derived (no accepted count) from its launch's draft-token count,
    and :data:`CONFIG_LIMITS` refuse that count: its ``num_draft_tokens``, or else ``num_steps`` (a chain's
    ``num_steps + 1``), as :attr:`~acceptmon.parse.records.LaunchConfig.draft_tokens` takes them."""
    if get("draft_accept_rate") is None or get("accepted_tokens") is not None:
        return False
    name = "spec_num_draft_tokens" if get("spec_num_draft_tokens") is not None else "spec_num_steps"
    return refuses_size(name, get(name))


def _checked(r: Record) -> tuple[Record, int]:
    """The record with its impossible values as None, and how many there were (the record itself if none)."""
    values = r.__dict__
    get = values.get
    derived = _from_refused(get)
    if not derived and (_PLAIN.get(type(r)) or _plain_of(type(r)))(get):
        return r, 0
    bad: list[str] | None = None
    for n, _, _ in _CHECKED.get(type(r)) or _bounds(type(r)):
        v = get(n)
        if v is not None and not _valid(n, v):
            bad = [*(bad or ()), n]
    if bad is None and not derived:
        return r, 0
    update = dict.fromkeys(bad or ())
    if derived:
        update["draft_accept_rate"] = None  # derived from the refused draft-token count
    return amended(r, update), len(bad or ())


def run_key(r: Record) -> RunKey:
    return r.file, getattr(r, "source", ""), r.run


class Batch(NamedTuple):
    """One stats line with acceptance, with its unit's load and its place in the run. (A named tuple: as
    immutable as a frozen dataclass, and made for a fraction of its cost, one per decode line.)"""

    unit: str
    accept_len: float | None
    accept_rate: float | None
    """The draft accept rate (accepted / proposed drafts): one definition for every server."""
    gen_throughput: float | None
    running_req: int | None
    queue_req: int | None
    steady: bool
    warmup: bool


class Load(NamedTuple):
    """One unit's load line: its logged generation throughput (tok/s of that rank or engine) and requests."""

    unit: str
    gen_throughput: float | None
    running_req: int | None
    queue_req: int | None
    steady: bool


@dataclass(slots=True)
class Fact:
    """A normalized record, with its batch (``acceptance`` role) and its load (``load`` role)."""

    record: Record
    batch: Batch | None = None
    load: Load | None = None
    invalid: int = 0
    """Values of the record left out as impossible (:data:`VALID`)."""
    refused: tuple[str, ...] = ()
    """A launch: the config fields refused as implausible (:data:`CONFIG_LIMITS`), now None."""

    @property
    def key(self) -> RunKey:
        return run_key(self.record)


@dataclass(slots=True)
class _Run:
    batches: int = 0
    """Batches seen so far (the first :attr:`Normalizer.warmup` are warm-up)."""


@dataclass(slots=True)
class _Unit:
    run: _Run
    """The run's state, shared by its units."""
    after_prefill: bool = True
    load: tuple[Any, ...] = (None, None, None)

    def carry(self, get: Callable[[str], Any]) -> tuple[Any, ...]:
        """A line of a ``load`` kind (its values' ``get``): its own load fields, which the unit keeps, each it logs,
        for its later lines without them (spelled out: generators over a field list cost more, per stats line)."""
        old_tput, old_running, old_queue = self.load
        tput, running, queue = get("gen_throughput"), get("running_req"), get("queue_req")
        self.load = (
            old_tput if tput is None else tput,
            old_running if running is None else running,
            old_queue if queue is None else queue,
        )
        return tput, running, queue


@dataclass
class Normalizer:
    """Turns records, in file order (files and sources may interleave), into :class:`Fact` s."""

    warmup: int = WARMUP_BATCHES
    intervals: Intervals = field(default_factory=Intervals)
    _units: dict[tuple[str, str, int, str], _Unit] = field(default_factory=dict)
    """By (file, source, run, unit): one lookup per stats line finds its unit and its run."""
    _runs: dict[RunKey, _Run] = field(default_factory=dict)
    _last_unit: dict[tuple[str, str], str] = field(default_factory=dict)
    _requests: dict[tuple[RunKey, str], Record] = field(default_factory=dict)
    """Each unit's last finished request, which a per-position line after it (its rates alone) belongs to."""

    def feed(self, records: Iterable[Record]) -> list[Fact]:
        return [self.fact(r) for r in records]

    def fact(self, r: Record) -> Fact:
        kind = KINDS[r.kind]
        if kind.starts_run:
            return self._launch(r)
        if kind.request:
            r, invalid = _checked(r)
            self._requests[run_key(r), r.rank or ""] = r
            return Fact(r, invalid=invalid)
        if kind.positions:
            return self._weighed(r)
        if not (kind.acceptance or kind.load or kind.prefill):
            return Fact(r)
        r, unit = self._unit(r, kind.unit_field)
        state = self._units.get((r.file, r.source, r.run, unit))
        if state is None:
            state = self._new_unit(r, unit)
        if kind.prefill:
            state.after_prefill = True
            return Fact(r)
        r, invalid = _checked(r)
        values = r.__dict__
        tput, running, queue = state.carry(values.get) if kind.load else state.load
        steady = queue == 0 and not state.after_prefill
        state.after_prefill = False
        load = Load(unit, tput, running, queue, steady) if kind.load else None
        if not kind.acceptance:
            return Fact(r, load=load, invalid=invalid)
        if values.get("cumulative"):
            r = self.intervals.record(r)
            values = r.__dict__
        run = state.run
        run.batches += 1
        accept_len, accept_rate = values.get("accept_len"), values.get("draft_accept_rate")
        batch = Batch(unit, accept_len, accept_rate, tput, running, queue, steady, run.batches <= self.warmup)
        return Fact(r, batch, load, invalid)

    def plain(self, r: Record, kind: RecordKind) -> tuple[str, Any, tuple[Any, Any] | None] | None:
        """What :meth:`fact` does with a record of a :func:`plain_kinds` kind (``kind``) whose values need no change
        (each valid, its draft accept rate not derived from a refused count), without making the fact: its unit's state
        moves on as there (the unit a line without one takes: its file's last named; its load kept, no longer after
        a prefill, one more batch of its run; a line counting since start closes its interval) and it returns the
        unit, the line's throughput, which the fact's batch or load would hold (None for a kind without the ``load``
        role), and the (accept_len, rate) of the interval a line counting since start closes (else None), which the
        fact's record would hold. None (nothing done) for any other record: :meth:`fact` takes it.
        :class:`~acceptmon.measure.aggregate.Stats` folds such records so, a few microseconds each fewer; a test
        holds the two ways equal on drawn records."""
        values = r.__dict__
        get = values.get
        if _from_refused(get) or not (_PLAIN.get(type(r)) or _plain_of(type(r)))(get):
            return None
        unit = self._unit_of(values, kind.unit_field)[0]  # no fact is made: no record's copy that names it
        state = self._units.get((values["file"], values["source"], values["run"], unit))
        if state is None:
            state = self._new_unit(r, unit)
        tput = state.carry(get)[0] if kind.load else None
        state.after_prefill = False
        interval = None
        if kind.acceptance:
            if get("cumulative"):  # the key as :meth:`Intervals.record` takes it of the fact's record
                interval = self.intervals.close(Intervals.key(r, unit or None), counters(r))  # type: ignore[arg-type]
            state.run.batches += 1
        return unit, tput, interval

    def moved_on(
        self,
        key: RunKey,
        units: Sequence[str],
        loads: Sequence[tuple[dict[str, Sequence[int]], list[Sequence[Any] | None]]],
        batches: int,
        named: str | None,
    ) -> None:
        """What :meth:`plain` does with rows of one run (``key``), in order: ``units``, every unit a row is of, in order
        of its first; ``loads``, for each plan of a ``load`` kind, each unit's rows' places and each row's
        throughput, running and queued requests (None: a field the kind lacks); ``batches``, the rows of an
        ``acceptance`` kind; ``named``, the last engine a row names. Each unit keeps its last logged load fields and
        is no longer after a prefill; the run counts the batches; the file and source have the engine named last."""
        run = self._run(key)
        for unit in units:
            state = self._units.get((*key, unit))
            if state is None:
                state = self._units[(*key, unit)] = _Unit(run)
            state.after_prefill = False
        for groups, columns in loads:
            for unit, at in groups.items():
                state = self._units[(*key, unit)]
                state.load = tuple(
                    old if column is None else _last(column, at, old)
                    for column, old in zip(columns, state.load, strict=True)
                )
        run.batches += batches
        if named:
            self._last_unit[key[0], key[1]] = named

    def unit_now(self, key: RunKey, unit: str) -> tuple[bool, tuple[Any, ...]]:
        """Whether a unit's next line would follow a prefill line (or be its first), and the load it carries."""
        state = self._units.get((*key, unit))
        return (True, (None, None, None)) if state is None else (state.after_prefill, state.load)

    def batches(self, key: RunKey) -> int:
        """A run's batches so far."""
        run = self._runs.get(key)
        return 0 if run is None else run.batches

    def _launch(self, r: Record) -> Fact:
        """A launch: its run starts; a config no real server runs has the refused sizes as None."""
        self.intervals.launch(run_key(r))
        config: LaunchConfig | None = getattr(r, "config", None)
        bad = refused(config)
        if not bad or config is None:
            return Fact(r)
        return Fact(amended(r, {"config": amended(config, dict.fromkeys(bad))}), refused=tuple(bad))

    def _run(self, key: RunKey) -> _Run:
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = _Run()
        return run

    def _new_unit(self, r: Record, unit: str) -> _Unit:
        """A unit's first line: its state, with its run's."""
        state = self._units[r.file, r.source, r.run, unit] = _Unit(self._run(run_key(r)))
        return state

    def _weighed(self, r: Record) -> Fact:
        """A request's per-position rates (``positions`` role) with their weight, the request's verify steps:
        the rates sum to accepted drafts per verify step, so steps = accepted / their sum (with nothing accepted,
        drafted / positions). The request is its unit's line just before; without one the rates weigh nothing.
        A rate outside 0..1 leaves the record without rates (counted invalid)."""
        request = self._requests.pop((run_key(r), r.rank or ""), None)
        rates: list[float | None] = r.__dict__.get("position_accept_rates") or []
        if any(p is not None and not (math.isfinite(p) and 0.0 <= p <= 1.0) for p in rates):
            return Fact(amended(r, {"position_accept_rates": None}), invalid=1)
        values = request.__dict__ if request is not None else {}
        accepted, drafted = values.get("correct_drafts"), values.get("proposed_drafts")
        total = sum(p or 0.0 for p in rates)
        steps = None
        if rates and accepted and total > 0:
            steps = accepted / total
        elif rates and accepted == 0 and total == 0 and drafted:
            steps = drafted / len(rates)
        return Fact(amended(r, {"verify_ct": round(steps, 3)}) if steps else r)

    @property
    def last_named(self) -> Mapping[tuple[str, str], str]:
        """The engine each file and source named last."""
        return self._last_unit

    def named_any(self, wheres: Iterable[tuple[str, str]]) -> bool:
        """Whether a line seen so far named an engine for any of these files and sources."""
        return any(w in self._last_unit for w in wheres)

    def take_last(self, later: Normalizer) -> None:
        """Take what the normalizer of a later part of the same files (read on its own) saw last: the units named
        (a record after that part that names none takes its file's and source's from there), each unit's last
        finished request (a per-position line after it is weighed by it) and the cumulative counters (a line after
        it closes the interval from there)."""
        self._last_unit.update(later._last_unit)
        self._requests.update(later._requests)
        self.intervals.take_last(later.intervals)

    def _unit(self, r: Record, name: str) -> tuple[Record, str]:
        """The record's unit; a record of an engine-named kind without one takes its file's last engine."""
        unit, taken = self._unit_of(r.__dict__, name)
        return (amended(r, {name: unit}) if taken else r), unit

    def _unit_of(self, values: dict[str, Any], name: str) -> tuple[str, bool]:
        """The unit of a record's values (``name``: its kind's unit field), and whether it is taken from its file's
        last named engine (the record names none); a record that names one is its file's last named."""
        unit = values.get(name)
        if name == "rank":
            return unit or "", False
        where = (values["file"], values["source"])
        if unit:
            self._last_unit[where] = unit
            return unit, False
        last = self._last_unit.get(where)
        return ("", False) if last is None else (last, True)


def _last(column: Sequence[Any], at: Sequence[int], old: Any) -> Any:
    """The last value logged at these places of a column (``old`` if none is)."""
    for i in reversed(at):
        v = column[i]
        if v is not None:
            return v
    return old


def plain_kinds() -> frozenset[str]:
    """The kinds :meth:`Normalizer.plain` takes: each record a batch (``acceptance``), a unit's load (``load``) or
    both, and nothing else (SGLang's decode lines, vLLM's spec and throughput lines). Asked of the registry at each
    call: a kind registered later is judged too."""
    return frozenset(
        k.name
        for k in KINDS.values()
        if (k.acceptance or k.load) and not (k.prefill or k.starts_run or k.request or k.positions)
    )


READS = frozenset(
    {
        "file",
        "line",
        "timestamp",
        "run",
        "source",
        "rank",
        "engine",
        "accept_len",
        "accept_rate",
        "draft_accept_rate",
        "gen_throughput",
        "running_req",
        "queue_req",
        "cumulative",
        "accepted_tokens",
        "drafted_tokens",
        "emitted_tokens",
        "num_spec_tokens",
        "spec_num_steps",
        "position_accept_rates",
        "correct_drafts",
        "proposed_drafts",
        "verify_ct",
        "config",
    }
)
"""Every field the normalizer (and the figures) read of a record."""
