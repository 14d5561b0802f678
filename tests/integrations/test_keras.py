"""The Keras callback against real Keras 3 (torch backend): it records exactly what
``History`` and ``evaluate()`` give."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.integrations.frameworks import require, run_readme_block, step_metrics, stored_runs

os.environ.setdefault("KERAS_BACKEND", "torch")  # Keras reads it once, at import: no TensorFlow
keras = require("keras", "keras")

from warehouse.integrations.keras import WarehouseCallback  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:keras.*")


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(96, 3)).astype("float32")
    y = (x[:, 0] - x[:, 2] > 0).astype("int32")
    return x, y


def model() -> keras.Model:
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, "tanh"), keras.layers.Dense(2)])
    m.compile(
        optimizer=keras.optimizers.SGD(0.3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return m


def test_the_callback_records_exactly_what_history_records(home: Path) -> None:
    x, y = data()
    m = model()
    callback = WarehouseCallback(experiment="keras-tiny", config={"units": 4})
    history = m.fit(
        x[:64],
        y[:64],
        validation_data=(x[64:], y[64:]),
        epochs=3,
        batch_size=16,
        callbacks=[callback],
        verbose=0,
    )
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert run["config"] == {"units": 4}
    epochs = history.epoch
    expected = [(e, {k: v[i] for k, v in history.history.items()}) for i, e in enumerate(epochs)]
    assert step_metrics(home, run["run_id"]) == expected
    last = {k: v[-1] for k, v in history.history.items()}
    assert run["metrics"]["train"] == {"loss": last["loss"], "accuracy": last["accuracy"]}
    assert run["metrics"]["val"] == {"loss": last["val_loss"], "accuracy": last["val_accuracy"]}
    assert "test" not in run["metrics"]  # fit's validation is not a test

    results = m.evaluate(x[64:], y[64:], callbacks=[callback], verbose=0, return_dict=True)
    [run] = stored_runs(home)
    assert run["metrics"]["test"] == {k: float(v) for k, v in results.items()}
    assert run["metrics"]["val"]["loss"] == last["val_loss"]


def test_evaluate_alone_records_a_run_with_the_test_split(home: Path) -> None:
    x, y = data(1)
    results = model().evaluate(
        x, y, callbacks=[WarehouseCallback(experiment="keras-eval")], verbose=0, return_dict=True
    )
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert run["metrics"] == {"test": {k: float(v) for k, v in results.items()}}


def test_the_readme_block_records_a_run(tmp_path: Path, home: Path) -> None:
    x, y = data()
    given = {"model": model(), "x": x[:64], "y": y[:64], "x_test": x[64:], "y_test": y[64:]}
    run_readme_block("Keras 3", given, tmp_path)
    [run] = stored_runs(home)
    assert run["experiment"] == "keras-mlp"
    assert run["config"] == {"verbose": "auto", "epochs": 3, "steps": 2}  # fit's parameters
    assert set(run["metrics"]) == {"train", "val", "test"}
