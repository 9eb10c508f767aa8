"""The dashboard's run history: earlier runs with the live ones, the reference lines they give, launch events. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from acceptmon.display import duration, number
from acceptmon.measure.aggregate import RunSummary
from acceptmon.parse.records import LaunchConfig

SAME_CONFIG_TOLERANCE = 0.1
"""Two runs with one config whose accept len means differ by more than this fraction differ for another reason."""


@dataclass(frozen=True)
class References:
    """The red reference lines of the plots: the previous run's means, or the no-speculation run's throughput."""

    accept: float | None = None
    accept_label: str = ""
    throughput: float | None = None
    throughput_label: str = ""


def history_rows(before: Mapping[str, Sequence[RunSummary]], live: Sequence[RunSummary]) -> list[RunSummary]:
    """Per file: the runs read before the live start, then the live runs.

    Both are numbered as ``acceptmon runs`` numbers them (the live parser starts in the file's state at
    the live start), so they follow on; a run in both (stats lines before any launch line, read partly
    before the live start) is shown as read live, once."""
    rows: list[RunSummary] = []
    for file, earlier in before.items():
        mine = [s for s in live if s.file == file]
        seen = {s.run for s in mine}
        rows.extend(h for h in earlier if h.run not in seen)
        rows.extend(mine)
    return rows


def references(history: Sequence[RunSummary], file: str, current: int, unit: str = "rank") -> References:
    """Reference lines for run ``current`` of ``file``: its previous run's accept length, and the
    throughput per rank or engine (what the plot shows) of its last run without speculation, else
    of its previous run."""
    earlier = [h for h in history if h.file == file and h.run < current and h.batches]
    prev = earlier[-1] if earlier else None
    accept = prev.accept_len_mean if prev else None
    accept_label = f"run {prev.run} mean" if prev and accept is not None else ""
    base = [h for h in earlier if h.method is None and h.launch_seen and h.gen_throughput_per_rank is not None]
    ref, label = (base[-1], "no-spec run") if base else (prev, "run")
    tput = ref.gen_throughput_per_rank if ref else None
    if ref is None or tput is None:
        return References(accept, accept_label)
    return References(accept, accept_label, tput, f"{label} {ref.run} mean per {unit}")


def launch_text(c: LaunchConfig, same_as: int | None) -> str:
    """The event of a launch: model and speculative settings, and whether the previous run had the same config."""
    spec = "no speculation"
    if c.method:
        spec = " ".join(
            (
                c.method,
                f"steps {number(c.spec_num_steps)}",
                f"topk {number(c.spec_eagle_topk)}",
                f"draft {number(c.spec_num_draft_tokens)}",
            )
        )
    same = f" (same config as run {same_as})" if same_as is not None else ""
    return f"launch: {c.model_path or 'model ?'}, {spec}{same}"


def same_config_text(history: Sequence[RunSummary], file: str, run: int, mean: float) -> str:
    """Run ``run`` has run ``run - 1``'s launch config: what its accept len did, and where a change must come from."""
    prev = next((h.accept_len_mean for h in history if h.file == file and h.run == run - 1), None)
    text = f"run {run}: same config as run {run - 1}"
    if prev is None:
        return f"{text}, accept len {mean:.2f}"
    text += f", accept len {prev:.2f} -> {mean:.2f}"
    if abs(mean - prev) > SAME_CONFIG_TOLERANCE * max(prev, mean):
        text += ": the difference is outside server_args"
    return text


HISTORY_COLUMNS = ("run", "start", "spec", "steps", "topk", "draft", "batch", "len", "rate", "tok/s/rank", "time")
"""The run history's columns (means: len = accept len, rate = normalized accept rate, tok/s/rank per rank)."""
NARROW_HISTORY_COLUMNS = tuple(c for c in HISTORY_COLUMNS if c != "batch")


def history_columns(*, narrow: bool, many_files: bool) -> tuple[str, ...]:
    """The history's columns: ``file`` first when several files are followed (their runs are one table).

    Without room (a narrow terminal) or with a file column to make room for, ``batch`` goes; both at
    once, ``start`` and ``time`` too (the header says when the shown file's run started)."""
    if many_files:
        left_out = ("start", "time") if narrow else ()
        return ("file", *(c for c in NARROW_HISTORY_COLUMNS if c not in left_out))
    return NARROW_HISTORY_COLUMNS if narrow else HISTORY_COLUMNS


def history_cells(h: RunSummary, current: bool, unit: str = "rank") -> dict[str, str]:
    """One run as the history table shows it, by column; the current run is marked ``*``.

    Gen throughput is per rank or engine (``runs``' ``tok/s/rank``), as the plot and the rank table show it."""
    return {
        "file": h.file.rsplit("/", 1)[-1],
        "run": f"{h.run}{' *' if current else ''}",
        "start": f"{h.start:%H:%M:%S}" if h.start is not None else "-",
        "spec": h.method or ("none" if h.launch_seen else "unknown"),
        "steps": number(h.spec_num_steps),
        "topk": number(h.spec_eagle_topk),
        "draft": number(h.spec_num_draft_tokens),
        "batch": str(h.batches),
        "len": number(h.accept_len_mean),
        "rate": number(h.draft_accept_rate_mean),
        "tok/s/rank": number(h.gen_throughput_per_rank, 1),
        "time": duration(h.duration_s),
    }
