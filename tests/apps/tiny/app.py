"""A tiny Hydra app for the callback tests: returns metrics chosen by its config."""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig

import warehouse


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> Any:
    run = warehouse.current_run()
    if cfg.fail:
        raise RuntimeError(f"boom at lr={cfg.lr}")
    if run is not None and cfg.samples:
        run.log_samples("val", [{"sample_id": i, "loss": i * cfg.lr} for i in range(5)])
    acc = 1.0 - cfg.lr
    if cfg.get("bare"):  # a bare number: the primary metric
        return acc
    if cfg.flat:
        return {"val/acc": acc, "train/acc": acc + 0.01, "epochs": 3}
    if cfg.checkpoint:  # a value that is not a metric among the metrics
        return {"val": {"acc": acc, "best_ckpt": "/ckpt/e3.pt"}, "test/acc": acc - 0.1}
    return {"train": {"acc": acc + 0.01, "loss": cfg.lr}, "val": {"acc": acc}}


if __name__ == "__main__":
    main()
