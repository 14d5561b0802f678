"""The test suite itself runs on a new machine however it is started, and never times itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.browser import find_chromium
from tests.servers import noida_executable

TESTS = Path(__file__).parent


def test_noida_db_is_found_beside_python_without_an_activated_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "")
    found = noida_executable()
    assert found is not None
    assert Path(found).parent == Path(sys.executable).parent


def test_a_missing_browser_skips_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("WAREHOUSE_TEST_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        find_chromium()


def test_a_missing_browser_fails_where_ci_requires_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("WAREHOUSE_TEST_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="WAREHOUSE_TEST_REQUIRE_BROWSER"):
        find_chromium()


_CLOCKS = {"time", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "process_time"}


def _reads_a_clock(node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            func = inner.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _CLOCKS:
                return True
        if isinstance(inner, ast.Name) and inner.id in {
            "elapsed",
            "took",
            "duration",
            "cold",
            "warm",
            "timings",
            "per_call",
        }:
            return True
    return False


def test_no_test_asserts_on_wall_clock_time() -> None:
    """Speed is for benchmarks/: an ``assert`` comparing a clock reading (or a variable named
    elapsed/took/duration) with ``<`` fails on a loaded 2-core machine."""
    offenders = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Assert):
                continue
            for compare in ast.walk(node.test):
                if (
                    isinstance(compare, ast.Compare)
                    and any(isinstance(op, ast.Lt | ast.LtE) for op in compare.ops)
                    and _reads_a_clock(compare)
                ):
                    offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert offenders == []
