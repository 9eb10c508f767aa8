"""What one run's records add up to, for every rule at once: config, warm-up, steady batches. Pure.

A :class:`RunState` is updated by each record before the run's detectors see it (a stretch of stats lines at once,
:meth:`RunState.fold`, which gives their contexts as :class:`Steps`; :meth:`RunState.stats` is what one line
does, and tests hold the two equal), so each detector keeps only what its own signature needs. :class:`Step` is the
per-line context, from
the normalized fact (:mod:`acceptmon.measure.normalize`, the rules every command shares):
past the warm-up (a run's first batches are left out by the accept-length rules), steady
(nothing queued and no prefill line since the unit's previous line), and the mean sequence
length ``#token / #running-req``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, gt, is_not, or_, truediv, truth
from typing import Any

from acceptmon.measure.facts import Facts, Values
from acceptmon.measure.figures import RunFigures
from acceptmon.measure.mean import Mean
from acceptmon.measure.normalize import Fact
from acceptmon.measure.plain import added, has_none, masked, present, summed, where_each
from acceptmon.measure.speedup import bucket_of, speculates
from acceptmon.parse.fast import native
from acceptmon.parse.records import LaunchConfig, Record

CONFIG_FIELDS = {
    "model_path": "model_path",
    "speculative_algorithm": "spec_algorithm",
    "speculative_num_steps": "spec_num_steps",
    "speculative_eagle_topk": "spec_eagle_topk",
    "speculative_num_draft_tokens": "spec_num_draft_tokens",
    "speculative_draft_model_path": "spec_draft_model_path",
    "tp_size": "tp_size",
    "dp_size": "dp_size",
    "ep_size": "ep_size",
}
"""server_args keys that the launch grammars lift into LaunchConfig fields."""


def config_value(launch: LaunchConfig | None, key: str) -> Any:
    """A server_args value by its logged name, whether lifted into a field or kept as an extra."""
    if launch is None:
        return None
    name = CONFIG_FIELDS.get(key)
    return getattr(launch, name) if name else launch.extra.get(key)


@dataclass(slots=True)
class BucketStats:
    """Steady decode lines at one ``#running-req`` bucket: throughput and accept length sums."""

    lines: int = 0
    throughput: float = 0.0
    running: int = 0
    accept_len: Mean = field(default_factory=Mean)

    def add(self, throughput: float, running: int, accept_len: float | None) -> None:
        """One steady decode line."""
        self.lines += 1
        self.throughput += throughput
        self.running += running
        self.accept_len.add(accept_len)

    def merge(self, other: BucketStats) -> None:
        self.lines += other.lines
        self.throughput += other.throughput
        self.running += other.running
        self.accept_len.merge(other.accept_len)

    @property
    def mean_throughput(self) -> float:
        return self.throughput / self.lines if self.lines else 0.0

    @property
    def mean_running(self) -> float:
        return self.running / self.lines if self.lines else 0.0


@dataclass(slots=True)
class Step:
    """Context of one decode line within its run, with the fields every stats feeder reads, read once.

    ``accept_len``, ``accept_rate``, ``running_req``, ``num_tokens`` and ``token_usage`` are the record's
    (None when its kind lacks them);
    ``speculative`` is :attr:`RunState.speculative` once the line is taken in.
    """

    warm: bool
    steady: bool
    seq_len: float | None
    line: int = 0
    accept_len: float | None = None
    accept_rate: float | None = None
    running_req: int | None = None
    speculative: bool = False
    num_tokens: int | None = None
    token_usage: float | None = None


