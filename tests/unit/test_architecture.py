"""ARCHITECTURE.md is the map of the package: every module is on it, and nothing else."""

from __future__ import annotations

import re

from conftest import REPO


def mapped_modules() -> set[str]:
    """Paths of the modules listed in the tree of ARCHITECTURE.md (``relay/api/body.py``)."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    tree = re.search(r"## The tree\n\n```\n(.+?)\n```", text, re.S)
    assert tree, "ARCHITECTURE.md has no tree"
    found: set[str] = set()
    folders: list[str] = []  # the folders enclosing the current line, by depth
    for line in tree.group(1).splitlines()[1:]:  # the first line is relay/
        if not line[: len(line) - len(line.lstrip())] or line.startswith(" " * 24):
            continue  # a description's continuation line
        name = line.split()[0]
        depth = (len(line) - len(line.lstrip())) // 2
        del folders[depth - 1 :]
        if name.endswith("/"):
            folders.append(name)
        elif name.endswith(".py"):
            found.add("relay/" + "".join(folders) + name)
    return found


def package_modules() -> set[str]:
    return {
        str(path.relative_to(REPO))
        for path in (REPO / "relay").rglob("*.py")
        if path.name != "__init__.py" and "migrations" not in path.parts
    }


def test_architecture_lists_every_module_and_no_other() -> None:
    mapped, actual = mapped_modules(), package_modules()
    assert not actual - mapped, f"modules missing from ARCHITECTURE.md: {actual - mapped}"
    assert not mapped - actual, f"ARCHITECTURE.md lists missing modules: {mapped - actual}"


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for folder in ("relay", "tests", "bench")
        for path in (REPO / folder).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > 400
    }
    assert not long, long


def test_test_modules_sit_in_their_tier_under_unique_names() -> None:
    """Pytest imports each test module by its bare name (no ``__init__.py``): two of one name
    would clash, and a test module importing another would tie it to that one's folder, so
    what tests share lives in helper modules at tests/ top level."""
    modules = sorted((REPO / "tests").rglob("test_*.py"))
    tiers = {path.relative_to(REPO / "tests").parts[0] for path in modules}
    assert tiers <= {"unit", "integration", "e2e"}, tiers
    names = [path.name for path in modules]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert not list((REPO / "tests").rglob("__init__.py"))
    importing = [
        str(path.relative_to(REPO))
        for path in modules
        if re.search(r"^\s*(from|import) test_", path.read_text(), re.M)  # in a function too
    ]
    assert not importing, importing
