"""The layers, enforced: no import cycles, each module imports only below itself, the core stays pure, sizes.

Imports are read from the source with ``ast``, including imports inside functions
(a static contract cannot tell a module-scope import from a deferred one, so both
count). A runtime check backs it up: importing the core and the CLI loads no UI,
exporter or watcher library.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "acceptmon"


def _modules_of(package: str) -> tuple[str, ...]:
    """Dotted names (below ``acceptmon``) of a package's modules, the package itself included."""
    root = PACKAGE / package
    names = {
        ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__") for p in root.rglob("*.py")
    }
    return tuple(sorted(names))


PACKAGES: dict[str, int] = {
    # the folders are the flow: bytes in -> records -> numbers -> wiring -> states and outputs -> screens -> command
    # line; the library API (api, bound on the package) over all of it but the command line
    "errors": 0, "data": 0, "display": 0, "version": 0,
    "inputs": 1,
    "parse": 2,
    "measure": 3,
    "pipeline": 4,
    "diagnose": 5, "sinks": 5, "live": 5,
    "exporter": 6, "tui": 6,
    "cli": 7,
    "__main__": 8,
    "api": 8, "ray": 8,
    "": 9,
}  # fmt: skip
"""The floor of every package (or top-level module): a module imports only from its own package or a lower floor.
Inside a package only cycles are forbidden."""
CORE = tuple(
    name
    for name in (*_modules_of("parse"), *_modules_of("measure"), *_modules_of("diagnose"))
    if name not in ("parse.load", "diagnose.rules", "diagnose.read", "diagnose.report")
    and not name.startswith("parse.fast")
)
"""Pure modules: text, records and numbers in and out; no file, socket, UI or exporter."""
BYTES = _modules_of("inputs")
FORBIDDEN_IN_CORE = {"textual", "textual_plotext", "prometheus_client", "watchfiles", "os", "io", "gzip", "glob",
                     "pathlib", "socket", "subprocess", "tomllib", "shutil", "threading", "http", "bcrypt"}  # fmt: skip
FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "fdopen"}


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


def _floor(module: str) -> int:
    return PACKAGES[module.split(".")[0]] if module.split(".")[0] in PACKAGES else PACKAGES[module]


def test_every_package_has_a_floor():
    assert sorted({m.split(".")[0] for m in _modules()} - set(PACKAGES)) == []


def test_each_module_imports_only_its_package_or_lower_floors():
    wrong = [
        f"{name} (floor {_floor(name)}) imports {dep} (floor {_floor(dep)})"
        for name, deps in _graph().items()
        for dep in deps
        if name.split(".")[0] != dep.split(".")[0] and _floor(dep) >= _floor(name)
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
    banned = {"textual", "textual_plotext", "prometheus_client"} | (
        {"watchfiles"} if name != "inputs.follow" else set()
    )
    assert top & banned == set()
    if name in BYTES:
        assert "acceptmon.parse.parser" not in {mod for mod, _ in _imports(_modules()[name])}  # bytes never parse


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
        test_each_module_imports_only_its_package_or_lower_floors()


def test_core_and_cli_import_no_ui_exporter_or_watcher_library():
    code = (
        "import sys\n"
        "import acceptmon.parse.records, acceptmon.parse.grammar, acceptmon.parse.parser, acceptmon.measure.aggregate, acceptmon.parse.kinds\n"
        "import acceptmon.parse.load, acceptmon.pipeline.batch, acceptmon.pipeline.live, acceptmon.inputs.files\n"
        "import acceptmon.live.state, acceptmon.tui.model, acceptmon.cli\n"
        "print(sorted(m for m in ('textual', 'textual_plotext', 'prometheus_client', 'watchfiles') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_layout_in_the_docs_names_every_folder_and_module():
    """docs/architecture.md's layout block is the tree: a new module or folder is placed there too."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    start = doc.index("```\nacceptmon/")
    words = set(re.findall(r"[a-z_]+", doc[start : doc.index("```", start + 4)]))
    names = {p.stem for p in PACKAGE.rglob("*.py") if p.stem not in ("__init__", "__main__")}
    names |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert sorted(names - words) == []


def test_the_readme_layout_names_every_folder():
    readme = (PACKAGE.parent / "README.md").read_text()
    start = readme.index("## How it is built")
    block = readme[start : readme.index("```", readme.index("```", start) + 3)]
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert sorted(f for f in folders if f"{f}/" not in block) == []
