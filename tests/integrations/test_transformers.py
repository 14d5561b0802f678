"""The transformers callback against a real ``Trainer`` (a tiny BERT built from a config, no
download): it records exactly the Trainer's ``state.log_history``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integrations.frameworks import (
    require,
    run_readme_block,
    stored_names,
    stored_runs,
    stored_steps,
)

require("transformers", "transformers")
require("accelerate", "transformers")

import torch  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Sequences of 6 token ids; the label: whether token 3 appears in the first half."""

    def __init__(self, n: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 20, (n, 6), generator=gen)
        self.labels = (self.ids[:, :3] == 3).any(1).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(6, dtype=torch.long),
            "labels": self.labels[i],
        }


def tiny_model() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=20,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=8,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def arguments(tmp_path: Path, **more: Any) -> TrainingArguments:
    given: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "num_train_epochs": 2,
        "per_device_train_batch_size": 8,
        "per_device_eval_batch_size": 8,
        "logging_steps": 2,
        "eval_strategy": "epoch",
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "disable_tqdm": True,
        "seed": 0,
    }
    return TrainingArguments(**{**given, **more})


def check_steps(home: Path, run_id: str, history: list[dict[str, Any]]) -> None:
    """Each log_history entry is a step with exactly its values (the fractional epoch as
    ``epoch_progress``, the step's epoch the epoch it falls in)."""
    docs = [d for d in stored_steps(home, run_id) if d["metrics"]]
    assert len(docs) == len(history)
    for doc, entry in zip(docs, history, strict=True):
        values = {k: float(v) for k, v in entry.items() if k not in ("step", "epoch")}
        if float(entry["epoch"]).is_integer():
            assert doc["epoch"] == entry["epoch"]
        else:
            values["epoch_progress"] = entry["epoch"]
            assert doc["epoch"] == int(entry["epoch"])
        assert doc["step"] == entry["step"]
        assert doc["metrics"] == stored_names(values)


def test_the_callback_records_exactly_the_trainers_log_history(tmp_path: Path, home: Path) -> None:
    from warehouse.integrations.transformers import WarehouseCallback

    trainer = Trainer(
        model=tiny_model(),
        args=arguments(tmp_path),
        train_dataset=Tokens(48, 0),
        eval_dataset=Tokens(16, 1),
        callbacks=[WarehouseCallback(experiment="bert-tiny")],
    )
    trainer.train()
    history = trainer.state.log_history
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert run["environment"]["world_size"] == 1
    assert run["config"]["training"]["num_train_epochs"] == 2
    assert run["config"]["model"]["hidden_size"] == 8
    check_steps(home, run["run_id"], history)
    summary = history[-1]
    assert run["metrics"]["train"]["loss"] == summary["train_loss"]
    assert run["metrics"]["train"]["runtime"] == summary["train_runtime"]
    last_eval = [e for e in history if "eval_loss" in e][-1]
    assert run["metrics"]["val"]["loss"] == last_eval["eval_loss"]

    test = trainer.evaluate(Tokens(16, 2), metric_key_prefix="test")
    [run] = stored_runs(home)
    assert run["metrics"]["test"]["loss"] == test["test_loss"]
    assert run["metrics"]["val"]["loss"] == last_eval["eval_loss"]


def test_report_to_warehouse_records_the_run(tmp_path: Path, home: Path) -> None:
    import warehouse.integrations.transformers  # noqa: F401  (registers report_to="warehouse")

    args = arguments(tmp_path, num_train_epochs=1, eval_strategy="no", report_to="warehouse")
    trainer = Trainer(model=tiny_model(), args=args, train_dataset=Tokens(16, 0))
    trainer.train()
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    check_steps(home, run["run_id"], trainer.state.log_history)


def test_the_readme_block_records_a_run(tmp_path: Path, home: Path) -> None:
    given = {
        "Trainer": Trainer,
        "model": tiny_model(),
        "args": arguments(tmp_path, num_train_epochs=1, eval_strategy="no"),
        "train": Tokens(16, 0),
    }
    run_readme_block("transformers", given, tmp_path)
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert "loss" in run["metrics"]["train"]
