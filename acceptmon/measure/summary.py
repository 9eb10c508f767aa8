"""One server launch in one file, summarised: what ``acceptmon runs`` prints and the dashboard's history shows."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class RunSummary(BaseModel):
    """One server launch in one file, summarised."""

    model_config = ConfigDict(frozen=True)

    file: str
    run: int
    start: datetime | None
    end: datetime | None
    duration_s: float | None
    model: str | None
    spec_algorithm: str | None
    spec_num_steps: int | None
    spec_eagle_topk: int | None
    spec_num_draft_tokens: int | None
    batches: int
    ranks: int
    accept_len_mean: float | None
    accept_len_p10: float | None
    accept_len_p50: float | None
    accept_len_p90: float | None
    accept_rate_mean: float | None
    draft_accept_rate_mean: float | None
    gen_throughput_mean: float | None
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
    position_accept_rates: list[float] | None = None
    """Per draft position, the fraction of drafts accepted up to it, weighted by drafts."""

    @property
    def method(self) -> str | None:
        """The speculative method (the launch's ``spec_algorithm``); None without speculation."""
        return self.spec_algorithm
