"""A Hydra job (recorded by the warehouse callback) that trains with an integration inside:
the integration joins the job's run. Writes the evals_result it got to ``evals.json`` in the
job's output folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import xgboost as xgb
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from warehouse.integrations.xgboost import WarehouseCallback


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> Any:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 3))
    y = (x[:, 0] > 0).astype(int)
    dtrain, dval = xgb.DMatrix(x[:70], label=y[:70]), xgb.DMatrix(x[70:], label=y[70:])
    evals: dict[str, Any] = {}
    booster = xgb.train(
        {"objective": "binary:logistic", "max_depth": cfg.max_depth, "eval_metric": "logloss"},
        dtrain,
        num_boost_round=cfg.rounds,
        evals=[(dtrain, "train"), (dval, "eval")],
        evals_result=evals,
        callbacks=[WarehouseCallback()],
        verbose_eval=False,
    )
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    with open(out_dir / "evals.json", "w") as out:
        json.dump(evals, out)
    acc = float(((booster.predict(dval) > 0.5) == y[70:]).mean())
    return {"test": {"acc": acc}}  # the job's return value: the callback records it


if __name__ == "__main__":
    main()
