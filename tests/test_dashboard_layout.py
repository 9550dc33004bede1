"""The dashboard's layout, checked on its files: each page's helpers beside the page, shared
modules at the top, and one door to the session's state.

``dashboard/views/`` holds the pages ``app.py`` registers and the helpers of one page each,
named after it (``lab_jobs.py`` serves ``lab.py``); ``dashboard/`` holds what several pages or
the app share. Every key of ``st.session_state`` is an attribute of ``state.Session``, so no
other module touches ``st.session_state``. Imports under ``if TYPE_CHECKING:`` are annotations
only and do not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

DASHBOARD = Path(__file__).resolve().parent.parent / "dashboard"
VIEWS = DASHBOARD / "views"


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` that runs (the bodies of ``if TYPE_CHECKING:`` left out)."""
    found: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        if _is_type_checking(node):
            return
        found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _name(path: Path) -> str:
    """``state`` for dashboard/state.py, ``views.lab`` for dashboard/views/lab.py."""
    return ".".join(path.relative_to(DASHBOARD).with_suffix("").parts)


def _imports(path: Path) -> set[str]:
    """The dashboard modules ``path`` imports, by :func:`_name` (relative imports only: the
    dashboard imports itself relatively, so it runs under either of its names)."""
    package = _name(path).split(".")[:-1]
    found: set[str] = set()
    for node in _nodes(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[: len(package) - (node.level - 1)]
        if node.module:
            found.add(".".join([*base, node.module]))
        else:
            found.update(".".join([*base, alias.name]) for alias in node.names)
    modules = {_name(p) for p in DASHBOARD.rglob("*.py")}
    return found & modules


def _modules() -> dict[str, Path]:
    return {_name(p): p for p in DASHBOARD.rglob("*.py") if p.name != "__init__.py"}


def _pages() -> set[str]:
    """The pages app.py registers (``st.Page(VIEWS / "data.py", ...)``)."""
    app = (DASHBOARD / "app.py").read_text()
    return {f"views.{name}" for name in re.findall(r'st\.Page\(VIEWS / "(\w+)\.py"', app)}


def misplaced(importers: dict[str, set[str]], pages: set[str]) -> list[str]:
    """What breaks the layout, given each module's importers: a top-level module that serves
    one page alone, or a helper in ``views`` that is not its named page's alone (imported by
    the page, or by the page's other helpers: a helper may be split in parts)."""
    problems = []
    for module, users in sorted(importers.items()):
        if module in pages or module == "app":
            continue
        if module.startswith("views."):
            page = next((p for p in pages if module.startswith(f"{p}_")), None)
            family = {u for u in users if u == page or u.startswith(f"{page}_")}
            if page is None or not users or users != family:
                problems.append(f"{module} is imported by {sorted(users)}, not by {page} alone")
        elif len(users) == 1 and users <= pages:
            problems.append(f"{module} serves {next(iter(users))} alone: move it beside it")
    return problems


def _importers() -> dict[str, set[str]]:
    modules = _modules()
    importers: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported in _imports(path):
            importers.setdefault(imported, set()).add(name)
    return importers


def test_the_pages_exist_and_every_registered_page_is_a_file():
    pages = _pages()
    assert {"views.data", "views.history", "views.lab", "views.learn"} <= pages
    assert all((DASHBOARD / f"{page.replace('.', '/')}.py").is_file() for page in pages)


def test_each_page_helper_is_beside_its_page_and_shared_modules_at_the_top():
    assert misplaced(_importers(), _pages()) == []


def test_the_layout_check_sees_a_misplaced_module():
    pages = {"views.lab", "views.run"}
    assert misplaced({"lab_jobs": {"views.lab"}}, pages)  # one page's helper at the top
    assert misplaced({"views.lab_jobs": {"views.lab", "views.run"}}, pages)  # shared
    assert misplaced({"views.helpers": {"views.lab"}}, pages)  # not named after its page
    assert not misplaced({"worker": {"views.lab", "views.run"}}, pages)
    assert not misplaced({"views.lab_jobs": {"views.lab"}}, pages)
    assert not misplaced({"views.lab_jobs_parts": {"views.lab_jobs"}}, pages)  # a helper's part
    assert misplaced({"views.lab_jobs": {"views.run_steps"}}, pages)  # another page's helper


def _touches_session_state(path: Path) -> list[int]:
    """Lines of ``path`` that use ``st.session_state`` (in code: a docstring may name it)."""
    return [
        node.lineno
        for node in _nodes(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "session_state"
    ]


@pytest.mark.parametrize(
    "path",
    sorted(p for p in DASHBOARD.rglob("*.py") if p.name != "state.py"),
    ids=lambda p: _name(p),
)
def test_no_module_but_state_touches_the_session_state(path):
    assert _touches_session_state(path) == [], f"use state.session in {_name(path)}"


def test_the_session_state_check_sees_a_raw_key(tmp_path):
    page = tmp_path / "page.py"
    page.write_text('"""Reads ``st.session_state``."""\nx = st.session_state["epsilon"]\n')
    assert _touches_session_state(page) == [2]
    assert _touches_session_state(DASHBOARD / "state.py")  # the one door
