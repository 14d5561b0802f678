"""Runs and samples in the shape teams have, and what each Kibana view must show for them,
computed here in plain Python from the generated documents (never by the server).

:func:`team_data`: ``experiments`` experiments (300) over ``total`` runs (12,000 in CI, 100,000
in ``benchmarks/kibana_views.py``), of very different sizes: hyper-parameter sweeps of 300
configs with one seed each (two of them sweep the very same grid, so their configs collide),
experiments of replicate groups of 3-5 seeds, small ones. About 1.5 % of the runs failed
without metrics, 2 % are still running with metrics and no end (some outscore every finished
run of their experiment, some tie with it: a running twin), some started before the time
range. The leader is ``leader``, a small experiment whose two finished runs ended in the last
days: a view that cut experiments by run count would drop it. Boolean params
(``data.augment``) on every run. The best finished run of each experiment has 100 ``val``
samples labelled ``0`` .. ``labels - 1`` (numbers: ordered as text they would read 0, 1, 10)
with exactly ``round(100 * val acc)`` correct; a few experiments have a second sampled run,
whose samples the heat map pools.

The ``expected_*`` functions are the independent computation each view is checked against:
Elasticsearch 9's semantics applied to the documents (ties, missing values, the time range),
because the test server orders terms by a sub-aggregation, sorts missing values and computes
``max`` of dates differently.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from warehouse.dashboards.vega.responses import bucket_start
from warehouse.models import Run, RunStatus, config_hash

SPAN = timedelta(days=90)  # the dashboard's time picker: now-90d .. now
INTERVAL = "24h"  # Kibana's automatic interval for 90 days
LEADER = "leader-vit"


@dataclass
class TeamData:
    now: datetime
    runs: list[dict[str, Any]]
    samples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def window(self) -> tuple[datetime, datetime]:
        return self.now - SPAN, self.now


def team_data(
    total: int = 12_000,
    experiments: int = 300,
    labels: int = 50,
    sweep_configs: int = 300,
    *,
    sweep_only: bool = False,
    seed: int = 29,
) -> TeamData:
    """The documents (see the module's docstring); deterministic for a ``seed``."""
    rng = random.Random(seed)
    now = datetime.now(UTC).replace(microsecond=0)
    runs: list[dict[str, Any]] = []
    names = [
        f"{rng.choice(('resnet', 'vit', 'bert', 'xgb', 'unet'))}-{i:03d}"
        for i in range(experiments - 1)
    ]
    sweeps = names[: max(2, total // (8 * sweep_configs))] if not sweep_only else names
    others = [n for n in names if n not in sweeps]
    sizes = dict.fromkeys(sweeps, sweep_configs)
    left = max(0, total - 2 - sum(sizes.values()))
    weights = [1.0 / (1 + i) ** 0.7 for i in range(len(others))]
    for name, weight in zip(others, weights, strict=True):
        sizes[name] = max(1, round(left * weight / sum(weights)))
    if sweep_only:
        per = max(1, (total - 2) // len(sweeps))
        sizes = dict.fromkeys(sweeps, per)
    quality = {n: rng.uniform(0.55, 0.93) for n in names}

    def add(
        experiment: str,
        config: dict[str, Any],
        acc: float | None,
        status: RunStatus,
        started: datetime,
    ) -> dict[str, Any]:
        ended = (
            None
            if status is RunStatus.RUNNING
            else started + timedelta(minutes=rng.randint(5, 600))
        )
        metrics: dict[str, dict[str, float]] = {}
        if acc is not None:
            train = min(1.0, round(acc + rng.choice((0.0, 0.01, 0.03, 0.06)), 4))
            metrics = {"train": {"acc": train}, "val": {"acc": acc}}
            if rng.random() < 0.7:
                metrics["test"] = {"acc": round(acc - rng.choice((0.004, -0.002, 0.01)), 4)}
        doc = Run(
            run_id=uuid.UUID(int=rng.getrandbits(128)).hex,
            experiment=experiment,
            status=status,
            started_at=started,
            ended_at=ended,
            config=config,
            params={
                "data.augment": bool(config["augment"]),
                "model.lr": config["lr"],
                "model.depth": config["depth"],
                "seed": config["seed"],
            },
            config_hash_noseed=config_hash(config, ("seed",)),
            metrics=metrics,
        ).to_doc()
        runs.append(doc)
        return doc

    grid = [
        (lr, depth, aug)
        for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
        for depth in range(30)
        for aug in (0, 1)
    ]
    for number, name in enumerate(names):
        count = sizes[name]
        family = "sweep" if name in sweeps[:2] else name  # the first two sweep the same grid
        seeds = 1 if name in sweeps else rng.choice((3, 3, 4, 5))
        for i in range(count):
            lr, depth, aug = grid[(i // seeds) % len(grid)]
            config = {
                "model": family,
                "lr": lr,
                "depth": depth + 100 * (i // (seeds * len(grid))),
                "augment": aug,
                "seed": i % seeds,
            }
            days = rng.uniform(0.5, 95 if number % 10 else 88)  # some started before the range
            started = now - timedelta(days=days)
            roll = rng.random()
            acc = round(min(0.989, quality[name] + rng.gauss(0, 0.03)), 4)
            if roll < 0.015:
                add(name, config, None, RunStatus.FAILED, started)
            elif roll < 0.035:
                add(name, config, round(min(0.999, acc + 0.05), 4), RunStatus.RUNNING, started)
            else:
                add(name, config, acc, RunStatus.COMPLETED, started)
    twins = 0
    for name in names:  # running twins: the same score as the best finished run, no end
        best = _best_finished([r for r in runs if r["experiment"] == name], now - SPAN, now)
        if best is not None and twins < 8 and rng.random() < 0.1:
            twin = add(
                name,
                dict(best["config"]),
                _val(best),
                RunStatus.RUNNING,
                datetime.fromisoformat(best["started_at"]),
            )
            twin["run_id"] = "0" + best["run_id"][1:]  # the smaller id: it would win the tie
            twins += 1
    for i, acc in enumerate((0.9931, 0.9952)):  # the leader: two late finished runs ...
        config = {"model": "leader", "lr": 1e-3, "depth": 7, "augment": 1, "seed": i}
        add(LEADER, config, acc, RunStatus.COMPLETED, now - timedelta(days=2 - i))
    add(
        LEADER,
        {"model": "leader", "lr": 1e-3, "depth": 7, "augment": 1, "seed": 9},
        0.9991,
        RunStatus.RUNNING,
        now - timedelta(hours=5),
    )
    data = TeamData(now, runs)
    _samples(data, labels, rng)
    return data


def _samples(data: TeamData, labels: int, rng: random.Random) -> None:
    """100 ``val`` samples of each experiment's best finished run (a second run for a few)."""
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for run in data.runs:
        by_experiment.setdefault(run["experiment"], []).append(run)
    for number, (name, runs) in enumerate(sorted(by_experiment.items())):
        best = _best_finished(runs, *data.window)
        if best is None:
            continue
        sampled = [best]
        if number % 37 == 5:
            others = [r for r in runs if r is not best and _val(r) is not None]
            sampled += others[:1]
        for run in sampled:
            acc = _val(run)
            assert acc is not None
            right = set(rng.sample(range(100), round(100 * acc)))
            recorded = run.get("ended_at") or run["started_at"]
            for i in range(100):
                data.samples.append(
                    {
                        "run_id": run["run_id"],
                        "experiment": name,
                        "split": "val",
                        "sample_id": f"s{i:03d}",
                        "label": (i * 7 + number) % labels,
                        "correct": i in right,
                        "recorded_at": recorded,
                    }
                )


# --- what the views must show, by plain Python ------------------------------------------------


def _val(run: dict[str, Any]) -> float | None:
    value = (run.get("metrics") or {}).get("val", {}).get("acc")
    return value if isinstance(value, int | float) and math.isfinite(value) else None


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def _in(text: str | None, lo: datetime, hi: datetime) -> bool:
    moment = _time(text)
    return moment is not None and lo <= moment <= hi


def _tie_key(run: dict[str, Any]) -> tuple[Any, ...]:
    """Best first: the higher val acc, then the earlier end (none: last), then the run id."""
    ended = _time(run.get("ended_at"))
    return (
        -(_val(run) or -math.inf),
        ended is None,
        ended or datetime.min.replace(tzinfo=UTC),
        run["run_id"],
    )


def _best_finished(runs: Iterable[dict[str, Any]], lo: datetime, hi: datetime) -> Any:
    scored = [
        r
        for r in runs
        if _val(r) is not None and r["status"] != "running" and _in(r["started_at"], lo, hi)
    ]
    return min(scored, key=_tie_key, default=None)


def expected_ranking(data: TeamData) -> list[dict[str, Any]]:
    """Every experiment with a finished scored run started in the range, best first:
    experiment, run_id, score, run_count (its runs in the range, any status), and the run."""
    lo, hi = data.window
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in data.runs:
        if _in(run["started_at"], lo, hi):
            groups.setdefault(run["experiment"], []).append(run)
    rows = []
    for name, runs in groups.items():
        best = _best_finished(runs, lo, hi)
        if best is not None:
            rows.append(
                {
                    "experiment": name,
                    "run_id": best["run_id"],
                    "score": _val(best),
                    "run_count": len(runs),
                    "run": best,
                }
            )
    rows.sort(key=lambda r: _tie_key(r["run"]))
    return rows


def expected_components(row: dict[str, Any]) -> dict[str, float]:
    """The best run's error components (baseline 0), as the bias/variance view stacks them."""
    metrics = row["run"]["metrics"]
    errors = {s: 1 - metrics[s]["acc"] for s in ("train", "val", "test") if s in metrics}
    out = {"avoidable bias": errors["train"], "variance": errors["val"] - errors["train"]}
    if "test" in errors:
        out["dev overfit"] = errors["test"] - errors["val"]
    return out


def expected_seed_groups(data: TeamData, top: int) -> list[dict[str, Any]]:
    """The ``top`` replicate groups (experiment, config without seeds) of the best runs started
    in the range, ranked by their best seed: n_seeds, mean, low, high, best_run_id."""
    lo, hi = data.window
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in data.runs:
        if (
            _val(run) is not None
            and run.get("config_hash_noseed")
            and _in(run["started_at"], lo, hi)
        ):
            groups.setdefault((run["experiment"], run["config_hash_noseed"]), []).append(run)
    rows = []
    for (name, group), members in groups.items():
        scores = [_val(m) or 0.0 for m in members]
        best = min(members, key=_tie_key)
        rows.append(
            {
                "experiment": name,
                "group": group,
                "n_seeds": len(members),
                "mean": sum(scores) / len(scores),
                "low": min(scores),
                "high": max(scores),
                "best_run_id": best["run_id"],
                "best": best,
            }
        )
    rows.sort(key=lambda r: _tie_key(r["best"]))
    return rows[:top]


def expected_slices(data: TeamData, top: int, labels: int = 50) -> dict[str, Any]:
    """The heat map: the ``top`` experiments by their pooled mean of ``correct`` (ties: the
    name), best first, and per experiment and label the pooled n and mean."""
    lo, hi = data.window
    samples = [s for s in data.samples if s["split"] == "val" and _in(s["recorded_at"], lo, hi)]
    totals: dict[str, list[int]] = {}
    cells: dict[tuple[str, int], list[int]] = {}
    frequency: dict[int, int] = {}
    for s in samples:
        for key, table in ((s["experiment"], totals), ((s["experiment"], s["label"]), cells)):
            counts = table.setdefault(key, [0, 0])  # type: ignore[attr-defined]
            counts[0] += 1
            counts[1] += int(s["correct"])
        frequency[s["label"]] = frequency.get(s["label"], 0) + 1
    ranked = sorted(totals, key=lambda e: (-totals[e][1] / totals[e][0], e))
    shown = ranked[:top]
    frequent = sorted(frequency, key=lambda k: (-frequency[k], str(k)))[:labels]
    return {
        "experiments": shown,
        "experiments_found": len(totals),
        "labels": sorted(frequent),
        "labels_found": len(frequency),
        "cells": {
            (e, str(k)): (n, right / n)
            for (e, k), (n, right) in cells.items()
            if e in shown and k in frequent
        },
    }


def expected_over_time(data: TeamData) -> list[tuple[Any, ...]]:
    """Per 24 h bucket of end time: bucket key, its best run, score, scored runs, and the
    running best after it (value, run) — finished runs ended in the range only."""
    lo, hi = data.window
    points = sorted(
        (
            r
            for r in data.runs
            if _val(r) is not None and r["status"] != "running" and _in(r.get("ended_at"), lo, hi)
        ),
        key=lambda r: (_time(r["ended_at"]), r["run_id"]),
    )
    buckets: dict[int, list[dict[str, Any]]] = {}
    for run in points:
        moment = _time(run["ended_at"])
        assert moment is not None
        buckets.setdefault(bucket_start(moment, INTERVAL), []).append(run)
    rows = []
    best: dict[str, Any] | None = None
    for key in sorted(buckets):
        members = buckets[key]
        top = min(members, key=_tie_key)
        if best is None or (_val(top) or 0) > (_val(best) or 0):
            best = top
        rows.append((key, top["run_id"], _val(top), len(members), _val(best), best["run_id"]))
    return rows


def bulk_samples(client: Any, index: str, samples: Sequence[dict[str, Any]]) -> None:
    """The samples into ``index`` with one bulk load, as the store's documents (``_id`` =
    ``run_id:split:sample_id``, the hidden row number for write order)."""
    from elasticsearch import helpers

    from warehouse.stores.elastic_bulk import ROW_FIELD

    actions = (
        {
            "_index": index,
            "_id": f"{s['run_id']}:{s['split']}:{s['sample_id']}",
            "_source": {**s, ROW_FIELD: i},
        }
        for i, s in enumerate(samples)
    )
    helpers.bulk(client, actions, chunk_size=5_000, refresh="wait_for")
