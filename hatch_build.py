"""Build hook: compile the fast lane's C matcher (``acceptmon/parse/fast/cmatch.c``) where a C compiler is.

``pip install .`` and ``pip install -e .`` run it. Without a compiler (or Python's headers)
the build goes on without the module, and ``acceptmon parse`` uses its pure-Python lane,
which writes the same bytes. ``python hatch_build.py`` compiles it in place by hand.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
SOURCE = ROOT / "acceptmon" / "parse" / "fast" / "cmatch.c"
"""The module's one translation unit; it includes the ``cmatch*.h`` files beside it."""


def target() -> Path:
    return SOURCE.with_name("cmatch" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def compile_scan() -> Path | None:
    """Compile the module next to its source; None (and a note on stderr) if that fails."""
    out = target()
    sources = [SOURCE, *SOURCE.parent.glob("cmatch*.h")]
    if out.exists() and out.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return out
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    cmd = [*cc, "-O2", "-shared", "-fPIC", "-Wall", f"-I{include}", str(SOURCE), "-o", str(out)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        done = subprocess.CompletedProcess(cmd, 1, "", str(e))
    if done.returncode:
        print(
            f"acceptmon: the C matcher was not built, the pure-Python lane is used: {done.stderr.strip()}",
            file=sys.stderr,
        )
        return None
    return out


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run by hand, outside a build
    BuildHookInterface = object  # type: ignore[assignment,misc]


class NativeScan(BuildHookInterface):  # type: ignore[misc,valid-type]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        built = compile_scan()
        if built is None or self.target_name != "wheel":
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            build_data["force_include"][str(built)] = str(built.relative_to(ROOT))


if __name__ == "__main__":
    sys.exit(0 if compile_scan() else 1)
