"""One server launch in one file, summarised: what ``acceptmon runs`` prints and the dashboard's history shows."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict


class RunSummary(BaseModel):
    """One server launch in one file, summarised."""

    model_config = ConfigDict(frozen=True)

    file: str
    run: int
    source: str = ""
    """The stream source (``pod/NAME/CONTAINER``, a compose service) as logged; empty for a plain file."""
    pod: str = ""
    """The Kubernetes pod of the run's lines, when their prefix or the file's path names it."""
    container: str = ""
    """Their container, when their prefix or the file's path names it (compose: the container's name)."""
    start: datetime | None
    end: datetime | None
    duration_s: float | None
    model: str | None
    spec_algorithm: str | None
    spec_num_steps: int | None
    spec_eagle_topk: int | None
    spec_num_draft_tokens: int | None
    batches: int
    """Stats lines with acceptance (decode lines, vLLM spec lines)."""
    ranks: int
    accept_len_mean: float | None
    """Mean accept length over the batches (a vLLM v0 line: over the interval it closes)."""
    accept_len_p10: float | None
    accept_len_p50: float | None
    accept_len_p90: float | None
    accept_rate_mean: float | None
    draft_accept_rate_mean: float | None
    gen_throughput_per_rank: float | None
    """Mean over the run's lines of the generation throughput each rank or engine logged."""
    gen_throughput_total: float | None
    """The sum over ranks or engines of their mean throughput: what the server made."""
    launch_seen: bool = True
    """False for decode lines before any launch line: the config is unknown, not absent."""
    requests: int = 0
    """Finished requests logged with speculative fields (``--log-requests``)."""
    request_accept_len_p10: float | None = None
    """Per-request accept length distribution: a batch mean hides the requests speculation did nothing for."""
    request_accept_len_p50: float | None = None
    request_accept_len_p90: float | None = None
    version: str | None = None
    spec_draft_model: str | None = None
    accepted_tokens: int | None = None
    """Spec lines' token counts over the run (vLLM; cumulative counters as their increase)."""
    drafted_tokens: int | None = None
    emitted_tokens: int | None = None
    num_drafts: float | None = None
    """Verify steps that carried a draft: drafted tokens / k."""
    accept_len_by_tokens: float | None = None
    """Emitted tokens / drafts over the whole run (vLLM): accept length weighted by drafts, not by lines."""
    accept_rate_by_tokens: float | None = None
    """Accepted / drafted tokens over the whole run (vLLM)."""
    position_accept_rates: list[float] | None = None
    """Per draft position, the fraction of drafts accepted up to it, weighted by drafts."""
    invalid_values: int = 0
    """Impossible values of the run's lines, left out of every figure (accept len under 1 or over 1000, a rate
    outside 0..1, a negative count or throughput, not finite)."""
    refused_configs: int = 0
    """Launch lines whose speculative or parallel sizes no server runs: the config shows them as unknown."""
    unrecognized: int = 0
    """Lines of the run that start like a stats line but that no grammar reads (a format change): ``parse``
    counts the same lines and shows the first."""

    @property
    def method(self) -> str | None:
        """The speculative method (the launch's ``spec_algorithm``); None without speculation."""
        return self.spec_algorithm


class Settings(Protocol):
    """A launch's speculative settings, as a launch config and a run summary both hold them."""

    @property
    def method(self) -> str | None: ...
    @property
    def spec_num_steps(self) -> int | None: ...
    @property
    def spec_eagle_topk(self) -> int | None: ...
    @property
    def spec_num_draft_tokens(self) -> int | None: ...


def config_text(c: Settings | None) -> str:
    """A launch's speculative config in a few words, as ``compare`` and ``doctor`` show it:
    ``EAGLE3 steps 3, topk 1, draft 4``, ``no speculation``, or ``config unknown: no launch line``."""
    if c is None:
        return "config unknown: no launch line"
    if c.method is None:
        return "no speculation"
    parts = [
        f"{name} {v}"
        for name, v in (("steps", c.spec_num_steps), ("topk", c.spec_eagle_topk), ("draft", c.spec_num_draft_tokens))
        if v is not None
    ]
    return f"{c.method} {', '.join(parts)}".strip()


def with_unrecognized(summaries: list[RunSummary], counts: Mapping[tuple[str, str, int], int]) -> list[RunSummary]:
    """The summaries with their runs' counts of unrecognized lines (by file, source and run)."""
    return [s.model_copy(update={"unrecognized": counts.get((s.file, s.source, s.run), 0)}) for s in summaries]
