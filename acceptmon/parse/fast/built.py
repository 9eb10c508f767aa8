"""Whether the compiled module (``cmatch*.c``) is there to use: built, of this protocol, not turned off.

Apart from :mod:`acceptmon.parse.fast.native` (which also checks the module's recipe codes against the lane's) so that
the modules below the lane (:mod:`acceptmon.parse.unmade`) can ask for its plain loops without importing the lane.
"""

from __future__ import annotations

import os
from types import ModuleType

VERSION = 43
"""The protocol this code speaks: a module of another ``cmatch.VERSION`` (an old build) is not used."""


def pure_asked() -> bool:
    """``ACCEPTMON_PURE_PYTHON`` is set: the general parser reads every line, by request."""
    return bool(os.environ.get("ACCEPTMON_PURE_PYTHON"))


def module() -> ModuleType | None:
    """The compiled module, or None (not built, another version, or pure Python asked for)."""
    if pure_asked():
        return None
    try:
        from acceptmon.parse.fast import cmatch
    except ImportError:
        return None
    return cmatch if getattr(cmatch, "VERSION", None) == VERSION else None
