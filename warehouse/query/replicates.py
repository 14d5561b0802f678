"""Seeds: whether a win survives another seed.

Runs whose resolved configs differ only in seed keys (``WAREHOUSE_SEED_KEYS``: by default keys
named ``seed`` or ending in ``_seed``) share ``config_hash_noseed``, computed when they are
recorded; runs of one experiment sharing it form a *replicate group*. A group's seeds are its
distinct values of the seed keys: runs repeated with the same seed count once (their mean).
For each group:

- the number of distinct seeds (and of runs), the mean and standard deviation of the metric
  over seeds, Student's t 95 % interval of the mean, the best and the worst run;
- ``lucky_seed``: the best seed lies beyond what the *other* seeds predict (leave one out:
  the t prediction bound of the others at level 1 - 0.05/n, n the seeds, since the best is
  the largest of n). ``None`` below 3 seeds (two values cannot say which one is unusual), or
  when the other seeds' scores are all equal (no spread to judge by).
  (A rule that keeps the best seed in the mean and standard deviation can never fire with
  3-5 seeds: by Samuelson's bound the largest of n values is at most (n-1)/sqrt(n)
  standard deviations above their mean.)
- ``flip_rate``: the share of the samples (seen by every seed) whose 0/1 column (correctness)
  is not the same across the seeds.

:func:`leaderboard_by_group` ranks experiments by their best group's mean over groups of two
seeds or more (a single seed is listed, unranked and marked), with Welch's test of each
group against the next across seeds (corrected for the pick of the best of an experiment's
groups); :func:`over_time_by_group` is the running best of group
means over time, which only groups of two seeds or more can set.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from warehouse.filters.docpath import flatten, get_path
from warehouse.models import Metric
from warehouse.query import stats
from warehouse.query.distributions import t_sf
from warehouse.query.evidence import candidate_columns, sample_table
from warehouse.stores.base import Store

REPLICATE_COLUMNS = (
    "experiment",
    "group",
    "n_seeds",
    "n_runs",
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
                              "best_so_far", "best_experiment", "is_new_best",
                              "single_seed")  # fmt: skip
BY_GROUP_COLUMNS = ("rank", "experiment", "group", "n_seeds", "mean", "std", "ci_low", "ci_high",
                    "lucky_seed", "single_seed", "vs_next_diff", "vs_next_p",
                    "vs_next_mde")  # fmt: skip
MIN_SEEDS = 3
"""The fewest seeds ``lucky_seed`` can judge."""
MIN_RANKED = 2
"""The fewest seeds a group needs to be ranked (or set a record) by its mean."""
SEED_KEYS = ("seed", "*_seed")


def replicates(
    store: Store,
    metric: Metric,
    *,
    experiment: str | None = None,
    filter: str | None = None,
    flips: bool = True,
    seed_keys: Collection[str] = SEED_KEYS,
) -> list[dict[str, Any]]:
    """One row per replicate group, best mean first."""
    return [
        {k: v for k, v in row.items() if k != "seed_scores"}
        for row in _group_rows(store, metric, experiment, filter, flips, seed_keys)
    ]


def _group_rows(
    store: Store,
    metric: Metric,
    experiment: str | None,
    filter: str | None,
    flips: bool,
    seed_keys: Collection[str],
) -> list[dict[str, Any]]:
    groups = _groups(store, metric, experiment, filter)
    sign = 1.0 if metric.direction == "max" else -1.0
    rows: list[dict[str, Any]] = []
    for (name, group), members in groups.items():
        by_seed: dict[str, list[float]] = {}
        for _, score, run in members:
            by_seed.setdefault(seed_value(run, seed_keys), []).append(score)
        scores = np.array([float(np.mean(v)) for v in by_seed.values()])
        # ties as every ranked view settles them: the earlier end, then the smaller run id
        ranked = sorted(members, key=lambda m: (-sign * m[1], _ended(m[2]), m[0]))
        ci = stats.mean_interval(scores)
        rows.append(
            {
                "experiment": name,
                "group": group,
                "n_seeds": int(scores.size),
                "n_runs": len(members),
                "mean": float(scores.mean()),
                "std": float(scores.std(ddof=1)) if scores.size > 1 else None,
                "ci_low": None if ci is None else ci.low,
                "ci_high": None if ci is None else ci.high,
                "best_run_id": ranked[0][0],
                "worst_run_id": ranked[-1][0],
                "lucky_seed": lucky_seed(scores, sign),
                "flip_rate": _flip_rate(store, [m[2] for m in ranked], metric) if flips else None,
                "seed_scores": scores,
            }
        )
    rows.sort(key=lambda r: (-sign * float(r["mean"]), str(r["experiment"]), str(r["group"])))
    return rows


def lucky_seed(scores: np.ndarray, sign: float = 1.0, alpha: float = 0.05) -> bool | None:
    """Whether the best of ``scores`` (one per seed) lies beyond the others' t prediction
    bound at level ``1 - alpha/n``; None for fewer than :data:`MIN_SEEDS` seeds, and where
    the others agree exactly (scores on a few samples tie often: three seeds on 50 samples
    tie one time in ten, and "beyond a zero spread" called 13 % of ordinary groups lucky)."""
    n = int(scores.size)
    if n < MIN_SEEDS:
        return None
    signed = sign * np.asarray(scores, dtype=np.float64)
    best = int(np.argmax(signed))
    others = np.delete(signed, best)
    gap = float(signed[best] - others.mean())
    spread = float(others.std(ddof=1)) * math.sqrt(1 + 1 / others.size)
    if spread == 0.0:  # the others agree exactly: they cannot say how far a seed may fall
        return None
    return t_sf(gap / spread, others.size - 1) < alpha / n


def seed_value(run: dict[str, Any], seed_keys: Collection[str] = SEED_KEYS) -> str:
    """The run's values of its seed keys, as one text (runs with equal text are one seed)."""
    found = sorted(
        (key, repr(value))
        for key, value in flatten(run.get("config") or {}).items()
        if any(fnmatch.fnmatchcase(key.rsplit(".", 1)[-1], p) for p in seed_keys)
    )
    return repr(found)


