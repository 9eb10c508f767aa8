"""Prometheus metrics built from a :class:`~acceptmon.live.LiveStats` snapshot at scrape time.

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

import math
import threading
from collections.abc import Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from acceptmon.live import ACCEPT_BUCKETS, LiveStats, Snapshot
from acceptmon.records import LINE_KINDS

DEFAULT_STALE_AFTER = 300.0
MAX_LABEL = 200
"""Longest label value kept (model paths are the only free text)."""

_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("acceptmon_accept_length", "accept_len", "Accept length of the last decode batch (tokens per verify step)."),
    ("acceptmon_accept_rate", "accept_rate", "Accept rate of the last decode batch, as logged (version-dependent)."),
    (
        "acceptmon_draft_accept_rate",
        "draft_accept_rate",
        "(accept_len - 1) / (num_draft_tokens - 1) of the last decode batch.",
    ),
    ("acceptmon_gen_throughput_tokens_per_second", "gen_throughput", "Generation throughput of the last batch."),
    ("acceptmon_running_requests", "running_req", "Running requests at the last decode batch."),
    ("acceptmon_queued_requests", "queue_req", "Queued requests at the last decode batch."),
    ("acceptmon_token_usage_ratio", "token_usage", "KV-cache token usage (0-1) at the last decode batch."),
)
RUN_INFO_LABELS = ("file", "model", "spec_algorithm", "spec_num_steps", "spec_eagle_topk", "spec_num_draft_tokens")


def _epoch(ts: datetime | None) -> float | None:
    """Log time (naive, the server's local time) as Unix seconds."""
    return None if ts is None else ts.timestamp()


class AcceptmonCollector(Collector):
    """Builds every acceptmon metric from the live snapshot."""

    def __init__(self, live: LiveStats, *, stale_after: float = DEFAULT_STALE_AFTER) -> None:
        self.live = live
        self.stale_after = stale_after

    def collect(self) -> Iterator[Metric]:
        yield from self.families(self.live.snapshot())

    def families(self, snap: Snapshot) -> Iterator[Metric]:
        fresh = [s for s in snap.series if snap.taken - s.seen <= self.stale_after]
        for name, attr, doc in _GAUGES:
            g = GaugeMetricFamily(name, doc, labels=("file", "rank"))
            for s in fresh:
                value = getattr(s.last, attr)
                if value is not None:
                    g.add_metric((s.file, s.rank), float(value))
            yield g
        g = GaugeMetricFamily(
            "acceptmon_run_baseline_accept_length",
            "Mean accept length over the current run's first 10 minutes (log time): the collapse reference.",
            labels=("file", "rank"),
        )
        for s in fresh:
            if s.baseline is not None:
                g.add_metric((s.file, s.rank), s.baseline)
        yield g
        g = GaugeMetricFamily(
            "acceptmon_last_decode_timestamp_seconds",
            "Log time of the last decode line (Unix seconds, from the server's local time).",
            labels=("file", "rank"),
        )
        for s in fresh:
            ts = _epoch(s.last.timestamp)
            if ts is not None:
                g.add_metric((s.file, s.rank), ts)
        yield g

        c = CounterMetricFamily("acceptmon_decode_batches", "Decode-batch lines read.", labels=("file", "rank"))
        h = HistogramMetricFamily(
            "acceptmon_batch_accept_length",
            "Accept length per decode batch; rate(_sum)/rate(_count) is the window mean.",
            labels=("file", "rank"),
        )
        for s in snap.series:
            c.add_metric((s.file, s.rank), s.batches)
            cumulative, buckets = 0, []
            for bound, n in zip((*ACCEPT_BUCKETS, math.inf), s.buckets, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == math.inf else _le(bound), float(cumulative)))
            h.add_metric((s.file, s.rank), buckets, s.accept_sum)
        yield c
        yield h

        lines = CounterMetricFamily("acceptmon_lines", "Log lines read, by kind.", labels=("file", "kind"))
        launches = CounterMetricFamily("acceptmon_server_launches", "Server launch lines read.", labels=("file",))
        info = GaugeMetricFamily("acceptmon_run_info", "1 for the current run's launch config.", labels=RUN_INFO_LABELS)
        present = GaugeMetricFamily(
            "acceptmon_log_file_present", "1 when the followed path exists, 0 while waiting.", labels=("file",)
        )
        for f in snap.files:
            for kind in LINE_KINDS:
                lines.add_metric((f.file, kind), f.lines.get(kind, 0))
            launches.add_metric((f.file,), f.launches)
            present.add_metric((f.file,), 0.0 if f.waiting else 1.0)
            cfg = f.launch
            if cfg is not None:
                info.add_metric(
                    (
                        f.file,
                        label(cfg.model_path),
                        label(cfg.spec_algorithm),
                        _num(cfg.spec_num_steps),
                        _num(cfg.spec_eagle_topk),
                        _num(cfg.spec_num_draft_tokens),
                    ),
                    1.0,
                )
        yield lines
        yield launches
        yield info
        yield present
        yield CounterMetricFamily(
            "acceptmon_series_overflow",
            "Decode lines not tracked because the (file, rank) series cap was reached.",
            value=snap.overflow,
        )


def label(text: str | None) -> str:
    """A label value: empty for None, cut to :data:`MAX_LABEL` characters."""
    return "" if text is None else text[:MAX_LABEL]


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
    ) -> None:
        """``registry``: where the collector is registered (a fresh one by default, never the global one)."""
        self.live = live
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.collector = AcceptmonCollector(live, stale_after=stale_after)
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
