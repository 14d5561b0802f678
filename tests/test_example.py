"""The digits example: its pieces in process, and the real Hydra app in a subprocess.

The subprocess tests run ``examples/digits/train.py`` from the repository root (so git is
captured), with Hydra's output folders and the warehouse (``WAREHOUSE_HOME``) in tmp, then
read the records back through the local store.
"""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
from omegaconf import OmegaConf

from tests.helpers import HANG_S
from warehouse.stores.base import RunQuery, SampleQuery
from warehouse.stores.local import LocalStore

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "digits"
APP = EXAMPLE / "train.py"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FAMILIES = ("logreg", "svm", "knn", "random_forest", "mlp")


@pytest.fixture(scope="module")
def train() -> Iterator[ModuleType]:
    """The example's module, imported from its file (it is not a package)."""
    spec = importlib.util.spec_from_file_location("digits_train", APP)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def config() -> Any:
    return OmegaConf.load(EXAMPLE / "conf" / "config.yaml")


def run_app(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(APP),
            *args,
            f"hydra.run.dir={tmp_path}/out",
            f"hydra.sweep.dir={tmp_path}/multi",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=HANG_S,
        check=False,
    )


def runs(home: Path) -> list[dict[str, Any]]:
    with LocalStore(home) as store:
        return store.search_runs(RunQuery(limit=None))


def samples(home: Path, run_id: str, split: str) -> list[dict[str, Any]]:
    with LocalStore(home) as store:
        return list(store.search_samples(SampleQuery(run_id=run_id, split=split, limit=None)))


def local_path(uri: str) -> Path:
    parsed = urlparse(uri)
    assert parsed.scheme == "file", uri
    return Path(unquote(parsed.path))


# the pieces, in process --------------------------------------------------------------------


def test_the_split_is_a_fixed_stratified_60_20_20_partition(train: ModuleType, config: Any) -> None:
    first = train.load_splits(config.data)
    again = train.load_splits(config.data)
    sizes = {name: len(split.index) for name, split in first.items()}
    assert sizes == {"train": 1078, "val": 359, "test": 360}
    all_ids = np.concatenate([s.index for s in first.values()])
    assert len(set(all_ids.tolist())) == 1797  # disjoint and complete
    for name in first:
        assert np.array_equal(first[name].index, again[name].index)
        assert np.bincount(first[name].y, minlength=10).min() >= 0.08 * sizes[name]


def test_train_fraction_shrinks_only_the_training_split(train: ModuleType, config: Any) -> None:
    half = OmegaConf.merge(config.data, {"train_fraction": 0.5})
    full, smaller = train.load_splits(config.data), train.load_splits(half)
    assert len(smaller["train"].index) == 539
    assert set(smaller["train"].index) <= set(full["train"].index)
    assert np.array_equal(smaller["val"].index, full["val"].index)
    assert np.array_equal(smaller["test"].index, full["test"].index)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_model_family_builds_from_its_config_and_gives_probabilities(
    train: ModuleType, config: Any, family: str
) -> None:
    model_cfg = OmegaConf.load(EXAMPLE / "conf" / "model" / f"{family}.yaml")
    assert model_cfg.name == family
    splits = train.load_splits(OmegaConf.merge(config.data, {"train_fraction": 0.25}))
    proba = train.fit_and_predict(train.build_model(model_cfg, 0), splits)["val"]
    assert proba.shape == (359, 10)
    assert np.allclose(proba.sum(axis=1), 1.0)


def test_per_sample_losses_average_to_sklearns_log_loss(train: ModuleType) -> None:
    from sklearn.metrics import log_loss

    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(10), size=50)
    proba[0] = np.eye(10)[3]  # a certain, wrong prediction: the clipped case
    y = rng.integers(0, 10, size=50)
    assert train.per_sample_loss(y, proba).mean() == pytest.approx(
        log_loss(y, proba, labels=np.arange(10)), rel=1e-9
    )


def test_sample_rows_carry_id_label_prediction_correct_confidence_loss(train: ModuleType) -> None:
    split = train.Split("val", np.array([17, 4]), np.zeros((2, 64)), np.array([3, 5]))
    proba = np.full((2, 10), 0.05)
    proba[0, 3], proba[1, 2] = 0.55, 0.55
    first, second = train.sample_rows(split, proba)
    assert first == {
        "sample_id": "17",
        "label": "3",
        "prediction": "3",
        "correct": True,
        "confidence": pytest.approx(0.55),
        "loss": pytest.approx(-np.log(0.55)),
    }
    assert second["sample_id"] == "4"
    assert second["correct"] is False
    assert second["loss"] == pytest.approx(-np.log(0.05))


