"""Streams: standard input, ``/dev/stdin`` and FIFOs are read a line at a time, by ``parse``, ``serve`` and ``tail``.

Real processes fed through real pipes and FIFOs, one line at a time: each line's row (or metric, or
plain line) is read back before the next line is written, within a generous timeout, so a reader
that waits for a block to fill fails and a slow machine does not. At the end of input ``parse``
ends; ``serve`` and ``tail`` say "input ended" and keep their last state until stopped. A prefixed
stream (``kubectl logs -f --prefix``) keeps each pod's records apart in the live pipeline, as the batch
commands do (``tests/test_streams.py``).
"""

from __future__ import annotations

import csv
import io
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

from acceptmon.inputs.files import check_path, is_stream
from acceptmon.inputs.stream import StreamReader
from acceptmon.parse.load import load_grammars
from acceptmon.parse.records import Record
from acceptmon.pipeline.live import LiveSource
from tests.serving import decode_line, fetch, free_port, launch_line, parse_metrics, value, wait_for
from tests.test_streams import POD_A, POD_B, SOURCE_A, SOURCE_B, _kubectl

ROOT = Path(__file__).resolve().parent.parent
WAIT = 20.0
"""Seconds a row may take (a loaded machine): a reader waiting for a block would wait forever."""
DECODES = [decode_line(i, acc=2.0 + i / 100) for i in range(6)]


def _start(*args: str, stdin: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "acceptmon", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )


def _lines_of(stream: IO[bytes]) -> queue.Queue[bytes]:
    """A queue of ``stream``'s lines as they come (b"" at its end), read on a thread."""
    q: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, b""):
            q.put(line)
        q.put(b"")

    threading.Thread(target=pump, daemon=True).start()
    return q


def _write(f: IO[bytes], line: str) -> None:
    f.write(line.encode() + b"\n")
    f.flush()


@contextmanager
def _stopped(p: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield p
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _rows_one_at_a_time(p: subprocess.Popen[bytes], writer: IO[bytes]) -> list[dict[str, str]]:
    """Write the launch line and each decode line in turn; each row is read before the next line is written."""
    assert p.stdout is not None
    out = _lines_of(p.stdout)
    _write(writer, launch_line())
    text = b""
    for i, line in enumerate(DECODES):
        _write(writer, line)
        want = 2 + i  # the header and a row per decode line written so far
        while text.count(b"\n") < want:
            text += out.get(timeout=WAIT)
    writer.close()
    assert out.get(timeout=WAIT) == b""  # the end of input ends parse
    return list(csv.DictReader(io.StringIO(text.decode())))


def test_parse_stdin_writes_each_row_when_its_line_is_written():
    with _stopped(_start("parse", "-", "-j", "2")) as p:
        assert p.stdin is not None
        rows = _rows_one_at_a_time(p, p.stdin)
        assert p.wait(timeout=WAIT) == 0
        assert p.stderr is not None
        assert "7 lines read, 6 decode, 0 spec" in p.stderr.read().decode()
    assert [float(r["accept_len"]) for r in rows] == [2.0 + i / 100 for i in range(6)]
    assert {(r["run"], r["spec_algorithm"], r["spec_num_steps"]) for r in rows} == {("1", "EAGLE3", "3")}


def test_parse_of_a_fifo_is_read_as_it_comes(tmp_path):
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    p = _start("parse", str(fifo), stdin=subprocess.DEVNULL)
    writer = fifo.open("wb")  # opening waits for the reader: parse opened it
    with _stopped(p):
        rows = _rows_one_at_a_time(p, writer)
        assert p.wait(timeout=WAIT) == 0
    assert [float(r["accept_len"]) for r in rows] == [2.0 + i / 100 for i in range(6)]


def _metric(port: int, name: str, **labels: str) -> float | None:
    try:
        return value(parse_metrics(fetch(f"http://127.0.0.1:{port}/metrics")), name, **labels)
    except OSError:
        return None


def test_serve_stdin_shows_each_batch_and_keeps_serving_after_the_input_ends():
    port = free_port()
    with _stopped(_start("serve", "-", "--port", str(port))) as p:
        assert p.stdin is not None and p.stderr is not None
        _write(p.stdin, launch_line())
        for i, line in enumerate(DECODES):
            _write(p.stdin, line)
            got = wait_for(lambda i=i: _metric(port, "acceptmon_decode_batches_total", file="-") == i + 1, WAIT)
            assert got, f"batch {i + 1} not on /metrics"
        assert _metric(port, "acceptmon_log_file_present", file="-") == 1
        assert _metric(port, "acceptmon_accept_length", file="-", rank="TP0") == pytest.approx(2.05)
        p.stdin.close()
        errors = _lines_of(p.stderr)
        seen = ""
        while "input ended" not in seen:
            seen += errors.get(timeout=WAIT).decode()
        assert "-: input ended after 7 lines; keeping the last state until stopped" in seen
        time.sleep(0.3)
        assert p.poll() is None  # still serving
        page = parse_metrics(fetch(f"http://127.0.0.1:{port}/metrics"))
        assert value(page, "acceptmon_decode_batches_total", file="-") == 6
        assert value(page, "acceptmon_run_info", file="-", spec_algorithm="EAGLE3") == 1
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=15) == 0


