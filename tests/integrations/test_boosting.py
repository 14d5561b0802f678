"""The XGBoost and LightGBM callbacks against the real libraries: they record exactly
``evals_result()`` / the ``evals_result`` dict and ``record_evaluation``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.integrations.frameworks import require, run_readme_block, step_metrics, stored_runs

xgb = require("xgboost", "xgboost")
lgb = require("lightgbm", "lightgbm")

from warehouse.integrations.lightgbm import WarehouseCallback as LightGBMCallback  # noqa: E402
from warehouse.integrations.xgboost import WarehouseCallback as XGBoostCallback  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def data(seed: int = 0, n: int = 120) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    y = (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(int)
    return x, y


def expected_steps(evals: dict[str, dict[str, list[float]]]) -> list[tuple[int, dict]]:
    """The per-round values of an ``evals_result``-shaped dict, as step metrics."""
    rounds = len(next(iter(next(iter(evals.values())).values())))
    return [
        (i, {f"{data}-{m}": v[i] for data, ms in evals.items() for m, v in ms.items()})
        for i in range(rounds)
    ]


def test_xgboost_train_records_exactly_its_evals_result(home: Path) -> None:
    x, y = data()
    dtrain = xgb.DMatrix(x[:80], label=y[:80])
    dval = xgb.DMatrix(x[80:], label=y[80:])
    evals_result: dict = {}
    params = {"objective": "binary:logistic", "eval_metric": ["logloss", "error"], "max_depth": 2}
    xgb.train(
        params,
        dtrain,
        num_boost_round=6,
        evals=[(dtrain, "train"), (dval, "eval")],
        evals_result=evals_result,
        callbacks=[XGBoostCallback(experiment="xgb")],
        verbose_eval=False,
    )
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert run["config"]["learner"]["objective"]["name"] == "binary:logistic"  # the booster's
    assert step_metrics(home, run["run_id"]) == expected_steps(evals_result)
    assert run["metrics"]["train"] == {m: v[-1] for m, v in evals_result["train"].items()}
    assert run["metrics"]["val"] == {m: v[-1] for m, v in evals_result["eval"].items()}


def test_the_xgboost_sklearn_api_records_exactly_evals_result(home: Path) -> None:
    x, y = data(1)
    model = xgb.XGBClassifier(
        n_estimators=5, max_depth=2, callbacks=[XGBoostCallback(experiment="xgb-sk")]
    )
    model.fit(x[:80], y[:80], eval_set=[(x[80:], y[80:])], verbose=False)
    evals = model.evals_result()
    [run] = stored_runs(home)
    assert step_metrics(home, run["run_id"]) == expected_steps(evals)
    assert run["metrics"]["val"] == {m: v[-1] for m, v in evals["validation_0"].items()}


def test_lightgbm_train_records_exactly_what_record_evaluation_records(home: Path) -> None:
    x, y = data(2)
    train = lgb.Dataset(x[:80], label=y[:80])
    valid = lgb.Dataset(x[80:], label=y[80:], reference=train)
    recorded: dict = {}
    params = {
        "objective": "binary",
        "metric": ["binary_logloss", "auc"],
        "verbose": -1,
        "num_leaves": 4,
        "min_data_in_leaf": 5,
    }
    lgb.train(
        params,
        train,
        num_boost_round=7,
        valid_sets=[train, valid],
        valid_names=["training", "valid_0"],
        callbacks=[lgb.record_evaluation(recorded), LightGBMCallback(experiment="gbm")],
    )
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert run["config"]["num_leaves"] == 4
    assert run["config"]["objective"] == "binary"  # the training parameters, as given
    assert step_metrics(home, run["run_id"]) == expected_steps(recorded)
    assert run["metrics"]["train"] == {m: v[-1] for m, v in recorded["training"].items()}
    assert run["metrics"]["val"] == {m: v[-1] for m, v in recorded["valid_0"].items()}


def test_lightgbm_with_early_stopping_records_the_stopping_round_and_ends(home: Path) -> None:
    x, y = data(3, 200)
    train = lgb.Dataset(x[:100], label=y[:100])
    valid = lgb.Dataset(x[100:], label=y[100:], reference=train)
    recorded: dict = {}
    callback = LightGBMCallback(experiment="gbm-es")
    booster = lgb.train(
        {"objective": "binary", "verbose": -1, "learning_rate": 0.5, "num_leaves": 31},
        train,
        num_boost_round=200,
        valid_sets=[valid],
        callbacks=[lgb.record_evaluation(recorded), callback, lgb.early_stopping(2, verbose=False)],
    )
    assert booster.current_iteration() < 200  # early stopping did stop it
    [run] = stored_runs(home)
    assert run["status"] == "running"  # LightGBM says nothing when it stops early
    callback.end()
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert step_metrics(home, run["run_id"]) == expected_steps(recorded)
    assert run["metrics"]["val"] == {m: v[-1] for m, v in recorded["valid_0"].items()}


def test_the_xgboost_readme_block_records_a_run(tmp_path: Path, home: Path) -> None:
    x, y = data(4)
    given = {
        "xgboost": xgb,
        "params": {"objective": "binary:logistic", "max_depth": 2},
        "dtrain": xgb.DMatrix(x[:80], label=y[:80]),
        "dval": xgb.DMatrix(x[80:], label=y[80:]),
    }
    run_readme_block("XGBoost", given, tmp_path)
    [run] = stored_runs(home)
    assert run["experiment"] == "xgb"
    assert set(run["metrics"]) == {"train", "val"}
    assert len(step_metrics(home, run["run_id"])) == 10


def test_the_lightgbm_readme_block_records_a_run(tmp_path: Path, home: Path) -> None:
    x, y = data(5)
    train_set = lgb.Dataset(x[:80], label=y[:80])
    given = {
        "lightgbm": lgb,
        "params": {"objective": "binary", "verbose": -1, "num_leaves": 4},
        "train_set": train_set,
        "valid_set": lgb.Dataset(x[80:], label=y[80:], reference=train_set),
    }
    run_readme_block("LightGBM", given, tmp_path)
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert set(run["metrics"]) == {"val"}
    assert len(step_metrics(home, run["run_id"])) == 10
