"""Container log files: a line the runtime split into 16 KiB pieces is joined back before parsing.

Real files in the CRI format (``TIME STREAM P|F MSG``, kubelet's ``/var/log/pods``) and Docker's
json-file format (pieces without a trailing ``\\n`` in ``log``), with a 40 kB ``server_args`` line
whose speculative settings come after its first 16 KiB: without joining, the run has no config.
Batch commands read the file; ``serve`` follows it as pieces are appended one at a time, and the
live pipeline reads the pieces as a stream through a FIFO. A journalctl ``-o export`` file is followed entry by entry.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import threading
from pathlib import Path

import pytest

from acceptmon.cli import main
from acceptmon.inputs.container import Joiner, is_container
from acceptmon.inputs.files import OVERSIZED, LineAssembler, iter_blocks
from acceptmon.inputs.follow import Follower
from acceptmon.parse.load import load_grammars
from acceptmon.parse.records import Record
from acceptmon.pipeline import batch
from acceptmon.pipeline.live import LiveSource
from tests.serving import Serve, decode_line, launch_line, parse_metrics, value, wait_for
from tests.test_journal import journal_export

WAIT = 20.0
PIECE = 16 << 10


def _big_launch() -> str:
    """A 40 kB launch line: a long value first, the model and speculative settings after 16 KiB."""
    line = launch_line()
    head = line.index("ServerArgs(") + len("ServerArgs(")
    return line[:head] + "chat_template='" + "x" * 40_000 + "', " + line[head:]


LINES = [_big_launch(), *(decode_line(i, acc=2.5 + i / 10) for i in range(5))]


def _pieces(line: str) -> list[str]:
    return [line[k : k + PIECE] for k in range(0, len(line), PIECE)] or [""]


def cri(lines: list[str], stream: str = "stderr") -> list[bytes]:
    """The lines as the kubelet writes them, one entry per piece."""
    out = []
    for i, line in enumerate(lines):
        parts = _pieces(line)
        for j, part in enumerate(parts):
            tag = "F" if j == len(parts) - 1 else "P"
            out.append(f"2026-02-26T14:00:{i:02d}.{j:09d}Z {stream} {tag} {part}\n".encode())
    return out


def docker(lines: list[str], stream: str = "stderr") -> list[bytes]:
    """The lines as Docker's json-file driver writes them: a piece's ``log`` has no newline but the last."""
    out = []
    for i, line in enumerate(lines):
        parts = _pieces(line)
        for j, part in enumerate(parts):
            log = part + ("\n" if j == len(parts) - 1 else "")
            entry = {"log": log, "stream": stream, "time": f"2026-02-26T14:00:{i:02d}.{j:09d}Z"}
            out.append(json.dumps(entry, separators=(",", ":")).encode() + b"\n")
    return out


FORMATS = {"cri": cri, "docker": docker}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(list(args)) == 0
    got = capsys.readouterr()
    return got.out, got.err


def _runs(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = json.loads(_run(capsys, "runs", "--format", "json", str(path))[0])
    return runs


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_split_launch_line_gives_the_run_its_config_in_runs_and_parse(tmp_path, fmt, capsys):
    assert len(LINES[0]) > 40_000 and "speculative_algorithm" not in LINES[0][:PIECE]
    plain = tmp_path / "plain.log"
    plain.write_text("\n".join(LINES) + "\n")
    path = tmp_path / f"{fmt}.log"
    path.write_bytes(b"".join(FORMATS[fmt](LINES)))
    (run,) = _runs(path, capsys)
    (want,) = _runs(plain, capsys)
    assert (run["spec_algorithm"], run["spec_num_steps"], run["model"], run["batches"]) == (
        "EAGLE3",
        3,
        "Qwen/Qwen3-8B",
        5,
    )
    assert {k: v for k, v in run.items() if k != "file"} == {k: v for k, v in want.items() if k != "file"}
    out, err = _run(capsys, "parse", str(path))
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["spec_algorithm"], float(r["accept_len"])) for r in rows] == [("EAGLE3", 2.5 + i / 10) for i in range(5)]
    assert ", 1 launch, " in err and "0 unrecognized" in err
    assert batch._whole(str(path))  # read from its start: no byte range of -j N starts inside a split line


def test_pieces_of_stdout_and_stderr_are_joined_apart_and_lines_keep_their_order():
    launch = cri([LINES[0]])
    other = b"2026-02-26T14:00:00.5Z stdout F stdout says hello\n"
    joined = Joiner(1 << 20)
    out = joined.feed(launch[0] + other) + joined.feed(b"".join(launch[1:]))
    text = b"".join(b for b in out if b is not None)
    assert text.count(b"\n") == 2 and text.endswith(other)  # the launch line first: its first piece came first
    assert text.startswith(b"2026-02-26T14:00:00.000000000Z stderr F " + LINES[0][:100].encode())
    assert len(text) - len(other) == len(LINES[0]) + len("2026-02-26T14:00:00.000000000Z stderr F \n")


def test_a_joined_line_over_the_line_limit_is_skipped_as_oversized():
    lines = LineAssembler(max_line=30_000)
    got = lines.feed(b"".join(cri([LINES[0], LINES[1]])))
    assert got[0] is OVERSIZED and got[1:] == [cri([LINES[1]])[0].replace(b":00.", b":01.", 1)]
    assert lines.resume_point() == (0, False)


def test_pieces_at_the_end_of_a_file_are_read_as_far_as_they_came(tmp_path):
    path = tmp_path / "0.log"
    path.write_bytes(b"".join(cri([LINES[0]])[:2]))
    with path.open("rb") as f:
        (block,) = list(iter_blocks(f))
    assert isinstance(block, bytes) and block.count(b"\n") == 1 and block.startswith(b"2026-02-26T14:00:00.000000000Z")


def test_a_followers_position_stays_at_the_first_piece_until_its_line_is_whole(tmp_path):
    path = tmp_path / "0.log"
    path.write_bytes(b"")
    got: list[bytes] = []
    f = Follower(str(path), got.append)  # type: ignore[arg-type]
    pieces = cri(LINES[:2])
    with path.open("ab") as w:
        w.write(pieces[0] + pieces[1])
        w.flush()
        f.poll_once()
        assert got == [] and f.position()[2:] == (0, False)  # type: ignore[index]
        w.write(pieces[2] + pieces[3])
        w.flush()
        f.poll_once()
    assert b"".join(got).count(b"\n") == 2 and f.position()[2] == path.stat().st_size  # type: ignore[index]
    f.close()


def test_the_head_of_a_container_file_is_known():
    assert is_container(cri(LINES)[0][:128]) and is_container(docker(LINES)[0][:128])
    assert not is_container(LINES[1].encode()[:128])


def _serve_metrics(s: Serve) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    try:
        return parse_metrics(s.get())
    except OSError:
        return {}


def _has_config(s: Serve, file: str, batches: int) -> bool:
    page = _serve_metrics(s)
    return (
        value(page, "acceptmon_run_info", file=file, spec_algorithm="EAGLE3", spec_num_steps="3") == 1
        and value(page, "acceptmon_decode_batches_total", file=file) == batches
    )


def test_serve_following_a_cri_file_joins_pieces_appended_one_at_a_time(tmp_path):
    folder = tmp_path / "pods" / "inference_sglang-0_0f1e2d3c" / "sglang"
    folder.mkdir(parents=True)
    path = folder / "0.log"
    path.write_bytes(b"")
    s = Serve(str(path), "--poll", "--poll-interval", "0.05")
    try:
        s.wait_listening()
        with path.open("ab") as w:
            for piece in cri(LINES):
                w.write(piece)
                w.flush()
        assert wait_for(lambda: _has_config(s, str(path), 5), WAIT), s.get()
    finally:
        assert s.stop() == 0
    assert "0 unrecognized" in s.stderr


def test_a_stream_of_docker_pieces_through_a_fifo_gives_the_live_run_its_config(tmp_path):
    fifo = tmp_path / "docker-logs"
    os.mkfifo(fifo)
    got: list[Record] = []
    ended: list[str] = []
    source = LiveSource([str(fifo)], load_grammars(), lambda _f, rs, _t: got.extend(rs), on_ended=ended.append)
    stop = threading.Event()
    t = threading.Thread(target=source.run, args=(stop,), kwargs={"poll": True})
    t.start()
    try:
        with fifo.open("wb") as w:
            for piece in docker(LINES):  # one write per piece, as `docker logs -f` relays them
                w.write(piece)
                w.flush()
        assert wait_for(lambda: ended == [str(fifo)], WAIT)
    finally:
        stop.set()
        t.join(WAIT)
        source.close()
    launch = next(r for r in got if r.kind == "launch")
    assert (launch.config.spec_algorithm, launch.config.spec_num_steps) == ("EAGLE3", 3)  # type: ignore[attr-defined]
    assert [r.spec_algorithm for r in got if r.kind == "decode"] == ["EAGLE3"] * 5  # type: ignore[attr-defined]
    assert source.streams[str(fifo)].parser.tally.kinds["unrecognized"] == 0


def test_serve_follows_a_journal_export_file_entry_by_entry(tmp_path):
    data = journal_export(("\n".join([launch_line(), *(decode_line(i) for i in range(4))]) + "\n").encode())
    cut = [i + 2 for i in range(len(data) - 1) if data[i : i + 2] == b"\n\n"]
    entries = [data[a:b] for a, b in zip([0, *cut], cut, strict=False)]
    assert len(entries) == 5 and b"".join(entries) == data
    path = tmp_path / "journal.export"
    path.write_bytes(entries[0])
    state = tmp_path / "state.json"
    s = Serve(str(path), "--poll", "--poll-interval", "0.05", "--state-file", str(state))
    try:
        s.wait_listening()
        with path.open("ab") as w:
            for entry in entries[1:]:
                half = len(entry) // 2
                for part in (entry[:half], entry[half:]):  # an entry written in two pieces
                    w.write(part)
                    w.flush()
        assert wait_for(lambda: _has_config(s, str(path), 4), WAIT)
    finally:
        assert s.stop() == 0
    saved = json.loads(state.read_text())["files"][os.path.abspath(path)]
    assert saved["offset"] == len(data)
    assert "0 unrecognized" in s.stderr


def test_a_follower_resumed_at_an_export_entry_reads_the_rest_as_json_lines(tmp_path):
    data = journal_export(("\n".join([launch_line(), *(decode_line(i) for i in range(3))]) + "\n").encode())
    ends = [i + 2 for i in range(len(data) - 1) if data[i : i + 2] == b"\n\n"]
    starts = [0, *ends[:-1]]
    path = tmp_path / "journal.export"
    path.write_bytes(data)
    got: list[bytes] = []
    f = Follower(str(path), got.append, start=starts[2])  # type: ignore[arg-type]
    f.poll_once()
    lines = b"".join(got).splitlines()
    messages = [re.sub(r"\x1b\[[\d;]*m", "", json.loads(line)["MESSAGE"]) for line in lines]  # one is coloured
    assert messages == [decode_line(1), decode_line(2)]
    assert f.position()[2] == len(data)  # type: ignore[index]
    f.close()


def test_a_carriage_return_inside_a_piece_does_not_end_its_line():
    bar = "Capturing batches (bs=4):  50%|#####     |\r" * 600  # a progress bar, redrawn with \r: over 16 KiB
    lines = [f"[2026-02-26 14:00:00] {bar}done", LINES[1]]
    pieces = cri(lines)
    assert len(pieces) == 3
    text = b"".join(b for b in Joiner(1 << 20).feed(b"".join(pieces)) if b is not None)
    assert text == b"2026-02-26T14:00:00.000000000Z stderr F " + lines[0].encode() + b"\n" + pieces[-1]
