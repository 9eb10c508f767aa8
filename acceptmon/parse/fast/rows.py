"""Row plans: how one fast template's match becomes one CSV or JSONL row, for one file and launch.

Everything that is the same for every row of a template in a run is printed once into its
recipe (:attr:`Plan.recipe`, which the compiled matcher follows): the file, server and kind, the
run, and the launch's derived values. A derived
value that depends on the row (``draft_accept_rate`` from ``accept_len``) is computed by
the kind's own ``derive``, once per distinct logged text where it is remembered (not where it depends on a token
count or a list, which rarely come again: :attr:`Plan.memoised`). What ``derive``
reads and writes is found by running it on the template's sample values; a ``derive`` that
reads anything but the template's fields, the server, the file or the run makes the
template's rows go to the general parser.

A typed plan (:mod:`acceptmon.parse.fast.typed`) writes no text: the compiled matcher builds each row's record
values itself (:meth:`Plan.compiled`), from a :attr:`Plan.shape` and the steps of the fields that vary, exactly as
``json.loads`` would read the JSON cells those steps stand for; its derived cells are such values too. Pure: no I/O.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from typing import Any, cast

from acceptmon.parse.derive import FIELDS
from acceptmon.parse.fast import compiled_derive
from acceptmon.parse.fast.model import Template
from acceptmon.parse.fast.pieces import CONVERTED, Format, cell, float_cell
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import LaunchConfig, prepare
from acceptmon.parse.streams import STREAM_FIELDS
from acceptmon.parse.values import VALUE_KINDS

CONSTANT_FIELDS = frozenset({"server", "file", "run"})
MEMO = 8192
"""Derived cells a plan remembers at most (then it starts again): a decode line's accept len has a few hundred
spellings (a plan whose cells depend on counts remembers none: :attr:`Plan.memoised`)."""
_LINE_FIELDS = frozenset({"line", "timestamp", "rank", "extra", *STREAM_FIELDS, "process", "pid", "level", "prefix"})
"""Values a line gives besides its template's fields (envelope, stream prefix, unknown keys): a ``derive``
that reads one makes the template's rows the parser's. Any other field a template lacks, its lines lack too."""
SLOT = 16
"""In a :attr:`Plan.recipe`, the code of the template's first group."""
BOOL_SLOT = SLOT + 256
"""In a JSONL recipe, the code of the template's first group written as JSON's ``true``/``false``."""
JSON_RANK = 5
"""In a JSONL recipe, the rank as a JSON string, or ``null`` for none."""
JSON_EXTRA = 6
"""In a JSONL recipe, the JSON object of the template's unknown keys (``extra``), as the parser's dict holds them."""
CONV_SLOT = BOOL_SLOT + 256
"""In a recipe, ``CONV_SLOT + 256 * c + i``: the template's group ``i`` as the compiled matcher converts it by
conversion ``c`` (``cmatch_convert.c``: the converter's value of a :data:`~acceptmon.parse.fast.pieces.CONVERTED`
kind, whose cell is not its text)."""
CONV_PERCENT, CONV_FLOATS_CSV, CONV_FLOATS_JSON = 0, 1, 2
"""Conversions: a percentage's fraction; a list of floats as its CSV cell (``;`` between) or its JSON array."""
DEP_TEXT, DEP_NUMBER, DEP_PERCENT, DEP_FLOATS = 0, 1, 2, 3
"""How the compiled matcher hands a derived cell's dependency (``slot + 256 * d``) to :meth:`Plan.derived_cells`:
its text, or its value as the kind's converter gives it (a list as a tuple, a memo key being hashable)."""
_UNIQUE = frozenset({"count", "float_list"})
"""Kinds whose values rarely come again (token counts, per-position rates): a plan depending on one remembers
nothing (:attr:`Plan.memoised`)."""
NUMBERS = frozenset({"int", "float", "count", "number"})
"""Group kinds captured as JSON numbers (by the INT and FLOAT steps, whose text ``json.loads`` reads as it is: the
compiled matcher builds their typed fields, see ``field_of`` in ``cmatch_rows.c``)."""
_DEP_OF = {**dict.fromkeys(NUMBERS, DEP_NUMBER), "percent": DEP_PERCENT, "float_list": DEP_FLOATS}
"""Kinds whose dependency value the compiled matcher converts (captured by the INT, FLOAT, LFLOAT, LIST steps)."""


_SAME = frozenset({type(None), bool, int, float, str})
"""Types of a value that its JSON cell reads back as: equal, and of the same type (a float's text is its repr)."""


