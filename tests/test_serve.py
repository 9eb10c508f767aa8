"""`acceptmon serve` as a real process: start position, live updates, signals, web config, state file."""

from __future__ import annotations

import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error

import bcrypt
import pytest

from tests.serving import Serve, decode_line, fetch, launch_line, value, wait_for

pytestmark = pytest.mark.integration


def write(path, *lines: str) -> None:
    with path.open("a") as f:
        f.write("".join(line + "\n" for line in lines))


def decoded(serve: Serve, **labels: str) -> float | None:
    return value(serve.metrics(), "acceptmon_decode_batches_total", **labels)


def stopped_decode_count(stderr: str, file: str) -> int:
    m = re.search(rf"stopped: {re.escape(file)}: [\d,]+ lines read, ([\d,]+) decode", stderr)
    assert m, stderr
    return int(m.group(1).replace(",", ""))


def test_default_start_backfills_the_current_run_then_follows(tmp_path):
    log = tmp_path / "server.log"
    write(log, launch_line(steps=3, tokens=4), *(decode_line(i, acc=1.12) for i in range(50)))
    write(log, launch_line(steps=5, tokens=6), *(decode_line(i, acc=3.2) for i in range(7)))
    serve = Serve(str(log))
    try:
        serve.wait_listening()
        m = wait_for(lambda: (x := serve.metrics()) and value(x, "acceptmon_decode_batches_total") and x)
        assert value(m, "acceptmon_decode_batches_total") == 7  # only the current run was replayed
        assert value(m, "acceptmon_accept_length") == 3.2
        labels = dict(next(iter(m["acceptmon_run_info"])))
        assert (labels["spec_num_steps"], labels["spec_num_draft_tokens"]) == ("5", "6")
        start = time.monotonic()
        write(log, decode_line(99, acc=2.0))
        # read as it is appended: about 0.05 s on an idle machine, a few tenths under load; 10 s is for a busy CI
        # machine (benchmarks/bench_live.py measures the latency)
        assert wait_for(lambda: decoded(serve) == 8, timeout=10.0), "appended line not visible within 10 s"
        print(f"\nappended line on /metrics after {time.monotonic() - start:.2f} s")
        assert value(serve.metrics(), "acceptmon_accept_length") == 2.0
    finally:
        assert serve.stop() == 0
    assert "Traceback" not in serve.stderr
    assert "serving metrics at http://127.0.0.1:" in serve.stderr


def test_from_start_reads_everything(tmp_path):
    log = tmp_path / "server.log"
    write(log, launch_line(steps=3), *(decode_line(i) for i in range(50)), launch_line(steps=5), decode_line(51))
    serve = Serve(str(log), "--from-start")
    try:
        serve.wait_listening()
        assert wait_for(lambda: decoded(serve) == 51)
        assert value(serve.metrics(), "acceptmon_server_launches_total") == 2
    finally:
        serve.stop()


def test_missing_file_waits_then_is_read_from_its_start(tmp_path):
    log = tmp_path / "later.log"
    serve = Serve(str(log))
    try:
        serve.wait_listening()

        def present() -> float | None:
            return value(serve.metrics(), "acceptmon_log_file_present", file=str(log))

        # serve listens before it first looks for its files, and marks a file present just after the tick that
        # read its first lines: a busy machine's scrape can come in between (no series yet; lines but 0)
        assert wait_for(lambda: present() == 0), ("the file known, and absent", present())
        write(log, launch_line(), decode_line(0), decode_line(1))
        assert wait_for(lambda: decoded(serve) == 2), "the file's lines once it appeared"
        assert wait_for(lambda: present() == 1), ("the file present", present())
    finally:
        serve.stop()
    assert "does not exist yet; waiting for it" in serve.stderr


