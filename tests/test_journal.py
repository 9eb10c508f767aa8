"""journald: ``journalctl -o json`` and ``-o export`` read as the plain log they carry.

The journal files are built from the sample logs as journalctl writes them: each line an entry with
the fields journald gives a service's stdout (``__CURSOR``, ``__REALTIME_TIMESTAMP``, ``_SYSTEMD_UNIT``,
``_PID`` ...); some messages as journalctl writes a value that is not printable UTF-8 (``-o json``: an
array of byte values; ``-o export``: ``KEY``, a 64-bit little-endian length, the bytes), some with ANSI
colour, which is what makes journalctl write them so.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import subprocess
import sys

import pytest

from acceptmon.cli import main
from acceptmon.inputs.journal import ExportReader, JsonReader
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser
from tests.conftest import ROOT, SAMPLES

UNIT = "sglang.service"
LOGS = sorted(p for p in SAMPLES.glob("*.log"))
GRAMMARS = load_grammars()


def _entries(log_bytes: bytes) -> list[dict[str, bytes]]:
    out = []
    for i, line in enumerate(log_bytes.splitlines()):
        message = b"\x1b[32m" + line + b"\x1b[0m" if i % 7 == 3 else line
        out.append({
            "__CURSOR": f"s=6b1e;i={i + 1:x};b=9f2c;m={i:x};t=64a1;x=1d".encode(),
            "__REALTIME_TIMESTAMP": str(1772100000000000 + 250_000 * i).encode(),
            "__MONOTONIC_TIMESTAMP": str(81234000 + i).encode(),
            "_BOOT_ID": b"9f2c0c8b1e6a4d1f8a3b2c1d0e9f8a7b",
            "PRIORITY": b"6",
            "SYSLOG_FACILITY": b"3",
            "SYSLOG_IDENTIFIER": b"python3",
            "MESSAGE": message,
            "_PID": b"81234",
            "_COMM": b"python3",
            "_SYSTEMD_UNIT": UNIT.encode(),
            "_TRANSPORT": b"stdout",
        })  # fmt: skip
    return out


def _printable(value: bytes) -> bool:
    try:
        text = value.decode()
    except UnicodeDecodeError:
        return False
    return all(c >= " " or c == "\t" for c in text)


def journal_json(log_bytes: bytes, *, old: bool = False) -> bytes:
    """``journalctl -o json``: compact (systemd 246+) or ``{ "KEY" : value, ... }`` (``old``)."""
    lines = []
    for entry in _entries(log_bytes):
        fields = {k: v.decode() if _printable(v) else list(v) for k, v in entry.items()}
        if old:
            lines.append("{ " + ", ".join(f"{json.dumps(k)} : {json.dumps(v)}" for k, v in fields.items()) + " }")
        else:
            lines.append(json.dumps(fields, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines).encode() + b"\n"


def journal_export(log_bytes: bytes) -> bytes:
    """``journalctl -o export``: a binary-safe field for every value that is not printable text."""
    out = bytearray()
    for entry in _entries(log_bytes):
        for key, value in entry.items():
            if _printable(value):
                out += key.encode() + b"=" + value + b"\n"
            else:
                out += key.encode() + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"
        out += b"\n"
    return bytes(out)


def _without_source(runs: list[dict]) -> list[dict]:
    for run in runs:
        assert run.pop("source") in ("", UNIT)
        run.pop("file")
    return runs


def _runs(path, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["runs", "--format", "json", "--year", "2026", str(path)]) == 0
    return _without_source(json.loads(capsys.readouterr().out))


def _runs_of_stdin(data: bytes) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "acceptmon", "runs", "--format", "json", "--year", "2026", "-"],
        input=data,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return _without_source(json.loads(done.stdout))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_runs_on_journalctl_json_and_export_are_the_runs_of_the_plain_log(log, tmp_path, capsys):
    plain = _runs(log, capsys)
    data = log.read_bytes()
    for name, text in [
        ("json", journal_json(data)),
        ("json-old", journal_json(data, old=True)),
        ("export", journal_export(data)),
    ]:
        path = tmp_path / f"{log.stem}.{name}"
        path.write_bytes(text)
        got = _runs(path, capsys)
        if all(r["start"] is None for r in plain):  # lines without a time of their own (llama.cpp): the entry's
            assert all(r["start"] is not None for r in got), name
            got = [{**r, "start": None, "end": None, "duration_s": None} for r in got]
        assert got == plain, name


def test_the_unit_is_the_source_and_stdin_and_gzip_are_read_too(tmp_path, capsys):
    log = SAMPLES / "seed_eagle3_moe.log"
    plain = _runs(log, capsys)
    export = journal_export(log.read_bytes())
    assert _runs_of_stdin(export) == plain
    assert _runs_of_stdin(journal_json(log.read_bytes())) == plain
    path = tmp_path / "journal.export.gz"
    path.write_bytes(gzip.compress(export))
    assert _runs(path, capsys) == plain
    parser = Parser(GRAMMARS, "j")
    records = parser.feed(b"".join(ExportReader(io.BytesIO(export)).read().splitlines(keepends=True)))
    assert records and {r.source for r in records} == {UNIT}


class _Trickle(io.RawIOBase):
    """A stream that hands out a few bytes per read: every field and length cut at every place."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.pos, self.step = data, 0, step

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        got = self.data[self.pos : self.pos + self.step]
        self.pos += len(got)
        return got


