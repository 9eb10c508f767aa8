"""The dashboard's run history: earlier runs with the live ones, and the reference lines they give. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from acceptmon.stats import RunSummary


@dataclass(frozen=True)
class References:
    """The red reference lines of the plots: the previous run's means, or the no-speculation run's throughput."""

    accept: float | None = None
    accept_label: str = ""
    throughput: float | None = None
    throughput_label: str = ""


def history_rows(
    before: Mapping[str, Sequence[RunSummary]], runs_before: Mapping[str, int], live: Sequence[RunSummary]
) -> list[RunSummary]:
    """Per file: the runs read before the live start, then the live runs numbered after them."""
    rows: list[RunSummary] = []
    for file, earlier in before.items():
        offset = runs_before.get(file, 0)
        rows.extend(earlier)
        for s in live:
            if s.file != file:
                continue
            if s.run == 0 and s.batches and offset:
                continue  # decode lines ahead of the first live launch belong to the last history run
            rows.append(s.model_copy(update={"run": s.run + offset}))
    return rows


def references(history: Sequence[RunSummary], file: str, current: int) -> References:
    """Reference lines for run ``current`` of ``file``."""
    earlier = [h for h in history if h.file == file and h.run < current and h.batches]
    prev = earlier[-1] if earlier else None
    accept = prev.accept_len_mean if prev else None
    accept_label = f"run {prev.run} mean" if prev and accept is not None else ""
    base = [h for h in earlier if h.spec_algorithm is None and h.gen_throughput_mean is not None]
    if base:
        return References(accept, accept_label, base[-1].gen_throughput_mean, f"no-spec run {base[-1].run} mean")
    if prev and prev.gen_throughput_mean is not None:
        return References(accept, accept_label, prev.gen_throughput_mean, f"run {prev.run} mean")
    return References(accept, accept_label)
