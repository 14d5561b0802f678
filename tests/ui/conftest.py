"""A demo-like warehouse for the UI tests, recorded through the public API, and the server."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

import warehouse
from warehouse.settings import Settings, load
from warehouse.ui.server import UiServer, close, serve_in_thread

# (experiment, model size, seed, val accuracy per sample is drawn with this skill)
RUNS = (
    ("digits-logreg", 1, 0, 0.70),
    ("digits-logreg", 2, 1, 0.80),
    ("digits-svm", 1, 2, 0.85),
    ("digits-svm", 3, 3, 0.95),
    ("digits-knn", 2, 4, 0.75),
)
SAMPLES = 40


def png(colour: tuple[int, int, int], size: int = 24) -> bytes:
    """A small solid PNG with a dark bar, so each image is not one colour."""
    image = Image.new("RGB", (size, size), colour)
    for x in range(size):
        for y in range(size // 3, size // 2):
            image.putpixel((x, y), (20, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@dataclass
class Demo:
    settings: Settings
    run_ids: list[str]
    experiments: list[str]
    correct: dict[str, dict[str, int]]  # run_id -> sample_id -> 1/0


def record_demo(tmp_path: Path) -> Demo:
    """Record RUNS with val/train metrics, per-sample results and a PNG output per val sample
    (green when right, red when wrong) through ``warehouse.start_run``."""
    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    ids, experiments, correct = [], [], {}
    for experiment, size, seed, skill in RUNS:
        rng = random.Random(seed)
        config = {"model": {"name": experiment.split("-", 1)[1], "size": size}, "seed": seed}
        with warehouse.start_run(experiment, config, settings=settings, cwd=tmp_path) as run:
            rows = []
            for i in range(SAMPLES):
                ok = int(rng.random() < skill)
                sid = f"s{i:03d}"
                run.log_output("val", sid, png((40, 180, 60) if ok else (220, 40, 40)), "image/png")
                rows.append({"sample_id": sid, "correct": ok, "confidence": rng.random()})
            run.log_samples("val", rows)
            acc = sum(r["correct"] for r in rows) / SAMPLES
            run.log_metrics("val", {"acc": acc, "loss": 1 - acc})
            run.log_metrics("train", {"acc": min(1.0, acc + 0.05)})
            for step in range(5):
                run.log_step(step, loss=1.0 / (step + 1))
            correct[run.run_id] = {r["sample_id"]: r["correct"] for r in rows}
            ids.append(run.run_id)
            experiments.append(experiment)
    return Demo(settings, ids, experiments, correct)


@pytest.fixture
def demo(home: Path, tmp_path: Path) -> Demo:
    return record_demo(tmp_path)


@pytest.fixture
def server(demo: Demo) -> Iterator[UiServer]:
    srv, _ = serve_in_thread(demo.settings)
    yield srv
    close(srv)
