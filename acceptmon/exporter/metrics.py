"""Prometheus metrics built from a :class:`~acceptmon.live.state.LiveStats` snapshot at scrape time.

Which families there are comes from the record kinds (:mod:`acceptmon.parse.kinds`): each
kind with live series declares its gauges, counter, histogram and baseline; the
line counters have a ``kind`` label for every registered kind. Every acceptance kind's series
also has the verify-step and generated-token counters of :mod:`acceptmon.measure.verify`.

Every series of a source carries ``file``, ``namespace``, ``pod`` and ``container`` (empty when
unknown: from the stream prefix or the Kubernetes log file's path), then its unit (``rank``,
``engine``); per-file series carry the labels the file's path names.

:class:`AcceptmonCollector` is a custom collector: nothing is kept in
prometheus_client's global state, the registry is passed in, and every scrape
reads one consistent snapshot. Gauges of a series that has seen no line for
``stale_after`` seconds are left out (the value would otherwise repeat forever);
counters and histograms stay, as Prometheus expects of counters.

:class:`MetricsPage` renders the exposition text and reuses it while neither the
live state nor the staleness cut-off has changed, so many concurrent scrapers
cost one render per change.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, tzinfo

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from acceptmon.live.state import LiveStats, RankSeries, Snapshot
from acceptmon.parse.kinds import KINDS, Gauge, RecordKind, SeriesMetrics, line_kinds

DEFAULT_STALE_AFTER = 300.0
MAX_LABEL = 200
"""Longest label value kept (file names, ranks and model paths come from the logs and the command line)."""

ORIGIN_LABELS = ("namespace", "pod", "container")
"""Where a source's lines come from (Kubernetes names; empty when unknown), on every series beside ``file``."""
SERIES_LABELS = ("file", *ORIGIN_LABELS, "rank")
RUN_INFO_LABELS = (
    "file",
    *ORIGIN_LABELS,
    "run",
    "model",
    "spec_algorithm",
    "spec_num_steps",
    "spec_eagle_topk",
    "spec_num_draft_tokens",
)


VERIFY_STEPS = (
    "acceptmon_verify_steps",
    "Verify steps (per request) of the windows the stats lines covered: for SGLang estimated from the decode "
    "line (decode_log_interval x #running-req), for vLLM exact (drafts). "
    "sum(rate(acceptmon_generated_tokens_total)) / sum(rate(this)) is accept length.",
)
GENERATED_TOKENS = (
    "acceptmon_generated_tokens",
    "Tokens generated in those windows, bonus tokens included: for SGLang estimated from the decode line "
    "(accept len x verify steps), for vLLM exact (accepted + drafts).",
)


def _epoch(ts: datetime | None, zone: tzinfo | None = None) -> float | None:
    """Log time as Unix seconds: a time without a zone is in ``zone`` (None: this machine's local zone)."""
    if ts is None:
        return None
    if ts.tzinfo is None and zone is not None:
        ts = ts.replace(tzinfo=zone)
    return ts.timestamp()


def _labels(s: RankSeries) -> tuple[str, ...]:
    """A series' file, namespace, pod, container and unit label values."""
    return (label(s.file), *(label(v) for v in s.origin), label(s.rank))


