"""The layers, enforced: no import cycles, each module imports only below itself, the core stays pure, sizes.

Imports are read from the source with ``ast``, including imports inside functions
(a static contract cannot tell a module-scope import from a deferred one, so both
count). A runtime check backs it up: importing the core and the CLI loads no UI,
exporter or watcher library.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "acceptmon"

LAYERS: dict[str, int] = {
    # core: records and their kinds, values, grammar, parser, aggregates (pure)
    "errors": 0, "records": 0, "values": 0, "fmt": 0,
    "derive": 1, "drafts": 1, "parsestate": 1, "summary": 0,
    "kinds": 2,
    "grammar": 3, "stats": 3,
    "body": 4, "request_body": 4, "window": 4, "compare": 4, "redos": 4,
    "parse": 5, "prescan": 6,
    # bytes: one-shot read, live tail, sample replay (read bytes, never parse)
    "source": 1, "ranges": 2, "replay": 1, "tail": 2, "runref": 2, "tomlfile": 0,
    # one pipeline, batch and live; grammar files (and the record of those that passed their checks)
    "checkcache": 5, "grammarschema": 4, "loader": 6, "pipeline": 6, "pipeline.positions": 6, "pipeline.start": 6, "pipeline.inplace": 7, "pipeline.workers": 8,
    "pipeline.live": 7,
    # the fast lane of `parse` (templates from grammar samples; rows straight from the text)
    "fastlane": 6, "fastlane.pieces": 6, "fastlane.templates": 7, "fastlane.careful": 8, "fastlane.rows": 8,
    "fastlane.bulk": 9, "fastlane.cmatch": 8, "fastlane.native": 9, "fastlane.rescan": 10, "fastlane.lane": 11,
    "pipeline.batch": 12,
    # sinks and the dashboard model, then the screen, then the command line
    "sinks": 8, "sinks.table": 8, "sinks.livestate": 8, "sinks.series": 7, "sinks.webconfig": 8,
    "sinks.httpserver": 9, "sinks.runs": 9, "sinks.prometheus": 9, "sinks.output": 9,
    "tui": 8, "tui.view": 8, "tui.verdict": 8, "tui.widgets": 8,
    "tui.history": 9, "tui.tiles": 9, "tui.filestate": 9, "tui.positions": 9, "tui.model": 10, "tui.app": 11,
    "cli.args": 12, "cli.wiring": 12, "cli.batch": 13, "cli.compare": 13, "cli.live": 13, "cli.doctor": 14,
    "cli": 15, "__main__": 16, "": 0,
    # doctor: rules and findings, run state, break-even, detectors, engine (pure); rule files, reading, rendering
    "doctor": 4, "doctor.model": 4, "doctor.state": 6, "doctor.breakeven": 7, "doctor.detector": 8,
    "doctor.detect_accept": 9, "doctor.detect_context": 9, "doctor.detect_serving": 9, "doctor.detect_load": 9,
    "doctor.signatures": 10, "doctor.engine": 11, "doctor.rules": 11, "doctor.report": 12, "doctor.read": 13,
}  # fmt: skip
"""Layer of every module: a module may import only modules of a lower layer."""
CORE = (
    "errors",
    "records",
    "values",
    "fmt",
    "kinds",
    "derive",
    "drafts",
    "parsestate",
    "summary",
    "grammar",
    "stats",
    "body",
    "request_body",
    "window",
    "parse",
    "prescan",
    "compare",
    "redos",
)
BYTES = ("source", "ranges", "tail", "replay")
FORBIDDEN_IN_CORE = {"textual", "textual_plotext", "prometheus_client", "watchfiles", "os", "io", "gzip", "glob",
                     "pathlib", "socket", "subprocess", "tomllib", "shutil", "threading", "http", "bcrypt"}  # fmt: skip
FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "fdopen"}
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 50


def _modules() -> dict[str, Path]:
    """Every module: its ``.py`` file, or for a compiled module its C source (``.c``)."""
    out = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.c")]):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        out[".".join(parts)] = path
    return out


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names) for every import in the file, at any depth (a C source imports none)."""
    found: list[tuple[str, list[str]]] = []
    if path.suffix != ".py":
        return found
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.name for a in node.names]))
    return found


