"""The code's shape, kept as a maintainer reads it: no import cycle, no module or function
too long to read in one sitting.

Imports are read from the source (every ``import``, also inside functions and under
``TYPE_CHECKING``), so a cycle hidden in a function-level import is caught as well as one
at module level. A module importing its own package's ``__init__`` is no edge: Python runs
a package before any of its modules, and the package's lazy names import nothing at load.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("privsyn_core", "dashboard")
#: the longest a module may be, and a function (the argument parser lists every option of
#: every command, one after the other: long, but read as a table)
MODULE_LINES = 800
FUNCTION_LINES = 100
LONG_BY_NATURE = {("privsyn_core/cli.py", "build_parser")}


@cache
def _parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once for every check here."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imported(path: Path, name: str) -> Iterator[str]:
    """Every module name ``path`` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (a name resolves to its longest known
    prefix: ``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``)."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        ancestors = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        for target in _imported(path, name):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target not in ancestors:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_sees_function_level_and_type_checking_imports(tmp_path):
    """The check can fail: a cycle through an import inside a function, and one through a
    ``TYPE_CHECKING`` import, are both found; a submodule importing its package is not one."""
    package = tmp_path / "privsyn_core"
    package.mkdir()
    (tmp_path / "dashboard").mkdir()
    (package / "__init__.py").write_text("from typing import TYPE_CHECKING\n")
    (package / "a.py").write_text("def f():\n    from privsyn_core.b import g\n")
    (package / "b.py").write_text("from privsyn_core import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import X\n"
    )
    (package / "d.py").write_text("import privsyn_core.c\n")
    (package / "e.py").write_text("import privsyn_core\n")
    found = cycles(import_graph(tmp_path))
    assert found == [["privsyn_core.a", "privsyn_core.b"], ["privsyn_core.c", "privsyn_core.d"]]


def _too_long(root: Path = ROOT) -> tuple[list[str], list[str]]:
    modules, functions = [], []
    for path in _modules(root).values():
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(root).as_posix()
        if text.count("\n") > MODULE_LINES:
            modules.append(f"{relative} ({text.count(chr(10))} lines)")
        for node in ast.walk(_parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES and (relative, node.name) not in LONG_BY_NATURE:
                    functions.append(f"{relative}:{node.lineno} {node.name} ({length} lines)")
    return modules, functions


def test_no_module_or_function_is_too_long_to_read():
    modules, functions = _too_long()
    assert not modules, f"modules over {MODULE_LINES} lines: {modules}"
    assert not functions, f"functions over {FUNCTION_LINES} lines: {functions}"


@pytest.mark.parametrize("lines", [MODULE_LINES + 1, FUNCTION_LINES + 1])
def test_the_length_check_can_fail(tmp_path, lines):
    package = tmp_path / "privsyn_core"
    package.mkdir()
    (tmp_path / "dashboard").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(lines))
    (package / "long.py").write_text("def f():\n" + body)
    modules, functions = _too_long(tmp_path)
    assert functions and (modules or lines <= MODULE_LINES)


def _definitions(path: Path) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """The names ``path`` defines at top level, and those it imports (name -> module, name)."""
    defined: set[str] = set()
    imported: dict[str, tuple[str, str]] = {}
    for node in _parsed(path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module, alias.name)
    return defined, imported


def borrowed_imports(root: Path = ROOT) -> list[str]:
    """Imports that take a name from a module that only imports it itself: each name has one
    home, and code names that home (a package's ``__init__`` may gather names for users)."""
    modules = _modules(root)
    known = {name: _definitions(path) for name, path in modules.items()}
    found = []
    for folder in (*PACKAGES, "tests", "benchmarks"):
        for path in sorted((root / folder).rglob("*.py")):
            if ".peers-venv" in path.parts:
                continue
            for node in ast.walk(_parsed(path)):
                if not isinstance(node, ast.ImportFrom) or node.module not in known or node.level:
                    continue
                if modules[node.module].name == "__init__.py":
                    continue
                defined, imported = known[node.module]
                for alias in node.names:
                    if alias.name not in defined and imported.get(alias.name, ("",))[0] in known:
                        where = f"{path.relative_to(root).as_posix()}:{node.lineno}"
                        found.append(f"{where} {node.module}.{alias.name}")
    return found


def test_every_name_is_imported_from_its_home():
    found = borrowed_imports()
    assert not found, f"names imported through a module that only imports them: {found}"


def test_the_home_check_can_fail(tmp_path):
    package = tmp_path / "privsyn_core"
    package.mkdir()
    (tmp_path / "dashboard").mkdir()
    (package / "home.py").write_text("def f():\n    pass\n")
    (package / "middle.py").write_text("from privsyn_core.home import f\n")
    (package / "user.py").write_text("from privsyn_core.middle import f\n")
    assert borrowed_imports(tmp_path) == ["privsyn_core/user.py:1 privsyn_core.middle.f"]
