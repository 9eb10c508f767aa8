"""Logs by URL through fsspec: ``file://``, HTTP from a real local server, and S3 from moto's server.

Every batch command (``parse``, ``runs``, ``compare`` with ``URL#N``, ``doctor``) and the library API read a
URL as they read the same bytes from a local file: the outputs are the local ones byte for byte (``parse``'s
``file`` column names the URL, so the local table is compared with its folder written as the URL's).

S3 is moto's server mode (``moto.server.ThreadedMotoServer`` on 127.0.0.1): the only S3 endpoint that runs
offline here. It is a real HTTP server speaking S3's protocol, reached by s3fs and botocore as any endpoint
(``AWS_ENDPOINT_URL``); instance metadata is switched off, so no request leaves the machine.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import acceptmon
from acceptmon.cli import main
from tests.conftest import SAMPLES

ROOT = Path(__file__).resolve().parent.parent
LOGS = ("seed_eagle3_moe.log", "vllm_v1_0.8.5.log")
GZ = "old_0.4.4.log.gz"
BASE = "baseline_nospec.log"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two plain logs (SGLang, vLLM) and a gzipped one in a folder of their own; a baseline in base/."""
    folder = tmp_path_factory.mktemp("logs")
    for name in LOGS:
        shutil.copy(SAMPLES / name, folder / name)
    (folder / GZ).write_bytes(gzip.compress((SAMPLES / "old_0.4.4.log").read_bytes(), mtime=0))
    (folder / "base").mkdir()  # a run without speculation, out of the globs' way
    shutil.copy(SAMPLES / BASE, folder / "base" / BASE)
    return folder


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def http_base(logs: Path):
    """python's http.server in a thread, serving the folder (with its directory listing) on 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(logs)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def s3(logs: Path, tmp_path_factory: pytest.TempPathFactory):
    """moto's S3 server on 127.0.0.1 with bucket ``logs`` holding the folder's files; yields the environment
    that points boto at it (set in this process too, while the module runs)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    none = tmp_path_factory.mktemp("aws") / "none"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(none),
        "AWS_SHARED_CREDENTIALS_FILE": str(none),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        import fsspec

        fs = fsspec.filesystem("s3")
        fs.mkdir("logs")
        for f in sorted(p for p in logs.rglob("*") if p.is_file()):
            fs.put(str(f), f"logs/{f.relative_to(logs)}")
        yield env
    server.stop()