def _internal(module: str, names: list[str], modules: dict[str, Path]) -> list[str]:
    """The acceptmon modules an import statement loads (``from acceptmon.x import y`` may name module y)."""
    if module != "acceptmon" and not module.startswith("acceptmon."):
        return []
    base = module.removeprefix("acceptmon").lstrip(".")
    subs = [f"{base}.{n}".lstrip(".") for n in names if f"{base}.{n}".lstrip(".") in modules]
    return subs or [base]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {dep for mod, names in _imports(path) for dep in _internal(mod, names, modules) if dep != name}
        for name, path in modules.items()
    }


def test_every_module_has_a_layer():
    assert sorted(set(_modules()) - set(LAYERS)) == []


def test_each_module_imports_only_lower_layers():
    wrong = [
        f"{name} (layer {LAYERS[name]}) imports {dep} (layer {LAYERS[dep]})"
        for name, deps in _graph().items()
        for dep in deps
        if LAYERS[dep] >= LAYERS[name] and not name.startswith(dep + ".")  # a package's own __init__ is fine
    ]
    assert wrong == []


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join([*path[path.index(dep) :], dep]))
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_no_module_imports_another_modules_private_names():
    private = [
        f"{name}: from {mod} import {n}"
        for name, path in _modules().items()
        for mod, names in _imports(path)
        if mod.startswith("acceptmon")
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    assert private == []


@pytest.mark.parametrize("name", [*CORE, *BYTES])
def test_core_and_bytes_use_no_ui_exporter_or_watcher(name):
    top = {mod.split(".")[0] for mod, _ in _imports(_modules()[name])}
    banned = {"textual", "textual_plotext", "prometheus_client"} | ({"watchfiles"} if name != "tail" else set())
    assert top & banned == set()
    if name in BYTES:
        assert "acceptmon.parse" not in {mod for mod, _ in _imports(_modules()[name])}  # bytes never parse


@pytest.mark.parametrize("name", CORE)
def test_core_does_no_io(name):
    tree = ast.parse(_modules()[name].read_text())
    top = {mod.split(".")[0] for mod, _ in _imports(_modules()[name])}
    assert top & FORBIDDEN_IN_CORE == set()
    calls = {
        n.func.id if isinstance(n.func, ast.Name) else n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)
    }
    assert calls & FILE_CALLS == set()


def test_sizes():
    over = []
    for name, path in _modules().items():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            over.append(f"{name}: {len(text.splitlines())} lines")
        if path.suffix == ".c":  # a compiled module: its source and headers, by size
            over += [f"{h.name}: too long" for h in path.parent.glob(f"{path.stem}*.h") if _lines(h) > MAX_MODULE_LINES]
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    over.append(f"{name}.{node.name}: {length} lines")
    assert over == []


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_check_sees_a_cycle_and_a_layer_break(tmp_path, monkeypatch):
    """The contract can fail: a fake package with a cycle and an upward import is caught."""
    pkg = tmp_path / "acceptmon"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "parse.py").write_text("from acceptmon.cli import main\n")
    (pkg / "cli.py").write_text("def main():\n    from acceptmon import parse\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    graph = _graph()
    assert graph["parse"] == {"cli"} and graph["cli"] == {"parse"}
    with pytest.raises(AssertionError):
        test_no_import_cycles()
    with pytest.raises(AssertionError):
        test_each_module_imports_only_lower_layers()


def test_core_and_cli_import_no_ui_exporter_or_watcher_library():
    code = (
        "import sys\n"
        "import acceptmon.records, acceptmon.grammar, acceptmon.parse, acceptmon.stats, acceptmon.kinds\n"
        "import acceptmon.loader, acceptmon.pipeline.batch, acceptmon.pipeline.live, acceptmon.source\n"
        "import acceptmon.sinks.livestate, acceptmon.tui.model, acceptmon.cli\n"
        "print(sorted(m for m in ('textual', 'textual_plotext', 'prometheus_client', 'watchfiles') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
