"""The doctor live: findings in the exporter's gauge and the dashboard's events as they start and clear."""

from __future__ import annotations

import threading
import time

from acceptmon.diagnose.engine import Doctor
from acceptmon.diagnose.rules import load_rules
from acceptmon.exporter.metrics import MetricsPage
from acceptmon.live.state import DOCTOR_SECONDS, LiveStats
from acceptmon.parse.parser import Parser
from acceptmon.tui.model import DashboardState
from tests.conftest import SAMPLES
from tests.serving import Clock

SEED = SAMPLES / "seed_eagle3_moe.log"


def _runs() -> tuple[list[str], list[str]]:
    """The seed log's broken first run, and its fixed second run."""
    lines = SEED.read_text().splitlines()
    launches = [i for i, line in enumerate(lines) if "server_args=" in line]
    return lines[: launches[1]], lines[launches[1] : launches[2]]


def test_serve_exports_a_finding_while_it_holds(grammars):
    clock = Clock()
    live = LiveStats(clock=clock, doctor=Doctor(load_rules()))
    parser = Parser(grammars, "seed.log")
    broken, fixed = _runs()
    live.update("seed.log", parser.feed(("\n".join(broken) + "\n").encode()), parser.tally)
    page = MetricsPage(live).render().decode()
    assert (
        'acceptmon_doctor_finding{container="",file="seed.log",namespace="",pod="",rule="P2",severity="warning"} 1.0'
        in page
    )
    assert [c.event for c in live.take_changes()] == ["new"]
    clock.now += DOCTOR_SECONDS
    live.update("seed.log", parser.feed(("\n".join(fixed) + "\n").encode()), parser.tally)
    page = MetricsPage(live).render().decode()
    assert "acceptmon_doctor_finding{" not in page  # the fixed run holds no finding: the series is gone
    assert "# TYPE acceptmon_doctor_finding gauge" in page
    assert [(c.event, c.finding.rule, c.finding.run) for c in live.take_changes()] == [("cleared", "P2", 1)]


def test_findings_wait_for_the_judging_interval_then_a_reader_sees_them(grammars):
    clock = Clock()
    live = LiveStats(clock=clock, doctor=Doctor(load_rules()))
    parser = Parser(grammars, "seed.log")
    broken, _ = _runs()
    live.update("seed.log", parser.feed(("\n".join(broken[:10]) + "\n").encode()), parser.tally)
    assert live.snapshot().findings == frozenset()  # the first reader judges the first lines
    clock.now += 0.1
    live.update("seed.log", parser.feed(("\n".join(broken[10:]) + "\n").encode()), parser.tally)
    assert live.snapshot().findings == frozenset()  # the rest waits a second
    clock.now += DOCTOR_SECONDS
    assert live.snapshot().findings == {("seed.log", "P2", "warning")}


def test_tail_shows_findings_as_events(grammars):
    clock = Clock()
    state = DashboardState(clock=clock, live=LiveStats(clock=clock, doctor=Doctor(load_rules())))
    parser = Parser(grammars, "seed.log")
    broken, fixed = _runs()
    state.add("seed.log", parser.feed(("\n".join(broken) + "\n").encode()), parser.tally)
    clock.now += DOCTOR_SECONDS
    state.add("seed.log", parser.feed(("\n".join(fixed) + "\n").encode()), parser.tally)
    doctor = [(e.level, e.text) for e in state.view().events if e.text.startswith("doctor: ")]
    assert [level for level, _ in doctor] == ["warn", "info"]
    assert doctor[0][1].startswith("doctor: P2 warning (run 1): Draft does not match the target - ")
    assert doctor[1][1] == "doctor: cleared P2 warning (run 1): Draft does not match the target"
    at = [e.at for e in state.view().events if e.text.startswith("doctor: ")]
    assert all(t is not None for t in at)  # log time, as every record-caused event


