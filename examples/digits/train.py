"""The digits example: a Hydra app that trains an sklearn classifier and reports per split.

It owns the whole experiment: a fixed, stratified train/val/test split of sklearn's bundled
8x8 digit images (no download), one model family per config group option
(``model=logreg|svm|knn|random_forest|mlp``), accuracy and log loss per split, per-sample
results for val and test, and the validation images (all, or only the misclassified ones:
``outputs.save``) as PNG model outputs.

    python examples/digits/train.py model=svm model.C=3
    python examples/digits/train.py -m model=logreg,svm,knn data.train_fraction=0.25,0.5,1.0

The warehouse callback (``override hydra/callbacks: warehouse`` in ``conf/config.yaml``)
records each job as a run in experiment ``digits-<model family>``; the task returns its
metrics as ``{"train": {"acc": ..., "log_loss": ...}, "val": {...}, "test": {...}}`` and the
callback stores them as the run's final metrics. With the callback off
(``hydra/callbacks=null``) the app runs the same and only logs its metrics.
"""

from __future__ import annotations

import io
import logging
import time
from dataclasses import dataclass
from typing import Any

import hydra
import numpy as np
from omegaconf import DictConfig
from PIL import Image
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

import warehouse

log = logging.getLogger(__name__)

CLASSES = np.arange(10)


@dataclass(frozen=True)
class Split:
    """One split: the dataset indices (sample ids), the features and the labels."""

    name: str
    index: np.ndarray
    x: np.ndarray
    y: np.ndarray


def load_splits(data: DictConfig) -> dict[str, Split]:
    """The fixed, stratified train/val/test split (seeded by ``data.split_seed``)."""
    digits = load_digits()
    x = digits.data / 16.0  # pixel intensities 0..16 -> 0..1
    y = digits.target
    index = np.arange(len(y))
    holdout = data.val_fraction + data.test_fraction
    train_idx, rest_idx = train_test_split(
        index, test_size=holdout, stratify=y, random_state=data.split_seed
    )
    val_idx, test_idx = train_test_split(
        rest_idx,
        test_size=data.test_fraction / holdout,
        stratify=y[rest_idx],
        random_state=data.split_seed,
    )
    if data.train_fraction < 1.0:  # a stratified subset of the same training split
        train_idx, _ = train_test_split(
            train_idx,
            train_size=data.train_fraction,
            stratify=y[train_idx],
            random_state=data.subset_seed,
        )
    return {
        name: Split(name, np.sort(idx), x[np.sort(idx)], y[np.sort(idx)])
        for name, idx in (("train", train_idx), ("val", val_idx), ("test", test_idx))
    }


def build_model(model: DictConfig, seed: int) -> Any:
    """The sklearn estimator of the chosen model family, with probabilities available."""
    match model.name:
        case "logreg":
            return LogisticRegression(C=model.C, max_iter=model.max_iter)
        case "svm":
            # Platt-scaled probabilities (what SVC(probability=True) did before sklearn 1.9)
            svc = SVC(C=model.C, gamma=model.gamma, kernel=model.kernel, random_state=seed)
            return CalibratedClassifierCV(svc, ensemble=False)
        case "knn":
            return KNeighborsClassifier(n_neighbors=model.n_neighbors, weights=model.weights)
        case "random_forest":
            return RandomForestClassifier(
                n_estimators=model.n_estimators,
                max_depth=model.max_depth,
                random_state=seed,
                n_jobs=1,
            )
        case "mlp":
            return MLPClassifier(
                hidden_layer_sizes=(model.hidden_units,),
                alpha=model.alpha,
                max_iter=model.max_iter,
                random_state=seed,
            )
    raise ValueError(
        f"unknown model family {model.name!r}; choose one of logreg, svm, knn, random_forest, mlp"
    )


def class_probabilities(model: Any, x: np.ndarray) -> np.ndarray:
    """predict_proba with one column per digit 0..9, even if a class was never seen."""
    proba = np.zeros((len(x), len(CLASSES)))
    proba[:, model.classes_] = model.predict_proba(x)
    return proba


def fit_and_predict(model: Any, splits: dict[str, Split]) -> dict[str, np.ndarray]:
    """Fit on the train split; return each split's class probabilities."""
    # 1,000 images: BLAS threads only add overhead, and oversubscribe shared CI cores badly
    with threadpool_limits(limits=1):
        model.fit(splits["train"].x, splits["train"].y)
        return {name: class_probabilities(model, split.x) for name, split in splits.items()}


def per_sample_loss(y: np.ndarray, proba: np.ndarray) -> np.ndarray:
    """Each sample's log loss, clipped as ``sklearn.metrics.log_loss`` clips."""
    eps = np.finfo(proba.dtype).eps
    loss: np.ndarray = -np.log(np.clip(proba[np.arange(len(y)), y], eps, 1 - eps))
    return loss


def sample_rows(split: Split, proba: np.ndarray) -> list[dict[str, Any]]:
    """Per-sample rows: sample_id (dataset index), label, prediction, correct, confidence, loss."""
    prediction = proba.argmax(axis=1)
    loss = per_sample_loss(split.y, proba)
    return [
        {
            "sample_id": str(int(i)),
            "label": str(int(label)),
            "prediction": str(int(pred)),
            "correct": bool(label == pred),
            "confidence": float(p.max()),
            "loss": float(sample_loss),
        }
        for i, label, pred, p, sample_loss in zip(
            split.index, split.y, prediction, proba, loss, strict=True
        )
    ]


def digit_png(pixels: np.ndarray, size: int) -> bytes:
    """One digit (64 intensities in 0..1) as a grayscale PNG, dark ink on white, upscaled."""
    gray = (255 * (1.0 - pixels.reshape(8, 8))).round().astype(np.uint8)
    image = Image.fromarray(gray).resize((size, size), Image.Resampling.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict[str, dict[str, float]]:
    """Train, evaluate every split, record samples and outputs; return split -> metrics."""
    started = time.perf_counter()
    splits = load_splits(cfg.data)
    probas = fit_and_predict(build_model(cfg.model, cfg.seed), splits)
    run = warehouse.current_run()  # None when the warehouse callback is off

    metrics: dict[str, dict[str, float]] = {}
    for name, split in splits.items():
        proba = probas[name]
        metrics[name] = {
            "acc": float(accuracy_score(split.y, proba.argmax(axis=1))),
            "log_loss": float(log_loss(split.y, proba, labels=CLASSES)),
        }
        if run is None or name == "train":
            continue
        rows = sample_rows(split, proba)
        if name == "val" and cfg.outputs.save in ("all", "misclassified"):
            for row, pixels in zip(rows, split.x, strict=True):
                if cfg.outputs.save == "all" or not row["correct"]:
                    run.log_output(
                        name,
                        row["sample_id"],
                        digit_png(pixels, cfg.outputs.image_size),
                        content_type="image/png",
                    )
        run.log_samples(name, rows)

    summary = "  ".join(
        f"{split}.acc={m['acc']:.4f} {split}.log_loss={m['log_loss']:.4f}"
        for split, m in metrics.items()
    )
    log.info("%s: %s (%.2f s)", cfg.model.name, summary, time.perf_counter() - started)
    return metrics


if __name__ == "__main__":
    main()
