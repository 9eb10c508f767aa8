"""`acceptmon tail` and `acceptmon demo` in a real terminal (tmux), read as a person would see them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tests.serving import decode_line, launch_line, wait_for

SEED = SAMPLES / "seed_eagle3_moe.log"

pytestmark = pytest.mark.integration


class Terminal:
    """One tmux session on a private server socket, 140x45 unless told."""

    def __init__(self, command: str, size: tuple[int, int] = (140, 45)) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux not found: install Debian's tmux package (apt-get install tmux), or run ./scripts/test")
        self.socket = f"acceptmon-test-{uuid.uuid4().hex[:8]}"
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            str(size[0]),
            "-y",
            str(size[1]),
            f"{command}; echo EXITED $?; sleep 30",
        )

    def tmux(self, *args: str) -> str:
        # A COLUMNS/LINES inherited from the test runner would override the pane's real size.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True,
                              env=env).stdout  # fmt: skip

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, text: str, timeout: float = 30.0) -> bool:
        """Whether ``text`` came on screen within ``timeout`` (generous: a busy machine; it returns once it shows)."""
        return bool(wait_for(lambda: text in self.screen(), timeout=timeout, interval=0.05))

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def quit(self) -> None:
        """Press q; the program must end with exit code 0."""
        self.keys("q")
        assert self.wait_for("EXITED 0"), self.screen()

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


SEED_HISTORY = [("1", "1.13"), ("2", "2.84"), ("3", "1.81"), ("4", "2.41"), ("5 *", "3.27")]
"""The seed log's launches as the run-history table shows them: run (current marked *) and mean accept len."""


def shows_seed_history(screen: str) -> bool:
    rows = [line.split("││")[-1] for line in screen.splitlines() if "││" in line]
    return all(any(row.startswith(f" {run} ") and f" {mean} " in row for row in rows) for run, mean in SEED_HISTORY)


def acceptmon(*args: str) -> str:
    return " ".join([sys.executable, "-m", "acceptmon", *args])


def test_tail_shows_the_run_follows_appends_and_quits(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join([launch_line(steps=5, tokens=6), *(decode_line(i, acc=2.85) for i in range(5))]) + "\n")
    term = Terminal(acceptmon("tail", str(log)))
    try:
        assert term.wait_for("EAGLE3  steps 5  topk 1  draft tokens 6"), term.screen()
        assert term.wait_for("2.85"), term.screen()
        with log.open("a") as f:
            f.write(decode_line(6, acc=1.37) + "\n")
        start = time.monotonic()
        assert term.wait_for("1.37"), term.screen()  # within a second or so, more on a busy machine
        print(f"\nappended line on screen after {time.monotonic() - start:.2f} s")
        term.quit()
    finally:
        term.close()


def test_tail_waits_for_a_missing_file(tmp_path):
    log = tmp_path / "later.log"
    term = Terminal(acceptmon("tail", str(log)))
    try:
        assert term.wait_for("to appear"), term.screen()
        log.write_text(launch_line() + "\n" + decode_line(0, acc=3.21) + "\n")
        assert term.wait_for("3.21"), term.screen()
        term.quit()
    finally:
        term.close()


def test_demo_replays_the_seed_scenario(tmp_path):
    term = Terminal(acceptmon("demo", "--speed", "300"))
    try:
        assert term.wait_for("seed_eagle3_moe.log (demo, 300x)"), term.screen()
        # The broken first launch (accept len about 1.13) is flagged by the default --alert-below 1.5.
        assert term.wait_for("acceptance collapse: window mean accept len 1.1"), term.screen()
        assert term.wait_for("replay finished", timeout=60.0), term.screen()
        # The replay ends before the follower has read its last lines: wait for the final means.
        assert wait_for(lambda: shows_seed_history(term.screen())), term.screen()
        term.quit()
    finally:
        term.close()