def test_tail_plain_stdin_prints_each_batch_and_waits_after_the_input_ends():
    with _stopped(_start("tail", "--plain", "-")) as p:
        assert p.stdin is not None and p.stdout is not None and p.stderr is not None
        out = _lines_of(p.stdout)
        _write(p.stdin, launch_line())
        printed = []
        for line in DECODES:
            _write(p.stdin, line)
            printed.append(out.get(timeout=WAIT).decode())
        assert [float(x.split("accept_len=")[1].split()[0]) for x in printed] == [2.0 + i / 100 for i in range(6)]
        p.stdin.close()
        errors = _lines_of(p.stderr)
        seen = ""
        while "input ended" not in seen:
            seen += errors.get(timeout=WAIT).decode()
        time.sleep(0.3)
        assert p.poll() is None  # the last state stays until stopped
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=15) == 0


def test_check_path_takes_dev_stdin_on_a_pipe_as_a_stream():
    r, w = os.pipe()
    saved = os.dup(0)
    try:
        os.dup2(r, 0)
        check_path("/dev/stdin")  # its real path is under /proc: no kernel file, a stream
        assert is_stream("/dev/stdin") and is_stream("-")
    finally:
        os.dup2(saved, 0)
        for fd in (r, w, saved):
            os.close(fd)


def test_a_fifo_without_a_writer_is_waited_on_and_its_end_is_seen(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = StreamReader(str(fifo), lambda b: got.append(b))  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    t = threading.Thread(target=reader.run, args=(stop,))
    t.start()
    time.sleep(0.3)
    assert t.is_alive() and not reader.ended  # no writer yet: not an end
    with fifo.open("wb") as w:
        w.write(b"one\ntwo")
        w.flush()
        assert wait_for(lambda: got == [b"one\n"], WAIT)
    t.join(WAIT)
    assert reader.ended and got == [b"one\n", b"two\n"]  # the last line, completed at the end


def test_a_prefixed_stream_keeps_each_pods_runs_in_the_live_pipeline(tmp_path):
    """``kubectl logs -f --prefix`` through a FIFO: each pod its own source, run and config, as ``runs`` has them."""
    fifo = tmp_path / "pods"
    os.mkfifo(fifo)
    got: list[Record] = []
    ended: list[str] = []
    source = LiveSource([str(fifo)], load_grammars(), lambda _f, rs, _t: got.extend(rs), on_ended=ended.append)
    stop = threading.Event()
    t = threading.Thread(target=source.run, args=(stop,), kwargs={"poll": True})
    t.start()
    try:
        with fifo.open("wb") as w:
            w.write(_kubectl().encode())
        assert wait_for(lambda: ended == [str(fifo)], WAIT)
    finally:
        stop.set()
        t.join(WAIT)
        source.close()
    decodes = [r for r in got if r.kind == "decode"]
    by_source = {(r.source, r.pod, r.run) for r in decodes}
    assert by_source == {(SOURCE_A, POD_A, 1), (SOURCE_B, POD_B, 2)}
    assert sum(1 for r in decodes if r.source == SOURCE_A) == 96
    assert sum(1 for r in decodes if r.source == SOURCE_B) == 120
    configs = {r.source: r.spec_algorithm for r in decodes}  # type: ignore[attr-defined]
    assert configs == {SOURCE_A: "EAGLE3", SOURCE_B: None}


def test_the_dashboard_of_a_log_on_stdin_reads_its_keys_from_the_terminal(tmp_path):
    """``kubectl logs -f POD | acceptmon tail -`` in a real terminal (tmux): the screen follows the stream,
    says when it ended, and q still quits (keys come from the terminal, not from the log)."""
    from tests.test_terminal import Terminal
    from tests.test_terminal import acceptmon as command

    fifo = tmp_path / "kubectl"
    os.mkfifo(fifo)
    term = Terminal(f"{command('tail', '-')} < {fifo}")
    try:
        with fifo.open("wb") as w:  # opened once the shell opened it for the command's standard input
            _write(w, launch_line(steps=5, tokens=6))
            _write(w, decode_line(0, acc=2.85))
            assert term.wait_for("EAGLE3  steps 5  topk 1  draft tokens 6", timeout=WAIT), term.screen()
            assert term.wait_for("2.85", timeout=WAIT), term.screen()
            _write(w, decode_line(1, acc=1.37))
            assert term.wait_for("1.37", timeout=WAIT), term.screen()
        assert term.wait_for("-: input ended after 3 lines", timeout=WAIT), term.screen()
        term.quit()
    finally:
        term.close()
