"""Build hook: compile the fast lane's C matcher (``acceptmon/parse/fast/cmatch*.c``) where a C compiler is.

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
FAST = ROOT / "acceptmon" / "parse" / "fast"
SOURCES = sorted(FAST.glob("cmatch*.c"))
"""The module's translation units (``cmatch.c`` and the ``cmatch_*.c`` beside it), compiled together."""
WARNINGS = ("-Wall", "-Wextra", "-Werror")
"""Every warning is an error: a build that warns is no build (and ``parse`` uses its pure-Python lane)."""
FLAGS = ("-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-std=c11", *WARNINGS)
"""Only ``PyInit_cmatch`` is exported; the units share their ``cm_*`` functions inside the module."""


def target() -> Path:
    return FAST / ("cmatch" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def compile_scan(out: Path | None = None, flags: Sequence[str] = FLAGS) -> Path | None:
    """Compile the module (next to its sources, unless ``out``); None (and a note on stderr) if that fails.

    A module newer than every source, header and this file is kept as it is."""
    out = out or target()
    inputs = [*SOURCES, *FAST.glob("cmatch*.h"), Path(__file__)]
    if out.exists() and flags == FLAGS and out.stat().st_mtime >= max(p.stat().st_mtime for p in inputs):
        return out
    include = sysconfig.get_paths()["include"]
    cmd = [*compiler(), *flags, "-isystem", include, *map(str, SOURCES), "-o", str(out)]
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
