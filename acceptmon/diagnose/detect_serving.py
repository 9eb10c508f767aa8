"""Signature types about how speculation is launched and served: launch signals, CUDA graphs, caps. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import and_, ge, gt, is_, not_
from typing import Any, cast

from pydantic import Field

from acceptmon.diagnose.detector import Context, Detector, Lines, Params, compared, hit, logged, r6
from acceptmon.diagnose.model import Evidence, Hit, plural
from acceptmon.diagnose.state import UNREAD, RunState, Step, Steps, config_value
from acceptmon.measure.plain import has_none
from acceptmon.parse.records import Record, WarningRecord


class SignalParams(Params):
    codes: list[str] = Field(default_factory=list)
    """Warning codes (the phrase the grammar captures) that show the pattern."""
    error_codes: list[str] = Field(default_factory=list)
    """Codes that mean the launch failed: the finding is an error."""
    before_launch: bool = False
    """The ``codes`` are printed while server arguments resolve, before the launch line they belong to.
    ``error_codes`` never move: an error at that point means the launch it belonged to never happened."""
    require_spec: bool = True
    config_equals: dict[str, Any] = Field(default_factory=dict)
    """server_args values that show the pattern together (all must hold)."""
    config_at_least: dict[str, float] = Field(default_factory=dict)
    """server_args numbers that show the pattern together (all must be at least these)."""


class Signal(Detector[SignalParams]):
    """P8, P9, P16: a warning or error at launch, or the server arguments that cause it."""

    def __init__(self, params: SignalParams) -> None:
        super().__init__(params)
        self.seen: list[WarningRecord] = []

    def warning(self, r: WarningRecord, run: RunState) -> None:
        if r.code in self.p.codes or r.code in self.p.error_codes:
            self.seen.append(r)

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        if self.p.require_spec and run.launch is not None and not run.speculative:
            return None  # without a launch line (a launch that failed early) the setting is unknown: report
        if self.seen:
            first = self.seen[0]
            error = any(w.code in self.p.error_codes for w in self.seen)
            number = f" {first.value:g}" if first.value is not None else ""
            text = " ".join(p for p in (first.code + number, (first.detail or "").strip()) if p)
            return hit(
                text, [w.line for w in self.seen], "error" if error else None, code=first.code, count=len(self.seen)
            )
        wanted = {**self.p.config_equals, **self.p.config_at_least}
        if not wanted or run.launch is None:
            return None
        got = {key: config_value(run.launch, key) for key in wanted}
        equal = all(_same(got[k], v) for k, v in self.p.config_equals.items())
        above = all(isinstance(got[k], int | float) and got[k] >= v for k, v in self.p.config_at_least.items())
        if equal and above:
            text = "server_args " + ", ".join(f"{k}={got[k]!r}" for k in wanted)
            values = {k: _plain(v) for k, v in got.items()}
            return Hit(evidence=Evidence(lines=[run.launch_line] if run.launch_line else [], values=values, text=text))
        return None


def _same(have: Any, want: Any) -> bool:
    return bool(have == want or (isinstance(have, str) and isinstance(want, str) and have.lower() == want.lower()))


def _plain(value: Any) -> float | int | str | bool | None:
    return value if isinstance(value, float | int | str | bool) or value is None else repr(value)


class GraphParams(Params):
    off_fraction: float = 0.05
    min_lines: int = 5
    codes: list[str] = Field(default_factory=lambda: ["Cuda graph is disabled because"])
    before_launch: bool = True


class GraphOff(Detector[GraphParams]):
    """P6: speculative decode batches run without CUDA graphs."""

    def __init__(self, params: GraphParams) -> None:
        super().__init__(params)
        self.total = 0
        self.off = Lines()
        self.max_on = 0
        self.min_off: int | None = None
        self.reason: WarningRecord | None = None
        self.above = Lines()  # lines without a graph field above the captured batch size (server_args)
        self.stats_lines = 0
        self.cap_of: Any = UNREAD  # the launch ``cap`` was read from
        self.cap: int | None = None

    def warning(self, r: WarningRecord, run: RunState) -> None:
        if r.code in self.p.codes and self.reason is None:
            self.reason = r

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        if not step.speculative:
            return
        graph, running = r.__dict__.get("cuda_graph"), step.running_req or 0
        if graph is None:  # versions before the field: judge by the captured batch size
            self.stats_lines += 1
            cap = self._captured(run)
            if cap is not None and running > cap:
                self.above.add(step.line)
            return
        self.total += 1
        if graph:
            if running > self.max_on:  # max(), without a call per line
                self.max_on = running
        else:
            self.off.add(step.line)
            self.min_off = running if self.min_off is None else min(self.min_off, running)

    def steps(self, steps: Steps, run: RunState) -> None:
        """Speculative lines (#running-req 0 where not logged). Lines without a ``cuda_graph`` field (versions
        before it) are counted and judged by the batch size graphs were captured for (server_args); the others are
        counted, the largest batch that ran with graphs kept, and the lines without graphs with their smallest
        batch."""
        start = steps.speculative_from
        if start >= len(steps):
            return
        lines, given = steps.line[start:], steps.running_req[start:]
        running = [r or 0 for r in given] if has_none(given) else cast(Sequence[int], given)
        column = steps.values.get("cuda_graph")
        graph = None if column is None else column[start:]
        unlogged = list(map(is_, graph, repeat(None))) if graph is not None and has_none(graph) else None  # None: none
        if unlogged is not None and False not in unlogged:  # no line logs the field
            graph = unlogged = None
        if graph is None or (unlogged is not None and True in unlogged):
            old = lines if graph is None else list(compress(lines, cast(list[bool], unlogged)))
            self.stats_lines += len(old)
            cap = self._captured(run)
            if cap is not None:
                old_running = running if graph is None else compress(running, cast(list[bool], unlogged))
                self.above.extend(compress(old, map(gt, old_running, repeat(cap))))
        if graph is None:
            return
        self.total += len(graph) if unlogged is None else unlogged.count(False)
        if False not in graph:  # graphs on every line that logs them: no line without
            self.max_on = max(chain((self.max_on,), running if unlogged is None else compress(running, graph)))
            return
        self.max_on = max(chain((self.max_on,), compress(running, graph)))
        off = list(map(not_, graph)) if unlogged is None else list(map(and_, map(not_, graph), map(not_, unlogged)))
        off_running = list(compress(running, off))
        if off_running:
            self.off.extend(compress(lines, off))
            self.min_off = min(chain(() if self.min_off is None else (self.min_off,), off_running))

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        if not run.speculative:
            return None
        disabled = config_value(run.launch, "disable_cuda_graph") is True
        if self.total >= self.p.min_lines and r6(self.off.count / self.total) > self.p.off_fraction:
            frac = self.off.count / self.total
            of = plural(self.total, "speculative batch", "speculative batches")
            text = f"cuda graph: False on {self.off.count} of {of} ({frac:.0%})"
            note = ""
            if not disabled and self.min_off is not None and self.min_off > self.max_on > 0:
                cap = config_value(run.launch, "cuda_graph_max_bs")
                note = (
                    f"Graphs run up to {plural(self.max_on, 'running request', 'running requests')} and stop "
                    f"from {self.min_off}: "
                    f"--cuda-graph-max-bs is likely {cap if cap is not None else self.max_on}."
                )
            return hit(
                text,
                self.off.lines,
                note=note,
                off_fraction=frac,
                off_lines=self.off.count,
                max_running_with_graph=self.max_on,
                min_running_without=self.min_off,
            )
        cap = self._captured(run)
        if cap is not None and self.stats_lines >= self.p.min_lines:
            if r6(self.above.count / self.stats_lines) > self.p.off_fraction:
                text = (
                    f"{self.above.count} of {plural(self.stats_lines, 'speculative batch', 'speculative batches')} "
                    f"run more than the {plural(cap, 'request', 'requests')} CUDA graphs were captured for"
                )
                return hit(text, self.above.lines, captured_batch=cap, lines_above=self.above.count)
        if disabled or self.reason is not None:
            lines = [self.reason.line] if self.reason else [run.launch_line] if run.launch_line else []
            text = f"{self.reason.code} {self.reason.detail}" if self.reason else "server_args disable_cuda_graph=True"
            return hit(text, lines, disable_cuda_graph=disabled)
        return None

    def _captured(self, run: RunState) -> int | None:
        """:func:`captured_batch` of the run, read once per launch line (per stats line and per judgement)."""
        if run.launch is not self.cap_of:
            self.cap_of, self.cap = run.launch, captured_batch(run)
        return self.cap


def captured_batch(run: RunState) -> int | None:
    """The largest batch CUDA graphs were captured for, from server_args: cuda_graph_max_bs or max(cuda_graph_bs)."""
    cap = config_value(run.launch, "cuda_graph_max_bs")
    if isinstance(cap, int) and not isinstance(cap, bool):
        return cap
    sizes = config_value(run.launch, "cuda_graph_bs")
    if isinstance(sizes, str):  # a list as logged: '[1, 2, 4, 8]'
        parts = [p.strip() for p in sizes.strip("[]() ").split(",")]
        sizes = [int(p) for p in parts if p.isdigit()] if all(p.isdigit() for p in parts) else None
    if isinstance(sizes, list) and sizes and all(isinstance(s, int) for s in sizes):
        return int(max(sizes))
    return None


class CapParams(Params):
    codes: list[str] = Field(default_factory=lambda: ["Max running requests is reset to"])
    before_launch: bool = True
    fraction: float = 0.2
    min_lines: int = 5
    require_warning: bool = True
    """Without the warning, judge only when server_args set max_running_requests."""


class QueueAtCap(Detector[CapParams]):
    """P7: running requests pinned at the cap speculation imposed, with requests queued."""

    def __init__(self, params: CapParams) -> None:
        super().__init__(params)
        self.cap: float | None = None
        self.cap_line = 0
        self.total = 0
        self.max_running = 0
        self.at_cap = Lines()

    def warning(self, r: WarningRecord, run: RunState) -> None:
        if r.code in self.p.codes and r.value is not None:
            self.cap, self.cap_line = r.value, r.line

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        running = step.running_req
        if running is None:
            return
        self.total += 1
        if running > self.max_running:
            self.max_running = running
        cap = self._cap(run)
        if cap is not None and running >= cap and (r.__dict__.get("queue_req") or 0) > 0:
            self.at_cap.add(step.line)

    def steps(self, steps: Steps, run: RunState) -> None:
        """Lines that log #running-req: counted, the largest kept; with a cap (the warning's, or server_args'
        max_running_requests where no warning is required), the lines at or above it with requests queued."""
        running = steps.running_req
        batches = logged(running)
        if not batches:
            return
        self.total += len(batches)
        self.max_running = max(chain((self.max_running,), batches))
        cap, queue = self._cap(run), steps.values.get("queue_req")
        if cap is not None and queue is not None and any(queue):  # (lines without a queue do not count)
            at_cap = map(and_, compared(running, ge, cap), compared(queue, gt, 0))  # (#queue-req or 0) > 0
            self.at_cap.extend(compress(steps.line, at_cap))

    def _cap(self, run: RunState) -> float | None:
        if self.cap is not None or self.p.require_warning:
            return self.cap
        cap = config_value(run.launch, "max_running_requests")
        return float(cap) if isinstance(cap, int | float) else None

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        cap = self._cap(run)
        if cap is None or self.total < self.p.min_lines or self.max_running != cap:
            return None
        if r6(self.at_cap.count / self.total) < self.p.fraction:
            return None
        frac = self.at_cap.count / self.total
        text = (
            f"#running-req at the cap {cap:g} with #queue-req > 0 on {self.at_cap.count} of "
            f"{plural(self.total, 'batch', 'batches')} ({frac:.0%})"
        )
        lines = [self.cap_line] if self.cap_line else []
        return hit(text, [*lines, *self.at_cap.lines], cap=cap, lines_at_cap=self.at_cap.count, fraction=frac)