class Unsupported(Exception):
    """The kind's derived values depend on more than the fast lane captures."""


class _Reads(dict[str, Any]):
    """A values dict that remembers which keys were read."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.reads: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.reads.add(str(key))
        return super().__contains__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.reads.add(key)
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().setdefault(key, default)


class _Memo(dict[Any, tuple[Any, ...]]):
    """Derived cells (a typed plan's: their values) by dependency text; a missing entry is computed (see
    :meth:`Plan.derived_cells`)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan

    def __missing__(self, key: Any) -> tuple[Any, ...]:
        return self.plan.derived_cells(key)


class Plan:
    """Output of one template's matches: the :attr:`recipe` of its row, and the cells derived from its values."""

    def __init__(
        self,
        t: Template,
        fmt: Format,
        columns: tuple[str, ...],
        context: tuple[str, int, LaunchConfig | None],
        every: bool = False,
        typed: bool = False,
        tuples: bool = False,
    ) -> None:
        """``every``: the derive depends on every captured field (not only those it read of the template's sample,
        as a branch the sample did not take may read others). ``typed``: a JSON row read back as a record
        (:mod:`acceptmon.parse.fast.typed`), whose unknown keys are left out: a template with some has a recipe too;
        ``tuples``: each typed row is only its varying values, a tuple in the order of :attr:`names` (the shape is
        the plan's)."""
        self.tuples = tuples
        file, run, launch = context
        kind = KINDS[t.kind]
        defaults = t.grammar.spec.defaults
        base: dict[str, Any] = {
            "file": file,
            "line": 0,
            "server": t.grammar.spec.server,
            **defaults,
            **t.values,
            "run": run,
        }
        probe = _Reads(base)
        if kind.derive is not None:
            kind.derive(probe, launch)
        reads, after = set(probe.reads), dict(probe)
        declared = FIELDS.get(kind.derive) if kind.derive is not None else None
        may_write = declared.writes if declared is not None else frozenset()
        written = [c for c in columns if c in may_write or (c in after and (c not in base or after[c] is not base[c]))]
        if (reads - set(t.fields) - CONSTANT_FIELDS - set(written) - set(defaults)) & _LINE_FIELDS:
            raise Unsupported(t.kind)  # a value of the line's that the template does not capture
        if declared is not None:  # what another line's values may take the derive to read, or leave as captured
            reads |= declared.reads | declared.writes
        deps = sorted(set(t.fields) & (reads | (set(t.fields) if every and kind.derive else set())))
        kinds = [t.groups[t.fields[f]][1] for f in deps]
        self.memoised = not {k for k in kinds if k in _UNIQUE}
        """Whether the derived cells are remembered by their dependencies' text: not where one is a count or a list
        (a vLLM spec line's token counts and rates differ line by line, so the compiled matcher hands them over
        converted and calls :meth:`derived_cells` itself rather than hash and keep keys that never come again)."""
        dep_kinds = [DEP_TEXT if self.memoised else _DEP_OF.get(k, DEP_TEXT) for k in kinds]
        self.dep_slots = tuple(t.fields[f] + 256 * d for f, d in zip(deps, dep_kinds, strict=True))
        """The template groups of ``dep`` and how each is handed over (:data:`DEP_TEXT`, ...), for the compiled
        matcher."""
        self.fmt_kind, self.launch, self.derive, self.base, self.typed = fmt, launch, kind.derive, base, typed
        self.kind = t.kind
        self.dep_fields = [(f, _dep_value(k, d)) for f, k, d in zip(deps, kinds, dep_kinds, strict=True)]
        self.cells: dict[tuple[type, Any], Any] = {}
        """Cells of derived values by their value (see :meth:`_cell`)."""
        self.float_cell = float_cell(fmt)
        self.derived = written if deps else []
        self.memo: _Memo = _Memo(self)
        captured = {f: (i, t.groups[i][1]) for f, i in t.fields.items()}
        written_values = {c: after.get(c) for c in self.derived}
        self.compiled_derive = (
            None
            if self.memoised or not self.derived
            else compiled_derive.spec(kind.derive, captured, base, written_values, launch, self._cell, typed)
        )
        """The derive as the compiled matcher computes it (:mod:`acceptmon.parse.fast.compiled_derive`), where it may:
        a vLLM spec line's, which no memo helps; the lines it declines are :meth:`derived_cells`'."""
        self.fields: tuple[tuple[bytes | int, ...], ...] = ()
        """A typed plan's varying fields (:attr:`names`) as their JSON cells' steps; a field the compiled matcher
        does not build makes it refuse the plan (:func:`acceptmon.parse.fast.native.compiled`: the template's rows
        are then the parser's)."""
        self.recipe = self._recipe(t, columns, (after, written, kind.model.model_fields))
        """The row as the compiled matcher writes it (see :func:`_recipe`); None for a JSONL row with unknown keys,
        whose ``extra`` object the general parser writes, and for a typed plan (:attr:`fields`)."""

    def compiled(self) -> tuple[Any, ...] | bool:
        """The plan as the compiled matcher takes it: (recipe, dependency slots, memo); typed, (fields, dependency
        slots, memo, shape, names, the plan itself, which each row comes paired with); False if it writes no row
        (the general parser's)."""
        if self.typed:  # the compiled matcher may still refuse a field it does not build (native.compiled)
            return (self.fields, self.dep_slots, self._lookup(), None if self.tuples else self.shape, self.names, self)
        return False if self.recipe is None else (self.recipe, self.dep_slots, self._lookup())

    def _lookup(self) -> Any:
        """What the compiled matcher asks for a row's derived cells: the memo (a mapping), or :meth:`derived_cells`
        (a callable) where nothing is remembered, with the compiled derive before it where there is one."""
        if self.memoised:
            return self.memo
        return self.derived_cells if self.compiled_derive is None else (self.compiled_derive, self.derived_cells)

    def _recipe(
        self, t: Template, columns: tuple[str, ...], probed: tuple[dict[str, Any], list[str], Any]
    ) -> tuple[bytes | int, ...] | None:
        after, written, model = probed
        base, fmt, deps = self.base, self.fmt_kind, self.dep_slots
        steps: list[list[bytes | int]] = []  # per column: literal bytes and argument codes (see `_recipe`)
        for c in columns:
            if c in written and deps:
                steps.append([-1 - self.derived.index(c)])
            elif c in written or c == "run" or (c not in t.fields and c not in ("timestamp", "rank", "line")):
                value = after.get(c) if c in written or c in base else None
                if c not in written and c not in base and c in model:
                    value = model[c].get_default(call_default_factory=True)
                steps.append([cell(value, fmt)])
            elif c in t.fields:
                steps.append(_group_step(t.fields[c], t.groups[t.fields[c]][1], fmt))
            elif c == "timestamp" and t.bare:  # no envelope: no timestamp
                steps.append([cell(None, fmt)])
            elif c == "timestamp":
                steps.append([1, b"T", 2, 3] if fmt == "csv" else [b'"', 1, b"T", 2, 3, b'"'])
            else:
                steps.append([0 if c == "line" else 4 if fmt == "csv" else JSON_RANK])
        if fmt == "csv":
            return _recipe(steps)
        if self.typed:
            self._typed(steps, columns, "extra" in model)
            return None
        return _json_recipe(steps, columns, [JSON_EXTRA] if t.extras else [b"{}"])

    def _typed(self, steps: list[list[bytes | int]], columns: tuple[str, ...], extra: bool) -> None:
        """A typed lane's row: the record's values, the same in every row of the plan in :attr:`shape`, and the
        cells that vary row by row (the line, its time and rank, captured and derived values) in :attr:`fields`,
        as the steps of their JSON cells: the compiled matcher sets each in a copy of the shape
        (:func:`typed.records` makes the record)."""
        shape: dict[str, Any] = {}
        varying: list[tuple[bytes | int, ...]] = []
        names: list[str] = []
        for c, column in zip(columns, steps, strict=True):
            fixed = all(isinstance(step, bytes) for step in column)
            shape[c] = json.loads(b"".join(cast("list[bytes]", column))) if fixed else None
            if not fixed:
                varying.append(tuple(column))
                names.append(c)
        if extra:
            shape["extra"] = {}
        self.shape = shape
        """Every field of the kind's record, in the model's order: its value where the same in every row."""
        self.names = tuple(names)
        """The fields that vary row by row, in the order of :attr:`fields`."""
        self.fresh = tuple((c, _fresh(v)) for c, v in shape.items() if isinstance(v, (dict, list)))
        """The fields whose value is a dict or list: each record gets its own."""
        self.make = prepare(KINDS[self.kind].model).make
        self.fields = tuple(varying)

    def derived_cells(self, key: Any) -> tuple[Any, ...]:
        """Cells of the derived columns for one row's dependencies (remembered where :attr:`memoised`); typed, their
        values."""
        raw = key if len(self.dep_slots) > 1 else (key,)
        values = dict(self.base)
        for (name, convert), got_value in zip(self.dep_fields, raw, strict=True):
            values[name] = got_value if convert is None else convert(got_value)
        if self.derive is not None:  # a plan has dependencies only where its kind derives values
            self.derive(values, self.launch)
        got = tuple(map(self._cell, map(values.get, self.derived)))
        if self.memoised:
            if len(self.memo) > MEMO:
                self.memo.clear()
            self.memo[key] = got
        return got

    def _cell(self, value: Any) -> Any:
        """A derived value's cell (a launch's algorithm, a source's name: the same values row after row)."""
        if type(value) is float:  # every row's own (an accept rate, an accept length): no memo, no type tests
            return value if self.typed else self.float_cell(value)
        if type(value) is list:
            return self._out(value)
        key = (type(value), value)  # 1, 1.0 and True are equal keys but different cells
        got = self.cells.get(key)
        if got is None:
            if len(self.cells) > MEMO:
                self.cells.clear()
            got = self.cells[key] = self._out(value)
        return got

    def _out(self, value: Any) -> Any:
        """A value as its row holds it: its cell's bytes; typed, what ``json.loads`` gives of its JSON cell (a tuple
        a list, as a JSON row gave it: a scalar, or a list the compiled matcher copies for each row)."""
        if not self.typed:
            return cell(value, self.fmt_kind)
        if type(value) in _SAME or (type(value) is list and all(type(v) in _SAME for v in value)):
            return value  # json.loads of its JSON cell is an equal value of the same type, at no cost (a spec line's)
        return json.loads(cell(value, "jsonl"))


