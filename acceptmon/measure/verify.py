"""Verify steps and generated tokens of the window a stats line covers: counters a fleet can sum. Pure.

Accept length is tokens per verify step, so a fleet's accept length is the sum of its tokens over the
sum of its steps, never a mean of its replicas' accept lengths (that weighs a replica serving one request
like one serving two hundred). Each acceptance line is turned into the steps and tokens of its window:

- **vLLM spec lines count** (exact): a window of ``drafted`` draft tokens at k per draft is
  ``drafted / k`` drafts, each one verify step; each step emits its accepted drafts and the bonus token,
  so tokens = accepted + drafts. Where the line counts emitted tokens (v0), those are the tokens: v0's
  accepted count includes drafts matched after a rejected one, which are not emitted (the accept length
  of ``runs`` reads them the same way). For v0's cumulative counters the window is their increase since
  the unit's previous line (the caller's, as the token counters' are: :data:`COUNTED`).
- **SGLang decode lines do not** (estimated): a decode line is printed every ``decode_log_interval``
  forward passes (``server_args``, default :data:`DEFAULT_DECODE_LOG_INTERVAL`), and its accept len is
  the window's accepted tokens over its per-request verify steps. The steps are estimated as
  ``decode_log_interval`` x ``#running-req`` of the line (the batch size at the window's end stands for
  every pass in it), and tokens = accept len x steps. The estimate's tokens / steps is the lines' accept
  lengths weighted by their ``#running-req``: exact when the batch size holds within each window, and
  off by how much it moved inside one otherwise (the README's "Counters a fleet can sum" has the error
  on the sample logs).

A line without acceptance (no speculation), or without what its rule needs, covers no window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from acceptmon.measure.tokens import counters
from acceptmon.parse.records import LaunchConfig, Record, SpecStats

DEFAULT_DECODE_LOG_INTERVAL = 40
"""SGLang's default ``decode_log_interval``: forward passes between two decode lines."""
COUNTED = ("accepted_tokens", "drafted_tokens", "emitted_tokens")
"""The token counts a spec line's window is made of (a cumulative line's: their increase)."""
MAX_DECODE_LOG_INTERVAL = 1_000_000
"""A larger ``decode_log_interval`` is taken for a corrupt value (the default is used)."""


class Window(NamedTuple):
    """The verify steps and generated tokens (bonus tokens included) of one stats line's window (a named
    tuple: immutable, and cheap to make, one per live decode line)."""

    steps: float
    tokens: float
    estimated: bool
    """True for an SGLang decode line's estimate, False for a vLLM spec line's counts."""


def decode_log_interval(launch: LaunchConfig | None) -> int:
    """The run's ``decode_log_interval`` from its ``server_args`` (:data:`DEFAULT_DECODE_LOG_INTERVAL` when
    the launch is unknown, does not say, or says something no server runs)."""
    value = launch.extra.get("decode_log_interval") if launch is not None else None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_DECODE_LOG_INTERVAL:
        return value
    return DEFAULT_DECODE_LOG_INTERVAL


def estimated(accept_len: float | None, running_req: int | None, interval: int) -> Window | None:
    """An SGLang decode line's window: ``interval`` x ``running_req`` steps, ``accept_len`` tokens each."""
    if accept_len is None or running_req is None:
        return None
    steps = float(interval * running_req)
    return Window(steps, accept_len * steps, estimated=True)


def counted(
    accepted: float | None, drafted: float | None, k: int | None, emitted: float | None = None
) -> Window | None:
    """A vLLM spec line's window from its accepted and drafted tokens (k drafted per draft), and its emitted
    tokens where it counts them."""
    if accepted is None or drafted is None or not k:
        return None
    drafts = drafted / k
    return Window(drafts, emitted if emitted is not None else accepted + drafts, estimated=False)


def window(record: Record, launch: LaunchConfig | None, increase: Mapping[str, float] | None = None) -> Window | None:
    """The window a normalized acceptance record covers (None: it says nothing of one).

    ``launch``: the record's run's launch config (its ``decode_log_interval``). ``increase``: the token
    counts of the window, where the caller turned cumulative counters into their increase (default: the
    record's own counts, as a per-interval line logs them).
    """
    values: dict[str, Any] = record.__dict__
    if values.get("drafted_tokens") is not None:
        counts = values if increase is None else increase
        k = counters(cast(SpecStats, record))[3]  # a record with drafted tokens is a spec line
        return counted(counts.get("accepted_tokens"), counts.get("drafted_tokens"), k, counts.get("emitted_tokens"))
    return estimated(values.get("accept_len"), values.get("running_req"), decode_log_interval(launch))
