"""The README and docs/ hold together: every relative link and image resolves to a file of the
repository (and every anchor to a heading of its page), every repository path they name in
code exists, the README stays short enough to read in five minutes, its two commands stay as
CI runs them, and no user-facing text cites an issue number (it says what the change does).

The checks are functions of a page's text, so the self-tests below feed them broken pages and
show that each one can fail.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest
from conftest import ROOT

README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
#: five minutes of reading for a newcomer
README_MAX_LINES = 300
#: the README's two commands, as CI (``.ci/run``) and a first-time user run them
FIRST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/privsyn studio"
SECOND_COMMAND = "bash .ci/run"
#: top-level folders whose paths, written in code in a page, must exist
REPOSITORY_FOLDERS = ("privsyn_core", "dashboard", "tests", "benchmarks", "assets", "docs",
                      ".ci", ".streamlit")  # fmt: skip

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
REFERENCE_LINK = re.compile(r"^[ ]{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HEADING = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
ISSUE_NUMBER = re.compile(r"\bissues?[\s_-]*(?:no\.?\s*)?#?\d+|(?<![\w&/#])#\d+\b", re.I)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def prose(text: str) -> str:
    """The page without fenced code blocks and with code spans emptied: what links can be."""
    return CODE_SPAN.sub("``", FENCE.sub("", text))


def links(text: str) -> list[str]:
    """Every link and image target of a Markdown page: inline, reference-style and HTML."""
    body = prose(text)
    found = [m.group(1) for m in INLINE_LINK.finditer(body)]
    found += [m.group(1) for m in REFERENCE_LINK.finditer(body)]
    return found + [m.group(1) for m in HTML_LINK.finditer(body)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its words lowercased, punctuation dropped, spaces as -."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings, with GitHub's -1, -2 for repeated ones."""
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(FENCE.sub("", text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(page: Path, text: str, root: Path = ROOT) -> list[str]:
    """Relative links of ``page`` that name no file or folder of ``root``, or no heading."""
    problems = []
    for target in links(text):
        if SCHEME.match(target) or target.startswith("//"):
            continue  # an address on the web: not a file of the repository
        path_part, _, anchor = target.partition("#")
        if not path_part:
            if anchor not in anchors(text):
                problems.append(f"{target}: no heading #{anchor} in {page.name}")
            continue
        path = (page.parent / path_part).resolve()
        if not path.is_relative_to(root.resolve()):
            problems.append(f"{target}: outside the repository")
        elif not path.exists():
            problems.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path.read_text()):
            problems.append(f"{target}: no heading #{anchor} in {path.name}")
    return problems


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """Repository paths a page names in code (``privsyn_core/...``, ``gum.py``) that do not
    exist: a moved or renamed module leaves the docs pointing nowhere."""
    python_files = _python_files(root)
    problems = []
    for match in CODE_SPAN.finditer(FENCE.sub("", text)):
        token = match.group(2).strip()
        if not re.fullmatch(r"[\w.*/-]+", token) or "/." in token or token.startswith(".."):
            continue
        if token.split("/")[0] in REPOSITORY_FOLDERS and "/" in token:
            if not any(root.glob(token.rstrip("/"))):
                problems.append(token)
        elif token.endswith(".py") and not any(
            path == token or path.endswith("/" + token) for path in python_files
        ):
            problems.append(token)
    return sorted(set(problems))


@functools.cache
def _python_files(root: Path) -> tuple[str, ...]:
    """The repository's Python files, relative to ``root``; hidden folders (virtual
    environments, caches) are not walked."""
    found = []
    for folder in ("privsyn_core", "dashboard", "tests", "benchmarks"):
        for here, subfolders, files in os.walk(root / folder):
            subfolders[:] = [s for s in subfolders if not s.startswith((".", "__pycache__"))]
            found += [
                (Path(here) / f).relative_to(root).as_posix() for f in files if f.endswith(".py")
            ]
    return tuple(found)


def issue_numbers(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE_NUMBER.finditer(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_image_resolves(page):
    assert broken_links(page, page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_named_in_code_exists(page):
    assert missing_paths(page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_issue_numbers_in_user_facing_text(page):
    assert issue_numbers(page.read_text()) == []


def test_the_readme_is_short_and_links_every_docs_page():
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(text) if t.startswith("docs/")}
    assert {page.resolve() for page in PAGES[1:]} <= linked
    assert len(PAGES) > 1  # docs/ exists: the README's details live there


def test_the_readme_keeps_its_two_commands_as_ci_runs_them():
    text = README.read_text()
    assert FIRST_COMMAND in text and SECOND_COMMAND in text
    assert text.index(FIRST_COMMAND) < text.index(SECOND_COMMAND)
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest" in ci and "pip install" in ci


# the checks themselves can fail


def test_a_broken_link_an_image_and_an_anchor_are_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## The pages\n")
    (tmp_path / "there.png").write_bytes(b"")
    page = tmp_path / "README.md"
    text = (
        "# Title\n[ok](docs/guide.md#the-pages) ![ok](there.png) [web](https://example.org)\n"
        "[gone](docs/missing.md) ![gone](nothere.png) [bad anchor](docs/guide.md#no-such)\n"
        "[self](#title) [self bad](#nowhere) [out](../elsewhere.md)\n"
        '[ref]: docs/gone-too.md\n<img src="lost.png">\n'
        "```\n[in code](not-a-link.md)\n```\n`[span](not-a-link-either.md)`\n"
    )
    assert broken_links(page, text, tmp_path) == [
        "docs/missing.md: no such file",
        "nothere.png: no such file",
        "docs/guide.md#no-such: no heading #no-such in guide.md",
        "#nowhere: no heading #nowhere in README.md",
        "../elsewhere.md: outside the repository",
        "docs/gone-too.md: no such file",
        "lost.png: no such file",
    ]


def test_github_anchors_follow_its_slug_rules():
    text = "# What the engine does: `privsyn_core/`, one step\n## Runs\n## Runs\n```\n# not\n```\n"
    assert anchors(text) == {"what-the-engine-does-privsyn_core-one-step", "runs", "runs-1"}


def test_a_missing_module_path_is_reported(tmp_path):
    (tmp_path / "privsyn_core" / "generation").mkdir(parents=True)
    (tmp_path / "privsyn_core" / "generation" / "gum.py").write_text("")
    text = (
        "`generation/gum.py` `gum.py` `privsyn_core/generation/gum.py` `release.zip`\n"
        "`generation/gone.py` `privsyn_core/nothing/` `benchmarks/evidence/x-*.txt`\n"
    )
    assert missing_paths(text, tmp_path) == [
        "benchmarks/evidence/x-*.txt", "generation/gone.py", "privsyn_core/nothing/",
    ]  # fmt: skip


def test_issue_numbers_are_found_in_their_usual_spellings():
    text = "fixed in issue 22, issue-12 targets, (issues 3 and 4), see #41; colour #fff, rule 22"
    assert issue_numbers(text) == ["issue 22", "issue-12", "issues 3", "#41"]
