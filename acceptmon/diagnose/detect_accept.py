"""Signature types about acceptance itself: stuck at 1, low for the run, a chain too deep. Pure.

Accept length ``L`` is tokens per request per verify step, bonus included (SGLang ``accept len``;
other servers' kinds are read through the same ``accept_len``/``accept_rate`` fields). Decode
lines of the warm-up (the first lines of a run) are not judged.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import compress, repeat
from operator import gt, itemgetter, lt, sub

from pydantic import BaseModel, ConfigDict, Field

from acceptmon.diagnose.detector import (
    Context,
    Detector,
    Lines,
    Params,
    Stretch,
    every,
    hit,
    known,
    matches,
    picked,
    r6,
    run_lines,
    tested,
    unlogged,
)
from acceptmon.diagnose.model import Hit, Severity, plural
from acceptmon.diagnose.state import RunState, Step, Steps
from acceptmon.measure.plain import added, has_none
from acceptmon.parse.fast import native
from acceptmon.parse.records import Record


class StuckParams(Params):
    algorithms: list[str] = Field(default_factory=lambda: ["EAGLE"])
    """Algorithms where the mistake is possible (a launch without a line counts too)."""
    draft_contains: list[str] = Field(default_factory=lambda: ["eagle3", "eagle-3", "eagle_3"])
    """Draft path words that mark a draft trained for another algorithm (case-insensitive)."""
    stuck_at_most: float = 1.02
    stuck_lines: int = 5
    min_running: int = 1


class Stuck(Detector[StuckParams]):
    """P1: the launch pairs an algorithm with a draft made for another, or L sits at 1.00."""

    def __init__(self, params: StuckParams) -> None:
        super().__init__(params)
        self.count = self.start = self.best = 0
        self.best_lines: list[int] = []
        self.min_running, self.at_most = params.min_running, params.stuck_at_most

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        length, running = step.accept_len, step.running_req
        if not step.warm or length is None or (running is not None and running < self.min_running):
            return
        if length > self.at_most:
            self.count = 0
            return
        self.start = step.line if self.count == 0 else self.start
        self.count += 1
        if self.count > self.best:
            self.best, self.best_lines = self.count, [self.start, step.line]

    def steps(self, steps: Steps, run: RunState) -> None:
        """The judged lines (warm, with an accept length, and ``min_running`` running requests where logged) form
        stretches at most ``stuck_at_most``, cut by the lines above it. The first stretch goes on from the count
        carried in from earlier lines; the longest stretch so far is kept with its first and last line (the first
        of equal ones); the last stretch stays open (``count``, ``start``) for the lines to come."""
        many = tested(steps.running_req, lt, self.min_running, negate=True)  # (not ``>=``: nan is not fewer)
        judged = every(steps.warm, known(steps.accept_len), many)
        lines = list(compress(steps.line, judged))
        if not lines:
            return
        above = list(map(gt, picked(steps.accept_len, judged), repeat(self.at_most)))
        if False not in above:  # nothing stuck: the count starts again
            self.count = 0
            return
        cuts = list(compress(range(len(lines)), above))
        ends = [*cuts, len(lines)]  # the stretch before each cut, and the last one, end before these
        first = ends[0]
        if first:  # the stretch before the first cut goes on from the carried count
            self.start = lines[0] if self.count == 0 else self.start
            self.count += first
            if self.count > self.best:
                self.best, self.best_lines = self.count, [self.start, lines[first - 1]]
        if not cuts:
            return
        sizes = list(map(sub, ends[1:], cuts))  # each later stretch: its length + 1 (from after its cut to the next)
        longest = max(sizes) - 1
        if longest > self.best:
            at = sizes.index(longest + 1)
            self.best, self.best_lines = longest, [lines[cuts[at] + 1], lines[ends[at + 1] - 1]]
        self.count = sizes[-1] - 1
        last = len(above) - 1 - above[::-1].index(False)  # the last stuck line
        if last > cuts[0]:  # its stretch starts after the cut before it
            self.start = lines[cuts[bisect_left(cuts, last) - 1] + 1]

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        algo = run.algorithm
        draft = run.launch.spec_draft_model_path if run.launch else None
        known = algo is not None and algo in [a.upper() for a in self.p.algorithms]
        if known and draft and self.p.draft_contains and matches(draft, self.p.draft_contains):
            lines = [run.launch_line] if run.launch_line else []
            return hit(f"speculative_algorithm={algo} with draft {draft}", lines, algorithm=algo, draft=draft)
        if (known or run.launch is None) and self.best >= self.p.stuck_lines:
            text = f"accept len <= {self.p.stuck_at_most} on {self.best} consecutive batches"
            return hit(text, Stretch(self.best_lines), consecutive_lines=self.best, accept_len_mean=run.accept_len.mean)
        return None


class Tier(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    below: float
    severity: Severity
    min_steps: int = 0
    """Judge only runs drafting at least this many steps (speculative_num_steps)."""


class LowParams(Params):
    tiers: list[Tier] = Field(min_length=1)
    """Checked in order; the first whose ``below`` the run's mean accept length is under wins."""
    algorithms: list[str] = Field(default_factory=list)
    """Judge only these algorithms (empty: every speculative run)."""
    exclude_algorithms: list[str] = Field(default_factory=list)
    model_contains: list[str] = Field(default_factory=list)
    """Judge only models whose path contains one of these (empty: any)."""
    min_lines: int = 5
    rate_below: float | None = None
    """For kinds that log only an acceptance rate (0-1): the rate under which the run is broken."""
    families: list[str] = Field(default_factory=list)
    """Model family words; a draft path naming another family than the model path is cited as evidence."""


