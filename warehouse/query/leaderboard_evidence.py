"""The leaderboard's evidence: each best run's interval, and whether its lead over the next row
is real, with the smallest lead the samples could have shown.

Which questions these answer, and what they assume:

- ``ci_low``/``ci_high``: the best run's recorded 95 % interval (what Kibana and the report
  draw): where its true score lies (its expected score on samples like these), had it been
  chosen in advance.
- ``best_of_low``/``best_of_high``: a row is the best of ``run_count`` runs, picked on these
  very samples, so its score is optimistic; this interval is widened for that (Bonferroni:
  level 1 - 0.05/K) and covers the picked run's true score at least 95 % of the time however
  the K runs compare.
- ``vs_next_*``: this row's best run against the next row's, on the samples both have
  (paired; unpaired when they share less than half): ``vs_next_diff`` is the **next row's
  score minus this row's**, so it is <= 0 for a higher-is-better metric when this row leads.
  ``vs_next_p`` tests the two *runs* (artifacts), not the experiments: compare setups across
  seeds with ``--by-group``, or re-evaluate both runs on new samples. This row's run was
  picked as the best of ``run_count`` on these samples, so its lead is tested as such a pick
  (Bonferroni: ``vs_next_p`` is ``run_count`` times the plain p-value, the interval and
  ``vs_next_mde`` at level ``0.05/run_count``); tested as if chosen in advance, the best of
  20 equal runs led one equal run "significantly" 17 % of the time.
- ``vs_next_mde``: the smallest true gap this comparison detects with 80 % power; a lead
  below it marked ``≈`` means "too few samples to tell", not "equal".
- ``no_evidence``: why a row has none (no samples, or samples that do not reproduce its
  logged score: :mod:`warehouse.query.aggregates`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from warehouse.errors import ConfigurationError

if TYPE_CHECKING:  # numpy and pyarrow load with the evidence, not with the column names
    from warehouse.models import Metric
    from warehouse.query import stats
    from warehouse.query.aggregates import Aggregate
    from warehouse.query.evidence import Samples
    from warehouse.stores.base import Store

LEADERBOARD_EVIDENCE = (
    "ci_low",
    "ci_high",
    "n",
    "best_of_low",
    "best_of_high",
    "vs_next_diff",
    "vs_next_ci_low",
    "vs_next_ci_high",
    "vs_next_p",
    "vs_next_mde",
    "no_evidence",
)
SAME = "≈"
"""Marks a leaderboard row whose lead over the next row is not significant."""
SIGNIFICANT = 0.05  # warehouse.query.stats.SIGNIFICANT, without loading numpy for the marks


class _Loaded:
    """One run's samples and the aggregate they were chosen for (or why there is none)."""

    def __init__(
        self, samples: Samples | None, aggregate: Aggregate | None, refused: str | None
    ) -> None:
        self.samples = samples
        self.aggregate = aggregate
        self.refused = refused


def with_evidence(
    store: Store, rows: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]], metric: Metric
) -> list[dict[str, Any]]:
    """Leaderboard rows with each best run's interval and a comparison with the next row's
    best run. Each run's samples are read once and dropped after its second comparison, so
    at most two runs' samples are held."""
    from warehouse.query import stats

    cache: dict[str, _Loaded] = {}
    out = []
    for i, (row, run) in enumerate(zip(rows, runs, strict=True)):
        here = _load(store, run, metric, cache)
        extra: dict[str, Any] = dict.fromkeys(LEADERBOARD_EVIDENCE)
        extra["no_evidence"] = here.refused
        recorded = (run.get("metrics_ci") or {}).get(metric.split, {}).get(metric.name) or {}
        if recorded.get("low") is not None and (here.samples is None or not here.refused):
            # the interval the run recorded (what Kibana and the report draw), unless its
            # samples show that it does not describe the score (recorded by an older version)
            extra.update(ci_low=recorded["low"], ci_high=recorded["high"], n=recorded.get("n"))
        if here.samples is not None and here.aggregate is not None and not here.refused:
            picked = max(1, int(row.get("run_count") or 1))
            ci = here.aggregate.interval(
                here.samples.values, here.samples.clusters, level=1 - stats.SIGNIFICANT / picked
            )
            if ci is not None:
                extra.update(best_of_low=ci.low, best_of_high=ci.high, n=ci.n)
        if i + 1 < len(runs):
            compared = _compare(store, run, runs[i + 1], metric, cache)
            cache.pop(str(run["run_id"]), None)  # done with: at most two runs held
            if compared is not None:
                # this row leads, and its run is its experiment's best of run_count on these
                # samples: its lead is tested as such a pick (the next row's pick only
                # shrinks the lead)
                compared = stats.selected(compared, max(1, int(row.get("run_count") or 1)))
                extra.update(
                    vs_next_diff=compared.diff,
                    vs_next_ci_low=compared.low,
                    vs_next_ci_high=compared.high,
                    vs_next_p=compared.p,
                    vs_next_mde=compared.mde(),
                )
        out.append({**row, **extra})
    return out


