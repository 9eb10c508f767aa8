"""Rendering doctor results: pinned JSON for programs, wrapped text for people (coloured on a terminal).

JSON: ``{"findings": [{"rule", "severity", "file", "run", "evidence", "message", "fix"}, ...],
"runs": [...]}``; ``evidence`` holds ``lines``, ``values`` and ``text``; each run carries its
break-even (verdict against a baseline, or the break-even statement) and its finding count.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from acceptmon.diagnose.engine import Change, RunReport
from acceptmon.diagnose.model import Finding, plural
from acceptmon.display import requests_only, strict_json
from acceptmon.measure.depth import Recommendation

WIDTH = 100
COLOURS = {"error": "\x1b[1;31m", "warning": "\x1b[33m", "info": "\x1b[36m"}
RESET = "\x1b[0m"


def to_json(findings: Sequence[Finding], runs: Sequence[RunReport]) -> str:
    data: dict[str, Any] = {
        "findings": [f.model_dump(mode="json") for f in findings],
        "runs": [r.model_dump(mode="json") for r in runs],
    }
    return strict_json(data, indent=2)


def to_text(findings: Sequence[Finding], runs: Sequence[RunReport], *, colour: bool = False) -> str:
    """Per run: a header, its findings (worst first) or 'no finding', and its break-even line."""
    by_run: dict[tuple[str, int], list[Finding]] = {}
    for f in findings:
        by_run.setdefault((f.file, f.run), []).append(f)
    keys = [(r.file, r.run) for r in runs]
    keys += [k for k in by_run if k not in keys]
    reports = {(r.file, r.run): r for r in runs}
    blocks = [_run_block(k, reports.get(k), by_run.get(k, []), colour) for k in keys]
    if not blocks:
        return "no runs and no batches found"
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    total = ", ".join(plural(n, s, s if s == "info" else f"{s}s") for s, n in counts.items())
    return "\n\n".join([*blocks, f"{plural(len(keys), 'run', 'runs')}: {total}"])


def event_line(change: Change) -> str:
    """One line for a live event log (:attr:`Change.line`)."""
    return change.line


def _run_block(key: tuple[str, int], report: RunReport | None, findings: list[Finding], colour: bool) -> str:
    file, number = key
    head = f"{file} run {number}"
    if report is not None:
        parts = [report.model or "model unknown", report.spec, plural(report.batches, "batch", "batches")]
        if report.accept_len_mean is not None:
            parts.append(f"accept len {report.accept_len_mean:.2f}")
        if report.judged_batches != report.batches and report.judged_accept_len_mean is not None:
            parts.append(f"judged {report.judged_accept_len_mean:.2f} over {report.judged_batches} past warm-up")
        if report.gen_throughput_per_rank is not None:
            parts.append(f"{report.gen_throughput_per_rank:.1f} tok/s/rank")
        if report.gen_throughput_total is not None and report.gen_throughput_total != report.gen_throughput_per_rank:
            parts.append(f"{report.gen_throughput_total:.1f} tok/s total")
        head += ": " + ", ".join(parts)
    lines = [head]
    order = {"error": 0, "warning": 1, "info": 2}
    for f in sorted(findings, key=lambda f: order[f.severity]):
        lines += _finding_lines(f, colour)
    if not findings and report is not None and report.too_few_to_judge:
        lines += _wrap(_too_few(report), "  ")
    elif not findings:
        lines.append("  no finding")
    if report is not None and report.break_even is not None:
        lines += _wrap("break-even: " + report.break_even.statement, "  ")
    if report is not None and report.recommendation is not None:
        lines += depth_lines(report.run, report.recommendation)
    return "\n".join(lines)


NOTHING_ACCEPTED = 1.05
"""A mean accept length at most this: speculation accepted (almost) nothing in the batches there are."""


def _too_few(report: RunReport) -> str:
    """Why a run without findings was not judged, and what its few batches do show."""
    if not report.batches and report.requests:  # a log of finished requests alone (llama-server's default)
        return f"nothing to judge: {requests_only(report.requests)}"
    text = f"too few batches ({report.judged_batches} past warm-up) to judge: no finding means nothing here"
    length = report.accept_len_mean
    if report.batches and length is not None and length <= NOTHING_ACCEPTED:
        text += f"; in the batches there are, speculation accepted nothing (accept len {length:.2f})"
    return text


MARK = {"measured": " ", "predicted": "~", "extrapolated": "+"}


def depth_lines(run: int, rec: Recommendation) -> list[str]:
    """This run's per-position acceptance and the sweep's recommendation; the sweep's first run also gets the
    per-depth table and the leave-one-out check."""
    cond = ", ".join(f"{p.conditional:.2f}" for p in rec.positions)
    out = _wrap(f"depth: conditional acceptance by position {cond} (from {rec.positions_from})", "  ")
    lead = min([*rec.sweep_runs, *(x.run for x in rec.left_out)])
    first = run == lead
    if first:
        out += _depth_table(rec)
    out += _wrap("recommended: " + _advice_text(rec) + ("" if first else f" (per-depth table under run {lead})"), "  ")
    if first and rec.checks:
        out += _wrap(_check_text(rec), "    ")
    return out


def _depth_table(rec: Recommendation) -> list[str]:
    head = "steps" if rec.parameter == "speculative_num_steps" else "k"
    rows = [f"    {head:<11}" + "".join(f"{r.depth:<7}" for r in rec.depths)]
    rows.append(
        "    accept len " + "".join(f"{r.predicted_accept_len:.2f}{MARK[r.basis]}".ljust(7) for r in rec.depths)
    )
    if any(r.predicted_tok_s is not None for r in rec.depths):
        cells = ("-" if r.predicted_tok_s is None else f"{r.predicted_tok_s:.1f}{MARK[r.basis]}" for r in rec.depths)
        rows.append("    tok/s/rank " + "".join(c.ljust(7) for c in cells))
    rows = [r.rstrip() for r in rows]
    against = (
        f"; tok/s = S x {rec.reference_tok_s:.1f}, the {'mean' if rec.reference_unmatched else 'steady'} "
        f"tok/s/rank of {rec.reference}"
        if rec.reference_tok_s
        else ""
    )
    note = f"(unmarked: a depth run, at its accept len and break-even S; ~ predicted, + extrapolated{against})"
    return rows + _wrap(note, "    ")


def _advice_text(rec: Recommendation) -> str:
    if rec.depth is None:
        return rec.advice
    row = next(r for r in rec.depths if r.depth == rec.depth)
    where = f"measured, run {row.run}" if row.run is not None else rec.basis or ""
    text = f"{rec.advice} ({where}): accept len {row.predicted_accept_len:.2f}"
    if row.predicted_tok_s is not None and row.predicted_speedup is not None and rec.baseline:
        text += f", {row.predicted_tok_s:.1f} tok/s/rank, S = {row.predicted_speedup:.2f} against {rec.reference}"
    elif row.predicted_tok_s is not None and row.predicted_speedup is not None:
        text += (
            f", {row.predicted_tok_s:.1f} tok/s/rank, {row.predicted_speedup:.2f} x the throughput of {rec.reference} "
            "(no baseline: whether speculation pays at all needs one)"
        )
    if rec.tied:
        text += f"; as fast within the 95 % CIs: {', '.join(str(d) for d in rec.tied)}"
    return text


def _check_text(rec: Recommendation) -> str:
    def signed(values: list[float | None], unit: str) -> str:
        return ", ".join("-" if v is None else f"{v:+.3f}{unit}" if not unit else f"{v:+.1f}{unit}" for v in values)

    c = rec.checks
    inside = sum(bool(x.accept_len_within_ci) for x in c)
    text = (
        f"check, each depth run predicted from the other runs (depths {', '.join(str(x.depth) for x in c)}): "
        f"accept len off by {signed([x.accept_len_error for x in c], '')} "
        f"({inside} of {len(c)} within the run's 95 % CI)"
    )
    if any(x.tok_s_error_pct is not None for x in c):
        inside = sum(bool(x.tok_s_within_ci) for x in c)
        text += f", tok/s by {signed([x.tok_s_error_pct for x in c], ' %')} ({inside} of {len(c)} within)"
    return text


def _finding_lines(f: Finding, colour: bool) -> list[str]:
    tag = f"[{f.severity}]"
    if colour:
        tag = f"{COLOURS[f.severity]}{tag}{RESET}"
    title, _, cause = f.message.partition(": ")
    out = [f"  {tag} {f.rule} {title}"]
    where = f" ({f.evidence.where()})" if f.evidence.lines else ""
    out += _wrap("evidence: " + f.evidence.text + where, "    ")
    out += _wrap("cause: " + cause, "    ")
    out += _wrap("try: " + f.fix, "    ")
    return out


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False)
