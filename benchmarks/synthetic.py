"""Synthetic benchmark data: 10,000 runs in 50 experiments, and 10M per-sample rows.

Written straight through the store contract (``LocalStore.write_runs`` /
``write_samples``), not the recorder, so generating the data takes seconds, not the time of
10,000 training runs. The runs look like a real sweep: train/val/test accuracy and loss, a
nested config with its flattened params, end times spread over half a year, a few failed
and running runs without metrics. The two best runs of every experiment (100 runs, the
global best among them) get 100,000 validation samples each: ``sample_id``, ``pixel_acc``,
``loss``, ``confidence``, ``correct``, ``label``, ``prediction`` and ``output_uri``.

    python benchmarks/synthetic.py --home /tmp/wh-bench            # the full set
    python benchmarks/synthetic.py --home /tmp/wh-small --runs 500 --samples 1000

Everything is seeded: the same arguments give the same records.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2025, 1, 6, tzinfo=UTC)
MODELS = ("resnet", "vit", "unet", "convnext", "mlp")
MARKER = "synthetic.json"


@dataclass(frozen=True)
class Shape:
    """How much data: runs, experiments, runs with samples, samples per such run."""

    runs: int = 10_000
    experiments: int = 50
    sample_runs: int = 100
    samples: int = 100_000
    seed: int = 7

    def slug(self) -> str:
        return f"r{self.runs}-e{self.experiments}-s{self.sample_runs}x{self.samples}-{self.seed}"


def experiment_names(n: int) -> list[str]:
    return [f"{MODELS[i % len(MODELS)]}-{i:02d}" for i in range(n)]


def run_docs(shape: Shape) -> list[dict[str, Any]]:
    """The run documents (``Run.to_doc()`` shape), validated by the Run model."""
    from warehouse.models import PrimaryMetric, Run, RunStatus

    rng = random.Random(shape.seed)
    names = experiment_names(shape.experiments)
    skill = {name: 0.70 + 0.25 * rng.random() for name in names}
    docs: list[dict[str, Any]] = []
    for i in range(shape.runs):
        experiment = names[i % len(names)]
        started = START + timedelta(minutes=26 * i + rng.randint(0, 600))
        duration = rng.uniform(60, 7200)
        lr = 10 ** rng.uniform(-5, -1)
        depth = rng.choice((18, 34, 50, 101))
        config = {
            "model": {
                "name": experiment.split("-")[0],
                "depth": depth,
                "dropout": rng.random() / 2,
            },
            "optim": {"lr": lr, "weight_decay": rng.choice((0.0, 1e-4, 1e-2)), "name": "adamw"},
            "data": {"batch_size": rng.choice((32, 64, 128)), "augment": rng.random() < 0.5},
            "seed": i,
        }
        roll = rng.random()
        status = (
            RunStatus.FAILED
            if roll < 0.03
            else RunStatus.RUNNING
            if roll < 0.05
            else RunStatus.COMPLETED
        )
        base = skill[experiment] - 0.08 * abs(math.log10(lr) + 3) / 2 + rng.gauss(0, 0.02)
        val = min(0.999, max(0.05, base))
        train = min(0.9999, val + abs(rng.gauss(0.04, 0.02)))
        test = min(0.999, max(0.05, val - rng.gauss(0.01, 0.01)))
        metrics = (
            {
                "train": {"acc": train, "loss": -math.log(train)},
                "val": {"acc": val, "loss": -math.log(val)},
                "test": {"acc": test, "loss": -math.log(test)},
            }
            if status is RunStatus.COMPLETED
            else {}
        )
        run = Run(
            run_id=f"{rng.getrandbits(128):032x}",
            experiment=experiment,
            project="bench",
            tags=["sweep"] + (["debug"] if rng.random() < 0.1 else []),
            user="bench",
            host=f"node{i % 8}",
            status=status,
            started_at=started,
            ended_at=None if status is RunStatus.RUNNING else started + timedelta(seconds=duration),
            duration_s=None if status is RunStatus.RUNNING else duration,
            config=config,
            overrides=[f"optim.lr={lr:.3g}", f"model.depth={depth}"],
            params=_flatten(config),
            metrics=metrics,
            primary_metric=(
                PrimaryMetric(name="val.acc", split="val", metric="acc", direction="max", value=val)
                if metrics
                else None
            ),
        )
        docs.append(run.to_doc())
    return docs


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def sample_run_ids(docs: list[dict[str, Any]], shape: Shape) -> list[dict[str, Any]]:
    """The runs that get samples: each experiment's best by val.acc (best experiment first),
    then each one's second best, and so on — the global best run always has samples."""
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        if doc["metrics"]:
            by_experiment.setdefault(doc["experiment"], []).append(doc)
    for runs in by_experiment.values():
        runs.sort(key=lambda d: -d["metrics"]["val"]["acc"])
    ranked = sorted(by_experiment.values(), key=lambda r: -r[0]["metrics"]["val"]["acc"])
    chosen: list[dict[str, Any]] = []
    depth = 0
    while len(chosen) < shape.sample_runs and any(len(r) > depth for r in ranked):
        for runs in ranked:
            if depth < len(runs) and len(chosen) < shape.sample_runs:
                chosen.append(runs[depth])
        depth += 1
    return chosen