Member = tuple[str, float, dict[str, Any]]
"""One run of a replicate group: ``(run_id, score, the run's fields)``."""


def _groups(
    store: Store, metric: Metric, experiment: str | None, filter: str | None
) -> dict[tuple[str, str], list[Member]]:
    """The scored runs matching ``filter`` (and ``experiment``) by (experiment, group)."""
    from warehouse.query import views

    named = f"experiment:{views.quote(experiment)}" if experiment else None
    fields = ("run_id", "experiment", "config_hash_noseed", "config", "sample_counts",
              "metrics_ci", "ended_at", metric.path)  # fmt: skip
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
    store: Store,
    metric: Metric,
    *,
    filter: str | None = None,
    limit: int | None = None,
    seed_keys: Collection[str] = SEED_KEYS,
) -> list[dict[str, Any]]:
    """The running best of replicate-group means over time: one point per group, at the end
    of its last run. Only a group of two seeds or more can set a record, so one lucky seed
    cannot set one on its own; a single-seed group's point is marked ``single_seed``."""
    sign = 1.0 if metric.direction == "max" else -1.0
    points = []
    for (name, group), members in _groups(store, metric, None, filter).items():
        ends = [_ended(m[2]) for m in members]
        if "~" in ends:  # a seed still running: the group's mean is not final yet
            continue
        by_seed: dict[str, list[float]] = {}
        for _, score, run in members:
            by_seed.setdefault(seed_value(run, seed_keys), []).append(score)
        mean = float(np.mean([np.mean(v) for v in by_seed.values()]))
        points.append((max(ends), name, group, len(by_seed), mean))
    points.sort(key=lambda p: (p[0], p[1], p[2]))
    rows: list[dict[str, Any]] = []
    best: tuple[float, str, str] | None = None
    for ended, name, group, n, mean in points:
        single = n < MIN_RANKED
        new = not single and (best is None or sign * mean > sign * best[0])
        if new:
            best = (mean, name, group)
        rows.append(
            {
                "ended_at": ended,
                "experiment": name,
                "group": group,
                "n_seeds": n,
                "mean": mean,
                "best_so_far": None if best is None else best[0],
                "best_experiment": None if best is None else best[1],
                "best_group": None if best is None else best[2],
                "is_new_best": new,
                "single_seed": single,
            }
        )
    return rows[-limit:] if limit else rows


def leaderboard_by_group(
    store: Store,
    metric: Metric,
    *,
    filter: str | None = None,
    limit: int | None = None,
    seed_keys: Collection[str] = SEED_KEYS,
) -> list[dict[str, Any]]:
    """Experiments ranked by their best replicate group's mean among groups of two seeds or
    more; experiments with single-seed groups only come after, unranked (``rank`` None,
    ``single_seed``). ``vs_next_*``: Welch's t of the next ranked group's seeds against this
    one's (next minus this): is this *setup* better, across seeds? This row's group is the
    best of its experiment's ranked groups, so its lead is tested as that pick (Bonferroni:
    the best of 30 equal setups led an equal one "significantly" 18 % of the time)."""
    ranked: dict[str, dict[str, Any]] = {}
    single: dict[str, dict[str, Any]] = {}
    candidates: dict[str, int] = {}  # each experiment's groups of two seeds or more
    for row in _group_rows(store, metric, None, filter, False, seed_keys):  # best mean first
        pool = ranked if row["n_seeds"] >= MIN_RANKED else single
        pool.setdefault(row["experiment"], row)
        if row["n_seeds"] >= MIN_RANKED:
            candidates[row["experiment"]] = candidates.get(row["experiment"], 0) + 1
    order = list(ranked.values()) + [r for e, r in single.items() if e not in ranked]
    if limit:
        order = order[:limit]
    out = []
    for i, row in enumerate(order):
        is_ranked = row["n_seeds"] >= MIN_RANKED
        compared = None
        if is_ranked and i + 1 < len(order) and order[i + 1]["n_seeds"] >= MIN_RANKED:
            # this row's group is its experiment's best of its groups: tested as that pick
            compared = stats.welch(row["seed_scores"], order[i + 1]["seed_scores"])
            if compared is not None:
                compared = stats.selected(compared, candidates[row["experiment"]])
        out.append(
            {
                "rank": i + 1 if is_ranked else None,
                **{k: row[k] for k in BY_GROUP_COLUMNS[1:9]},
                "single_seed": not is_ranked,
                "vs_next_diff": None if compared is None else compared.diff,
                "vs_next_p": None if compared is None else compared.p,
                "vs_next_mde": None if compared is None else compared.mde(),
            }
        )
    return out


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


__all__ = [
    "BY_GROUP_COLUMNS",
    "OVER_TIME_BY_GROUP_COLUMNS",
    "REPLICATE_COLUMNS",
    "leaderboard_by_group",
    "lucky_seed",
    "over_time_by_group",
    "replicates",
    "seed_value",
]