def test_plain_lines_pipe_into_grep(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join([launch_line(), decode_line(0, rank="DP0 TP0"), decode_line(1, rank="DP1 TP1")]) + "\n")
    cmd = acceptmon("tail", "--plain", "--from-start", str(log)) + " | grep --line-buffered TP1"
    proc = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
    finally:
        proc.terminate()
        subprocess.run(["pkill", "-f", f"tail --plain --from-start {log}"], check=False)
    assert line.strip() == (
        "2026-02-26 14:00:01 DP1 TP1 run=1 accept_len=2.85 accept_rate=0.47 draft_accept_rate=0.62 gen_throughput=94.12"
    )


THROUGHPUT = re.compile(
    r"(?:Engine (\d+): )?Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: ([\d.]+)"
)


def engines_and_throughput(log: Path) -> list[tuple[str, str]]:
    """Per spec line of a vLLM log, read off the text: the engine of the throughput line before it (a spec
    line names none; v0 logs none at all: ``-``) and that line's generation throughput."""
    out, engine, tput = [], "-", "-"
    for line in log.read_text().splitlines():
        if m := THROUGHPUT.search(line):
            engine, tput = m[1] or engine, f"{float(m[2]):.2f}"
        elif "Speculative metrics:" in line or "SpecDecoding metrics:" in line:
            out.append((engine, tput))
    return out


