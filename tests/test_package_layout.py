"""The private boundary, checked on the import graph.

Only ``privsyn_core.data`` (reading and encoding the table) and ``privsyn_core.measuring``
(counting it, with noise) read private rows. Selection, generation and release work on
measurements alone, so none of their modules may import, even indirectly, the modules that
read or count the table. Imports under ``if TYPE_CHECKING:`` are annotations only and do not
count; imports inside functions do.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "privsyn_core"
POST_PROCESSING = ("selection", "generation", "release")


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in CORE.rglob("*.py")}

#: the counting backends' package: each of its modules reads rows (its interface included)
COUNTERS = "privsyn_core.measuring.counters"
COUNTER_MODULES = tuple(sorted(m for m in MODULES if m == COUNTERS or m.startswith(COUNTERS + ".")))
BACKENDS = (
    "counting",
    "reading",
    "sql_counting",
    "sql_encoding",
    "duckdb_counter",
    "spark_counter",
)
ROW_READERS = (
    "privsyn_core.data.io",
    "privsyn_core.data.table",
    "privsyn_core.data.columns",
    "privsyn_core.data.column_domains",
    "privsyn_core.data.released_values",
    "privsyn_core.data.sources",
    *COUNTER_MODULES,
    "privsyn_core.pipeline",
)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST, *, in_functions: bool = True) -> set[str]:
    """The package modules ``tree`` imports when it runs (not under ``TYPE_CHECKING``);
    without ``in_functions``, only those imported when the module itself is imported."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if not in_functions and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name.startswith("privsyn_core")}


@cache
def _imports(module: str) -> frozenset[str]:
    path = MODULES.get(module)
    if path is None:  # a name imported from a module, not a module
        return frozenset()
    return frozenset(
        name for name in _runtime_imports(ast.parse(path.read_text())) if name in MODULES
    )


def _reachable(module: str) -> dict[str, str]:
    """Every module ``module`` imports at run time, each with the module that imports it."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        current = todo.pop()
        for imported in _imports(current):
            if imported not in seen and imported != module:
                seen[imported] = current
                todo.append(imported)
    return seen


def _chain(module: str, target: str, parents: dict[str, str]) -> str:
    chain = [target]
    while chain[-1] != module and chain[-1] in parents:
        chain.append(parents[chain[-1]])
    return " <- ".join(chain)


POST_MODULES = sorted(
    name for name in MODULES if name.split(".")[1:2] and name.split(".")[1] in POST_PROCESSING
)


def test_the_packages_exist_and_hold_modules():
    for package in (*POST_PROCESSING, "data", "measuring", "privacy"):
        assert (CORE / package / "__init__.py").is_file(), package
    assert len(POST_MODULES) >= 10


@pytest.mark.parametrize("module", POST_MODULES)
def test_post_processing_never_reaches_the_rows(module):
    parents = _reachable(module)
    crossed = [_chain(module, reader, parents) for reader in ROW_READERS if reader in parents]
    assert not crossed, f"{module} reaches code that reads the private table: {crossed}"


def test_the_counting_backends_live_in_their_own_package():
    """Every backend is a module of ``measuring/counters``, beside the package that states their
    interface; the rest of ``measuring`` holds the DP mechanisms."""
    assert set(COUNTER_MODULES) == {COUNTERS, *(f"{COUNTERS}.{name}" for name in BACKENDS)}
    assert not {f"privsyn_core.measuring.{name}" for name in BACKENDS} & set(MODULES)


def _private_names_imported(source: str) -> list[str]:
    """The names starting with ``_`` that ``source`` imports from a package module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("privsyn_core"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


@pytest.mark.parametrize("module", COUNTER_MODULES)
def test_the_counting_backends_use_only_public_names(module):
    """What a backend needs from ``data`` (a CSV file's delimiter, how a path is named to an
    engine, how values read) is public there: no backend imports another module's private
    name."""
    assert _private_names_imported(MODULES[module].read_text()) == []


def test_the_private_name_check_sees_one():
    source = "def f():\n    from privsyn_core.data.io import _first_line, file_delimiter\n"
    assert _private_names_imported(source) == ["privsyn_core.data.io._first_line"]


def test_the_check_sees_a_crossing():
    """The walk finds what it must find: the pipeline reaches the counters and the readers."""
    parents = _reachable("privsyn_core.pipeline")
    assert "privsyn_core.measuring.counters.counting" in parents
    assert "privsyn_core.data.io" in parents or "privsyn_core.data.columns" in parents


def test_the_fitted_model_and_its_bundle_are_post_processing():
    """Sampling (the fitted model) and loading a model from a bundle are checked like every
    other post-processing module: neither may reach the readers or the counters."""
    assert {"privsyn_core.generation.fitted", "privsyn_core.release.bundle"} <= set(POST_MODULES)
    assert "privsyn_core.generation.fitted" in _reachable("privsyn_core.release.bundle")
    # the estimator that fits is outside the boundary: it measures
    assert "privsyn_core.measuring.counters.counting" in _reachable("privsyn_core.model")
