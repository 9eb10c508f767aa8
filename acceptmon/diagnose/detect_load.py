"""Signature types about load: KV memory under speculation, batch size, and whether speculation pays. Pure."""

from __future__ import annotations

from functools import partial
from itertools import chain, compress, repeat
from operator import ge, gt, is_not, le, lt, mul, truediv

from pydantic import Field

from acceptmon.diagnose.breakeven import BreakEven, label, tree_note
from acceptmon.diagnose.detector import (
    Context,
    Detector,
    Lines,
    Params,
    compared,
    every,
    hit,
    known,
    picked,
    r6,
    tested,
)
from acceptmon.diagnose.model import Hit, plural
from acceptmon.diagnose.state import RunState, Step, Steps
from acceptmon.measure.speedup import LOSES_BELOW, MARGINAL_BELOW
from acceptmon.parse.fast import native
from acceptmon.parse.records import Record, WarningRecord


class RetractParams(Params):
    codes: list[str] = Field(default_factory=lambda: ["KV cache pool is full", "Decode out of memory"])
    reserve_fraction: float = 0.10


class Retractions(Detector[RetractParams]):
    """P10: requests retracted for KV memory while speculating; the per-step speculative reserve."""

    def __init__(self, params: RetractParams) -> None:
        super().__init__(params)
        self.events = Lines()
        self.retracted = 0
        self.usage: float | None = None
        self.usage_at: list[float] = []
        self.reserve = 0.0
        self.reserve_line = 0

    def warning(self, r: WarningRecord, run: RunState) -> None:
        if r.code in self.p.codes:
            self.events.add(r.line)
            self.retracted += int(r.value or 0)
            if self.usage is not None:
                self.usage_at.append(self.usage)

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        usage, retracted, running = step.token_usage, r.__dict__.get("retracted_req"), step.running_req
        if usage is not None:
            self.usage = usage
        if retracted and retracted > 0:
            self.events.add(step.line)
            self.retracted += retracted
        if not (running and usage):
            return
        tokens = step.num_tokens
        _, n, k, topk = run.spec_params()  # worked out once per launch line
        if n and tokens:
            reserve = running * (n + topk * (k or 0)) / (tokens / usage)
            if reserve > self.reserve:
                self.reserve, self.reserve_line = reserve, step.line

    def steps(self, steps: Steps, run: RunState) -> None:
        """The token usage last logged; lines retracting requests (``retracted_req`` > 0) as events, the requests
        summed; and, where the launch sets N, the largest speculative KV reserve ``B·(N + K·k) / (#token / usage)``
        (of lines logging all three) with the first line that reached it."""
        usage = next(filter(partial(is_not, None), reversed(steps.token_usage)), None)
        if usage is not None:
            self.usage = usage
        column = steps.values.get("retracted_req")
        if column is not None and any(column):  # (None and 0 retract nothing)
            retracting = list(compared(column, gt, 0))
            retracted = list(compress(column, retracting))
            if retracted:
                self.events.extend(compress(steps.line, retracting))
                self.retracted += sum(retracted)
        _, n, k, topk = run.spec_params()  # worked out once per launch line
        if not n:
            return
        c = n + topk * (k or 0)
        module = native.load()
        got = (
            module.reserve_max(steps.running_req, steps.num_tokens, steps.token_usage, steps.line, c, self.reserve)
            if module is not None and type(c) is int and type(self.reserve) is float
            else None
        )
        if got is not None:
            largest, line = got
            if line is not None:
                self.reserve, self.reserve_line = largest, line
            return
        judged = every(steps.running_req, steps.token_usage, steps.num_tokens)
        pools = map(truediv, compress(steps.num_tokens, judged), compress(steps.token_usage, judged))
        reserves = list(map(truediv, map(mul, compress(steps.running_req, judged), repeat(c)), pools))
        largest = max(chain((self.reserve,), reserves))
        if largest > self.reserve:  # the first line that reached it (none after is above it)
            self.reserve, self.reserve_line = largest, list(compress(steps.line, judged))[reserves.index(largest)]

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        if not run.speculative:
            return None
        if self.events.count:
            low = min(self.usage_at) if self.usage_at else None
            text = f"{plural(self.events.count, 'retraction', 'retractions')}, "
            text += f"{plural(self.retracted, 'request', 'requests')} retracted"
            text += f", at token usage {low:.2f}" if low is not None else ""
            return hit(
                text,
                self.events.lines,
                retractions=self.events.count,
                retracted=self.retracted,
                token_usage=low,
                spec_reserve_fraction=self.reserve,
            )
        if self.reserve > self.p.reserve_fraction:
            text = f"speculative KV reserve B·(N + K·k) is {self.reserve:.0%} of the KV pool"
            return hit(text, [self.reserve_line], "info", spec_reserve_fraction=self.reserve)
        return None


class BatchParams(Params):
    verify_tokens_at_least: int = 256
    efficiency_below: float = 0.5
    min_lines: int = 5
    falloff: float = 0.30
    flat: float = 0.10
    min_bucket_lines: int = 3
    min_span: float = 4.0
    """Per-request falloff: the highest bucket's mean #running-req is at least this many times the lowest's."""
    healthy_accept_len: float = 2.0
    """With a baseline: a bucket where speculation loses while L is at least this."""