class Low(Detector[LowParams]):
    """P2, P3, P14: the run's accept length stays low."""

    def __init__(self, params: LowParams) -> None:
        super().__init__(params)
        self.rate_lines = Lines()
        self.rate_sum = 0.0

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        rate = step.accept_rate
        if rate is not None and step.accept_len is None and step.warm:
            self.rate_lines.add(step.line)
            self.rate_sum += rate

    def steps(self, steps: Steps, run: RunState) -> None:
        """Warm lines that log an acceptance rate and no accept length: counted, their rates added in order."""
        if not has_none(steps.accept_len):  # every line logs an accept length
            return
        rated = every(steps.warm, known(steps.accept_rate), unlogged(steps.accept_len))
        rates = list(compress(steps.accept_rate, rated))
        if rates:
            self.rate_lines.extend(compress(steps.line, rated))
            self.rate_sum = added(rates, self.rate_sum)

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        algo = run.algorithm or ""
        if not run.speculative or not matches(run.launch.model_path if run.launch else None, self.p.model_contains):
            return None
        if (self.p.algorithms and algo not in [a.upper() for a in self.p.algorithms]) or algo in [
            a.upper() for a in self.p.exclude_algorithms
        ]:
            return None
        mean, count = run.accept_len.mean, run.accept_len.count
        if mean is None or count < self.p.min_lines:
            return self._rate_hit()
        for tier in self.p.tiers:
            if r6(mean) < tier.below and (run.steps or 0) >= tier.min_steps:
                text = f"mean accept len {mean:.2f} over {plural(count, 'batch', 'batches')} (< {tier.below})"
                note = " ".join(n for n in (self._names(run), _same_config_note(run, ctx, tier.below)) if n)
                return hit(
                    text,
                    run_lines(run),
                    tier.severity,
                    note,
                    accept_len_mean=mean,
                    line_count=count,
                    threshold=tier.below,
                )
        return None

    def _names(self, run: RunState) -> str:
        """The cross-check of doctor.md P2: do the draft and model paths name other families or sizes?"""
        model = (run.launch.model_path or "") if run.launch else ""
        draft = (run.launch.spec_draft_model_path or "") if run.launch else ""
        if not model or not draft:
            return ""
        notes = []
        fam_m, fam_d = _first(model, self.p.families), _first(draft, self.p.families)
        if fam_m and fam_d and fam_m != fam_d:
            notes.append(f"the draft path names {fam_d}, the model path {fam_m}")
        size_m, size_d = _size(model), _size(draft)
        if size_m and size_d and size_m != size_d:
            notes.append(f"the draft path names size {size_d}B, the model path {size_m}B")
        return f"Names: {'; '.join(notes)}." if notes else ""

    def _rate_hit(self) -> Hit | None:
        n = self.rate_lines.count
        if self.p.rate_below is None or n < self.p.min_lines or r6(self.rate_sum / n) >= self.p.rate_below:
            return None
        rate = self.rate_sum / n
        text = f"mean draft acceptance rate {rate:.3f} over {plural(n, 'batch', 'batches')} (< {self.p.rate_below})"
        return hit(text, self.rate_lines.lines, "error", accept_rate_mean=rate, line_count=n)


def _first(path: str, words: list[str]) -> str | None:
    low = path.lower()
    found = [(low.find(w.lower()), w.lower()) for w in words if w.lower() in low]
    return min(found)[1] if found else None


def _size(path: str) -> str | None:
    """The parameter count a path names (``8B`` in ``Llama-3.1-8B-Instruct``), without the B; None if none."""
    low = path.lower()
    for i, ch in enumerate(low):
        if ch == "b" and i and low[i - 1].isdigit() and (i + 1 == len(low) or not low[i + 1].isalnum()):
            j = i
            while j and (low[j - 1].isdigit() or low[j - 1] == "."):
                j -= 1
            if j == 0 or not low[j - 1].isalnum():
                return low[j:i]
    return None