def test_a_digit_becomes_a_64px_grayscale_png_with_dark_ink(train: ModuleType) -> None:
    from PIL import Image

    pixels = np.zeros(64)
    pixels[0] = 1.0  # full ink in the top-left pixel
    png = train.digit_png(pixels, 64)
    assert png.startswith(PNG_MAGIC)
    image = Image.open(io.BytesIO(png))
    assert (image.size, image.mode) == ((64, 64), "L")
    assert image.getpixel((0, 0)) == 0
    assert image.getpixel((7, 7)) == 0  # upscaled 8x
    assert image.getpixel((8, 8)) == 255


# the app, in a subprocess ------------------------------------------------------------------


@pytest.mark.slow
def test_a_single_run_records_metrics_params_samples_and_png_outputs(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(tmp_path, "model=svm", "model.C=5", "outputs.save=misclassified")
    assert proc.returncode == 0, proc.stderr
    [doc] = runs(home)
    assert doc["status"] == "completed"
    assert doc["experiment"] == "digits-svm"
    assert set(doc["metrics"]) == {"train", "val", "test"}
    for split in ("train", "val", "test"):
        assert set(doc["metrics"][split]) == {"acc", "log_loss"}
        assert 0.9 < doc["metrics"][split]["acc"] <= 1.0
        assert 0.0 < doc["metrics"][split]["log_loss"] < 1.0
    assert doc["primary_metric"]["name"] == "val.acc"
    assert doc["primary_metric"]["value"] == doc["metrics"]["val"]["acc"]
    assert doc["params"]["model.name"] == "svm"
    assert doc["params"]["model.C"] == 5.0
    assert doc["params"]["data.train_fraction"] == 1.0
    assert doc["config"]["model"]["kernel"] == "rbf"
    assert "model.C=5" in doc["overrides"]
    assert "outputs.save=misclassified" in doc["overrides"]
    assert doc["git"]["commit"]  # run from the repository root
    assert doc["sample_counts"] == {"val": 359, "test": 360}

    val = samples(home, doc["run_id"], "val")
    assert len(val) == 359
    assert {r["sample_id"] for r in val}.isdisjoint(
        {r["sample_id"] for r in samples(home, doc["run_id"], "test")}
    )
    accuracy = sum(bool(r["correct"]) for r in val) / len(val)
    assert accuracy == pytest.approx(doc["metrics"]["val"]["acc"])
    mean_loss = sum(r["loss"] for r in val) / len(val)
    assert mean_loss == pytest.approx(doc["metrics"]["val"]["log_loss"], rel=1e-6)
    wrong = [r for r in val if not r["correct"]]
    assert wrong, "an svm on digits misclassifies a few validation images"
    assert all(r["output_uri"] is None for r in val if r["correct"])
    for row in wrong:
        assert row["label"] != row["prediction"]
        assert 0.0 < row["confidence"] <= 1.0
        path = local_path(row["output_uri"])
        assert path.is_relative_to(home)
        assert path.read_bytes().startswith(PNG_MAGIC)
    assert all(r.get("output_uri") is None for r in samples(home, doc["run_id"], "test"))


@pytest.mark.slow
def test_a_multirun_of_8_jobs_records_one_run_per_job_in_one_sweep(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(tmp_path, "-m", "model=logreg,knn", "data.train_fraction=0.25,0.5,0.75,1.0")
    assert proc.returncode == 0, proc.stderr
    docs = runs(home)
    assert len(docs) == 8
    assert len({d["run_id"] for d in docs}) == 8
    assert {d["status"] for d in docs} == {"completed"}
    assert sorted(d["hydra"]["job_num"] for d in docs) == list(range(8))
    assert len({d["hydra"]["sweep_id"] for d in docs}) == 1
    assert docs[0]["hydra"]["sweep_id"]
    by_job = {
        (d["experiment"], d["params"]["model.name"], d["params"]["data.train_fraction"])
        for d in docs
    }
    assert by_job == {
        (f"digits-{family}", family, fraction)
        for family in ("logreg", "knn")
        for fraction in (0.25, 0.5, 0.75, 1.0)
    }
    for doc in docs:
        assert set(doc["metrics"]) == {"train", "val", "test"}
        assert doc["sample_counts"] == {"val": 359, "test": 360}
    # more training data, better validation accuracy: the learning curve the sweep is for
    logreg = sorted(
        (d["params"]["data.train_fraction"], d["metrics"]["val"]["acc"])
        for d in docs
        if d["experiment"] == "digits-logreg"
    )
    assert logreg[0][1] < logreg[-1][1]


@pytest.mark.slow
def test_the_app_runs_and_reports_with_the_warehouse_callback_off(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(tmp_path, "~hydra/callbacks", "model=knn")
    assert proc.returncode == 0, proc.stderr
    assert "val.acc=0.9" in proc.stdout + proc.stderr
    assert "warehouse:" not in proc.stdout + proc.stderr  # no callback, so no callback warning
    assert not home.exists() or runs(home) == []