def test_glob_picks_up_new_files(tmp_path):
    write(tmp_path / "a.log", launch_line(), decode_line(0))
    serve = Serve(str(tmp_path / "*.log"))
    try:
        serve.wait_listening()
        assert wait_for(lambda: decoded(serve, file=str(tmp_path / "a.log")) == 1)
        write(tmp_path / "b.log", launch_line(), decode_line(0), decode_line(1))
        assert wait_for(lambda: decoded(serve, file=str(tmp_path / "b.log")) == 2), "the new match's lines"
    finally:
        serve.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_cleanly(tmp_path, sig):
    log = tmp_path / "s.log"
    write(log, decode_line(0))
    serve = Serve(str(log))
    serve.wait_listening()
    assert serve.stop(sig) == 0
    assert "Traceback" not in serve.stderr and "stopped: " in serve.stderr


def test_restart_with_state_file_counts_every_line_once(tmp_path):
    log, state = tmp_path / "s.log", tmp_path / "state.json"
    log.write_text(launch_line() + "\n")
    written = 0
    first = Serve(str(log), "--state-file", str(state))
    first.wait_listening()
    with log.open("a") as f:
        for _ in range(3):  # write while the first lifetime runs
            for _ in range(400):
                f.write(decode_line(written) + "\n")
                written += 1
            f.flush()
            time.sleep(0.05)
        f.write(decode_line(written)[:40])  # a partial line is pending when it stops
        f.flush()
        assert first.stop() == 0
        counted_first = stopped_decode_count(first.stderr, str(log))
        f.write(decode_line(written)[40:] + "\n")
        written += 1
        for _ in range(300):  # more lines while nobody is following
            f.write(decode_line(written) + "\n")
            written += 1
    second = Serve(str(log), "--state-file", str(state))
    try:
        second.wait_listening()
        with log.open("a") as f:
            for _ in range(200):
                f.write(decode_line(written) + "\n")
                written += 1
        assert wait_for(lambda: (counted_first + (decoded(second) or 0)) >= written), (counted_first, written)
        time.sleep(0.3)
        assert counted_first + decoded(second) == written
        assert 0 < counted_first < written
    finally:
        second.stop()
    assert "resuming at byte" in second.stderr


def test_state_file_for_a_replaced_file_reads_the_new_one_whole(tmp_path):
    log, state = tmp_path / "s.log", tmp_path / "state.json"
    write(log, launch_line(), *(decode_line(i) for i in range(10)))
    s1 = Serve(str(log), "--state-file", str(state), "--from-start")
    try:
        s1.wait_listening()
        assert wait_for(lambda: decoded(s1) == 10), "the first lifetime's lines"
    finally:
        s1.stop()
    log.unlink()
    write(log, launch_line(steps=2, tokens=3), *(decode_line(i, ts="2026-03-01 10:00:00") for i in range(4)))
    s2 = Serve(str(log), "--state-file", str(state))
    try:
        s2.wait_listening()
        assert wait_for(lambda: decoded(s2) == 4)
    finally:
        s2.stop()
    assert "replaced since the state file was written" in s2.stderr


def _run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acceptmon", "serve", *args], capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("basic_auth_users: [\n", "not valid YAML"),
        ("basic_auth_user:\n  a: b\n", "basic_auth_user: Extra inputs are not permitted"),
        ("basic_auth_users:\n  prom: secret\n", "is not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n", "cannot load cert_file/key_file"),
        ("tls_server_config:\n  cert_file: a.crt\n", "tls_server_config.key_file: Field required"),
    ],
)
def test_bad_web_config_is_one_line_error(tmp_path, content, message):
    web = tmp_path / "web.yml"
    web.write_text(content)
    r = _run_serve(str(tmp_path / "s.log"), "--web-config", str(web), "--port", "0")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(web) in lines[0] and message in lines[0], r.stderr


