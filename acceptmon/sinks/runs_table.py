"""The runs sink: one summary per server launch, aggregated (in workers too) and shown as a table.

:class:`StatsJob` is the batch pipeline's job for ``acceptmon runs`` (and the demo's
closing table); :func:`render_runs_table` is the aligned text those commands print.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, cast

from acceptmon.display import duration, number, short_model
from acceptmon.measure.aggregate import RunSummary, Stats
from acceptmon.measure.columns import Packed
from acceptmon.measure.normalize import plain_kinds
from acceptmon.measure.parts import Free, judged, made, order_free
from acceptmon.measure.speedup import UNMATCHED
from acceptmon.measure.summary import config_text
from acceptmon.measure.verdicts import SweepRun
from acceptmon.parse.kinds import with_role
from acceptmon.parse.records import Record
from acceptmon.parse.unmade import Unmade
from acceptmon.pipeline.workers import handed_on, in_worker, taken


class StatsJob:
    """Records of the kinds runs are made of, normalized and aggregated in file order: a part is aggregated where it
    was parsed (in workers too) from where :func:`~acceptmon.measure.parts.order_free` says (every SGLang part from
    its start, a vLLM part after its lines that need one before it) and merged; what comes before, and any other part
    (per-position rates), is handed on as records, as is a whole part that assumes no engine was named before it (fed
    in order if one was)."""

    from_lane = True
    """Reads no record's ``extra``: the fast lane's records do (:class:`acceptmon.pipeline.batch.Job`)."""
    queued = 4
    """Ranges each worker has queued (:data:`acceptmon.pipeline.workers.QUEUED`): merging a range's aggregates takes
    the main process a while. 256 MiB, ``-j 2``, alternating: vLLM v0 2.18–2.70 → 2.06–2.27 s (6 pairs of 6), vLLM
    0.10 DP 1.66–1.79 → 1.55–1.61 s, SGLang 0.5.23 the same (1.63 against 1.67); summed peak RSS 122–124 → 126–131
    MiB. ``parse`` gains nothing (1.14 against 1.10 s) and keeps 2."""

    @property
    def takes_unmade(self) -> frozenset[str]:
        """Takes the lane's rows of these kinds as records not made yet (:class:`~acceptmon.parse.unmade.Unmade`):
        plain decode lines are folded as columns (:meth:`Stats.update`)."""
        return plain_kinds()

    def __init__(self) -> None:
        self.records_wanted = (
            with_role("acceptance") | with_role("load") | with_role("request") | with_role("positions")
        )
        self.stats = Stats()
        self.records = 0

    def chunk(self, records: Sequence[Record | Unmade]) -> Chunk:
        """The records to feed in file order (those before where the part is order-free, all of them if it is not,
        or if it assumes), and the aggregate of the rest. A worker hands on a part that assumes without the rest of
        its records (``partial``: they are many, and rarely needed): :meth:`ready` has the range read again here
        if they are."""
        items = judged(records)  # as :func:`~acceptmon.measure.parts.order_free` judges them
        wanted = sum(len(r) if type(r) is Unmade else r.kind in self.records_wanted for r in items)
        free = order_free(items)
        partial = free is not None and bool(free.assumed) and in_worker()
        if free is None:
            return Chunk(wanted, _handed_on(items), None)
        if free.assumed and not partial:  # all of them handed on too, for a line before them that names an engine
            return Chunk(wanted, _handed_on(items), Stats.part(items, free.start), free, partial)
        head = made(items[: free.start])
        items[: free.start] = head
        free = free._replace(start=len(head))
        return Chunk(wanted, handed_on(head), Stats.part(items, free.start), free, partial)

    def ready(self, parts: Sequence[Chunk]) -> bool:
        """Whether a range's parts can be taken as they are: not if a part that assumes no engine was named before
        it came without the rest of its records (:meth:`chunk`) and a line before it names one (or may: a part that
        is not order-free says nothing of what it names)."""
        named: set[tuple[str, str]] | None = set()  # None: what the parts so far name is not known
        for part in parts:
            free = part.free
            if free is None:
                named = None
                continue
            if part.partial and (
                named is None or named & free.assumed or self.stats.normalizer.named_any(free.assumed)
            ):
                return False
            if named is not None:
                named |= free.named
        return True

    def collect(self, part: Chunk) -> None:
        self.records += part.wanted
        free, records = part.free, part.records
        if free is not None and self.stats.normalizer.named_any(free.assumed):
            free = None  # a line before the part named an engine its lines take: read in order
        if free is None:
            self.stats.update(taken(records))
            return
        if free.start:
            self.stats.update(taken(records[: free.start]))
        if part.rest is not None:
            self.stats.merge(part.rest)


def _handed_on(items: list[Record | Unmade]) -> Sequence[Record | Unmade] | Packed:
    """Records to feed in file order, some not made yet: as they are in this process (:meth:`Stats.update` folds them),
    made and packed in a worker (:func:`~acceptmon.pipeline.workers.handed_on`)."""
    return handed_on(made(items)) if in_worker() else items


class Chunk(NamedTuple):
    """What :meth:`StatsJob.chunk` hands on: records to feed in order, the aggregate of the rest and where it
    starts."""

    wanted: int
    records: Sequence[Record | Unmade] | Packed
    rest: Stats | None
    free: Free | None = None
    partial: bool = False
    """The part assumes (:attr:`Free.assumed`) but its records after :attr:`Free.start` are not here."""


def render_runs_table(summaries: Sequence[RunSummary]) -> str:
    """Aligned text table of run summaries, one row per launch: one word per header and per cell."""
    head = (
        "file",
        "run",
        "start",
        "model",
        "spec",
        "steps",
        "topk",
        "draft",
        "batches",
        "accept_len",
        "p10",
        "p50",
        "p90",
        "rate",
        "draft_rate",
        "tok/s/rank",
        "tok/s_total",
        "duration",
        "req_len_p10/p50/p90",
    )
    rows: list[tuple[str, ...]] = [head]
    for s in summaries:
        rows.append(
            (
                Path(s.file).name,
                str(s.run),
                s.start.isoformat(timespec="seconds") if s.start else "-",  # one word: awk and column -t read it
                short_model(s.model),
                _spec(s),
                number(s.spec_num_steps),
                number(s.spec_eagle_topk),
                number(s.spec_num_draft_tokens),
                str(s.batches),
                number(s.accept_len_mean),
                number(s.accept_len_p10),
                number(s.accept_len_p50),
                number(s.accept_len_p90),
                number(s.accept_rate_mean),
                number(s.draft_accept_rate_mean),
                number(s.gen_throughput_per_rank, 1),
                number(s.gen_throughput_total, 1),
                duration(s.duration_s),
                _request_lengths(s),
            )
        )
    if summaries and all(isinstance(s, SweepRun) for s in summaries):
        rows = [
            (*row, *cells) for row, cells in zip(rows, _sweep_cells(cast("Sequence[SweepRun]", summaries)), strict=True)
        ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


SWEEP_HEAD = ("speedup", "speedup_95%", "verdict", "best")


def _sweep_cells(runs: Sequence[SweepRun]) -> list[tuple[str, ...]]:
    """``runs --baseline``'s columns, one word a cell: S, its interval, the verdict, and ``best`` / ``tied``
    (throughput interval overlapping the best's); ``-`` where there is none."""
    out: list[tuple[str, ...]] = [SWEEP_HEAD]
    for r in runs:
        ci = "-" if r.speedup_ci_low is None else f"{r.speedup_ci_low:.2f}..{r.speedup_ci_high:.2f}"
        place = "best" if r.best else "tied" if r.tied_with_best else "-"
        few = r.baseline and r.speedup is None and r.speedup_note.startswith("too few")
        speedup = "too_few" if few else number(r.speedup, 2)
        out.append((speedup, ci, r.verdict or "-", place))
    return out


def sweep_notes(summaries: Sequence[RunSummary]) -> list[str]:
    """``runs --baseline``'s lines under the table: what S is measured against, and each speculative run
    with a baseline but no S (and why), or whose S is not over matched buckets (no running requests logged)."""
    runs = [s for s in summaries if isinstance(s, SweepRun)]
    against = sorted({r.baseline for r in runs if r.baseline})
    out = []
    if against:
        out.append(
            f"speedup S = G_spec/G_base against {'; '.join(against)}: matched #running-req buckets of steady "
            "batches, 95 % block-bootstrap interval; verdict by the doctor's thresholds (P18)"
        )
    for r in runs:
        if r.speedup is None and r.baseline:
            out.append(f"{Path(r.file).name}#{r.run}: no speedup: {r.speedup_note}")
        elif r.speedup is not None and r.speedup_note == UNMATCHED:
            out.append(f"{Path(r.file).name}#{r.run}: S unmatched: {r.speedup_note}")
    best = next((r for r in runs if r.best), None)
    if best is not None and len(runs) > 1:
        s = f", S = {best.speedup:.2f} ({best.verdict})" if best.speedup is not None and best.verdict else ""
        ties = [f"{_name(r)} ({_settings(r)})" for r in runs if r.tied_with_best]
        tied = f"; as fast within the 95 % intervals: {', '.join(ties)}" if ties else ""
        out.append(
            f"best: {_name(best)} ({_settings(best)}), {number(best.gen_throughput_per_rank, 1)} tok/s/rank{s}{tied}"
        )
    return out


def _name(r: RunSummary) -> str:
    return f"{Path(r.file).name}#{r.run}"


def _settings(r: RunSummary) -> str:
    return config_text(r if r.launch_seen else None)


def tree_notes(summaries: Sequence[RunSummary]) -> list[str]:
    """One line per tree-draft config (topk > 1) among the runs: why their draft_rate is low, what to read instead."""
    trees: dict[tuple[int, int | None], list[str]] = {}
    for s in summaries:
        if s.spec_eagle_topk is not None and s.spec_eagle_topk > 1:
            trees.setdefault((s.spec_eagle_topk, s.spec_num_draft_tokens), []).append(f"{Path(s.file).name}#{s.run}")
    return [
        tree_note(", ".join(runs), topk, draft, "draft_rate", "accept_len") for (topk, draft), runs in trees.items()
    ]


def tree_note(which: str, topk: int, draft: int | None, rate: str, length: str) -> str:
    """Why a tree draft's accepted-over-proposed rate is low: ``which`` names the runs, ``rate`` and ``length``
    the figures as the table calls them."""
    tokens = f"{draft} draft tokens" if draft is not None else "its draft tokens"
    return (
        f"tree drafts ({which}: topk {topk}, {tokens}): verification accepts one path of the tree, "
        f"so {rate} is low by design; judge by {length}"
    )


def _spec(s: RunSummary) -> str:
    """The speculative method (for vLLM inferred where no line prints it), ``none`` for a launch without
    speculation, ``unknown`` with no launch line seen."""
    return s.method or ("none" if s.launch_seen else "unknown")


def _request_lengths(s: RunSummary) -> str:
    """p10/p50/p90 of the per-request accept lengths, ``-`` without request lines."""
    if not s.requests:
        return "-"
    return "/".join(number(x) for x in (s.request_accept_len_p10, s.request_accept_len_p50, s.request_accept_len_p90))
