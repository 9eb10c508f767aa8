"""The compiled matcher under AddressSanitizer and UndefinedBehaviorSanitizer: its tests and a bounded fuzz.

Builds ``acceptmon/parse/fast/cmatch*.c`` with ``-fsanitize=address,undefined`` (any finding aborts)
into a temporary folder, and runs the C tests, the misuse cases, the fuzz and the compiled half of the
fast-lane tests against that build (the tree's own module is left alone). Python is no ASan program, so
the sanitizer's runtime is preloaded, and ``PYTHONMALLOC=malloc`` lets ASan see the module's
``PyMem_*`` arrays (pymalloc's arenas would hide an overrun inside them). Where the compiler cannot
build and run a sanitized program, it says so in one line and stops (exit 0). ``./scripts/test`` runs it.

    python scripts/sanitize_cmatch.py [pytest arguments]
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import hatch_build  # noqa: E402

SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1")
FLAGS = ("-shared", "-fPIC", "-std=c11", *hatch_build.WARNINGS, *SANITIZE)
GROUPS = (
    ["tests/test_fastlane.py", "tests/test_fastlane_vllm.py", "tests/test_fastlane_sglang.py"],
    [
        "tests/test_cmatch.py",
        "tests/test_cmatch_faults.py",
        "tests/test_cmatch_facts.py",
        "tests/test_cmatch_fuzz.py",
        "tests/test_compiled_derive.py",
    ],
)
"""Two pytest runs side by side (a core each): every fast-lane case runs on the compiled matcher."""
TIMEOUT = 300
SITECUSTOMIZE = '''"""Loads the sanitized build of acceptmon.parse.fast.cmatch instead of the tree's (sanitize_cmatch.py)."""
import importlib.util
import os
import sys


class _Sanitized:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "acceptmon.parse.fast.cmatch":
            return None
        return importlib.util.spec_from_file_location(name, os.environ["ACCEPTMON_SANITIZED_CMATCH"])


sys.meta_path.insert(0, _Sanitized)
'''
EXAMPLES = 3
"""Hypothesis tests run a third of their examples (every piece of C still meets hundreds of inputs): under the
sanitizers Python itself runs several times slower, and the job must stay well under a minute and a half."""
PLUGIN = f'''"""Fewer Hypothesis examples under the sanitizers (sanitize_cmatch.py)."""
from hypothesis import settings


def pytest_collection_modifyitems(items):
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None:
            test._hypothesis_internal_use_settings = settings(own, max_examples=max(20, own.max_examples // {EXAMPLES}))
'''


def runtime(cc: list[str], folder: Path) -> str | None:
    """The ASan runtime to preload, or None if this compiler cannot build and run a sanitized program."""
    probe, exe = folder / "probe.c", folder / "probe"
    probe.write_text("#include <stdlib.h>\nint main(void) { char *p = malloc(2); p[0] = 0; free(p); return 0; }\n")
    try:
        built = subprocess.run([*cc, *SANITIZE, str(probe), "-o", str(exe)], capture_output=True, check=False)
        ran = built.returncode == 0 and subprocess.run([str(exe)], capture_output=True, check=False).returncode == 0
        if not ran:
            return None
        for name in ("libasan.so", "libclang_rt.asan-x86_64.so", "libclang_rt.asan.so"):
            found = subprocess.run([*cc, f"-print-file-name={name}"], capture_output=True, text=True, check=False)
            path = found.stdout.strip()
            if found.returncode == 0 and os.path.isabs(path) and os.path.exists(path):
                return str(Path(path).resolve())
    except OSError:
        return None
    return None


def run_groups(env: dict[str, str], args: list[str]) -> int:
    """The test groups side by side, each one's time and CPU said; the first failing group's status, or 0."""
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sanitize_examples"]
    began = time.monotonic()
    running = {subprocess.Popen([*base, *group, *args], env=env, cwd=ROOT).pid: group[0] for group in GROUPS}
    codes = []
    while running:
        pid, status, used = os.wait4(-1, os.WNOHANG)
        if pid == 0 and time.monotonic() - began < TIMEOUT:
            time.sleep(0.1)
            continue
        if pid == 0:
            print(f"sanitize_cmatch: the tests did not finish in {TIMEOUT} s", file=sys.stderr)
            for other in running:
                os.kill(other, 9)
                os.waitpid(other, 0)
            return 1
        group = running.pop(pid, None)
        if group is not None:
            codes.append(os.waitstatus_to_exitcode(status))
            cpu = used.ru_utime + used.ru_stime
            print(f"sanitize_cmatch: {group} and its group: {time.monotonic() - began:.0f} s, {cpu:.0f} s of CPU")
    return next((c for c in codes if c), 0)


def main(args: list[str]) -> int:
    began = time.monotonic()
    cc = hatch_build.compiler()
    with tempfile.TemporaryDirectory(prefix="acceptmon-sanitize-") as tmp:
        folder = Path(tmp)
        asan = runtime(cc, folder)
        if asan is None:
            print(f"sanitize_cmatch: skipped: {' '.join(cc)} cannot build and run -fsanitize=address,undefined here")
            return 0
        module = folder / ("cmatch" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
        if hatch_build.compile_scan(module, FLAGS) is None:
            return 1
        (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (folder / "sanitize_examples.py").write_text(PLUGIN)
        env = dict(os.environ)
        env.pop("ACCEPTMON_PURE_PYTHON", None)
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [tmp, env.get("PYTHONPATH")])),
            PYTHONMALLOC="malloc",
            LD_PRELOAD=" ".join(filter(None, [asan, env.get("LD_PRELOAD")])),
            ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86",
            UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87",
            ACCEPTMON_SANITIZED_CMATCH=str(module),
        )
        check = "from acceptmon.parse.fast import cmatch, native; import sys; sys.exit(cmatch.__file__ != sys.argv[1] or native.load() is None)"
        if subprocess.run([sys.executable, "-c", check, str(module)], env=env, cwd=ROOT, check=False).returncode:
            print("sanitize_cmatch: the sanitized build is not the module the tests load", file=sys.stderr)
            return 1
        rc = run_groups(env, args)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"sanitize_cmatch: ASan+UBSan build, {'passed' if rc == 0 else 'FAILED'} in {time.monotonic() - began:.0f} s"
        f" ({used.ru_utime + used.ru_stime:.0f} s of CPU)"
    )
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