def run(*args: object, capfd: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command in this process: (exit code, stdout, stderr)."""
    capfd.readouterr()
    code = main([str(a) for a in args])
    out, err = capfd.readouterr()
    return code, out, err


def local_parse(path: Path, url_dir: str, capfd: pytest.CaptureFixture[str]) -> str:
    """``parse`` of the local file, its ``file`` column naming the same file under ``url_dir``."""
    code, out, _ = run("parse", path, capfd=capfd)
    assert code == 0
    return out.replace(f"\n{path.parent}/", f"\n{url_dir}/")


def one_error(code: int, err: str, url: str) -> str:
    """The command failed with one line naming the URL, exit 2; that line."""
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"acceptmon: error: {url}: "), err
    return err.strip().removeprefix(f"acceptmon: error: {url}: ")


# -- file:// (fsspec's local filesystem) -------------------------------------------------------------------


def test_file_urls_read_as_the_files(logs, capfd):
    url = f"file://{logs}"
    for name in (*LOGS, GZ):
        code, out, _ = run("parse", f"{url}/{name}", capfd=capfd)
        assert code == 0 and out.count("\n") > 50
        assert out == local_parse(logs / name, url, capfd)
    code, out, _ = run("runs", f"{url}/*", "--format", "json", capfd=capfd)
    local = run("runs", *sorted(p for p in logs.iterdir() if p.is_file()), "--format", "json", capfd=capfd)[1]
    assert code == 0 and out == local.replace(f'"{logs}/', f'"{url}/')
    assert '"file": "file://' in out and out.count('"run":') == 7
    for url, why in (
        ("file:///proc/self/status", "is under /proc: a kernel interface, not a log file"),
        (
            "file:///dev/null",
            "not a regular file (a character device); acceptmon reads regular files, FIFOs or - for stdin",
        ),
        ("file:///nope.log", "no such file"),
    ):
        assert one_error(*run("parse", url, capfd=capfd)[::2], url) == why


# -- HTTP: fsspec's HTTP filesystem against python's http.server ----------------------------------------------


def test_http_parse_plain_and_gz_is_the_local_table(logs, http_base, capfd):
    for name in (LOGS[0], GZ):
        code, out, err = run("parse", f"{http_base}/{name}", capfd=capfd)
        assert code == 0, err
        assert out == local_parse(logs / name, http_base, capfd)
    assert out.count("\n") == 51  # old_0.4.4.log's 50 decode rows and the header, from the .gz
    signed = f"{http_base}/{LOGS[0]}?X-Amz-Signature=ab%2Fc&X-Amz-Expires=60"  # a presigned URL: one object
    code, out, err = run("parse", signed, capfd=capfd)
    assert code == 0 and out == local_parse(logs / LOGS[0], http_base, capfd).replace(
        f"{LOGS[0]},", f"{signed[len(http_base) + 1 :]},"
    )


def test_http_runs_by_names_and_by_glob_of_the_listing(logs, http_base, capfd):
    local = run("runs", *(logs / n for n in (*LOGS, GZ)), capfd=capfd)[1]
    named = run("runs", *(f"{http_base}/{n}" for n in (*LOGS, GZ)), capfd=capfd)
    assert named[0] == 0 and named[1] == local
    assert local.splitlines()[-1].split()[:2] == ["old_0.4.4.log.gz", "1"] and len(local.splitlines()) == 8
    globbed = run("runs", f"{http_base}/*.log", capfd=capfd)  # fsspec reads the server's directory listing
    assert globbed[0] == 0 and globbed[1] == run("runs", *(logs / n for n in LOGS), capfd=capfd)[1]


def test_http_compare_url_runs_and_doctor(logs, http_base, capfd):
    seed = f"{http_base}/{LOGS[0]}"
    code, out, _ = run("compare", f"{seed}#1", f"{seed}#2", "--format", "json", capfd=capfd)
    local = run("compare", f"{logs / LOGS[0]}#1", f"{logs / LOGS[0]}#2", "--format", "json", capfd=capfd)[1]
    assert code == 0 and out == local and '"verdict": "better"' in out
    code, out, _ = run("doctor", f"{http_base}/{GZ}", capfd=capfd)
    local = run("doctor", logs / GZ, capfd=capfd)[1].replace(str(logs / GZ), f"{http_base}/{GZ}")
    assert code == 0 and out == local and "1 run:" in out
    code, err = run("compare", f"{seed}#9", seed, capfd=capfd)[::2]
    assert one_error(code, err, f"{seed}#9") == "no run 9 (runs there: 1-5)"


def test_http_errors_are_one_line(http_base, capfd):
    missing = f"{http_base}/nope.log"
    assert one_error(*run("parse", missing, capfd=capfd)[::2], missing) == "no such object (HTTP 404)"
    assert one_error(*run("runs", f"{http_base}/*.nothing", capfd=capfd)[::2], f"{http_base}/*.nothing") == (
        "no object matches this pattern"
    )
    with socket_closed() as port:
        refused = f"http://127.0.0.1:{port}/x.log"
        assert one_error(*run("doctor", refused, capfd=capfd)[::2], refused).startswith("cannot connect: ")


class _CutShort(http.server.BaseHTTPRequestHandler):
    """Promises five times the bytes it sends, then closes the connection: a transfer broken half-way."""

    body = (SAMPLES / LOGS[0]).read_bytes()[:20000]

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(5 * len(self.body)))
        self.end_headers()

    def do_GET(self) -> None:
        self.do_HEAD()
        self.wfile.write(self.body)
        self.close_connection = True


def test_a_transfer_broken_half_way_is_one_line(capfd):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CutShort)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/cut.log"
        why = one_error(*run("runs", url, capfd=capfd)[::2], url)
    finally:
        server.shutdown()
        server.server_close()
    assert why.startswith("the transfer broke off (") and "received 20000 of 100000 bytes" in why


class socket_closed:
    """A port on 127.0.0.1 that nothing listens on (bound, never listening, while the block runs)."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


# -- S3: moto's server ------------------------------------------------------------------------------------


def test_s3_parse_and_runs_glob_are_the_local_outputs(logs, s3, capfd):
    """The commands as a user runs them, in their own process, against the S3 endpoint."""
    env = {**os.environ, **s3}

    def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "acceptmon", *args], capture_output=True, env=env, cwd=ROOT)

    parsed = cli("parse", f"s3://logs/{LOGS[0]}")
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout == local_parse(logs / LOGS[0], "s3://logs", capfd).encode()
    assert parsed.stdout.count(b"\ns3://logs/seed_eagle3_moe.log,") == 384
    runs = cli("runs", "s3://logs/*.log")
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout == run("runs", *(logs / n for n in LOGS), capfd=capfd)[1].encode()
    assert [line.split()[0] for line in runs.stdout.decode().splitlines()[1:]] == [LOGS[0]] * 5 + [LOGS[1]]