def sample_batches(doc: dict[str, Any], n: int, seed: int) -> Iterator[Any]:
    """``n`` validation samples of one run, as pyarrow record batches of 50,000 rows."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    acc = doc["metrics"]["val"]["acc"]
    base = f"file:///bench/objects/{doc['experiment']}/{doc['run_id']}/output/"
    for start in range(0, n, 50_000):
        size = min(50_000, n - start)
        ids = np.char.add("s", np.char.zfill(np.arange(start, start + size).astype(str), 7))
        pixel = np.clip(rng.beta(8 * acc, 8 * (1 - acc) + 0.1, size), 0, 1)
        confidence = np.clip(pixel + rng.normal(0, 0.05, size), 0, 1)
        label = rng.integers(0, 10, size)
        correct = pixel > 0.5
        prediction = np.where(correct, label, (label + rng.integers(1, 10, size)) % 10)
        uris = np.char.add(np.char.add(base, ids), ".png")
        yield pa.record_batch(
            {
                "sample_id": pa.array(ids.tolist(), pa.string()),
                "pixel_acc": pa.array(pixel, pa.float64()),
                "loss": pa.array(-np.log(np.maximum(pixel, 1e-6)), pa.float64()),
                "confidence": pa.array(confidence, pa.float64()),
                "correct": pa.array(correct, pa.bool_()),
                "label": pa.array(label, pa.int64()),
                "prediction": pa.array(prediction, pa.int64()),
                "output_uri": pa.array(uris.tolist(), pa.string()),
            }
        )


def generate(home: Path, shape: Shape = Shape(), *, quiet: bool = False) -> dict[str, Any]:
    """Write the synthetic warehouse into ``home`` (reused when already there); a summary."""
    from warehouse.stores.local import LocalStore

    marker = home / MARKER
    if marker.is_file():
        summary: dict[str, Any] = json.loads(marker.read_text())
        if summary.get("shape") == asdict(shape):
            return summary
    home.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    docs = run_docs(shape)
    with_samples = sample_run_ids(docs, shape)
    for doc in with_samples:
        doc["sample_counts"] = {"val": shape.samples}
    with LocalStore(home) as store:
        for start in range(0, len(docs), 1000):
            store.write_runs(docs[start : start + 1000])
        _say(quiet, f"{len(docs):,} runs written in {time.perf_counter() - began:.1f} s")
        for i, doc in enumerate(with_samples):
            store.write_samples(
                doc["run_id"],
                doc["experiment"],
                "val",
                sample_batches(doc, shape.samples, shape.seed * 100_003 + i),
            )
            if (i + 1) % 10 == 0:
                _say(quiet, f"  samples: {i + 1}/{len(with_samples)} runs")
    best = max((d for d in docs if d["metrics"]), key=lambda d: d["metrics"]["val"]["acc"])
    summary = {
        "shape": asdict(shape),
        "runs": len(docs),
        "sample_rows": len(with_samples) * shape.samples,
        "best_run_id": best["run_id"],
        "seconds": round(time.perf_counter() - began, 1),
    }
    marker.write_text(json.dumps(summary, indent=2))
    _say(quiet, f"synthetic warehouse ready in {summary['seconds']} s: {home}")
    return summary


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="warehouse folder to fill")
    parser.add_argument("--runs", type=int, default=Shape.runs)
    parser.add_argument("--experiments", type=int, default=Shape.experiments)
    parser.add_argument("--sample-runs", type=int, default=Shape.sample_runs)
    parser.add_argument("--samples", type=int, default=Shape.samples)
    parser.add_argument("--seed", type=int, default=Shape.seed)
    args = parser.parse_args(argv)
    shape = Shape(args.runs, args.experiments, args.sample_runs, args.samples, args.seed)
    print(json.dumps(generate(args.home, shape), indent=2))


if __name__ == "__main__":
    main()
