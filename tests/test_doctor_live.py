"""The doctor live: findings in the exporter's gauge and the dashboard's events as they start and clear."""

from __future__ import annotations

from acceptmon.doctor.engine import Doctor
from acceptmon.doctor.rules import load_rules
from acceptmon.parse import Parser
from acceptmon.sinks.livestate import DOCTOR_SECONDS, LiveStats
from acceptmon.sinks.prometheus import MetricsPage
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
    assert 'acceptmon_doctor_finding{file="seed.log",rule="P2",severity="warning"} 1.0' in page
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
    clock.now += 0.1
    live.update("seed.log", parser.feed(("\n".join(broken[10:]) + "\n").encode()), parser.tally)
    assert live.snapshot().findings == frozenset()  # judged at the first batch; the rest waits a second
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