def test_s3_gz_compare_doctor_and_jobs(logs, s3, capfd):
    code, out, _ = run("parse", f"s3://logs/{GZ}", "-j", "2", capfd=capfd)
    assert code == 0 and out == local_parse(logs / GZ, "s3://logs", capfd)
    code, out, _ = run("runs", "s3://logs/*.gz", "--format", "json", capfd=capfd)
    assert code == 0 and out == run("runs", logs / GZ, "--format", "json", capfd=capfd)[1].replace(
        f'"{logs}/', '"s3://logs/'
    )
    seed = f"s3://logs/{LOGS[0]}"
    code, out, _ = run("compare", f"{seed}#3", f"{seed}#5", capfd=capfd)
    assert code == 0 and out == run("compare", f"{logs / LOGS[0]}#3", f"{logs / LOGS[0]}#5", capfd=capfd)[1]
    code, out, _ = run("doctor", seed, "--baseline", f"s3://logs/base/{BASE}#1", "--format", "json", capfd=capfd)
    local = run("doctor", logs / LOGS[0], "--baseline", f"{logs / 'base' / BASE}#1", "--format", "json", capfd=capfd)
    assert code == 0 and out == local[1].replace(f'"{logs}/', '"s3://logs/') and '"speedup"' in out


def test_s3_errors_are_one_line(s3, capfd):
    for url, why in (
        ("s3://logs/nope.log", "no such object"),
        ("s3://no-such-bucket/x.log", "no such object"),
        ("s3://logs", "is a directory (a prefix), not a log object: name objects, or a glob like s3://logs/*.log"),
    ):
        assert one_error(*run("parse", url, capfd=capfd)[::2], url) == why
    for command in ("tail", "serve"):
        code, err = run(command, "s3://logs/*.log", capfd=capfd)[::2]
        assert one_error(code, err, "s3://logs/*.log") == (
            "a URL is not followed live: tail and serve read local files and streams "
            "(parse, runs, compare and doctor read URLs)"
        )


def test_s3_without_credentials_says_so(s3):
    env = {k: v for k, v in {**os.environ, **s3}.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    p = subprocess.run(
        [sys.executable, "-m", "acceptmon", "runs", f"s3://logs/{LOGS[0]}"], capture_output=True, text=True, env=env
    )
    assert one_error(p.returncode, p.stderr, f"s3://logs/{LOGS[0]}") == (
        "no credentials for s3:// (Unable to locate credentials); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "AWS_PROFILE, or run where an IAM role is"
    )


def test_the_api_reads_urls(logs, http_base, s3):
    local = logs / LOGS[1]
    want = [r for r in acceptmon.read(local) if r.kind == "spec"]
    got = list(acceptmon.read(f"s3://logs/{LOGS[1]}", kinds=["spec"]))
    assert len(got) == len(want) == 55
    assert [r.model_copy(update={"file": str(local)}) for r in got] == want
    assert [(r.run, r.accept_len_mean) for r in acceptmon.runs(f"{http_base}/*.log")] == [
        (r.run, r.accept_len_mean) for r in acceptmon.runs([logs / n for n in LOGS])
    ]
    table = acceptmon.to_arrow(f"s3://logs/{GZ}")
    assert table.drop_columns(["file"]) == acceptmon.to_arrow(logs / GZ).drop_columns(["file"])
    assert table.num_rows == 50 and set(table.column("file").to_pylist()) == {f"s3://logs/{GZ}"}


# -- without the extra; schemes not read ----------------------------------------------------------------------


def test_without_fsspec_a_url_says_how_to_install():
    """fsspec made unimportable in that process, as on an install without the extra."""
    code = "import sys; sys.modules['fsspec'] = None; from acceptmon.cli import main; sys.exit(main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, "parse", "s3://b/x.log"], capture_output=True, text=True)
    assert one_error(p.returncode, p.stderr, "s3://b/x.log") == (
        "reading URLs needs the optional extra acceptmon[remote] (fsspec): pip install 'acceptmon[remote]'"
    )


def test_output_to_a_url_is_refused_before_reading(capfd):
    for command in ("parse", "runs"):
        code, err = run(command, SAMPLES / LOGS[0], "-o", "s3://b/out.csv", capfd=capfd)[::2]
        assert one_error(code, err, "s3://b/out.csv") == (
            "-o writes a local file; URLs are read, not written (copy the file up afterwards)"
        )


def test_schemes_not_read_and_packages_missing(capfd):
    assert one_error(*run("parse", "ftp://h/x.log", capfd=capfd)[::2], "ftp://h/x.log") == (
        "URL scheme ftp:// is not read; acceptmon reads s3://, gs://, http://, https:// and file:// URLs"
    )
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        assert one_error(*run("runs", "gs://b/x.log", capfd=capfd)[::2], "gs://b/x.log") == (
            "reading gs:// URLs needs gcsfs: pip install 'acceptmon[gcs]'"
        )
    assert one_error(*run("compare", "file:///nope.log#1", "x", capfd=capfd)[::2], "file:///nope.log") == (
        "no such file"
    )
