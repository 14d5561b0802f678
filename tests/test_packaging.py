"""What ``pip install results-warehouse`` pulls in: the named foundation and nothing that serves
one call (vl-convert is the ``report`` extra), no upper bound that is only a start-up
preference (typer's lives in ``constraints.txt``, which CI and the benchmarks install with),
and no optional import of a required package (orjson)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

import warehouse

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
CORE = {Requirement(r).name.lower(): Requirement(r) for r in PROJECT["dependencies"]}
EXTRAS = {
    name: {Requirement(r).name.lower(): Requirement(r) for r in reqs}
    for name, reqs in PROJECT["optional-dependencies"].items()
}


def test_the_core_install_is_the_named_foundation_without_the_report_renderer() -> None:
    for name in ("elasticsearch", "boto3", "gitpython", "hydra-core", "pydantic", "typer"):
        assert name in CORE, name
    assert "orjson" in CORE  # required, so never imported optionally (below)
    assert "vl-convert-python" not in CORE
    assert "vl-convert-python" in EXTRAS["report"]
    # the tests draw charts with vl-convert: the test extra brings the report extra along
    assert "results-warehouse" in EXTRAS["test"]
    assert "report" in EXTRAS["test"]["results-warehouse"].extras


def test_no_install_requirement_carries_an_upper_bound_on_typer() -> None:
    typer = CORE["typer"]
    assert not [s for s in typer.specifier if s.operator in ("<", "<=", "==", "~=")]
    pinned = [
        Requirement(line.split("#", 1)[0].strip())
        for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
        if line.split("#", 1)[0].strip()
    ]
    assert [str(r) for r in pinned if r.name == "typer"] == ["typer<0.29"]


def test_ci_and_the_benchmarks_install_with_the_constraints() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    exported = re.search(r'^export PIP_CONSTRAINT="\$PWD/constraints\.txt"$', ci, re.M)
    assert exported, "CI installs without constraints.txt"
    first_install = re.search(r"^pip install .*-e ", ci, re.M)
    assert first_install
    assert exported.start() < first_install.start()
    bench = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert "pip install -c constraints.txt -e '.[bench]'" in bench


def test_a_required_package_is_never_imported_as_optional() -> None:
    """``try: import orjson / except ImportError`` would make orjson both required and
    optional: a fallback path no install ever takes."""
    required = {name.replace("-", "_") for name in CORE}
    guarded = []
    for path in Path(warehouse.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Try):
                continue
            catches = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if not catches & {"ImportError", "ModuleNotFoundError"}:
                continue
            for inner in node.body:
                names = []
                if isinstance(inner, ast.Import):
                    names = [a.name for a in inner.names]
                elif isinstance(inner, ast.ImportFrom) and inner.module:
                    names = [inner.module]
                guarded += [
                    f"{path.name}: {n}" for n in names if n.split(".")[0].lower() in required
                ]
    assert guarded == []
