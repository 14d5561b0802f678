"""Where a model fails: the metric per slice of the samples, and the samples most runs get wrong.

Both views read grouped counts (the ``group_samples`` store primitive: an aggregation on
Elasticsearch, an Arrow group-by locally), so a slice of a million samples costs one request.

- :func:`slices`: for each chosen run (by default each experiment's best run), the mean of a
  per-sample column in each slice (a value of a metadata column such as ``label``, or an
  equal-width bin of a numeric one: ``size:bins=5``), with its 95 % interval (exact binomial
  for 0/1 columns; other columns get the mean and ``n`` only, as no store sums squares) and the
  gap to the run's overall mean; the worst slices first.
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
from warehouse.query.evidence import candidate_columns, resolve_run
from warehouse.stores.base import Group, GroupQuery, Store

SLICE_COLUMNS = ("experiment", "run_id", "{by}", "n", "mean", "ci_low", "ci_high", "gap")
HARDEST_COLUMNS = ("sample_id", "runs", "wrong", "error_rate", "output_uri")


def parse_by(spec: str) -> tuple[str, int | None]:
    """``label`` → ``("label", None)``; ``size:bins=5`` → ``("size", 5)``."""
    name, _, option = spec.partition(":")
    if not option:
        return name.strip(), None
    key, _, value = option.partition("=")
    if key.strip() != "bins" or not value.strip().isdigit() or int(value) < 1:
        raise ConfigurationError(
            f"cannot read --by {spec!r}: write a sample column (label) or a numeric one cut "
            "into bins (size:bins=5)"
        )
    return name.strip(), int(value)


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
    """The metric per slice value of each chosen run, the worst slices first."""
    name, bins = parse_by(by)
    where = split or metric.split
    chosen = [r for r in chosen_runs(store, metric, runs, filter) if _has_samples(r, where)]
    if not chosen:
        return []
    query = GroupQuery(tuple(str(r["run_id"]) for r in chosen), where, name, "", bins=bins)
    groups = _first_answer(store, query, candidate_columns(chosen[0], where, metric, column))
    experiment = {str(r["run_id"]): r.get("experiment") for r in chosen}
    overall = _overall(groups)
    top = max((g.key[1] for g in groups if isinstance(g.key, tuple)), default=None)
    rows = []
    for g in groups:
        if g.n < min_n or g.run_id is None:
            continue
        mean = g.mean
        ci = stats.binomial_interval(int(g.total), g.n) if _binary(g) else None
        rows.append(
            {
                "experiment": experiment.get(g.run_id),
                "run_id": g.run_id,
                name: _shown_key(g.key, top),
                "n": g.n,
                "mean": mean,
                "ci_low": None if ci is None else ci.low,
                "ci_high": None if ci is None else ci.high,
                "gap": None if mean is None else mean - overall[g.run_id],
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
    candidates = candidate_columns(with_samples[0], where, metric, column)
    groups = [g for g in _first_answer(store, query, candidates) if g.wrong]
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


def _first_answer(store: Store, query: GroupQuery, columns: Sequence[str]) -> list[Group]:
    """The groups of the first candidate column the runs have (an absent column answers
    nothing, on every store)."""
    for column in columns:
        groups = store.group_samples(replace(query, column=column))
        if groups:
            return groups
    raise ConfigurationError(
        f"no per-sample column {' or '.join(map(repr, columns)) or 'for the metric'} in these "
        "runs' samples; name one with --metric COLUMN (a 0/1 column such as correct)"
    )


def _has_samples(run: dict[str, Any], split: str) -> bool:
    return bool((run.get("sample_counts") or {}).get(split))


def _binary(group: Group) -> bool:
    return group.total + group.wrong == group.n and float(group.total).is_integer()


def _overall(groups: Sequence[Group]) -> dict[str, float]:
    """Each run's mean of the column over all its slices."""
    totals: dict[str, list[float]] = {}
    for g in groups:
        if g.run_id is not None:
            acc = totals.setdefault(g.run_id, [0.0, 0.0])
            acc[0] += g.total
            acc[1] += g.n
    return {run: t / n for run, (t, n) in totals.items() if n}


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
