"""What a record derives from its line's values and the run's launch, before it is built. Pure.

Each record kind names one of these as its ``derive`` in :mod:`acceptmon.parse.kinds`: a decode
batch takes the run's speculative config and the normalized accept rate; a vLLM spec line
its accept rate from token counts and its accept length with the bonus token; a finished
request the run's algorithm and draft tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from acceptmon.parse.records import LaunchConfig

SPEC_DIGITS = 6
"""A spec line's derived accept rate and accept length are rounded to this many decimals (the compiled matcher's
``SPEC_DIGITS`` too: its twin of :func:`spec_values`, ``cmatch_derive.c``)."""


def decode_from_launch(values: dict[str, Any], launch: LaunchConfig | None) -> None:
    """The run's speculative config, and the normalized rate (accept_len - 1)/(draft tokens - 1)."""
    if launch is None:
        return
    values["spec_algorithm"] = launch.spec_algorithm
    values["spec_num_steps"] = launch.spec_num_steps
    values["spec_num_draft_tokens"] = launch.spec_num_draft_tokens
    accept_len = values.get("accept_len")
    tokens = launch.draft_tokens
    if accept_len is not None and tokens is not None and tokens > 1:
        values["draft_accept_rate"] = round((accept_len - 1) / (tokens - 1), 4)


def spec_values(values: dict[str, Any], launch: LaunchConfig | None) -> None:
    """accept_rate from the counts; accept_len with the bonus token, logged or derived; the launch's config."""
    drafted, accepted = values.get("drafted_tokens"), values.get("accepted_tokens")
    if drafted == 0:
        values["accept_rate"] = None
    elif drafted is not None and accepted is not None:
        values["accept_rate"] = round(accepted / drafted, SPEC_DIGITS)
    values["draft_accept_rate"] = values.get("accept_rate")
    positions = values.get("position_accept_rates")
    k = values.get("num_spec_tokens") or (len(positions) if positions else None)
    if launch is not None:
        values["spec_algorithm"] = launch.spec_algorithm
        values["spec_num_steps"] = launch.spec_num_steps
        values["spec_num_draft_tokens"] = launch.spec_num_draft_tokens
        k = k or launch.spec_num_steps
    logged = values.pop("accept_len", None)
    if logged is not None:
        values["accept_len"] = round(logged + missing_bonus(logged, positions), SPEC_DIGITS)
        values["accept_len_source"] = "logged"
    elif drafted and k:
        emitted = values.get("emitted_tokens")
        derived = emitted * k / drafted if emitted is not None else 1 + (accepted or 0) * k / drafted
        values["accept_len"] = round(derived, SPEC_DIGITS)
        values["accept_len_source"] = "derived"


def missing_bonus(mean: float, positions: list[float | None] | None) -> int:
    """1 when a logged mean acceptance length leaves out the bonus token (vLLM 0.8.5), else 0.

    The per-position rates sum to accepted drafts per draft (S); a mean without the
    bonus is S, with it 1 + S: whichever is nearer tells (rounding error << 0.5).
    """
    if not positions or None in positions:
        return 0
    total = sum(cast("list[float]", positions))  # no None in it
    return 1 if abs(mean - total) < abs(mean - 1 - total) else 0


def request_from_launch(values: dict[str, Any], launch: LaunchConfig | None) -> None:
    """The run's speculative algorithm and draft tokens per verify step, beside each request."""
    if launch is not None:
        values["spec_algorithm"] = launch.spec_algorithm
        values["spec_num_draft_tokens"] = launch.draft_tokens


@dataclass(frozen=True)
class Fields:
    """What a derive may read and write, whichever branch a line's values take it down (the fast lane's plans learn
    from one line, whose values may take another: an idle spec line writes no accept length). A test runs each
    derive on drawn values and holds what it touches to these."""

    reads: frozenset[str]
    writes: frozenset[str]


LAUNCH_FIELDS = frozenset({"spec_algorithm", "spec_num_steps", "spec_num_draft_tokens"})
"""What a derive copies from the run's launch: the same on every line of a run."""
FIELDS: dict[Callable[[dict[str, Any], LaunchConfig | None], None], Fields] = {
    decode_from_launch: Fields(frozenset({"accept_len"}), LAUNCH_FIELDS | {"draft_accept_rate"}),
    spec_values: Fields(
        frozenset(
            {"drafted_tokens", "accepted_tokens", "accept_rate", "position_accept_rates", "num_spec_tokens"}
            | {"accept_len", "emitted_tokens"}
        ),
        LAUNCH_FIELDS | {"accept_rate", "draft_accept_rate", "accept_len", "accept_len_source"},
    ),
    request_from_launch: Fields(frozenset(), frozenset({"spec_algorithm", "spec_num_draft_tokens"})),
}
"""Each derive's :class:`Fields`."""