class AcceptmonCollector(Collector):
    """Builds every acceptmon metric from the live snapshot."""

    def __init__(
        self, live: LiveStats, *, stale_after: float = DEFAULT_STALE_AFTER, zone: tzinfo | None = None
    ) -> None:
        """``zone``: the servers' time zone, for log times without one (None: this machine's local zone)."""
        self.live = live
        self.stale_after = stale_after
        self.zone = zone

    def collect(self) -> Iterator[Metric]:
        yield from self.families(self.live.snapshot())

    def families(self, snap: Snapshot) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}  # kinds sharing a family (decode and spec lines: accept length) add samples
        for kind in KINDS.values():
            if kind.series is not None:
                for family in self._series_families(kind, [s for s in snap.series if s.kind == kind.name], snap.taken):
                    _merge(merged, family)
        yield from merged.values()
        yield from self._file_families(snap)

    def _series_families(self, kind: RecordKind, series: list[RankSeries], taken: float) -> Iterator[Metric]:
        m = kind.series
        assert m is not None
        fresh = [s for s in series if taken - s.seen <= self.stale_after]
        for gauge in m.gauges:
            yield _gauge(gauge, fresh, _field(gauge.field))
        if m.baseline is not None:
            yield _gauge(m.baseline, fresh, lambda s: s.baseline)
        if m.last_timestamp is not None:
            yield _gauge(m.last_timestamp, fresh, lambda s: _epoch(s.last.timestamp, self.zone))
        if m.counter is not None:
            c = CounterMetricFamily(m.counter.name, m.counter.help, labels=SERIES_LABELS)
            for s in series:
                c.add_metric(_labels(s), s.batches)
            yield c
        if kind.acceptance:
            yield from _verify_families(series)
        if m.histogram is not None:
            h = HistogramMetricFamily(m.histogram.name, m.histogram.help, labels=SERIES_LABELS)
            for s in series:
                cumulative, buckets = 0, []
                for bound, n in zip((*m.histogram.buckets, math.inf), s.buckets, strict=True):
                    cumulative += n
                    buckets.append(("+Inf" if bound == math.inf else _le(bound), float(cumulative)))
                h.add_metric(_labels(s), buckets, s.hist_sum)
            yield h
        yield from _token_families(m, series, fresh)

    def _file_families(self, snap: Snapshot) -> Iterator[Metric]:
        per_file = ("file", *ORIGIN_LABELS)
        lines = CounterMetricFamily("acceptmon_lines", "Log lines read, by kind.", labels=(*per_file, "kind"))
        launches = CounterMetricFamily("acceptmon_server_launches", "Server launch lines read.", labels=per_file)
        info = GaugeMetricFamily(
            "acceptmon_run_info",
            "1 for each source's current run's launch config; run is numbered per file in launch order, "
            "as acceptmon runs does.",
            labels=RUN_INFO_LABELS,
        )
        present = GaugeMetricFamily(
            "acceptmon_log_file_present", "1 when the followed path exists, 0 while waiting.", labels=per_file
        )
        where: dict[str, tuple[str, ...]] = {}
        for f in snap.files:
            file = label(f.file)
            at = where[f.file] = (file, *(label(v) for v in f.origin or ("", "", "")))
            for kind in line_kinds():
                lines.add_metric((*at, label(kind)), f.lines.get(kind, 0))
            launches.add_metric(at, f.launches)
            present.add_metric(at, 0.0 if f.waiting else 1.0)
            for src in f.sources.values():
                cfg = src.launch
                if cfg is None:
                    continue
                info.add_metric(
                    (
                        file,
                        *(label(v) for v in src.origin),
                        str(src.run),
                        label(cfg.model_path),
                        label(cfg.spec_algorithm),
                        label(_num(cfg.spec_num_steps)),
                        label(_num(cfg.spec_eagle_topk)),
                        label(_num(cfg.spec_num_draft_tokens)),
                    ),
                    1.0,
                )
        yield lines
        yield launches
        yield info
        yield present
        yield CounterMetricFamily(
            "acceptmon_series_overflow",
            "Decode lines not tracked because the (file, source, rank) series cap was reached.",
            value=snap.overflow,
        )
        if snap.findings or self.live.doctor is not None:
            doctor = GaugeMetricFamily(
                "acceptmon_doctor_finding",
                "1 while an acceptmon doctor finding holds for the file's current run.",
                labels=(*per_file, "rule", "severity"),
            )
            for file, rule, severity in sorted(snap.findings):
                at = where.get(file) or (label(file), "", "", "")
                doctor.add_metric((*at, rule, severity), 1.0)
            yield doctor