@dataclass(slots=True)
class Steps:
    """Consecutive stats lines of one run, in order, as columns: each :class:`Step` field one entry per line (what
    :meth:`RunState.stats` would give each line, in turn), and the other fields of their records that detectors
    read. The engine hands detectors their lines so, a part of a file at a time, not a call per line."""

    line: Sequence[int]
    warm: Sequence[bool]
    steady: Sequence[bool]
    seq_len: Sequence[float | None]
    accept_len: Sequence[float | None]
    accept_rate: Sequence[float | None]
    running_req: Sequence[int | None]
    num_tokens: Sequence[int | None]
    token_usage: Sequence[float | None]
    speculative_from: int
    """Lines from this place on see the run speculate (:attr:`RunState.speculative` once each is taken in: the
    launch decides for every line, or, a run without one, its first line with an accept length or rate);
    ``len(self)`` when none does."""
    values: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    """Other fields of the lines' records, by name (``cuda_graph``, ``queue_req``, ``retracted_req``, ...): a name
    not here is None on every line."""

    def __len__(self) -> int:
        return len(self.line)

    def value(self, name: str) -> Sequence[Any]:
        """A record field's column (None on every line where no line's record has it)."""
        found = self.values.get(name)
        return found if found is not None else [None] * len(self.line)

    def kept(self, keep: Sequence[bool]) -> Steps:
        """The lines ``keep`` marks."""

        def pick(column: Sequence[Any]) -> list[Any]:
            return list(compress(column, keep))

        return Steps(
            pick(self.line),
            pick(self.warm),
            pick(self.steady),
            pick(self.seq_len),
            pick(self.accept_len),
            pick(self.accept_rate),
            pick(self.running_req),
            pick(self.num_tokens),
            pick(self.token_usage),
            sum(keep[: self.speculative_from]),
            Values(sum(keep), lambda name: pick(self.value(name))),
        )

    def step(self, i: int) -> Step:
        """The ``i`` th line's :class:`Step`."""
        return Step(
            self.warm[i],
            self.steady[i],
            self.seq_len[i],
            self.line[i],
            self.accept_len[i],
            self.accept_rate[i],
            self.running_req[i],
            i >= self.speculative_from,
            self.num_tokens[i],
            self.token_usage[i],
        )


def _logged(column: Sequence[Any]) -> Iterator[bool]:
    """Whether each value is logged (not None)."""
    return map(is_not, column, repeat(None))


UNREAD: Any = object()
"""Stands for a launch not read yet, where a launch-derived value is cached by the launch it came from
(None means no launch line)."""