def test_plain_vllm_lines_name_the_engine_and_its_intervals_throughput():
    logs = [SAMPLES / name for name in ("vllm_v0_0.6.log", "vllm_v1_0.8.5.log", "vllm_v1_0.10.2_dp.log")]
    wanted = {str(log): engines_and_throughput(log) for log in logs}
    proc = subprocess.Popen([sys.executable, "-m", "acceptmon", "tail", "--plain", "--from-start", *wanted],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:  # FILE DATE TIME UNIT run=N accept_len= accept_rate= draft_accept_rate= gen_throughput=
        lines = [proc.stdout.readline().split() for _ in range(sum(map(len, wanted.values())))]  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
    assert all(len(x) == 9 for x in lines), lines
    got = {f: [(x[3], x[8].removeprefix("gen_throughput=")) for x in lines if x[0] == f] for f in wanted}
    assert got == wanted
    assert [len(w) for w in wanted.values()] == [42, 55, 92]  # runs' batches
    units = [{u for u, _ in w} for w in wanted.values()]
    assert units == [{"-"}, {"000"}, {"000", "001"}]  # v0 logs no engine number


def test_tail_with_metrics_port_serves_the_same_numbers(tmp_path):
    from tests.serving import fetch, free_port, parse_metrics, value

    log = tmp_path / "server.log"
    log.write_text("\n".join([launch_line(), decode_line(0, acc=2.61), decode_line(1, acc=2.73)]) + "\n")
    port = free_port()
    term = Terminal(acceptmon("tail", str(log), "--metrics-port", str(port)))
    try:
        assert term.wait_for("2.73"), term.screen()
        m = wait_for(lambda: parse_metrics(fetch(f"http://127.0.0.1:{port}/metrics")))
        assert value(m, "acceptmon_accept_length", file=str(log)) == 2.73
        assert value(m, "acceptmon_decode_batches_total", file=str(log)) == 2
        term.quit()
    finally:
        term.close()


def test_tail_starts_at_the_last_launch_and_fills_the_history_from_before_it(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(SEED.read_bytes())
    term = Terminal(acceptmon("tail", str(log)))
    try:
        assert term.wait_for("run 5 started 2026-02-26 14:02:50"), term.screen()
        assert term.wait_for("run history: 4 earlier launches read"), term.screen()
        assert wait_for(lambda: shows_seed_history(term.screen())), term.screen()
        term.quit()
    finally:
        term.close()


def legible(screen: str) -> list[str]:
    """Lines with text cut short (an ellipsis) or wider than the terminal."""
    width = max(len(line) for line in screen.splitlines())
    return [line for line in screen.splitlines() if "…" in line or len(line) > width]


def test_demo_at_80x24_shows_fewer_things_whole(tmp_path):
    term = Terminal(acceptmon("demo", "--speed", "60", "--stale-after", "1s"), size=(80, 24))
    try:
        # Runs 1 and 2 have one launch config: the log says the fix was elsewhere, with both means.
        assert term.wait_for("run 2: same config as run 1, accept len 1.1"), term.screen()
        assert "outside server_args" in term.screen()
        assert term.wait_for("replay finished", timeout=60.0), term.screen()
        finished = time.monotonic()
        texts = ("accept len", "window mean", "accept rate", "normalized; logged", "gen tok/s", "sum of 8 ranks",
                 "queued req", "accept len, mean of ranks", "len   rate  tok/s/rank  time", "events (log time)")  # fmt: skip

        def plot_rows(screen: str) -> list[str]:
            return [line for line in screen.splitlines() if line[:4].replace(".", "").isdigit() and "┤" in line]

        def drawn() -> bool:
            screen = term.screen()
            return all(text in screen for text in texts) and len(plot_rows(screen)) >= 6

        # drawn (a busy machine draws the last lines a while after the replay's end; what is missing fails
        # below), then the rest of 2.5 s: over --stale-after, and a finished replay with requests queued is not a stall
        wait_for(drawn)
        time.sleep(max(0.0, finished + 2.5 - time.monotonic()))
        screen = term.screen()
        print("\n" + screen)
        assert "no decode line" not in screen
        assert legible(screen) == [], screen
        for text in texts:
            assert text in screen, (text, screen)
        assert "running req" not in screen and "DP0 TP0" not in screen  # no room: left out, not cut
        rows = plot_rows(screen)
        assert len(rows) >= 6, screen
        values = [float(line[:4]) for line in rows]
        assert values == sorted(values, reverse=True)  # y rises upwards
        term.keys("p")
        assert term.wait_for(" PAUSED "), term.screen()
        assert term.screen().splitlines()[0].startswith("  PAUSED   seed_eagle3_moe.log")  # first, at any width
        term.keys("p")
        term.quit()
    finally:
        term.close()


def test_demo_at_140x45_is_legible(tmp_path):
    term = Terminal(acceptmon("demo", "--speed", "300"))
    try:
        assert term.wait_for("replay finished", timeout=60.0), term.screen()
        assert wait_for(lambda: shows_seed_history(term.screen())), term.screen()
        screen = term.screen()
        print("\n" + screen)
        assert legible(screen) == [], screen
        for text in ("window mean", "normalized;", "logged", "sum of 8 ranks", "running req", "token usage",
                     "rank▲", "tok/s/rank", "gen tok/s per rank", "--:--:--  replay finished"):  # fmt: skip
            assert text in screen, (text, screen)
        term.keys("?")
        assert term.wait_for("Esc, ? or q closes this help"), term.screen()
        term.keys("Escape")
        assert wait_for(lambda: "closes this help" not in term.screen()), term.screen()
        term.quit()
    finally:
        term.close()


@pytest.mark.parametrize("size", [(140, 45), (80, 24)])
def test_demo_of_a_vllm_log_shows_engines_and_position_bars(tmp_path, size):
    term = Terminal(acceptmon("demo", "--sample", "vllm_v1_0.10", "--speed", "300"), size=size)
    try:
        assert term.wait_for("replay finished", timeout=60.0), term.screen()
        assert term.wait_for("run 2 vs run 1: better", timeout=60.0), term.screen()  # judged every 10 s
        screen = term.screen()
        print("\n" + screen)
        # the verdict's throughput CI is compare's (tok/s of the engines' load lines): a range, not a cut
        assert legible(screen.replace("(CI +5.7 … +32.9 %)", "(CI +5.7 to +32.9 %)")) == [], screen
        texts = ["vllm_v1_0.10.2_dp.log (demo, 300x)", "last spec 00:02:09", "window mean 3.48", "sum of 2 engines",
                 "accepted by position", "█ run ┃ last", "0.87 0.86", "0.37 0.36", "accept len"]  # fmt: skip
        if size == (140, 45):
            texts += ["KV, fullest engine", "engines: accept len last", "engine▲  last", "000      3.39  3.47  299.3",
                      "gen tok/s per engine", "accept len  (--- run 1 mean 2.98)"]  # fmt: skip
        for text in texts:
            assert text in screen, (text, screen)
        term.quit()
    finally:
        term.close()


def rank_header(screen: str) -> str:
    """The rank table's column header line, as drawn (left of the run history)."""
    return next((line.split("││")[0] for line in screen.splitlines() if "│ rank" in line), "")


def test_tail_of_several_files_names_the_shown_file_and_f_switches_it(tmp_path):
    from tests.test_dashboard import nospec_lines, ts

    spec, base, broken = tmp_path / "spec.log", tmp_path / "baseline.log", tmp_path / "broken.log"
    lines = [decode_line(rank=f"DP{r} TP{r}", acc=3.21, tput=94, ts=ts(1 + i)) for i in range(3) for r in range(11)]
    spec.write_text("\n".join([launch_line(ts=ts(0), steps=5, tokens=6), *lines]) + "\n")
    base.write_text("\n".join(nospec_lines(0, 3)) + "\n")
    broken.write_text(launch_line(ts=ts(200)) + "\n")  # launched, then nothing: a failed start
    term = Terminal(acceptmon("tail", str(spec), str(base), str(broken)))
    try:
        # broken.log is read last; the tiles show the newest run with data, and say whose they are
        assert term.wait_for("showing baseline.log (f: next file)"), term.screen()
        assert term.wait_for("143.0"), term.screen()  # the baseline's 2 ranks x 71.5 tok/s
        assert term.wait_for("f Next file"), term.screen()  # the footer offers it, with a second file
        rows = ("││ baseline.log ", "││ spec.log ")  # the history's rows, drawn after its header
        assert wait_for(lambda: all(r in term.screen() for r in rows), timeout=30.0, interval=0.05), term.screen()
        screen = term.screen()
        assert "sum of 2 ranks" in screen, screen
        history = [line.split("││")[-1] for line in screen.splitlines() if "││" in line]
        assert any(row.startswith(" file ") and " run " in row for row in history), screen
        assert any(row.startswith(" baseline.log ") and " 1 * " in row for row in history), screen
        assert any(row.startswith(" spec.log ") and " 1 " in row for row in history), screen
        term.keys("f")
        assert term.wait_for("showing broken.log"), term.screen()
        term.keys("f")
        assert term.wait_for("showing spec.log"), term.screen()
        assert term.wait_for("window mean 3.21") and term.wait_for("1034.0"), term.screen()
        assert [r[0] for r in rank_rows(term.screen())] == [f"DP{i}" for i in range(11)], term.screen()  # its own
        term.keys("f")  # round again
        assert term.wait_for("showing baseline.log"), term.screen()
        term.quit()
    finally:
        term.close()


def rank_rows(screen: str) -> list[list[str]]:
    """The rank table's rows as drawn, split into words."""
    return [line.split("││")[0].split("│")[-1].split() for line in screen.splitlines() if "│ DP" in line]


def test_tail_keeps_the_sort_marker_on_the_sorted_column_and_sorts_ranks_as_numbers(tmp_path):
    log = tmp_path / "server.log"
    ranks = (10, 2, 0, 1, 9, 11)
    lines = [decode_line(rank=f"DP{r} TP{r}", acc=2 + r / 100, tput=90 - r, ts=f"2026-02-26 14:00:0{i}")
             for i in range(2) for r in ranks]  # fmt: skip
    log.write_text("\n".join([launch_line(), *lines]) + "\n")
    term = Terminal(acceptmon("tail", str(log)))
    try:
        assert term.wait_for("│ DP11 TP11"), term.screen()
        assert rank_header(term.screen()).split()[1:3] == ["rank▲", "last"], term.screen()
        order = [f"DP{r}" for r in sorted(ranks)]
        for name in ("last", "mean", "tok/s", "running", "queue", "seen", "rank"):  # each s: the next column
            term.keys("s")
            assert wait_for(lambda name=name: f" {name}▲ " in rank_header(term.screen())), term.screen()
            assert rank_header(term.screen()).count("▲") == 1, term.screen()
            if name == "tok/s":  # 90 - rank, ascending: the highest rank first
                assert [r[0] for r in rank_rows(term.screen())] == order[::-1], term.screen()
        assert [r[0] for r in rank_rows(term.screen())] == order, term.screen()  # by rank: DP2 before DP10
        term.quit()
    finally:
        term.close()
