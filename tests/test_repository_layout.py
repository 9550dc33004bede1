"""The repository's top level stays the one the design page lays out: the two packages, the
tests, the docs and the screenshots, benchmarks, CI and the server's settings. A file added
there by accident (a downloaded wheel, a synthetic CSV, a scratch script) fails here before it
lands in every clone."""

from __future__ import annotations

import subprocess

from conftest import ROOT

TOP_LEVEL = {
    ".ci", ".gitignore", ".streamlit", "README.md", "assets", "benchmarks", "dashboard",
    "docs", "privsyn_core", "pyproject.toml", "tests",
}  # fmt: skip


def tracked_top_level() -> set[str]:
    """The first part of every path git tracks (or is about to: the index), in this checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return {path.split("/", 1)[0] for path in listed.split("\0") if path}


def test_the_top_level_holds_only_what_the_layout_names():
    extra = tracked_top_level() - TOP_LEVEL
    assert not extra, f"not part of the layout (docs/design-and-layout.md): {sorted(extra)}"
    assert {"privsyn_core", "dashboard", "tests", "README.md", "pyproject.toml"} <= (
        tracked_top_level()
    )