def test_a_live_start_reads_the_start_up_warnings_printed_before_the_launch_line(tmp_path, grammars):
    """SGLang prints some warnings just before server_args=: starting at the launch line must not lose them."""
    from acceptmon.pipeline.live import LiveSource
    from tests.data.doctor.make import p07_cap_48

    log = tmp_path / "p07.log"
    log.write_text(p07_cap_48().text())
    clock = Clock()
    live = LiveStats(clock=clock, doctor=Doctor(load_rules()))
    source = LiveSource([str(log)], grammars, live.update)  # not --from-start: starts at the last launch
    source.discover()
    source.tick()
    clock.now += DOCTOR_SECONDS
    assert (str(log), "P7", "warning") in live.snapshot().findings
    assert live.snapshot().files[0].lines["warning"] == 1
    source.close()


def _vllm_log(accepted_per_position: tuple[float, ...], k: int = 3, method: str = "eagle3") -> str:
    """A vLLM 0.10.2 log from its format strings: one launch, then 12 throughput and spec intervals."""
    launch = ("INFO 12-31 23:41:02 [utils.py:328] non-default args: {'model': 'Qwen/Qwen3-8B', 'speculative_config': "
              f"{{'method': '{method}', 'model': 'some/draft', 'num_speculative_tokens': {k}}}}}")  # fmt: skip
    lines = [launch]
    drafts = 1000
    for i in range(12):
        accepted = round(drafts * sum(accepted_per_position))
        rates = ", ".join(f"{p:.3f}" for p in accepted_per_position)
        ts = f"12-31 23:{42 + i:02d}:03"
        lines.append(f"INFO {ts} [loggers.py:123] Engine 000: Avg prompt throughput: 700.9 tokens/s, Avg generation "
                     "throughput: 247.9 tokens/s, Running: 26 reqs, Waiting: 0 reqs, GPU KV cache usage: 9.4%, "
                     "Prefix cache hit rate: 35.9%")  # fmt: skip
        lines.append(f"INFO {ts} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
                     f"{1 + accepted / drafts:.2f}, Accepted throughput: {accepted / 10:.2f} tokens/s, Drafted "
                     f"throughput: {drafts * k / 10:.2f} tokens/s, Accepted: {accepted} tokens, Drafted: {drafts * k} "
                     f"tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: "
                     f"{100 * accepted / (drafts * k):.1f}%")  # fmt: skip
    return "\n".join(lines) + "\n"


def test_the_doctor_reads_vllm_spec_lines(tmp_path, grammars):
    """P2 (draft does not match) from a vLLM log's accept length; P13 from its last per-position rate."""
    from acceptmon.diagnose.read import diagnose

    bad, deep = tmp_path / "bad.log", tmp_path / "deep.log"
    bad.write_text(_vllm_log((0.03, 0.01, 0.0)))
    deep.write_text(_vllm_log((0.85, 0.62, 0.35, 0.12, 0.04), k=5))
    doctor = diagnose([str(bad), str(deep)], grammars, load_rules())
    rules = {(f.file.rsplit("/", 1)[-1], f.rule) for f in doctor.findings()}
    assert ("bad.log", "P2") in rules
    assert ("deep.log", "P13") in rules
    assert not {r for f, r in rules if f == "deep.log"} & {"P1", "P2"}


class _SlowDoctor(Doctor):
    """The real doctor, whose judgement waits until the test lets it go (a judgement of any cost)."""

    def __init__(self) -> None:
        super().__init__(load_rules())
        self.judging = threading.Event()
        self.release = threading.Event()

    def update(self, records):  # type: ignore[no-untyped-def]
        self.judging.set()
        self.release.wait(30)
        return super().update(records)


def _within(seconds: float, call):  # type: ignore[no-untyped-def]
    """``call()``'s result if it returns within ``seconds``, else fail (a thread, so a blocked call cannot hang)."""
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"blocked for more than {seconds} s behind the doctor's judgement"
    return out[0]


