"""The Lightning logger against real Lightning: it records exactly what CSVLogger records."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.integrations.frameworks import (
    require,
    run_readme_block,
    step_metrics,
    stored_names,
    stored_runs,
    stored_steps,
)

require("lightning", "lightning")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:lightning.*")

import lightning as L  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from warehouse.integrations.lightning import WarehouseLogger  # noqa: E402


class Classifier(L.LightningModule):
    """Logistic regression on two features: tiny, deterministic, on the CPU."""

    def __init__(self, lr: float = 0.5, hidden: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(2, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2)
        )

    def _step(self, batch: tuple[torch.Tensor, torch.Tensor], split: str) -> torch.Tensor:
        x, y = batch
        logits = self.net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        on_step = split == "train"
        self.log(f"{split}_loss", loss, on_step=on_step, on_epoch=True)
        self.log(f"{split}/acc", acc, on_step=False, on_epoch=True)
        return loss

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        self._step(batch, "test")

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def loaders(seed: int = 0) -> tuple[DataLoader, DataLoader]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(96, 2, generator=gen)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    train = TensorDataset(x[:64], y[:64])
    val = TensorDataset(x[64:], y[64:])
    return DataLoader(train, batch_size=16), DataLoader(val, batch_size=16)


def trainer(tmp_path: Path, *loggers: object, epochs: int = 3) -> L.Trainer:
    return L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=list(loggers),
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )


def csv_rows(logger: CSVLogger) -> list[tuple[int, dict[str, float]]]:
    """CSVLogger's rows: (step, the metrics that row has), as Lightning logged them."""
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as src:
        rows = list(csv.DictReader(src))
    out = []
    for row in rows:
        step = int(row.pop("step"))
        out.append((step, {k: float(v) for k, v in row.items() if v != ""}))
    return out


def test_the_logger_records_exactly_what_csvlogger_records(tmp_path: Path, home: Path) -> None:
    torch.manual_seed(0)
    csv_logger = CSVLogger(tmp_path / "csv", name="tiny")
    train, val = loaders()
    model = Classifier()
    t = trainer(tmp_path, WarehouseLogger(experiment="lit"), csv_logger)
    t.fit(model, train, val)
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert run["experiment"] == "lit"
    assert run["config"] == {"lr": 0.5, "hidden": 4}  # the module's hparams
    assert run["environment"]["world_size"] == 1
    # every step Lightning logged, with exactly its values (the epoch: the step's epoch)
    expected = [
        (step, stored_names({k: v for k, v in metrics.items() if k != "epoch"}))
        for step, metrics in csv_rows(csv_logger)
    ]
    assert step_metrics(home, run["run_id"]) == expected
    epochs = [d["epoch"] for d in stored_steps(home, run["run_id"]) if d["metrics"]]
    assert epochs == [int(metrics["epoch"]) for _, metrics in csv_rows(csv_logger)]
    # final metrics: trainer.callback_metrics, by split
    final = {k: float(v) for k, v in t.callback_metrics.items()}
    assert run["metrics"]["train"] == {
        "loss": final["train_loss"],
        "loss_step": final["train_loss_step"],
        "loss_epoch": final["train_loss_epoch"],
        "acc": final["train/acc"],
    }
    assert run["metrics"]["val"] == {"loss": final["val_loss"], "acc": final["val/acc"]}

    # trainer.test() afterwards: its results are the run's test split
    [results] = t.test(model, val)
    [run] = stored_runs(home)
    assert run["metrics"]["test"] == {"loss": results["test_loss"], "acc": results["test/acc"]}
    assert run["metrics"]["val"]["acc"] == final["val/acc"]  # the rest stays
    assert run["status"] == "completed"


def test_a_failing_fit_records_a_failed_run_with_the_error(tmp_path: Path, home: Path) -> None:
    class Broken(Classifier):
        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            if self.current_epoch == 1:
                raise RuntimeError("diverged at epoch 1")
            return super().training_step(batch, batch_idx)

    train, val = loaders()
    with pytest.raises(RuntimeError, match="diverged"):
        trainer(tmp_path, WarehouseLogger(experiment="lit")).fit(Broken(), train, val)
    [run] = stored_runs(home)
    assert run["status"] == "failed"
    assert "diverged at epoch 1" in run["error"]["message"]


def test_the_readme_block_records_a_run(tmp_path: Path, home: Path) -> None:
    train, val = loaders()
    given = {"lightning": L, "model": Classifier(), "train_loader": train, "val_loader": val}
    run_readme_block("Lightning", given, tmp_path)
    [run] = stored_runs(home)
    assert run["experiment"] == "mnist"
    assert run["status"] == "completed"
    assert set(run["metrics"]) == {"train", "val"}
