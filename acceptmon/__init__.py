"""acceptmon: live, exact speculative-decoding acceptance monitoring for SGLang logs."""

from __future__ import annotations

__version__ = "0.1.0"