class LargeBatch(Detector[BatchParams]):
    """P5: the batch is large enough that verifying drafts costs more than they return."""

    def __init__(self, params: BatchParams) -> None:
        super().__init__(params)
        self.wasteful = Lines()
        self.verify_at_least, self.efficiency_below = params.verify_tokens_at_least, params.efficiency_below

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        length, running = step.accept_len, step.running_req
        if length is None or not running or not step.warm:
            return
        n = run.spec_params()[1]
        if n and running * n >= self.verify_at_least and r6(length / n) < self.efficiency_below:
            self.wasteful.add(step.line)

    def steps(self, steps: Steps, run: RunState) -> None:
        """Where the launch sets N: warm lines with an accept length and running requests whose batch verifies
        ``B·N >= verify_tokens_at_least`` tokens per step and keeps ``L/N`` under ``efficiency_below`` (rounded
        as :func:`~acceptmon.diagnose.detector.r6` rounds)."""
        n = run.spec_params()[1]
        if not n:
            return
        verify = self.verify_at_least  # B·N >= V, of ints: B >= ceil(V / N) where N > 0, B <= floor(V / N) where N < 0
        enough = tested(steps.running_req, ge, -(-verify // n)) if n > 0 else tested(steps.running_req, le, verify // n)
        big = every(steps.warm, known(steps.accept_len), steps.running_req, enough)
        if True not in big:
            return
        lengths = picked(steps.accept_len, big)
        kept = map(lt, map(round, map(truediv, lengths, repeat(n)), repeat(6)), repeat(self.efficiency_below))
        self.wasteful.extend(compress(picked(steps.line, big), kept))  # r6(L / N) < bound

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        if not run.speculative:
            return None
        be = ctx.break_even(run)
        if be is not None and be.verdict is not None:  # a baseline decides
            return self._against_baseline(run, be)
        if self.wasteful.count >= self.p.min_lines:
            n = run.draft_tokens
            text = (
                f"{plural(self.wasteful.count, 'batch verifies', 'batches verify')} B·N >= "
                f"{self.p.verify_tokens_at_least} tokens per step while keeping L/N < {self.p.efficiency_below} "
                f"(N = {n})"
            )
            tree = tree_note(run)
            note = f"{tree[0].upper()}{tree[1:]}: the cost is the B·N tokens verified per step." if tree else ""
            return hit(text, self.wasteful.lines, note=note, line_count=self.wasteful.count, draft_tokens=n)
        return self._falloff(run)

    def _against_baseline(self, run: RunState, be: BreakEven) -> Hit | None:
        """Speculation pays at small batches and loses at larger ones, with a healthy accept length."""
        rated = [b for b in be.buckets if b.speedup is not None]
        paying = [b for b in rated if b.speedup is not None and b.speedup >= 1.0]
        losing = [
            b
            for b in rated
            if b.speedup is not None and b.speedup < 1.0 and paying and rated.index(b) > rated.index(paying[0])
        ]
        if not losing or (run.accept_len.mean or 0) < self.p.healthy_accept_len:
            return None
        text = (
            f"faster than the baseline at #running-req {paying[0].running_req} ({paying[0].speedup:.2f}x) "
            f"but slower at {', '.join(f'{b.running_req} ({b.speedup:.2f}x)' for b in losing)}"
        )
        return hit(text, [], accept_len_mean=run.accept_len.mean, losing_buckets=len(losing))

    def _falloff(self, run: RunState) -> Hit | None:
        full = sorted((k, b) for k, b in run.buckets.items() if b.lines >= self.p.min_bucket_lines)
        if len(full) < 2:
            return None
        (lo_key, lo), (hi_key, hi) = full[0], full[-1]
        if hi.mean_running < self.p.min_span * lo.mean_running:
            return None
        lo_len, hi_len = lo.accept_len.mean, hi.accept_len.mean
        if not lo_len or not hi_len or abs(hi_len / lo_len - 1) > self.p.flat:
            return None
        per_lo, per_hi = lo.mean_throughput / lo.mean_running, hi.mean_throughput / hi.mean_running
        if r6(per_hi) >= r6((1 - self.p.falloff) * per_lo):
            return None
        text = (
            f"tok/s per request falls {1 - per_hi / per_lo:.0%} from #running-req {label(*lo_key)} to "
            f"{label(*hi_key)} while accept len stays {lo_len:.2f} -> {hi_len:.2f}"
        )
        return hit(text, [], "info", per_request_low_batch=per_lo, per_request_high_batch=per_hi)


class SpeedupParams(Params):
    loses_below: float = LOSES_BELOW
    marginal_below: float = MARGINAL_BELOW


class Speedup(Detector[SpeedupParams]):
    """P18: against a baseline, speculation loses (warning) or barely pays (info)."""

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        be = ctx.break_even(run)
        if be is None or be.verdict is None or be.verdict == "pays" or be.speedup is None:
            return None
        return hit(
            be.statement,
            [],
            "warning" if be.verdict == "loses" else "info",
            verdict=be.verdict,
            speedup=be.speedup,
            step_cost_ratio=be.step_cost_ratio,
            accept_len=be.accept_len,
        )
