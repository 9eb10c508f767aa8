"""What a fast template is: an envelope's shape, and one message template's head, keys and steps. Pure.

:mod:`acceptmon.parse.fast.templates` builds templates from the grammar samples and from log lines,
:mod:`acceptmon.parse.fast.bodies` reads their heads and bodies; the lane, the row plans and the compiled
matcher read them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from acceptmon.parse.grammar import Grammar
from acceptmon.parse.records import Record
from acceptmon.parse.unmade import Unmade

ACCEPT = b"accept"
"""The parser's grep-bait word: lines holding it that are not decode lines are counted as noise."""
Op = tuple[str, Any]
"""One step of a template: see :attr:`Template.ops`."""

Part = tuple[int, bytes] | list[Record] | list[Unmade]
"""What a lane hands its job per piece: (rows, their bytes) for the table job; with a typed lane, records."""
Chunk = Callable[[list[Record]], Part]
"""The job's chunk of the general parser's records."""

LEARN_TEMPLATES = 32
"""Templates a lane learns from the log at most (each one is tried on the lines the ones before it do not match)."""
LEARN_TRIES = 64
"""Lines a lane tries to learn a template from at most."""
SHAPE_TRIES = 3
"""Lines of one shape (:func:`shape_of`) tried at most: a line with a value the lane writes no cell for (a time
at .000 milliseconds, a float of 7 decimals) fails the proof, and the next line of its shape may not."""
_NUMBERS = re.compile(rb"[0-9]+")


def shape_of(line: bytes) -> bytes:
    """A line's shape: its numbers masked (what :data:`SHAPE_TRIES` counts)."""
    return _NUMBERS.sub(b"0", line)


@dataclass(frozen=True)
class Shape:
    """An envelope: literal ``prefix``, timestamp and rank (``inner``), literal ``suffix``; before the prefix, one of
    the ``leads`` or none."""

    prefix: bytes
    inner: bytes
    suffix: bytes
    leads: tuple[tuple[Op, ...], ...] = ()
    """Text the envelope may have before its prefix that fills no field (a Ray actor's ``(SchedulerActor pid=4242,
    ip=10.0.0.5) ``), as steps: literal text, numbers loose (:func:`lead_of`)."""

    @property
    def base(self) -> Shape:
        return replace(self, leads=())


@dataclass
class Template:
    """One message template of one grammar: head, then keys in order."""

    grammar: Grammar
    kind: str
    head: bytes
    """Pattern of the head, with the grammar's own groups (e.g. the iteration number)."""
    groups: list[tuple[str | None, str]] = field(default_factory=list)
    """(record field or None for an unknown key's name or value, value kind) per group, in order."""
    fields: dict[str, int] = field(default_factory=dict)
    """Record field -> index in ``groups`` of the capture that gives its final value."""
    extras: list[tuple[int, int]] = field(default_factory=list)
    """(name, value) group indexes of unknown keys, in line order."""
    values: dict[str, Any] = field(default_factory=dict)
    """The sample's converted field values (to see what the kind's ``derive`` reads and writes)."""
    body: bytes = b""
    literal: bytes = b""
    """Every fixed byte of the template (for counting anchors and 'accept')."""
    head_groups: int = 0
    """How many of ``groups`` belong to the head."""
    ops: list[Op] = field(default_factory=list)
    """The head and body as steps, for the compiled matcher (:mod:`acceptmon.parse.fast.native`):
    ``("lit", text)``, ``("alt", texts)``, ``(value kind, group index)``; an unknown key, its name in a group and its
    value in the next: ``("extra", (known keys, group index))`` (any key but those), or ``("lkey", (b"key: ", group
    index))`` (one the template names), its value the text the steps up to ``("vend", that group + 1)`` match."""

    @property
    def key(self) -> tuple[str, bytes, bytes]:
        return (self.grammar.name, self.head, self.body)

    @property
    def bare(self) -> bool:
        """The template starts its line, behind no envelope (its rows have no timestamp and no rank)."""
        return bool(self.ops) and self.ops[0][0] == "bare"

    def capture(self, name: str, kind: str, value: Any, found: set[str], fallback: bool = False) -> None:
        """One group of record field ``name`` (value kind ``kind``, converted ``value``): it gives the field's
        value unless the field is a fallback one that an earlier key already gave (``found``)."""
        if not (fallback and name in found):
            self.fields[name] = len(self.groups)
            self.values[name] = value
            found.add(name)
        self.groups.append((name, kind))


LINE_SECONDS = 0.05
"""Time a grammar pattern may take on one log line while a template is built from it (as the parser bounds it)."""