def _dep_value(kind: str, handed: int) -> Callable[[Any], Any] | None:
    """What makes a dependency's value of what the compiled matcher hands over (``handed``, :data:`DEP_TEXT`, ...):
    the kind's converter of its text, a list of its tuple, or nothing (its converted value)."""
    if handed == DEP_TEXT:
        return functools.partial(_decoded, VALUE_KINDS[kind])
    return list if handed == DEP_FLOATS else None


def _decoded(convert: Callable[[str], Any], text: bytes) -> Any:
    return convert(text.decode())


def _recipe(steps: list[list[bytes | int]], end: bytes = b"\r\n") -> tuple[bytes | int, ...]:
    """A CSV row as literal bytes and argument codes (0 line, 1-3 date, time, fraction, 4 rank,
    ``SLOT + i`` the template's group ``i``, ``-1 - k`` derived cell ``k``; in JSONL also
    :data:`JSON_RANK` and :data:`BOOL_SLOT` ``+ i``), adjacent literals merged."""
    out: list[bytes | int] = []
    for i, column in enumerate(steps):
        for step in [b"," if i else b"", *column]:
            if isinstance(step, bytes) and out and isinstance(out[-1], bytes):
                out[-1] += step
            elif step != b"":
                out.append(step)
    return (*out[:-1], out[-1] + end) if isinstance(out[-1], bytes) else (*out, end)