def test_port_in_use_is_one_line_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _run_serve(str(tmp_path / "s.log"), "--port", str(port))
    assert r.returncode == 2 and "cannot listen" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_basic_auth_and_tls(tmp_path):
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "server.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10)).decode().replace("$2b$", "$2y$")
    (tmp_path / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    log = tmp_path / "s.log"
    write(log, launch_line(), decode_line(0))
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    serve = Serve(str(log), "--web-config", str(tmp_path / "web.yml"), scheme="https")
    try:
        serve.wait_listening(context=ctx)
        with pytest.raises(urllib.error.HTTPError) as err:
            serve.get(context=ctx)
        assert err.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as err:
            serve.get("prometheus", "wrong", context=ctx)
        assert err.value.code == 401
        auth = {"user": "prometheus", "password": "s3cret", "context": ctx}
        assert wait_for(lambda: value(serve.metrics(**auth), "acceptmon_decode_batches_total") == 1)
        with pytest.raises(OSError):
            fetch(serve.url.replace("https://", "http://"), "prometheus", "s3cret")  # plain HTTP to a TLS port
    finally:
        assert serve.stop() == 0
    assert "Traceback" not in serve.stderr


def _status(serve: Serve, password: str) -> int:
    try:
        serve.get("prometheus", password)
    except urllib.error.HTTPError as err:
        return err.code
    return 200


def test_the_right_password_is_served_while_the_same_address_keeps_guessing(tmp_path):
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10)).decode().replace("$2b$", "$2y$")
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    log = tmp_path / "s.log"
    write(log, launch_line(), decode_line(0))
    serve = Serve(str(log), "--web-config", str(tmp_path / "web.yml"))
    stop, answers = threading.Event(), []

    def guess() -> None:
        while not stop.is_set():
            answers.append(_status(serve, "wrong"))

    guessers = [threading.Thread(target=guess) for _ in range(8)]
    try:
        serve.wait_listening()  # a restart: no success cached yet
        assert [_status(serve, f"guess{i}") for i in range(5)] == [401] * 5
        for t in guessers:
            t.start()
        assert wait_for(lambda: 429 in answers)
        counted, start = len(answers), time.monotonic()
        for _ in range(3):  # the same address (127.0.0.1) keeps failing meanwhile
            assert value(serve.metrics(user="prometheus", password="s3cret"), "acceptmon_decode_batches_total") == 1
            time.sleep(0.5)
        rate = (len(answers) - counted) / (time.monotonic() - start)
        assert 0 < rate < 10  # 8 guessers, each failure held 1 s (it was ~1000 answers/s)
    finally:
        stop.set()
        for t in guessers:
            t.join(30)
        assert serve.stop() == 0
    assert set(answers) == {429} and "Traceback" not in serve.stderr


def test_tls_client_certificates_are_required_when_configured(tmp_path):
    import trustme

    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1")
    server_cert.cert_chain_pems[0].write_to_path(str(tmp_path / "server.crt"))
    server_cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    (tmp_path / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n"
    )
    log = tmp_path / "s.log"
    write(log, decode_line(0))
    anonymous = ssl.create_default_context()
    ca.configure_trust(anonymous)
    with_cert = ssl.create_default_context()
    ca.configure_trust(with_cert)
    ca.issue_cert("prometheus@example.org").configure_cert(with_cert)
    serve = Serve(str(log), "--web-config", str(tmp_path / "web.yml"), scheme="https")
    try:
        serve.wait_listening(context=with_cert)
        assert wait_for(lambda: value(serve.metrics(context=with_cert), "acceptmon_decode_batches_total") == 1)
        with pytest.raises(OSError):
            serve.get(context=anonymous)  # no client certificate: the handshake is refused
    finally:
        assert serve.stop() == 0
    assert "Traceback" not in serve.stderr


def test_landing_page_404_and_configured_headers(tmp_path):
    import urllib.request

    (tmp_path / "web.yml").write_text("http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
    log = tmp_path / "s.log"
    write(log, decode_line(0))
    serve = Serve(str(log), "--web-config", str(tmp_path / "web.yml"))
    try:
        serve.wait_listening()
        base = serve.url.removesuffix("/metrics")
        with urllib.request.urlopen(base + "/", timeout=10) as resp:
            assert b'<a href="/metrics">' in resp.read() and resp.headers["X-Frame-Options"] == "deny"
        with urllib.request.urlopen(serve.url, timeout=10) as resp:
            assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            assert resp.headers["X-Frame-Options"] == "deny"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/nope", timeout=10)
        assert err.value.code == 404
    finally:
        assert serve.stop() == 0
