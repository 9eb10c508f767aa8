"""acceptmon: live, exact speculative-decoding acceptance monitoring for SGLang, vLLM and llama.cpp logs.

The library API (``docs/api.md``): :func:`read` (typed records), :func:`runs` (the summaries of
``acceptmon runs``), :func:`compare` and :func:`doctor` (what those commands report), :func:`to_arrow`
(the ``parse`` table as a ``pyarrow.Table``). They are bound
on first use, so ``import acceptmon`` stays light for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acceptmon.version import __version__

if TYPE_CHECKING:
    from acceptmon.api import compare, doctor, read, runs, to_arrow

__all__ = ["__version__", "compare", "doctor", "read", "runs", "to_arrow"]
_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    """The API's functions, imported when first asked for (a module attribute, PEP 562)."""
    if name in _API:
        from acceptmon import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'acceptmon' has no attribute {name!r}")