def _json_recipe(
    steps: list[list[bytes | int]], columns: tuple[str, ...], extra: list[bytes | int]
) -> tuple[bytes | int, ...]:
    """A JSONL row (``{"column":cell,...,"extra":{...}}``) as literal bytes and argument codes (see :func:`_recipe`;
    ``extra``: the steps of the unknown keys' object, ``{}`` or :data:`JSON_EXTRA`)."""
    named = [[json.dumps(c).encode() + b":", *column] for c, column in zip(columns, steps, strict=True)]
    named[0] = [b"{", *named[0]]
    named[-1] = [*named[-1], b',"extra":', *extra, b"}"]
    return _recipe(named, b"\n")


def _fresh(value: dict[str, Any] | list[Any]) -> Callable[[], Any]:
    """What makes a new copy of a dict or list that a plan's rows all hold."""
    if not value:
        return type(value)
    return functools.partial(copy.deepcopy, value)


def _group_step(slot: int, kind: str, fmt: Format) -> list[bytes | int]:
    """Recipe steps of one captured group: the text itself, but JSON's booleans and quoted strings, and the value
    the compiled matcher converts of a :data:`~acceptmon.parse.fast.pieces.CONVERTED` kind."""
    if kind in CONVERTED:
        conv = CONV_PERCENT if kind == "percent" else CONV_FLOATS_CSV if fmt == "csv" else CONV_FLOATS_JSON
        return [CONV_SLOT + 256 * conv + slot]
    if fmt == "csv" or kind in NUMBERS:  # JSON numbers: the int's or float's own text
        return [SLOT + slot]
    return [BOOL_SLOT + slot] if kind == "bool" else [b'"', SLOT + slot, b'"']
