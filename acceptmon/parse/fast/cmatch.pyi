"""Types of the compiled matcher (``cmatch.c``): see :mod:`acceptmon.parse.fast.native`."""

from collections.abc import Sequence
from typing import Any

VERSION: int

class Program:
    def __init__(
        self,
        prefix: bytes,
        suffix: bytes,
        templates: Sequence[Sequence[tuple[int, int, Sequence[bytes]]]],
        needles: Sequence[bytes],
        nlaunch: int,
        keep: object,
    ) -> None: ...
    def scan(
        self, buf: bytes, s: int, e: int, base: int, plans: list[Any]
    ) -> tuple[int, bytes, list[int], list[int], int, int] | None: ...

def find_any(buf: Any, start: int, end: int, words: Sequence[bytes]) -> int: ...
def newlines(buf: Any, start: int, end: int) -> int: ...
