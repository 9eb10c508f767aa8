"""The data acceptmon ships (grammars, doctor rules, sample logs), and reading its TOML files with one-line errors."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_toml(path: Path, error: Callable[[str, str, str], Exception]) -> dict[str, Any]:
    """The file's table; ``error(file, key, reason)`` is raised when it cannot be read or is not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(str(path), "-", f"cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(str(path), "-", f"not valid TOML: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise error(str(path), "-", "not valid TOML: nested too deeply to read") from None


def shipped_dir(name: str) -> Path:
    """A folder of shipped data: the wheel's copy (``acceptmon/_data/NAME``) first, then the source tree's."""
    here = Path(__file__).resolve().parent
    packaged = here / "_data" / name
    return packaged if packaged.is_dir() else here.parent / name
