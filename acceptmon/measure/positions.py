"""Per-position acceptance of a chain draft, from what logs give. Pure: numbers in, numbers out.

A chain draft (topk 1) of depth ``k`` proposes ``k`` tokens per verify step; the target keeps the
longest accepted prefix and adds one token of its own. With ``a_i`` the share of verify steps whose
first ``i`` drafts were all accepted (``a_0 = 1``; vLLM's per-position rate ``i - 1``; from SGLang's
per-request histogram ``H[n]``, steps that accepted exactly ``n``: ``a_i = sum(H[n], n >= i) / sum(H)``),
the conditional acceptance of position ``i`` is ``c_i = a_i / a_(i-1)`` and the accept length of
depth ``d`` is ``L(d) = 1 + a_1 + ... + a_d``: a draft's first ``d`` tokens do not depend on how many
more it drafts, so one run's positions predict every shallower depth.

Where no run logs per-position figures (SGLang decode lines only), the sweep's accept lengths at their
depths give them: between two depths run, ``L`` rises by ``a`` of the positions between, taken with one
conditional acceptance (exact for neighbouring depths). Past the deepest position known, ``c_i``
follows a fitted decay (least squares of ``log c_i`` on ``i``, never rising), marked ``extrapolated``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import add, mul

from acceptmon.parse.fast import native


@dataclass
class Positions:
    """Verify steps and, per draft position i (1-based), the steps whose first i drafts were all accepted."""

    steps: float = 0.0
    reached: list[float] = field(default_factory=list)

    def add_rates(self, rates: Sequence[float | None], drafts: float) -> None:
        """vLLM's per-position rates of one line (position i: share of drafts with the first i+1 accepted)."""
        self.reached += [0.0] * (len(rates) - len(self.reached))
        for i, p in enumerate(rates):
            self.reached[i] += (p or 0.0) * drafts
        self.steps += drafts

    def add_each(self, rates: Sequence[Sequence[float | None]], drafts: Sequence[float]) -> None:
        """:meth:`add_rates` of each line's rates and drafts, in order (a position at a time, in C)."""
        weighed(self.reached, rates, drafts)
        module = native.load()
        got = module.added(drafts, self.steps) if module is not None and type(self.steps) is float else None
        self.steps = got if got is not None else reduce(add, drafts, self.steps)

    def add_histogram(self, histogram: Sequence[int]) -> None:
        """SGLang's per-request histogram: entry n counts the verify steps that accepted exactly n drafts."""
        depth = len(histogram) - 1
        self.reached += [0.0] * (depth - len(self.reached))
        tail = 0
        for n in range(depth, 0, -1):
            tail += histogram[n]
            self.reached[n - 1] += tail
        self.steps += sum(histogram)

    @property
    def depth(self) -> int:
        return len(self.reached) if self.steps > 0 else 0

    def marginals(self) -> list[float]:
        """``a_1 .. a_k``: the share of steps with the first i drafts accepted."""
        return [r / self.steps for r in self.reached] if self.steps > 0 else []


def conditionals(marginals: Sequence[float]) -> list[float]:
    """``c_i = a_i / a_(i-1)`` (``a_0 = 1``); 0 after a position nothing reached."""
    out, before = [], 1.0
    for a in marginals:
        out.append(min(1.0, a / before) if before > 0 else 0.0)
        before = a
    return out


def pooled(runs: Sequence[Positions]) -> list[float]:
    """Marginals of several runs' positions: each conditional pooled over the runs that drafted that far."""
    depth = max((p.depth for p in runs), default=0)
    out, a = [], 1.0
    for i in range(depth):
        num = sum(p.reached[i] for p in runs if p.depth > i)
        den = sum((p.reached[i - 1] if i else p.steps) for p in runs if p.depth > i)
        a *= num / den if den > 0 else 0.0
        out.append(a)
    return out


def from_lengths(points: Sequence[tuple[int, float]]) -> list[float]:
    """Marginals from accept lengths at depths (with ``L(0) = 1``): one conditional between depths run."""
    out: list[float] = []
    last_depth, last_len, a = 0, 1.0, 1.0
    for depth, length in sorted(points):
        gap = depth - last_depth
        if gap <= 0:
            continue
        c = _gap_rate(a, length - last_len, gap)
        for _ in range(gap):
            a *= c
            out.append(a)
        last_depth, last_len = depth, 1.0 + sum(out)
    return out


def _gap_rate(a: float, rise: float, gap: int) -> float:
    """The c in [0, 1] with ``a·(c + c² + ... + c^gap) = rise`` (bisection; the sum rises with c)."""
    if a <= 0 or rise <= 0:
        return 0.0
    if rise >= a * gap:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if a * sum(mid**m for m in range(1, gap + 1)) < rise:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def decay(cond: Sequence[float]) -> float:
    """Per-position factor of the conditional acceptance: exp of the least-squares slope of log c_i on i,
    at most 1 (a conditional acceptance is not assumed to rise past what was seen)."""
    pts = [(i, math.log(c)) for i, c in enumerate(cond, 1) if c > 0]
    if len(pts) < 2:
        return 1.0
    mx = sum(i for i, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((i - mx) ** 2 for i, _ in pts)
    slope = sum((i - mx) * (y - my) for i, y in pts) / sxx
    return math.exp(min(0.0, slope))


def extend(marginals: Sequence[float], depth: int) -> list[float]:
    """Marginals to ``depth``, the positions past the known ones from the fitted decay of c_i."""
    out = list(marginals[:depth])
    cond = conditionals(marginals)
    if not cond:
        return out
    factor, c, a = decay(cond), cond[-1], out[-1] if out else 1.0
    while len(out) < depth:
        c = min(1.0, c * factor)
        a *= c
        out.append(a)
    return out


def accept_length(marginals: Sequence[float], depth: int) -> float:
    return 1.0 + sum(marginals[:depth])


def weighed(totals: list[float], rates: Sequence[Sequence[float | None] | None], drafts: Sequence[float]) -> None:
    """Each position's rate of each row (None: not logged, as 0) weighted by the row's drafts, added to ``totals``
    position by position in row order, as row by row; ``totals`` grows to the widest row. The compiled module's
    ``weighed`` where it is built and the numbers are floats (or ints within 2**53): the same multiplications and
    additions, without a float object for each."""
    module = native.load()
    got = module.weighed(rates, drafts, totals) if module is not None else None
    if got is not None:
        totals[:] = got
        return
    width = max(map(len, filter(None, rates)), default=0)
    totals += [0.0] * (width - len(totals))
    if width and all(r is not None and len(r) == width for r in rates):
        for i, column in enumerate(zip(*rates, strict=True)):
            if None in column:
                column = tuple(p or 0.0 for p in column)
            totals[i] = reduce(add, map(mul, column, drafts), totals[i])
        return
    for i in range(width):
        weighed = [(r[i] or 0.0) * n for r, n in zip(rates, drafts, strict=True) if r and len(r) > i]
        totals[i] = reduce(add, weighed, totals[i])