def _load(store: Store, run: dict[str, Any], metric: Metric, cache: dict[str, _Loaded]) -> _Loaded:
    from warehouse.query import evidence

    run_id = str(run["run_id"])
    if run_id in cache:
        return cache[run_id]
    split = metric.split
    candidates = evidence.candidate_aggregates([run], split, metric, None)
    grouped = evidence.cluster_of([run], split, metric, None)
    needed = [c for a in candidates for c in a.columns]
    try:
        samples = evidence.try_load(store, run, split, needed, cluster=grouped)
    except ConfigurationError as exc:  # a declared cluster column that is not there
        cache[run_id] = _Loaded(None, None, str(exc))
        return cache[run_id]
    if samples is None:
        cache[run_id] = _Loaded(None, None, f"no per-sample results of {split!r}")
        return cache[run_id]
    chosen = next((a for a in candidates if samples.has(a)), None)
    if chosen is None:
        wanted = " or ".join(a.text for a in candidates) or "the metric"
        cache[run_id] = _Loaded(samples, None, f"no sample column for {wanted}")
        return cache[run_id]
    refused = evidence.describes(run, samples, metric, split, chosen)
    cache[run_id] = _Loaded(samples, chosen, refused)
    return cache[run_id]


def _compare(
    store: Store,
    run: dict[str, Any],
    other: dict[str, Any],
    metric: Metric,
    cache: dict[str, _Loaded],
) -> stats.Comparison | None:
    """The next run (``other``) against this one: next minus this."""
    from warehouse.query import evidence

    this, that = _load(store, run, metric, cache), _load(store, other, metric, cache)
    if this.refused or that.refused or this.samples is None or that.samples is None:
        return None
    if this.aggregate is None or this.aggregate != that.aggregate:
        return None  # two runs whose scores are computed differently: no common test
    found = evidence.compare(evidence.join(this.samples, that.samples), this.aggregate)
    return None if isinstance(found, str) else found


def mark(row: dict[str, Any]) -> str:
    """``≈ ±0.013`` for a row whose lead is not significant (the smallest gap its samples
    detect with 80 % power), else empty."""
    p = row.get("vs_next_p")
    if not isinstance(p, float) or p < SIGNIFICANT:
        return ""
    mde = row.get("vs_next_mde")
    return f"{SAME} ±{mde:.2g}" if isinstance(mde, float) else SAME


def marked(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows with a ``≈`` column after the score when some lead is not significant, and the
    caption lines that say what the marks and the intervals mean."""
    notes = []
    if any(int(r.get("run_count") or 1) > 1 and r.get("best_of_low") is not None for r in rows):
        notes.append(
            "each row is its experiment's best of run_count runs, picked on these samples: "
            "its score is optimistic (best_of_low/high widen its interval for the pick, and "
            "vs_next tests its lead as that pick); compare setups across seeds with "
            "--by-group, or evaluate the runs on new samples"
        )
    if not any(mark(r) for r in rows):
        return rows, notes
    out = []
    for row in rows:
        items = list(row.items())
        at = next(
            (i + 1 for i, (k, _) in enumerate(items) if k in ("best_score", "mean")), len(items)
        )
        out.append(dict([*items[:at], (SAME, mark(row)), *items[at:]]))
    test = (
        "Welch's t of the two groups' seeds: is the setup better?"
        if any("group" in r for r in rows)
        else "a test of the two runs on the samples both have"
    )
    notes.insert(
        0,
        f"{SAME} ±d: not significantly better than the next row ({test}; vs_next_p ≥ 0.05): "
        "the ranking may be luck; d is the smallest gap the test detects with 80 % power",
    )
    return out, notes


__all__ = ["LEADERBOARD_EVIDENCE", "SAME", "mark", "marked", "with_evidence"]