def test_a_judgement_in_progress_blocks_no_update_scrape_or_screen(grammars):
    """Whatever one judgement costs, lines are still taken in and every reader answers at once."""
    doctor = _SlowDoctor()
    live = LiveStats(doctor=doctor)
    stop = threading.Event()
    live.start_doctor(stop)
    parser = Parser(grammars, "seed.log")
    broken, fixed = _runs()
    try:
        live.update("seed.log", parser.feed(("\n".join(broken) + "\n").encode()), parser.tally)
        assert doctor.judging.wait(30)  # the doctor's thread is inside a judgement now
        page = _within(10.0, lambda: MetricsPage(live).render().decode())  # blocked, it would wait 30 s
        batches = [x for x in page.splitlines() if x.startswith("acceptmon_decode_batches_total{")]
        assert any('rank="DP0 TP0 EP0"' in x and x.endswith(" 12.0") for x in batches)  # the lines were taken in
        assert "acceptmon_doctor_finding{" not in page  # nothing judged yet, and nobody waits for it
        _within(10.0, lambda: live.update("seed.log", parser.feed(("\n".join(fixed) + "\n").encode()), parser.tally))
        assert _within(10.0, live.take_changes) == []
        doctor.release.set()
        deadline = time.monotonic() + 30
        while ("seed.log", "P2", "warning") not in live.snapshot().findings and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ("seed.log", "P2", "warning") in live.snapshot().findings  # published once it was judged
    finally:
        doctor.release.set()
        stop.set()


def test_labels_after_a_judgement_are_that_judgements_and_a_feed_makes_them_judged_anew(grammars):
    """The live doctor asks for labels right after each judgement: they are the findings it just judged
    (not judged twice), and once more records are fed they are judged again."""
    doctor = Doctor(load_rules())
    parser = Parser(grammars, "seed.log")
    broken, fixed = _runs()
    doctor.update(parser.feed(("\n".join(broken) + "\n").encode()))
    assert doctor.labels() == {("seed.log", "P2", "warning")}
    doctor.feed(parser.feed(("\n".join(fixed) + "\n").encode()))  # fed, not yet judged through update
    assert doctor.labels() == set()
    assert [(c.event, c.finding.rule) for c in doctor.update([])] == [("cleared", "P2")]
    assert doctor.labels() == set()


def test_a_judgement_judges_again_only_the_runs_of_files_with_new_records(grammars, monkeypatch):
    """A run is judged with its own file's runs and fixed inputs: while no record reaches its file, its last
    findings stand (a live tick with 30 files, one of them busy, judges one); a record there judges it anew."""
    doctor = Doctor(load_rules())
    quiet, busy = Parser(grammars, "quiet.log"), Parser(grammars, "busy.log")
    broken, fixed = _runs()
    doctor.update(quiet.feed(("\n".join(broken) + "\n").encode()))
    doctor.update(busy.feed(("\n".join(broken[:12]) + "\n").encode()))
    assert doctor.labels() == {("quiet.log", "P2", "warning")}  # busy.log: too few batches yet
    judged: list[str] = []
    hit = type(doctor.runs["quiet.log", 1].detectors[0][1]).hit
    monkeypatch.setattr(
        type(doctor.runs["quiet.log", 1].detectors[0][1]),
        "hit",
        lambda self, run, ctx: judged.append(run.file) or hit(self, run, ctx),
    )
    changes = doctor.update(busy.feed(("\n".join(broken[12:]) + "\n").encode()))
    assert [(c.event, c.finding.file, c.finding.rule) for c in changes] == [("new", "busy.log", "P2")]
    assert judged == ["busy.log"]
    assert doctor.labels() == {("quiet.log", "P2", "warning"), ("busy.log", "P2", "warning")}
    judged.clear()
    changes = doctor.update(quiet.feed(("\n".join(fixed) + "\n").encode()))  # a new run: the file's current run
    assert [(c.event, c.finding.file, c.finding.run) for c in changes] == [("cleared", "quiet.log", 1)]
    assert judged == ["quiet.log"]
    assert doctor.labels() == {("busy.log", "P2", "warning")}
    assert [f.file for f in doctor.findings()] == ["quiet.log", "busy.log"]  # run 1 of quiet.log still has its own
