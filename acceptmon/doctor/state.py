"""What one run's records add up to, for every rule at once: config, warm-up, steady batches. Pure.

A :class:`RunState` is updated once per record before the run's detectors see it, so each
detector keeps only what its own signature needs. :class:`Step` is the per-line context:
past the warm-up (the first decode lines of a run are ignored by accept-length rules),
steady (``#queue-req`` 0 and no prefill line since the rank's previous decode line, the rule
``acceptmon compare`` uses), and the mean sequence length ``#token / #running-req``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acceptmon.compare import bucket_of
from acceptmon.records import LaunchConfig, PrefillStats, Record
from acceptmon.stats import Mean

WARMUP_LINES = 2
"""Decode lines ignored per run by the accept-length rules (doctor.md §4)."""

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


@dataclass(frozen=True, slots=True)
class Step:
    """Context of one decode line within its run."""

    warm: bool
    steady: bool
    seq_len: float | None


@dataclass
class RunState:
    """One launch in one file, as far as it has been read."""

    file: str
    run: int
    launch: LaunchConfig | None = None
    launch_line: int | None = None
    decode_lines: int = 0
    spec_lines: int = 0
    first_line: int | None = None
    last_line: int | None = None
    accept_len: Mean = field(default_factory=Mean)
    """Accept length of decode lines past the warm-up."""
    accept_lines: tuple[int, int] | None = None
    """First and last line that went into ``accept_len``."""
    throughput: Mean = field(default_factory=Mean)
    buckets: dict[tuple[int, int], BucketStats] = field(default_factory=dict)
    """Steady decode lines by ``#running-req`` bucket (``compare.bucket_of``)."""
    warnings: int = 0
    _after_prefill: dict[str, bool] = field(default_factory=dict)

    @property
    def algorithm(self) -> str | None:
        """The speculative algorithm, upper case; None when the run does not speculate or has no launch."""
        c = self.launch
        if c is None:
            return None
        algo = c.method  # a vLLM <= 0.7 draft model whose method the log does not name: "draft model"
        return algo.upper().replace(" ", "_") if algo else None

    @property
    def speculative(self) -> bool:
        """Speculation is on: by the launch line, or (no launch line) by accept lengths in decode lines."""
        if self.launch is not None and self.algorithm is not None:
            return True
        return self.launch is None and self.spec_lines > 0

    @property
    def steps(self) -> int | None:
        return self.launch.spec_num_steps if self.launch else None

    @property
    def draft_tokens(self) -> int | None:
        """N: tokens verified per request per step."""
        return self.launch.draft_tokens if self.launch else None

    def config_key(self) -> tuple[Any, ...] | None:
        """Model and speculative settings: runs with equal keys differ only in what logs do not show."""
        c = self.launch
        if c is None:
            return None
        return (c.model_path, c.spec_algorithm, c.spec_draft_model_path, c.spec_num_steps, c.spec_eagle_topk,
                c.spec_num_draft_tokens)  # fmt: skip

    def prefill(self, r: PrefillStats) -> None:
        self._after_prefill[r.rank or ""] = True
        self._seen(r.line)

    def stats(self, r: Record, warmup: int = WARMUP_LINES) -> Step:
        """Fold in one stats line (a decode line, or any kind with decode-like fields); return its context."""
        rank = r.rank or ""
        v = r.__dict__.get
        queue, running, tput, length = v("queue_req"), v("running_req"), v("gen_throughput"), v("accept_len")
        steady = queue == 0 and not self._after_prefill.get(rank, True)
        self._after_prefill[rank] = False
        warm = self.decode_lines >= warmup
        self.decode_lines += 1
        self._seen(r.line)
        if length is not None or v("accept_rate") is not None:
            self.spec_lines += 1
        if length is not None and warm:
            self.accept_len.add(length)
            self.accept_lines = (self.accept_lines[0] if self.accept_lines else r.line, r.line)
        self.throughput.add(tput)
        if steady and running and tput is not None:
            bucket = self.buckets.setdefault(bucket_of(running), BucketStats())
            bucket.lines += 1
            bucket.throughput += tput
            bucket.running += running
            bucket.accept_len.add(length)
        tokens = v("num_tokens")
        seq = tokens / running if tokens is not None and running else None
        return Step(warm=warm, steady=steady, seq_len=seq)

    def record(self, r: Record) -> None:
        """Any other record: only its line counts."""
        self._seen(r.line)

    def _seen(self, line: int) -> None:
        self.first_line = self.first_line if self.first_line is not None else line
        self.last_line = line
