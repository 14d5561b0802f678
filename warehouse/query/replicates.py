"""Seeds: whether a win survives another seed.

Runs whose resolved configs differ only in seed keys (``WAREHOUSE_SEED_KEYS``: by default keys
named ``seed`` or ending in ``_seed``) share ``config_hash_noseed``, computed when they are
recorded; runs of one experiment sharing it form a *replicate group*. For each group:

- the number of seeds, the mean and standard deviation of the metric, Student's t 95 % interval
  of the mean, the best and the worst seed's run;
- ``lucky_seed``: the group's best seed is more than 2 standard deviations better than the
  group's mean, or the group has fewer than 3 seeds (one good number proves nothing);
- ``flip_rate``: the share of the samples (seen by every seed) whose 0/1 column (correctness)
  is not the same across the seeds.

:func:`leaderboard_by_group` ranks experiments by their best group's mean instead of their best
single run; :func:`over_time_by_group` is the running best of group means over time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from warehouse.filters.docpath import get_path
from warehouse.models import Metric
from warehouse.query import stats
from warehouse.query.evidence import candidate_columns, sample_table
from warehouse.stores.base import Store

REPLICATE_COLUMNS = (
    "experiment",
    "group",
    "n_seeds",
    "mean",
    "std",
    "ci_low",
    "ci_high",
    "best_run_id",
    "worst_run_id",
    "lucky_seed",
    "flip_rate",
)
OVER_TIME_BY_GROUP_COLUMNS = ("ended_at", "experiment", "group", "n_seeds", "mean",
                              "best_so_far", "best_experiment", "is_new_best")  # fmt: skip
BY_GROUP_COLUMNS = ("rank", "experiment", "group", "n_seeds", "mean", "std", "ci_low", "ci_high",
                    "lucky_seed")  # fmt: skip
LUCKY_SIGMAS = 2.0
MIN_SEEDS = 3


def replicates(
    store: Store,
    metric: Metric,
    *,
    experiment: str | None = None,
    filter: str | None = None,
    flips: bool = True,
) -> list[dict[str, Any]]:
    """One row per replicate group, best mean first."""
    groups = _groups(store, metric, experiment, filter)
    sign = 1.0 if metric.direction == "max" else -1.0
    rows: list[dict[str, Any]] = []
    for (name, group), members in groups.items():
        scores = np.array([s for _, s, _ in members])
        # ties as every ranked view settles them: the earlier end, then the smaller run id
        ranked = sorted(members, key=lambda m: (-sign * m[1], _ended(m[2]), m[0]))
        ci = stats.mean_interval(scores)
        std = float(scores.std(ddof=1)) if len(scores) > 1 else None
        mean = float(scores.mean())
        best_seed = sign * ranked[0][1]
        lucky = len(scores) < MIN_SEEDS or (
            std is not None and best_seed - sign * mean > LUCKY_SIGMAS * std
        )
        rows.append(
            {
                "experiment": name,
                "group": group,
                "n_seeds": len(scores),
                "mean": mean,
                "std": std,
                "ci_low": None if ci is None else ci.low,
                "ci_high": None if ci is None else ci.high,
                "best_run_id": ranked[0][0],
                "worst_run_id": ranked[-1][0],
                "lucky_seed": lucky,
                "flip_rate": _flip_rate(store, [m[2] for m in ranked], metric) if flips else None,
            }
        )
    rows.sort(key=lambda r: (-sign * float(r["mean"]), str(r["experiment"]), str(r["group"])))
    return rows


Member = tuple[str, float, dict[str, Any]]
"""One run of a replicate group: ``(run_id, score, the run's fields)``."""


def _groups(
    store: Store, metric: Metric, experiment: str | None, filter: str | None
) -> dict[tuple[str, str], list[Member]]:
    """The scored runs matching ``filter`` (and ``experiment``) by (experiment, group)."""
    from warehouse.query import views

    named = f"experiment:{views.quote(experiment)}" if experiment else None
    fields = ("run_id", "experiment", "config_hash_noseed", "sample_counts", "metrics_ci",
              "ended_at", metric.path)  # fmt: skip
    found = views.runs(store, views.and_filters(filter, named), limit=None, fields=fields)
    groups: dict[tuple[str, str], list[Member]] = {}
    for run in found:
        score = views.finite(get_path(run, metric.path))
        group = run.get("config_hash_noseed")
        if score is None or not group:
            continue
        groups.setdefault((str(run["experiment"]), str(group)), []).append(
            (str(run["run_id"]), score, run)
        )
    return groups


def over_time_by_group(
    store: Store, metric: Metric, *, filter: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """The running best of replicate-group means over time: one point per group, at the end
    of its last run, so one lucky seed cannot set a record on its own."""
    sign = 1.0 if metric.direction == "max" else -1.0
    points = []
    for (name, group), members in _groups(store, metric, None, filter).items():
        ends = [_ended(m[2]) for m in members]
        if "~" in ends:  # a seed still running: the group's mean is not final yet
            continue
        mean = float(np.mean([m[1] for m in members]))
        points.append((max(ends), name, group, len(members), mean))
    points.sort(key=lambda p: (p[0], p[1], p[2]))
    rows: list[dict[str, Any]] = []
    best: tuple[float, str, str] | None = None
    for ended, name, group, n, mean in points:
        new = best is None or sign * mean > sign * best[0]
        if new:
            best = (mean, name, group)
        assert best is not None
        rows.append(
            {
                "ended_at": ended,
                "experiment": name,
                "group": group,
                "n_seeds": n,
                "mean": mean,
                "best_so_far": best[0],
                "best_experiment": best[1],
                "best_group": best[2],
                "is_new_best": new,
            }
        )
    return rows[-limit:] if limit else rows


def leaderboard_by_group(
    store: Store, metric: Metric, *, filter: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Experiments ranked by their best replicate group's mean."""
    best: dict[str, dict[str, Any]] = {}
    for row in replicates(store, metric, filter=filter, flips=False):
        best.setdefault(row["experiment"], row)  # rows come best mean first
    ranked = list(best.values())[:limit] if limit else list(best.values())
    return [
        {"rank": rank, **{k: row[k] for k in BY_GROUP_COLUMNS if k != "rank"}}
        for rank, row in enumerate(ranked, 1)
    ]


def _ended(run: dict[str, Any]) -> str:
    """A sortable end time (ISO-8601 UTC strings sort in time order); unfinished runs last."""
    from warehouse.values import iso_utc, parse_time

    moment = parse_time(run.get("ended_at"))
    return "~" if moment is None else iso_utc(moment)


def _flip_rate(store: Store, runs: Sequence[dict[str, Any]], metric: Metric) -> float | None:
    """The share of shared samples whose 0/1 column differs across the runs (None when fewer
    than two runs have per-sample results)."""
    split = metric.split
    with_samples = [r for r in runs if (r.get("sample_counts") or {}).get(split)]
    if len(with_samples) < 2:
        return None
    columns = candidate_columns(with_samples[0], split, metric, None)
    tables = []
    for run in with_samples:
        table = sample_table(store, str(run["run_id"]), split, columns)
        column = next((c for c in columns if c in table.schema.names), None)
        if column is None:
            return None
        tables.append(table.select(["sample_id", column]).rename_columns(["sample_id", "v"]))
    joined = tables[0].rename_columns(["sample_id", "v0"])
    for i, table in enumerate(tables[1:], 1):
        joined = joined.join(table.rename_columns(["sample_id", f"v{i}"]), keys="sample_id")
    if joined.num_rows == 0:
        return None
    values = np.column_stack([_floats(joined.column(f"v{i}")) for i in range(len(tables))])
    if not stats.is_binary(values[np.isfinite(values)]):
        return None
    return float(np.mean(values.min(axis=1) != values.max(axis=1)))


def _floats(column: Any) -> np.ndarray:
    values: np.ndarray = column.to_numpy(zero_copy_only=False).astype(float)
    return values


__all__ = ["BY_GROUP_COLUMNS", "REPLICATE_COLUMNS", "leaderboard_by_group", "replicates"]
