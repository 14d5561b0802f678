"""docs/ARCHITECTURE.md tells the truth (issue 26, item 7): every module of ``warehouse/`` is
named in it, every file it names exists, and each of its three paths names at most six files,
in order, each with functions and methods that exist in that file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
PACKAGE = REPO / "warehouse"
DOC_PATH = REPO / "docs" / "ARCHITECTURE.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
MAX_FILES = 6

CODE = re.compile(r"`([^`\n]+)`")
PY_FILE = re.compile(r"^[\w/<>]+\.py$")
SYMBOL = re.compile(r"^_?[A-Za-z]\w*(\.\w+)?$")


def modules() -> list[str]:
    """Every module of the package, relative to ``warehouse/``."""
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))


def named_files(text: str = DOC) -> set[str]:
    return {c for c in CODE.findall(text) if PY_FILE.match(c)}


def resolve(name: str, near: Path | None = None) -> Path | None:
    """A file the page names: relative to ``warehouse/`` (or to ``near``, the package of the
    file named just before it, for a bare ``name.py``), or to the repository."""
    for base in (near, PACKAGE, REPO):
        if base is not None and (base / name).is_file():
            return base / name
    # a module named inside its package's paragraph (``api.py`` of ``ui/``), or a file of
    # the tests: the first of the package, then of the repository, whose path ends so
    for root in (PACKAGE, REPO / "tests"):
        found = sorted(p for p in root.rglob(Path(name).name) if str(p).endswith("/" + name))
        if found:
            return found[0]
    return None


def paths(text: str = DOC) -> list[tuple[str, list[tuple[list[str], list[str]]]]]:
    """The three paths: (title, [(files, symbols) per step, in order])."""
    section = text.split("## Three paths", 1)[1].split("\n## ", 1)[0]
    found = []
    for item in re.split(r"\n- ", "\n" + section.split("\n", 1)[1].strip())[1:]:
        item = " ".join(item.split())
        title = item.split("**")[1] if "**" in item else item[:40]
        steps = []
        for part in item.split(" → "):
            codes = CODE.findall(part)
            files = [c for c in codes if PY_FILE.match(c)]
            symbols = [c for c in codes if SYMBOL.match(c) and not c.endswith(".py")]
            if files:
                steps.append((files, symbols))
            elif steps:  # an arrow inside a step's own parentheses (end → save)
                steps[-1][1].extend(symbols)
        found.append((title, steps))
    return found


def defined(path: Path) -> set[str]:
    """The top-level functions and classes of ``path``, and ``Class.method`` for methods."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}.{item.name}")
                    names.add(item.name)
    return names


EVERYWHERE = set().union(*(defined(PACKAGE / m) for m in modules()))


def test_every_module_is_named() -> None:
    named = named_files()
    bare = {Path(n).name for n in named}
    missing = [m for m in modules() if m not in named and Path(m).name not in bare]
    assert not missing, f"docs/ARCHITECTURE.md says nothing of: {missing}"


def test_every_file_named_exists() -> None:
    missing = [n for n in sorted(named_files()) if "<" not in n and resolve(n) is None]
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


def test_there_are_three_paths_of_at_most_six_files() -> None:
    found = paths()
    assert len(found) == 3, [t for t, _ in found]
    for title, steps in found:
        assert 3 <= len(steps) <= MAX_FILES, (title, [f for f, _ in steps])


@pytest.mark.parametrize("title", [t for t, _ in paths()])
def test_each_step_of_a_path_names_what_its_file_defines(title: str) -> None:
    [steps] = [s for t, s in paths() if t == title]
    near: Path | None = None
    for files, symbols in steps:
        places = [resolve(f, near) for f in files]
        assert all(places), (title, files)
        near = places[0].parent if places[0] is not None else None
        known = set().union(*(defined(p) for p in places if p is not None))
        # a name is code when it is Class.method, or defined somewhere in the package; other
        # words in backticks are the vocabulary of a server (top_hits, index, updated_at)
        code = [s for s in symbols if s.split(".")[0][0].isupper() or s in EVERYWHERE]
        unknown = [s for s in code if s not in known]
        assert not unknown, f"{title}: {files} define none of {unknown}"


def test_the_path_reader_sees_steps_symbols_and_a_wrong_name() -> None:
    text = (
        "## Three paths\n\n- **A**: `recording/run.py` (`ActiveRun.end` → `ActiveRun.save`)"
        " → `stores/local.py` (`LocalStore.write_runs`)\n\n## Next\n"
    )
    [(title, steps)] = paths(text)
    assert title == "A"
    assert steps == [
        (["recording/run.py"], ["ActiveRun.end", "ActiveRun.save"]),
        (["stores/local.py"], ["LocalStore.write_runs"]),
    ]
    assert "ActiveRun.save" in defined(PACKAGE / "recording" / "run.py")
    assert "ActiveRun.no_such_method" not in defined(PACKAGE / "recording" / "run.py")