def _same_config_note(run: RunState, ctx: Context, below: float) -> str:
    better = [r for r in ctx.same_config(run) if (r.accept_len.mean or 0) >= below]
    if not better:
        return ""
    best = max(better, key=lambda r: r.accept_len.mean or 0)
    return (
        f"Run {best.run} of this file, with the same model and speculative settings, averaged accept len "
        f"{best.accept_len.mean:.2f}: the draft can match this target, so look for what differed between "
        "the launches that the logs do not show (draft weights or revision, environment, version)."
    )


class DepthParams(Params):
    per_step_below: float = 0.3
    """SGLang: (L - 1) / k under this."""
    min_steps: int = 2
    min_lines: int = 5
    position_below: float = 0.10
    """Kinds with per-position rates (vLLM): the last position's rate under this."""
    position_field: str = "position_accept_rates"
    min_alpha: float = 0.3
    """Judge depth only when the first drafted position is accepted at least this often (i.i.d. alpha from
    L and k); below it the draft itself fails, which the accept-length rules report."""


class Depth(Detector[DepthParams]):
    """P13: the chain drafts more steps than it gets accepted."""

    def __init__(self, params: DepthParams) -> None:
        super().__init__(params)
        self.last_position: list[float] = []
        self.position_lines = Lines()
        self.field = params.position_field

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        if not step.warm:
            return
        rates = r.__dict__.get(self.field)
        if rates and isinstance(rates, list | tuple) and rates[-1] is not None:  # nan (no drafts) is None
            self.last_position.append(float(rates[-1]))
            self.position_lines.add(step.line)

    def steps(self, steps: Steps, run: RunState) -> None:
        """Warm lines whose per-position rates (``position_field``) end in a number (nan, nothing drafted, is None):
        that last rate, as a float, and the line."""
        column = steps.values.get(self.field)
        if column is None or not any(column):  # no line logs rates
            return
        module = native.load()
        got = None if module is None else module.last_rates(steps.warm, column, steps.line)
        if got is not None:  # the same in C, where every value is of the lane's types
            self.last_position += got[0]
            self.position_lines.extend(got[1])
            return
        ends = [
            warm and rates and isinstance(rates, list | tuple) and rates[-1] is not None
            for warm, rates in zip(steps.warm, column, strict=True)
        ]
        ended = list(compress(column, ends))
        if ended:
            self.last_position += map(float, map(itemgetter(-1), ended))
            self.position_lines.extend(compress(steps.line, ends))

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        n = len(self.last_position)
        if n >= self.p.min_lines and r6(sum(self.last_position) / n) < self.p.position_below:
            rate = sum(self.last_position) / n
            return hit(
                f"last drafted position accepted {rate:.3f} on average",
                self.position_lines.lines,
                last_position_rate=rate,
                line_count=n,
            )
        k, mean = run.steps, run.accept_len.mean
        if not run.speculative or not k or k < self.p.min_steps or mean is None:
            return None
        if run.accept_len.count < self.p.min_lines or r6((mean - 1) / k) >= self.p.per_step_below:
            return None
        per_step = (mean - 1) / k
        alpha = acceptance_probability(mean, k)
        if alpha < self.p.min_alpha:
            return None
        best = deepest_step(alpha, self.p.per_step_below, k)
        text = f"(L - 1)/k = ({mean:.2f} - 1)/{k} = {per_step:.2f} (< {self.p.per_step_below})"
        note = (
            f"At the per-token acceptance this L implies (alpha = {alpha:.2f}, i.i.d. model), drafted position "
            f"{best + 1} is accepted less than {self.p.per_step_below:.0%} of the time: try "
            f"--speculative-num-steps {best}."
        )
        return hit(text, run_lines(run), note=note, per_step_rate=per_step, alpha=alpha, steps=k, suggested_steps=best)


def deepest_step(alpha: float, below: float, steps: int) -> int:
    """The last position i in 1..steps with alpha**i >= below (1 if none), in constant time: alpha**i falls with i,
    so it is floor(log(below) / log(alpha)), checked against float rounding on both sides. ``steps`` is a logged
    number and never bounds a loop."""
    if steps < 1:
        return 1
    if below <= 0 or alpha >= 1:
        return steps
    if alpha <= 0 or alpha < below:
        return 1
    best = max(1, min(steps, int(math.log(below) / math.log(alpha))))
    if best < steps and alpha ** (best + 1) >= below:
        best += 1
    if best > 1 and alpha**best < below:
        best -= 1
    return best


def acceptance_probability(length: float, steps: int) -> float:
    """Invert E[tokens] = (1 - a^(k+1)) / (1 - a) for a in [0, 1) by bisection (doctor.md §3.1)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        expected = (1 - mid ** (steps + 1)) / (1 - mid)
        lo, hi = (mid, hi) if expected < length else (lo, mid)
    return lo
