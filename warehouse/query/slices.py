"""Where a model fails: the metric per slice of the samples, and the samples most runs get wrong.

Both views read grouped counts (the ``group_samples`` store primitive: an aggregation on
Elasticsearch, an Arrow group-by locally), so a slice of a million samples costs one request.

- :func:`slices`: for each chosen run (by default each experiment's best run), the mean of a
  per-sample column in each slice (a value of a metadata column such as ``label``, or an
  equal-width bin of a numeric one: ``size:bins=5``), with its 95 % interval (exact binomial
  for 0/1 columns; other columns, and samples the run declared clustered, get the mean and
  ``n`` only, as no store sums squares or clusters) and the
  gap to the run's score over *all* its samples, labelled or not (a corpus metric's slices
  are its ratio in the slice); the worst slices first.
- :func:`hardest`: across runs, the samples most runs got wrong (a 0/1 column), with how many
  runs saw each, and the best run's output of each to look at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from warehouse.errors import ConfigurationError
from warehouse.models import Metric
from warehouse.query import stats
from warehouse.query.aggregates import Aggregate
from warehouse.query.evidence import (
    candidate_aggregates,
    candidate_columns,
    cluster_of,
    resolve_run,
)
from warehouse.query.gate import parse_by as parse_by
from warehouse.stores.base import Group, GroupQuery, Store

SLICE_COLUMNS = ("experiment", "run_id", "{by}", "n", "mean", "ci_low", "ci_high", "gap")
HARDEST_COLUMNS = ("sample_id", "runs", "wrong", "error_rate", "output_uri")


def chosen_runs(
    store: Store, metric: Metric, runs: Sequence[str] = (), filter: str | None = None
) -> list[dict[str, Any]]:
    """The runs given (ids, prefixes, ``best``, ``best:EXPERIMENT``), else each experiment's
    best run by ``metric``."""
    if runs:
        return [resolve_run(store, spec, metric, filter) for spec in runs]
    from warehouse.query import views

    found = views.leaderboard(store, metric.label, metric.direction, filter)
    ids = [str(row["best_run_id"]) for row in found]
    return [views.get_run(store, run_id) for run_id in ids]


def slices(
    store: Store,
    metric: Metric,
    by: str,
    *,
    column: str | None = None,
    split: str | None = None,
    runs: Sequence[str] = (),
    filter: str | None = None,
    min_n: int = 0,
) -> list[dict[str, Any]]:
    """The metric per slice value of each chosen run, the worst slices first; ``gap`` is the
    slice's score minus the run's score over all its samples (labelled or not)."""
    name, bins = parse_by(by)
    where = split or metric.split
    chosen = [r for r in chosen_runs(store, metric, runs, filter) if _has_samples(r, where)]
    if not chosen:
        return []
    query = GroupQuery(tuple(str(r["run_id"]) for r in chosen), where, name, "", bins=bins)
    aggregate, groups = _first_answer(
        store, query, candidate_aggregates(chosen[:1], where, metric, column)
    )
    overall = {
        g.run_id: g.mean
        for g in _scores(store, replace(query, by="split", bins=None), aggregate)
        if g.run_id is not None and g.mean is not None
    }
    experiment = {str(r["run_id"]): r.get("experiment") for r in chosen}
    clustered = cluster_of(chosen, where, metric, None) is not None
    top = max((g.key[1] for g in groups if isinstance(g.key, tuple)), default=None)
    rows = []
    for g in groups:
        if g.n < min_n or g.run_id is None:
            continue
        mean = g.mean
        ci = None
        # a slice's exact interval assumes independent samples: none where they are clustered
        if aggregate.kind == "mean" and _binary(g) and not clustered:
            found = stats.binomial_interval(int(g.total), g.n)
            ci = (
                None
                if found is None
                else (aggregate.scale * found.low, aggregate.scale * found.high)
            )
        full = overall.get(g.run_id)
        rows.append(
            {
                "experiment": experiment.get(g.run_id),
                "run_id": g.run_id,
                name: _shown_key(g.key, top),
                "n": g.n,
                "mean": mean,
                "ci_low": None if ci is None else ci[0],
                "ci_high": None if ci is None else ci[1],
                "gap": None if mean is None or full is None else mean - full,
            }
        )
    worst_first = 1.0 if metric.direction == "max" else -1.0
    rows.sort(key=lambda r: (worst_first * (r["mean"] or 0.0), -r["n"], str(r[name])))
    return rows


def hardest(
    store: Store,
    metric: Metric,
    *,
    experiment: str | None = None,
    column: str | None = None,
    split: str | None = None,
    filter: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The samples most runs got wrong (a 0/1 column, e.g. ``correct``), across the runs of
    ``experiment`` (or all runs matching ``filter``) that recorded the split."""
    from warehouse.query import views

    where = split or metric.split
    scope = views.and_filters(
        filter, f"experiment:{views.quote(experiment)}" if experiment else None
    )
    fields = ("run_id", "sample_counts", "metrics_ci", metric.path)
    found = views.runs(store, scope, sort=[metric.path], limit=None, fields=fields)  # best first
    with_samples = [r for r in found if _has_samples(r, where)]
    if not with_samples:
        return []
    query = GroupQuery(
        tuple(str(r["run_id"]) for r in with_samples),
        where,
        "sample_id",
        "",
        per_run=False,
        order="wrong",
        limit=limit,
    )
    candidates = [
        Aggregate("mean", (c,)) for c in candidate_columns(with_samples[0], where, metric, column)
    ]
    groups = [g for g in _first_answer(store, query, candidates)[1] if g.wrong]
    uris = _outputs(store, str(with_samples[0]["run_id"]), where, [g.key for g in groups])
    return [
        {
            "sample_id": g.key,
            "runs": g.n,
            "wrong": g.wrong,
            "error_rate": g.wrong / g.n,
            "output_uri": uris.get(str(g.key)),
        }
        for g in groups
    ]


