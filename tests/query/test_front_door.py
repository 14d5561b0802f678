"""The views' one front door (``warehouse.query.api``): every front end asks it and only parses
and renders, a CLI command opens the store once even when it explains an empty answer, errors
carry typed data instead of steering callers by attribute lookups, and ``compare`` takes a list.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any

import pytest

import warehouse
from tests.test_cli_query import run_main
from warehouse.errors import ConfigurationError, QuerySyntaxError, UnknownField

PACKAGE = Path(warehouse.__file__).resolve().parent


@pytest.fixture
def recorded(home: Path, tmp_path: Path) -> list[str]:
    settings = warehouse.load_settings(cli={"capture_git_diff": False, "system_interval_s": 0})
    ids = []
    for experiment, acc, seed in (("svm", 0.9, 0), ("svm", 0.8, 1), ("knn", 0.85, 2)):
        config = {"model": experiment, "seed": seed}
        with warehouse.start_run(experiment, config, settings=settings, cwd=tmp_path) as run:
            rows = [{"sample_id": i, "correct": i < acc * 40} for i in range(40)]
            run.log_samples("val", rows)
            run.log_metrics("val", {"acc": acc})
        ids.append(run.run_id)
    return ids


@pytest.fixture
def openings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every opening of the configured store, counted around the real factory."""
    import warehouse.stores

    real = warehouse.stores.open_store
    seen: list[str] = []

    def counted(settings: Any) -> Any:
        seen.append(settings.store_engine)
        return real(settings)

    monkeypatch.setattr(warehouse.stores, "open_store", counted)
    return seen


EMPTY_ANSWERS = [
    pytest.param(["query", "runs", "-q", "experiment:nope"], id="runs-table"),
    pytest.param(["query", "runs", "-q", "experiment:nope", "-f", "csv"], id="runs-csv"),
    pytest.param(["query", "runs", "-q", "experiment:nope", "-f", "json"], id="runs-json"),
    pytest.param(["query", "runs", "-q", "experiment=svm"], id="runs-mistyped"),
    pytest.param(["query", "leaderboard", "-q", "experiment=svm"], id="leaderboard"),
    pytest.param(["query", "best", "-q", "experiment:nope"], id="best"),
    pytest.param(["query", "over-time", "-q", "experiment:nope"], id="over-time"),
    pytest.param(["query", "decomposition", "-q", "experiment:nope"], id="decomposition"),
    pytest.param(["query", "samples", "--hardest", "-q", "experiment:nope"], id="hardest"),
]


@pytest.mark.parametrize("argv", EMPTY_ANSWERS)
def test_an_empty_answer_is_explained_from_one_store_opening(
    recorded: list[str],
    openings: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    assert run_main(argv, monkeypatch) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "no " in err  # the empty answer is said ...
    if "=" in argv[-1]:
        assert "did you mean -q 'experiment:svm'?" in err  # ... with the filter's slip
    assert len(openings) == 1


@pytest.mark.parametrize(
    "argv", [["query", "leaderboard"], ["query", "runs"], ["query", "runs", "-q", "tags:x"]]
)
def test_an_empty_warehouse_is_said_from_one_store_opening(
    home: Path,
    openings: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    assert run_main(argv, monkeypatch) == 0
    assert "no runs recorded in local store" in capsys.readouterr().err
    assert len(openings) == 1


# --- the front ends ask the front door -----------------------------------------------------

FRONT_ENDS = sorted(
    [
        *(PACKAGE / "cli").glob("query*.py"),
        PACKAGE / "cli" / "evidence.py",
        *(PACKAGE / "ui").glob("*.py"),
        PACKAGE / "dashboards" / "report.py",
    ]
)
DOOR = {"warehouse.query.api", "warehouse.query.result", "warehouse.query.lookup"}
"""What a front end may import of ``warehouse.query``: the door, its values, and the small
parsing pieces (sort specs, finite numbers)."""


def imported(path: Path) -> set[str]:
    """The modules a file imports (lazy imports included, TYPE_CHECKING ones left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("path", FRONT_ENDS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_front_end_asks_the_views_only_through_the_front_door(path: Path) -> None:
    names = imported(path)
    views = {n for n in names if n.startswith("warehouse.query.") and n.count(".") == 2}
    assert views <= DOOR, f"{path.name} imports {sorted(views - DOOR)}: ask warehouse.query.api"
    stores = {n for n in names if n == "warehouse.stores.open_store" or n == "warehouse.stores"}
    assert not stores, f"{path.name} opens a store itself: ask warehouse.query.api"


def test_the_import_check_sees_a_front_end_that_bypasses_the_door(tmp_path: Path) -> None:
    planted = tmp_path / "front.py"
    planted.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from warehouse.query.overview import Overview\n"
        "def f():\n    from warehouse.query import views\n"
        "    from warehouse.stores import open_store\n"
    )
    names = imported(planted)
    assert "warehouse.query.views" in names
    assert "warehouse.stores.open_store" in names
    assert "warehouse.query.overview" not in names


# --- errors carry typed data ---------------------------------------------------------------


def test_no_code_steers_on_an_error_attribute_looked_up_by_name() -> None:
    """``getattr(exc, "field", None)`` let any error steer a view; ``UnknownField.field`` is
    typed, and only the error for an unknown field has it."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "field"
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def test_an_unknown_field_is_an_unknown_field_error_with_its_name(recorded: list[str]) -> None:
    with pytest.raises(UnknownField) as caught:
        warehouse.runs("metrics.val.acx:>0.5")
    assert caught.value.field == "metrics.val.acx"
    assert "metrics.val.acc" in str(caught.value)  # the closest known field
    back = pickle.loads(pickle.dumps(caught.value))
    assert (type(back), back.field) == (UnknownField, "metrics.val.acx")
    assert isinstance(back, QuerySyntaxError)  # exit code 2, as every query error


def test_a_metric_no_run_has_names_the_ones_they_have(recorded: list[str]) -> None:
    with pytest.raises(UnknownField, match=r"no run has val\.acx: 3 runs have no val\.acx"):
        warehouse.leaderboard("val.acx")
    board = warehouse.leaderboard("val.acc", filter="experiment:svm")
    assert board.metric == "val.acc"
    assert board.left_out is None
    assert board.empty is None
    assert [r["experiment"] for r in board] == ["svm"]


# --- compare -------------------------------------------------------------------------------


def test_compare_takes_ids_or_one_list_of_them(recorded: list[str]) -> None:
    a, b, _ = recorded
    by_ids = warehouse.compare(a, b).to_dicts()
    assert warehouse.compare([a, b]).to_dicts() == by_ids
    assert warehouse.compare((a[:8], b[:8])).to_dicts() == by_ids
    assert [r["field"] for r in by_ids if r["field"].startswith("config.")] == ["config.seed"]
    with pytest.raises(TypeError, match=r"compare\(\['3f2a9c1d', '8d41c07a'\]\)"):
        warehouse.compare([a, 3])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="two or more"):
        warehouse.compare([a])
