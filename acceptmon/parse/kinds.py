"""The record kinds: the one place where a kind of log line says what it becomes and where it goes.

A :class:`RecordKind` names its record model, whether its records are rows of
``acceptmon parse`` (the columns are the model's fields, in declaration order), what
the parser does with it (a launch starts a run; a stats line takes derived values from
the current launch), how the live state folds it in (the latest record per file and
rank), and the Prometheus families the exporter builds from that live state. Sinks,
the live state and the dashboard ask this registry; none of them tests a record's
class. A new kind is a model plus one :func:`register` call, and a grammar file whose
``record`` names it. Pure: no I/O, no UI or exporter library.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from acceptmon.parse.derive import decode_from_launch, request_from_launch, spec_values
from acceptmon.parse.records import (
    OTHER_LINE_KINDS,
    BaseRecord,
    DecodeStats,
    LaunchConfig,
    PositionStats,
    PrefillStats,
    RequestStats,
    ServerLaunch,
    SpecStats,
    ThroughputStats,
    WarningRecord,
)
from acceptmon.parse.streams import STREAM_FIELDS

Derive = Callable[[dict[str, Any], LaunchConfig | None], None]
"""Fills derived values into a record's values, given the file's current launch (or None)."""


@dataclass(frozen=True)
class Gauge:
    """A per-series gauge: the value of ``field`` in the series' latest record."""

    name: str
    field: str
    help: str


@dataclass(frozen=True)
class Histogram:
    """A per-series histogram of one field, with its upper bucket bounds (+Inf follows)."""

    name: str
    field: str
    help: str
    buckets: tuple[float, ...]


@dataclass(frozen=True)
class SeriesMetrics:
    """What the exporter builds from each live series of a kind."""

    gauges: tuple[Gauge, ...] = ()
    baseline: Gauge | None = None
    """Mean of ``field`` over the current run's first ten minutes (log time)."""
    last_timestamp: Gauge | None = None
    """Log time of the series' latest record (``field`` is ignored)."""
    counter: Gauge | None = None
    """Records read for the series (``field`` is ignored)."""
    histogram: Histogram | None = None
    totals: tuple[Gauge, ...] = ()
    """Counters (labels file, engine) summing ``field``; a record whose ``cumulative`` is true
    counts since server start, so its increase over the previous record is added."""
    positions: Gauge | None = None
    """A gauge per list element of ``field`` (labels file, engine, position; position 1 first)."""
    sticky: bool = False
    """Gauges show each field's latest non-empty value (a kind whose lines carry different fields)."""


@dataclass(frozen=True, eq=False)
class RecordKind:
    """One kind of record and every role's view of it. Each is its own identity (hashed by it, cheaply)."""

    name: str
    model: type[BaseRecord]
    table: bool = False
    """Its records are the rows of ``acceptmon parse``."""
    starts_run: bool = False
    """A server launch: the parser numbers runs by these and every later record carries the run."""
    derive: Derive | None = None
    series: SeriesMetrics | None = None
    """Set for kinds whose latest record per (file, rank) the live state keeps."""
    before_launch: bool = False
    """May be printed just before the launch line of the run it concerns (start-up warnings): a live
    start at the current run's launch line also reads these from the bytes before it."""
    acceptance: bool = False
    """Role: each record is one batch's (or one logging interval's) acceptance: ``accept_len`` and
    ``draft_accept_rate``. Batches are counted, averaged and compared by these (decode, spec)."""
    load: bool = False
    """Role: each record is one unit's load: ``gen_throughput`` (logged tok/s of that rank or engine),
    ``running_req``, ``queue_req``. A run's throughput is read from these (decode, throughput)."""
    prefill: bool = False
    """Role: a prefill batch; a unit's next batch after one is not steady."""
    ends_launch_group: bool = False
    """Role: a stats (or finished-request) line; a launch line after it starts a new run even where launch
    lines merge."""
    request: bool = False
    """Role: one finished request's acceptance (never a batch)."""
    positions: bool = False
    """Role: one finished request's per-position rates alone (``position_accept_rates``), on a line after the
    request's own: weighed by that request's verify steps (``verify_ct``, from the normalize step)."""
    warning: bool = False
    """Role: a launch or serving warning the doctor reads (``code``, ``value``, ``limit``, ``detail``)."""
    unit_field: str = "rank"
    """The field naming the unit a record belongs to (a rank, or a vLLM engine). Where it is ``engine``,
    a record without one belongs to the unit its file (and stream source) named last: a vLLM spec line
    follows its engine's throughput line."""

    @property
    def columns(self) -> tuple[str, ...]:
        """Table columns: the model's fields in declaration order, less the free-form ``extra``."""
        return tuple(name for name in self.model.model_fields if name != "extra")


KINDS: dict[str, RecordKind] = {}
"""Every registered kind, by name, in registration order."""