@pytest.mark.parametrize("step", [1, 2, 7, 8, 9, 64, 1 << 20])
def test_export_entries_cut_anywhere_are_the_same_lines(step):
    data = journal_export((SAMPLES / "request_0.5.23.log").read_bytes()[:20000])
    data += b"MESSAGE\n" + struct.pack("<Q", 266) + b"x\n" * 133 + b"\n_SYSTEMD_UNIT=a\n\n"  # 266 = 0x10a
    want = ExportReader(io.BytesIO(data)).read()
    assert ExportReader(_Trickle(data, step)).read() == want  # type: ignore[arg-type]
    lines = want.splitlines()
    assert len(lines) == data.count(b"__CURSOR=") + 1
    assert json.loads(lines[-1]) == {"MESSAGE": "x\n" * 133, "_SYSTEMD_UNIT": "a"}
    json_lines = journal_json((SAMPLES / "request_0.5.23.log").read_bytes()[:20000])
    assert JsonReader(_Trickle(json_lines, step)).read() == JsonReader(io.BytesIO(json_lines)).read()  # type: ignore[arg-type]


def test_an_over_long_export_value_is_dropped_unread_and_its_entry_kept():
    huge = 1 << 62
    data = b"__CURSOR=a\nMESSAGE\n" + struct.pack("<Q", huge) + b"abc"
    assert ExportReader(io.BytesIO(data)).read() == b'{"__CURSOR":"a"}\n'


def test_the_entry_time_dates_a_record_that_has_none_of_its_own():
    body = "#running-req: 3, #token: 4521, token usage: 0.02, accept len: 2.85, gen throughput (token/s): 94.12"
    stamp = "1772100000123456"  # 2026-02-26 10:00:00.123456 UTC
    parser = Parser(GRAMMARS, "j")
    own = f'{{"__CURSOR":"c","__REALTIME_TIMESTAMP":"{stamp}","MESSAGE":"[2026-02-26 14:09:45 TP0] Decode batch, {body}"}}'
    none = f'{{"__CURSOR":"c","__REALTIME_TIMESTAMP":"{stamp}","MESSAGE":"Decode batch, {body}"}}'
    assert str(parser.parse_line(own).timestamp) == "2026-02-26 14:09:45"
    assert str(parser.parse_line(none).timestamp) == "2026-02-26 10:00:00.123456"
    assert parser.parse_line(none.replace(f',"__REALTIME_TIMESTAMP":"{stamp}"', "")).timestamp is None


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_fast_lane_writes_what_the_parser_writes_on_journal_files(fmt, tmp_path, monkeypatch):
    from acceptmon.pipeline import batch
    from acceptmon.sinks.table import TableJob

    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    data = (SAMPLES / "seed_eagle3_moe.log").read_bytes()
    for name, text in [("json", journal_json(data)), ("export", journal_export(data))]:
        path = tmp_path / f"j.{name}"
        path.write_bytes(text)
        outs = []
        for fast in (fmt, None):
            out = io.BytesIO()
            batch.run([str(path)], GRAMMARS, TableJob(fmt, out), jobs=2, fast=fast)  # type: ignore[arg-type]
            outs.append(out.getvalue())
        assert outs[0] == outs[1] and outs[0].count(b"\n") > 300, name