def _merge(families: dict[str, Metric], family: Metric) -> None:
    """Add a family, or its samples to the family of that name (a (name, labels) sample once)."""
    have = families.get(family.name)
    if have is None:
        families[family.name] = family
        return
    seen = {(x.name, tuple(sorted(x.labels.items()))) for x in have.samples}
    have.samples.extend(x for x in family.samples if (x.name, tuple(sorted(x.labels.items()))) not in seen)


def _verify_families(series: list[RankSeries]) -> Iterator[Metric]:
    """Verify steps and generated tokens (:mod:`acceptmon.measure.verify`) of the series that covered a window."""
    steps = CounterMetricFamily(*VERIFY_STEPS, labels=SERIES_LABELS)
    tokens = CounterMetricFamily(*GENERATED_TOKENS, labels=SERIES_LABELS)
    for s in series:
        if s.windows:
            steps.add_metric(_labels(s), s.steps)
            tokens.add_metric(_labels(s), s.tokens)
    yield steps
    yield tokens


def _token_families(m: SeriesMetrics, series: list[RankSeries], fresh: list[RankSeries]) -> Iterator[Metric]:
    """Token counters (labels file, namespace, pod, container, engine) and per-position acceptance gauges
    (vLLM spec lines)."""
    engine_labels = (*SERIES_LABELS[:-1], "engine")
    for total in m.totals:
        c = CounterMetricFamily(total.name, total.help, labels=engine_labels)
        for s in series:
            if total.field in s.totals:
                c.add_metric(_labels(s), s.totals[total.field])
        yield c
    if m.positions is not None:
        g = GaugeMetricFamily(m.positions.name, m.positions.help, labels=(*engine_labels, "position"))
        for s in fresh:
            for i, rate in enumerate(getattr(s.last, m.positions.field, None) or ()):
                if rate is not None:
                    g.add_metric((*_labels(s), str(i + 1)), float(rate))
        yield g


def _gauge(gauge: Gauge, series: list[RankSeries], value: Callable[[RankSeries], float | None]) -> Metric:
    g = GaugeMetricFamily(gauge.name, gauge.help, labels=SERIES_LABELS)
    for s in series:
        v = value(s)
        if v is not None:
            g.add_metric(_labels(s), float(v))
    return g


def _field(name: str) -> Callable[[RankSeries], float | None]:
    def value(s: RankSeries) -> float | None:
        v = getattr(s.last, name)
        return None if v is None else float(v)

    return value


@functools.lru_cache(maxsize=4096)
def label(text: str | None) -> str:
    """Every label value goes through here: empty for None, valid UTF-8, cut to :data:`MAX_LABEL` characters.

    File names may hold bytes that are not UTF-8 (Python keeps them as lone surrogates,
    which cannot be encoded): they become U+FFFD, so a scrape never fails on them.
    """
    if text is None:
        return ""
    text = text[: MAX_LABEL * 4]  # enough: at most 4 escaped bytes make one character
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")[:MAX_LABEL]


def _le(bound: float) -> str:
    return repr(float(bound))


def _num(value: int | None) -> str:
    return "" if value is None else str(value)


class MetricsPage:
    """The /metrics body, re-rendered only when the live state or the stale cut-off changed."""

    def __init__(
        self,
        live: LiveStats,
        *,
        stale_after: float = DEFAULT_STALE_AFTER,
        registry: CollectorRegistry | None = None,
        zone: tzinfo | None = None,
    ) -> None:
        """``registry``: where the collector is registered (a fresh one by default, never the global one);
        ``zone``: the servers' time zone for log times without one (None: this machine's local zone)."""
        self.live = live
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.collector = AcceptmonCollector(live, stale_after=stale_after, zone=zone)
        self.registry.register(self.collector)
        self._lock = threading.Lock()
        self._key: tuple[int, int] | None = None
        self._body = b""

    def render(self) -> bytes:
        # Staleness changes with time alone: key the cache on the second as well.
        key = (self.live.version, int(self.live.clock()))
        with self._lock:
            if key != self._key:
                self._body = generate_latest(self.registry)
                self._key = key
            return self._body
