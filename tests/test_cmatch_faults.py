"""The compiled matcher defends itself against misuse: it refuses, it never hangs, crashes or reads stray memory.

A ``Program`` used out of order (scan before ``__init__``, scan after a failed ``__init__``, ``__init__``
again from inside a scan), plans changed under a running scan, a capture slot on a step that captures
nothing, and line numbers that would overflow. Each case that could crash or hang the interpreter runs
in a child process with a time limit, so that a crash is a failed test, not a dead test run.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import pytest

from acceptmon.parse.fast import built, native
from acceptmon.parse.fast.rows import JSON_EXTRA, SLOT

CMATCH = native.load()
pytestmark = pytest.mark.skipif(CMATCH is None, reason="needs the compiled matcher (test_cmatch.py fails without)")

PRELUDE = """
from acceptmon.parse.fast import cmatch as m
STEPS = [(m.OP_LIT, -1, (b"k: ",)), (m.OP_INT, 0, ())]
NEEDLES = [b"zq", b"Launch!", b"accept"]
def program(steps=STEPS):
    return m.Program(b"[", b"] ", [steps], NEEDLES, 1)
BUF = b"\\n" + b"".join(b"[2026-02-26 10:00:0%d TP0] k: %d\\n" % (i, i) for i in range(5))
"""


def _child(body: str) -> str:
    """Run PRELUDE + body in a fresh interpreter; its stdout. A crash, a hang or an error fails the test."""
    code = PRELUDE + textwrap.dedent(body)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the child process hung (killed after 30 s)")
    assert done.returncode == 0, f"the child process died ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


def test_scan_before_init_is_refused():
    out = _child("""
        p = m.Program.__new__(m.Program)
        try:
            p.scan(b"\\nabc\\n", 0, 5, 0, [])
        except RuntimeError as e:
            print("refused:", e)
    """)
    assert out.startswith("refused: scan: the program is not built")


def test_scan_after_a_failed_reinit_is_refused_and_a_good_init_restores_it():
    out = _child("""
        p = program()
        print(p.scan(BUF, 1, len(BUF), 0, [None])[2])
        try:
            p.__init__(b"[", b"] ", [[(m.OP_LIT, -1, (b"k: ",)), (99, -1, ())]], NEEDLES, 1)
        except ValueError as e:
            print("init:", e)
        text = b"\\nzq accept zq Launch! accept\\n" * 50
        try:
            p.scan(text, 1, len(text), 0, [None])
        except RuntimeError as e:
            print("scan:", e)
        p.__init__(b"[", b"] ", [STEPS], NEEDLES, 1)
        print(p.scan(BUF, 1, len(BUF), 0, [None])[2])
    """)
    assert out.splitlines() == [
        "[5]",
        "init: bad step: no such code",
        "scan: scan: the program is not built (its __init__ did not run, or failed)",
        "[5]",
    ]


def test_reinit_from_the_memo_callback_is_refused_and_the_scan_stops_with_it():
    out = _child("""
        p = program()
        class Memo(dict):
            def __missing__(self, key):
                # more templates than the scan's tables were sized for
                p.__init__(b"[", b"] ", [STEPS] * 40, NEEDLES, 1)
                return (key,)
        plan = ((m.SLOT, b",", -1, b"\\n"), (0,), Memo())
        try:
            p.scan(BUF, 1, len(BUF), 0, [plan])
        except RuntimeError as e:
            print("refused:", e)
        print(p.scan(BUF, 1, len(BUF), 0, [((m.SLOT, b"\\n"), (), {})])[:3])
    """)
    assert out.splitlines() == [
        "refused: Program.__init__ while the program is scanning",
        "(5, b'0\\n1\\n2\\n3\\n4\\n', [5])",
    ]


def test_plans_changed_from_the_memo_callback_do_not_change_the_running_scan():
    """The scan holds its own references: the recipe it started with writes every row."""
    out = _child("""
        p = program()
        plans = []
        class Memo(dict):
            def __missing__(self, key):
                plans.clear()  # the only other reference to the recipe tuple
                junk = [tuple(range(-7, -3)) for _ in range(1000)]  # the freed tuple's memory, reused
                self[key] = cells = (b"<" + key + b">",)
                return cells
        plans.append(((m.SLOT, b",", -1, b"\\n"), (0,), Memo()))
        print(p.scan(BUF, 1, len(BUF), 0, plans)[:2])
    """)
    assert out.strip() == "(5, b'0,<0>\\n1,<1>\\n2,<2>\\n3,<3>\\n4,<4>\\n')"


def test_a_scan_from_the_memo_callback_is_allowed():
    out = _child("""
        p = program()
        inner = []
        class Memo(dict):
            def __missing__(self, key):
                inner.append(p.scan(BUF, 1, len(BUF), 0, [None])[2])
                self[key] = cells = (key,)
                return cells
        print(p.scan(BUF, 1, len(BUF), 0, [((-1, b"\\n"), (0,), Memo())])[:2], inner)
    """)
    assert out.strip() == "(5, b'0\\n1\\n2\\n3\\n4\\n') [[5], [5], [5], [5], [5]]"


def test_every_failed_allocation_is_a_memory_error():
    """Each allocation of a build and a scan made to fail in turn (CPython's own fault injection): every
    failure is a MemoryError, never an error without an exception (SystemError) or a crash."""
    pytest.importorskip("_testcapi", reason="CPython's fault injection (_testcapi.set_nomemory)")
    out = _child("""
        import _testcapi
        class Memo(dict):
            def __missing__(self, key):
                return (key,)
        plans = [((m.SLOT, b",", -1, b"\\n"), (0,), Memo()), ((m.SLOT, b"\\n"), (), {}), None]
        text = BUF + b"zq accept zq\\n"
        seen = {}
        for n in range(400):
            _testcapi.set_nomemory(n, n + 1)  # the n-th allocation from here fails, and only it
            try:
                got = m.Program(b"[", b"] ", [STEPS] * 3, NEEDLES, 1).scan(text, 1, len(text), 0, plans)
                _testcapi.remove_mem_hooks()
                assert got[:3] == (5, b"0,0\\n1,1\\n2,2\\n3,3\\n4,4\\n", [5, 0, 0]), got
                name = "ok"
            except MemoryError:
                _testcapi.remove_mem_hooks()
                name = "MemoryError"
            except BaseException as e:
                _testcapi.remove_mem_hooks()
                name = f"{type(e).__name__}: {e}"
            seen[name] = seen.get(name, 0) + 1
        print(sorted(seen))
    """)
    assert out.strip() == "['MemoryError', 'ok']"


def _program(steps):
    assert CMATCH is not None
    return CMATCH.Program(b"[", b"] ", [native.codes(CMATCH, steps)], [b"zq", b"Launch!", b"accept"], 1)


BUF = b"\n[2026-02-26 10:00:00 TP0] k: 7\n"


@pytest.mark.parametrize("name", ["LIT", "ALT"])
def test_a_step_that_does_not_capture_takes_no_slot(name):
    """A slot there would let a recipe print a capture no step made (bytes of the stack)."""
    with pytest.raises(ValueError, match="a step that does not capture takes no slot"):
        _program([(name, 0, (b"k: ",)), ("INT", 1, ())])
    with pytest.raises(ValueError, match="a literal is one text"):
        _program([("LIT", -1, (b"k: ", b"x"))])
    with pytest.raises(ValueError, match="slot out of range"):
        _program([("LIT", -1, (b"k: ",)), ("INT", 256, ())])


def test_an_unknown_keys_two_slots_and_a_named_keys_end_are_checked():
    """An unknown key fills its slot and the next (so the last slot is refused it); a named key's value ends at the
    step that captures the next slot, before another key: a value never reads a capture no step set."""
    with pytest.raises(ValueError, match="slot out of range"):
        _program([("EXTRA", 255, (b"x",))])
    with pytest.raises(ValueError, match="slot out of range"):
        _program([("LKEY", 255, (b"k: ",)), ("VEND", 256, ())])
    with pytest.raises(ValueError, match="is one text, 'key: '"):
        _program([("LKEY", 0, (b"k:",)), ("VEND", 1, ())])
    for steps in (
        [("LKEY", 0, (b"k: ",)), ("INT", -1, ())],  # no end
        [("INT", -1, ()), ("VEND", 1, ())],  # an end of no key
        [("LKEY", 0, (b"k: ",)), ("INT", -1, ()), ("VEND", 2, ())],  # another slot's end
        [("LKEY", 0, (b"k: ",)), ("EXTRA", 2, (b"x",)), ("VEND", 1, ())],  # another key before the end
    ):
        with pytest.raises(ValueError, match="a named key's value"):
            _program(steps)
    program = _program([("LKEY", 0, (b"k: ",)), ("INT", -1, ()), ("VEND", 1, ())])
    assert program.scan(BUF, 1, len(BUF), 0, [((b"{", JSON_EXTRA, b"}\n"), (), {})])[:2] == (1, b'{{"k":"7"}}\n')


def test_a_base_whose_line_numbers_would_overflow_is_refused():
    program = _program([("LIT", -1, (b"k: ",)), ("INT", 0, ())])
    plan = [((0, b",", SLOT, b"\n"), (), {})]
    top = 2**63 - 1 - (len(BUF) - 1)  # the highest base whose line numbers all fit
    assert program.scan(BUF, 1, len(BUF), top, plan)[:2] == (1, b"%d,7\n" % (top + 1))
    for base in (top + 1, 2**63 - 1):
        with pytest.raises(OverflowError, match="overflows a line number"):
            program.scan(BUF, 1, len(BUF), base, plan)
    with pytest.raises(OverflowError):
        program.scan(BUF, 1, len(BUF), 2**63, plan)
    with pytest.raises(ValueError, match="negative base"):
        program.scan(BUF, 1, len(BUF), -1, plan)


def test_the_program_owns_its_texts():
    """Built from bytes that nothing else holds, it matches as well after they are gone."""
    steps = [("LIT", -1, (bytes(bytearray(b"k: ")),)), ("INT", 0, ())]
    program = CMATCH.Program(  # type: ignore[union-attr]
        bytes(bytearray(b"[")), bytes(bytearray(b"] ")), [native.codes(CMATCH, steps)],
        [bytes(bytearray(b"zq")), b"Launch!", bytes(bytearray(b"accept"))], 1,
    )  # fmt: skip
    del steps
    gc.collect()
    junk = [bytes(bytearray(b"x" * 3)) for _ in range(10000)]
    assert program.scan(BUF + b"zq accept\n", 1, len(BUF) + 10, 0, [((SLOT, b"\n"), (), {})]) == (
        1, b"7\n", [1], [1], 1, 2, 0, 0, len(BUF) + 10, 0,
    )  # fmt: skip
    del junk


def test_recipes_and_dependencies_hold_only_ints_and_bytes():
    program = _program([("LIT", -1, (b"k: ",)), ("INT", 0, ())])

    class Index:
        def __index__(self) -> int:
            return SLOT

    for recipe, deps in [((Index(),), ()), ((SLOT,), (Index(),)), ((2**80,), ()), ((SLOT,), (2**80,))]:
        with pytest.raises((TypeError, ValueError, OverflowError)):
            program.scan(BUF, 1, len(BUF), 0, [(recipe, deps, {})])


def test_the_protocol_numbers_are_the_modules_own():
    """native.py writes no opcode: each step's code is the module's; the recipe codes rows.py writes agree."""
    assert CMATCH is not None
    steps = native.codes(CMATCH, [(name, -1, ()) for name in ("LIT", "EXTRA")])
    assert steps == [(CMATCH.OP_LIT, -1, ()), (CMATCH.OP_EXTRA, -1, ())]
    assert {k: getattr(CMATCH, k) for k in native.RECIPE_CODES} == native.RECIPE_CODES
    assert CMATCH.VERSION == built.VERSION
    assert CMATCH.BOOL_SLOT == CMATCH.SLOT + CMATCH.MAX_SLOTS