@dataclass
class RunState:
    """One launch in one file, as far as it has been read."""

    file: str
    run: int
    source: str = ""
    """The stream source of the run's lines (empty for a plain file)."""
    launch: LaunchConfig | None = None
    launch_line: int | None = None
    stats_lines: int = 0
    """Stats lines read (batches and load lines)."""
    figures: RunFigures = field(default_factory=RunFigures)
    """The figures every command reports for a run (batches, accept_len_mean, throughput per rank and total)."""
    spec_lines: int = 0
    first_line: int | None = None
    last_line: int | None = None
    accept_len: Mean = field(default_factory=Mean)
    """Accept length of the batches past the warm-up: what the accept-length rules judge."""
    accept_lines: tuple[int, int] | None = None
    """First and last line that went into ``accept_len``."""
    throughput: Mean = field(default_factory=Mean)
    running_logged: bool = False
    """A stats line of the run logged its running requests (llama.cpp's lines log none)."""
    buckets: dict[tuple[int, int], BucketStats] = field(default_factory=dict)
    """Steady decode lines by ``#running-req`` bucket (``speedup.bucket_of``)."""
    warnings: int = 0
    _by_running: dict[int, BucketStats] = field(default_factory=dict, repr=False, compare=False)
    """``buckets`` entries by exact ``#running-req``, so a line finds its bucket without ``bucket_of``."""

    _spec_of: Any = field(default=UNREAD, repr=False, compare=False)
    """The launch ``_spec`` was worked out from: launch-derived values are computed once per launch line."""
    _spec: tuple[str | None, int | None, int | None, int] = field(
        default=(None, None, None, 1), repr=False, compare=False
    )

    def spec_params(self) -> tuple[str | None, int | None, int | None, int]:
        """(algorithm, draft tokens N, steps k, topk or 1) of the current launch, cached until it changes."""
        c = self.launch
        if c is self._spec_of:
            return self._spec
        if c is None:
            spec: tuple[str | None, int | None, int | None, int] = (None, None, None, 1)
        else:
            algo = c.method
            spec = (
                algo.upper() if algo else None,
                c.draft_tokens,
                c.spec_num_steps,
                c.spec_eagle_topk or 1,
            )
        self._spec_of, self._spec = c, spec
        return spec

    @property
    def algorithm(self) -> str | None:
        """The speculative algorithm, upper case; None when the run does not speculate or has no launch."""
        return self.spec_params()[0]

    @property
    def speculative(self) -> bool:
        """Speculation is on: by the launch line, or (no launch line) by accept lengths in decode lines."""
        return speculates(self.launch, self.spec_lines)

    @property
    def steps(self) -> int | None:
        return self.spec_params()[2]

    @property
    def draft_tokens(self) -> int | None:
        """N: tokens verified per request per step."""
        return self.spec_params()[1]

    def config_key(self) -> tuple[Any, ...] | None:
        """Model and speculative settings: runs with equal keys differ only in what logs do not show."""
        c = self.launch
        if c is None:
            return None
        return (
            c.model_path,
            c.spec_algorithm,
            c.spec_draft_model_path,
            c.spec_num_steps,
            c.spec_eagle_topk,
            c.spec_num_draft_tokens,
        )

    def prefill(self, r: Record) -> None:
        self._seen(r.line)

    def stats(self, fact: Fact) -> Step:
        """Fold in one stats line (a batch, a load line, or both: its normalized fact); return its context."""
        r, batch, load = fact.record, fact.batch, fact.load
        values = r.__dict__
        line = r.line
        self.stats_lines += 1
        self.figures.add(fact)
        if self.first_line is None:
            self.first_line = line
        self.last_line = line
        length = batch.accept_len if batch else None
        rate = values.get("accept_rate") if batch else None
        warm = batch is not None and not batch.warmup
        if length is not None or rate is not None:
            self.spec_lines += 1
        if length is not None and warm:
            self.accept_len.add(length)
            self.accept_lines = (self.accept_lines[0] if self.accept_lines else line, line)
        tput = load.gen_throughput if load else None
        if tput is not None:
            self.throughput.add(tput)
            if load is not None and load.steady and load.running_req:
                self._bucket(load.running_req).add(tput, load.running_req, length)
        running = batch.running_req if batch else load.running_req if load else None
        self.running_logged = self.running_logged or running is not None
        steady = batch.steady if batch else load.steady if load else False
        tokens, usage = values.get("num_tokens"), values.get("token_usage")
        seq = tokens / running if tokens is not None and running else None
        return Step(warm, steady, seq, line, length, rate, running, self.speculative, tokens, usage)

    def fold(self, facts: Facts) -> Steps:
        """Fold in consecutive stats lines of the run (their facts as columns); return their contexts: what
        :meth:`stats` does with each line and gives for it, in order."""
        n, lines, batch, length, running = len(facts), facts.line, facts.batch, facts.accept_len, facts.running_req
        values = facts.values
        every = all(batch)
        self.stats_lines += n
        tputs = self.figures.fold(facts)
        if self.first_line is None:
            self.first_line = lines[0]
        self.last_line = lines[-1]
        rate = values["accept_rate"] if every else masked(values["accept_rate"], batch)
        spec = [True] * n if not has_none(length) else list(map(or_, _logged(length), _logged(rate)))
        spec_lines = spec.count(True)
        spec_from = 0 if self.spec_lines else spec.index(True) if spec_lines else n  # (no launch: its first such line)
        self.spec_lines += spec_lines
        warm = list(map(gt, batch, facts.warmup))  # a batch past the warm-up
        judged = warm if not has_none(length) else list(map(and_, warm, _logged(length)))
        if True in judged:
            summed(self.accept_len, list(compress(length, judged)))
            first, last = judged.index(True), n - 1 - judged[::-1].index(True)
            self.accept_lines = (self.accept_lines[0] if self.accept_lines else lines[first], lines[last])
        summed(self.throughput, present(tputs))
        self._buckets(tputs, running, length, facts.steady)
        self.running_logged = self.running_logged or any(_logged(running))
        tokens = values["num_tokens"]
        if tokens.count(None) == n:  # (no line logs a token count: vLLM's)
            seq: Sequence[float | None] = [None] * n
        elif has_none(tokens) or has_none(running) or 0 in running:
            seq = [t / r if t is not None and r else None for t, r in zip(tokens, running, strict=True)]
        else:
            seq = list(map(truediv, tokens, running))
        speculative = spec_from if self.launch is None else 0 if self.launch.method else n
        return Steps(
            lines, warm, facts.steady, seq, length, rate, running, tokens, values["token_usage"], speculative, values
        )

    def _buckets(
        self,
        tputs: Sequence[float | None],
        running: Sequence[int | None],
        length: Sequence[float | None],
        steady: Sequence[bool],
    ) -> None:
        """Steady lines with a throughput and running requests, each added to its ``#running-req`` bucket in order
        (the buckets in the order first seen, as each line in turn adds to its own): in one compiled pass where the
        module is built and the values are floats and ints it reads (:func:`_compiled_buckets`)."""
        if self._compiled_buckets(tputs, running, length, steady):
            return
        keep = list(map(and_, map(and_, map(truth, steady), map(truth, running)), _logged(tputs)))
        if True not in keep:
            return
        at = list(compress(running, keep))
        found = {r: self._bucket(r) for r in dict.fromkeys(at)}  # type: ignore[arg-type]  # r is an int
        numbers: dict[int, int] = {}  # a bucket's number, by its id, in the order first seen (values share buckets)
        number = {r: numbers.setdefault(id(b), len(numbers)) for r, b in found.items()}
        bucket_of_number = {numbers[id(b)]: b for b in found.values()}
        kept_tputs, kept_lengths = list(compress(tputs, keep)), list(compress(length, keep))
        for k, mine in where_each(list(map(number.__getitem__, at))):
            bucket = bucket_of_number[k]
            bucket.lines += mine.count(1)
            bucket.throughput = added(compress(kept_tputs, mine), bucket.throughput)
            bucket.running += sum(compress(at, mine))  # type: ignore[arg-type]  # ints, where kept
            summed(bucket.accept_len, present(list(compress(kept_lengths, mine))))

    def _compiled_buckets(
        self,
        tputs: Sequence[float | None],
        running: Sequence[int | None],
        length: Sequence[float | None],
        steady: Sequence[bool],
    ) -> bool:
        """:meth:`_buckets` by the compiled module's ``kept_keys`` and ``keyed_sums``: the same sums, each added in
        line order from the bucket's; False (nothing added) where it is not built or cannot read a value."""
        module = native.load()
        if module is None:
            return False
        firsts = module.kept_keys(steady, running, tputs)
        numbers: dict[int, int] = {}  # a bucket's number, by its id, in the order first seen (values share buckets)
        number: dict[int, int] = {}
        kept: list[BucketStats] = []
        for r in firsts:
            bucket = self._bucket(r)
            if id(bucket) not in numbers:
                numbers[id(bucket)] = len(kept)
                kept.append(bucket)
            number[r] = numbers[id(bucket)]
        got = module.keyed_sums(
            steady, running, tputs, length, number, [(b.throughput, b.accept_len.total) for b in kept]
        )
        if got is None:
            return False
        for bucket, (lines, throughput, run, counted, total) in zip(kept, got, strict=True):
            bucket.lines += lines
            bucket.throughput = throughput
            bucket.running += run
            bucket.accept_len.count += counted
            bucket.accept_len.total = total
        return True

    def _bucket(self, running: int) -> BucketStats:
        """The ``buckets`` entry of a ``#running-req`` value, created on its first steady line."""
        bucket = self._by_running.get(running)
        if bucket is None:
            bucket = self._by_running[running] = self.buckets.setdefault(bucket_of(running), BucketStats())
        return bucket

    def record(self, r: Record) -> None:
        """Any other record: only its line counts."""
        self._seen(r.line)

    def _seen(self, line: int) -> None:
        self.first_line = self.first_line if self.first_line is not None else line
        self.last_line = line