def _first_answer(
    store: Store, query: GroupQuery, candidates: Sequence[Aggregate]
) -> tuple[Aggregate, list[Group]]:
    """The groups of the first candidate the runs have (an absent column answers nothing,
    on every store), with each group's score (``total``/``n`` as the aggregate's ratio)."""
    for aggregate in candidates:
        groups = _scores(store, query, aggregate)
        if groups:
            return aggregate, groups
    wanted = " or ".join(a.text for a in candidates) or "the metric"
    raise ConfigurationError(
        f"no per-sample values for {wanted} in these runs' samples; name a column with "
        "--column COLUMN (a 0/1 column such as correct) or a formula such as "
        "'sum(matches)/sum(length)'"
    )


def _scores(store: Store, query: GroupQuery, aggregate: Aggregate) -> list[Group]:
    """Groups whose ``mean`` is the aggregate's value in the group: a plain mean's groups as
    the store counts them; a ratio's numerator sums over its denominator's (``n`` rows)."""
    first = store.group_samples(replace(query, column=aggregate.columns[0]))
    if aggregate.kind == "mean":
        if aggregate.scale == 1.0:
            return first
        return [replace(g, total=aggregate.scale * g.total) for g in first]
    second = {
        (g.run_id, _hashable(g.key)): g
        for g in store.group_samples(replace(query, column=aggregate.columns[1]))
    }
    found = []
    for g in first:
        den = second.get((g.run_id, _hashable(g.key)))
        if den is None or den.total == 0:
            continue
        # mean = total / n must be sum(num) / sum(den): keep n, scale the total
        found.append(replace(g, total=aggregate.scale * g.total / den.total * g.n, wrong=0))
    return found


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def _has_samples(run: dict[str, Any], split: str) -> bool:
    return bool((run.get("sample_counts") or {}).get(split))


def _binary(group: Group) -> bool:
    return group.total + group.wrong == group.n and float(group.total).is_integer()


def _shown_key(key: Any, top: float | None) -> Any:
    """A bin as ``[low, high)``, the last one (ending at ``top``) closed: ``[low, high]``."""
    if isinstance(key, tuple):
        return f"[{key[0]:.6g}, {key[1]:.6g}{']' if key[1] == top else ')'}"
    return key


def _outputs(store: Store, run_id: str, split: str, ids: Sequence[Any]) -> dict[str, Any]:
    """One run's output URIs of these samples (to look at them)."""
    import pyarrow as pa

    wanted = {str(i) for i in ids}
    table = pa.Table.from_batches(
        list(store.sample_batches(run_id, split, ["sample_id", "output_uri"]))
    )
    if "output_uri" not in table.schema.names:
        return {}
    return {
        s: u
        for s, u in zip(
            table.column("sample_id").to_pylist(),
            table.column("output_uri").to_pylist(),
            strict=True,
        )
        if s in wanted
    }


__all__ = ["HARDEST_COLUMNS", "SLICE_COLUMNS", "chosen_runs", "hardest", "parse_by", "slices"]