def register(kind: RecordKind) -> RecordKind:
    """Add a kind (a test may add a toy one); its name is the model's ``kind`` literal."""
    default = kind.model.model_fields["kind"].default
    if default != kind.name:
        raise ValueError(f"record kind {kind.name!r}: its model's kind field defaults to {default!r}")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind added by :func:`register` (tests)."""
    KINDS.pop(name, None)


def line_kinds() -> tuple[str, ...]:
    """Every way a line is counted: the registered kinds, then unrecognized, oversized, other."""
    return (*KINDS, *OTHER_LINE_KINDS)


def kind_of(record: BaseRecord) -> RecordKind:
    """The registered kind of a record."""
    return KINDS[record.kind]


def table_kinds() -> list[RecordKind]:
    return [k for k in KINDS.values() if k.table]


def table_columns(kinds: Sequence[RecordKind] | None = None) -> tuple[str, ...]:
    """The columns of a table of ``kinds`` (default: every table kind), in registration and declaration order,
    each once; the stream fields last (``parse``'s output and the fast lane's rows: column order is interface)."""
    kinds = kinds or table_kinds()
    own = dict.fromkeys(c for k in kinds for c in k.columns if c not in STREAM_FIELDS)
    return (*own, *(c for c in STREAM_FIELDS if any(c in k.columns for k in kinds)))


def with_role(role: str) -> frozenset[str]:
    """Names of the kinds that declare a role (``acceptance``, ``load``, ``prefill``, ...)."""
    return frozenset(k.name for k in KINDS.values() if getattr(k, role))


ACCEPT_BUCKETS: tuple[float, ...] = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0)
"""Upper bounds of the accept-length histogram (tokens per verify step); +Inf follows."""

_DECODE_GAUGES = (
    Gauge("acceptmon_accept_length", "accept_len", "Accept length of the last decode batch (tokens per verify step)."),
    Gauge(
        "acceptmon_accept_rate", "accept_rate", "Accept rate of the last decode batch, as logged (version-dependent)."
    ),
    Gauge(
        "acceptmon_draft_accept_rate",
        "draft_accept_rate",
        "(accept_len - 1) / (num_draft_tokens - 1) of the last decode batch.",
    ),
    Gauge("acceptmon_gen_throughput_tokens_per_second", "gen_throughput", "Generation throughput of the last batch."),
    Gauge("acceptmon_running_requests", "running_req", "Running requests at the last decode batch."),
    Gauge("acceptmon_queued_requests", "queue_req", "Queued requests at the last decode batch."),
    Gauge("acceptmon_token_usage_ratio", "token_usage", "KV-cache token usage (0-1) at the last decode batch."),
)

DECODE = register(
    RecordKind(
        "decode",
        DecodeStats,
        table=True,
        acceptance=True,
        load=True,
        ends_launch_group=True,
        derive=decode_from_launch,
        series=SeriesMetrics(
            gauges=_DECODE_GAUGES,
            baseline=Gauge(
                "acceptmon_run_baseline_accept_length",
                "accept_len",
                "Mean accept length over the current run's first 10 minutes (log time): the collapse reference.",
            ),
            last_timestamp=Gauge(
                "acceptmon_last_decode_timestamp_seconds",
                "timestamp",
                "Log time of the last decode line (Unix seconds, from the server's local time).",
            ),
            counter=Gauge("acceptmon_decode_batches", "", "Decode-batch lines read."),
            histogram=Histogram(
                "acceptmon_batch_accept_length",
                "accept_len",
                "Accept length per decode batch; rate(_sum)/rate(_count) is the window mean.",
                ACCEPT_BUCKETS,
            ),
        ),
    )
)
PREFILL = register(RecordKind("prefill", PrefillStats, prefill=True))
LAUNCH = register(RecordKind("launch", ServerLaunch, starts_run=True))


SPEC = register(
    RecordKind(
        "spec",
        SpecStats,
        table=True,
        acceptance=True,
        ends_launch_group=True,
        unit_field="engine",
        derive=spec_values,
        series=SeriesMetrics(
            gauges=_DECODE_GAUGES[:3],
            baseline=DECODE.series.baseline if DECODE.series else None,
            last_timestamp=DECODE.series.last_timestamp if DECODE.series else None,
            counter=DECODE.series.counter if DECODE.series else None,
            histogram=DECODE.series.histogram if DECODE.series else None,
            totals=(
                Gauge("acceptmon_accepted_tokens", "accepted_tokens", "Draft tokens the target model accepted."),
                Gauge("acceptmon_drafted_tokens", "drafted_tokens", "Draft tokens proposed."),
            ),
            positions=Gauge(
                "acceptmon_position_accept_rate",
                "position_accept_rates",
                "Fraction of drafts whose first `position` tokens were accepted (last spec line).",
            ),
        ),
    )
)
THROUGHPUT = register(
    RecordKind(
        "throughput",
        ThroughputStats,
        table=True,
        load=True,
        ends_launch_group=True,
        unit_field="engine",
        series=SeriesMetrics(
            gauges=(
                *_DECODE_GAUGES[3:],
                Gauge("acceptmon_prompt_throughput_tokens_per_second", "prompt_throughput", "Prompt throughput."),
                Gauge("acceptmon_prefix_cache_hit_ratio", "prefix_cache_hit_rate", "Prefix-cache hit rate (0-1)."),
            ),
            sticky=True,
        ),
    )
)


REQUEST = register(
    RecordKind(
        "request",
        RequestStats,
        request=True,
        ends_launch_group=True,
        derive=request_from_launch,
        series=SeriesMetrics(
            counter=Gauge("acceptmon_requests", "", "Finished-request lines with speculative fields read."),
            histogram=Histogram(
                "acceptmon_request_accept_length",
                "accept_len",
                "Accept length per finished request (completion tokens / verify steps, bonus included).",
                ACCEPT_BUCKETS,
            ),
        ),
    )
)
"""Finished requests (``--log-requests``): not a ``parse`` table kind, so decode rows and columns stay as they are."""


POSITIONS = register(RecordKind("positions", PositionStats, positions=True))
"""Per-position rates of the request line before (llama.cpp's ``acc per pos``): read by runs and the doctor's depth."""


WARNING = register(RecordKind("warning", WarningRecord, before_launch=True, warning=True))
