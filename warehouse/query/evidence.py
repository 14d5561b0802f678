"""Evidence from per-sample results: which samples a change fixed or broke, and whether a gap
is real: the same numbers on every store.

Every answer here is computed from one store primitive, ``sample_batches`` (the stored rows of a
split, a few columns at a time): two runs' columns are joined on ``sample_id`` and compared
with :mod:`warehouse.query.stats`. What is compared is the metric's *aggregate*
(:mod:`warehouse.query.aggregates`): the one the user names (``--column``, a column or a
formula), else the one the run recorded (``metrics_ci.<split>.<metric>.aggregate``), else
the mean of the column the naming rule finds. An aggregate the user did not name must
reproduce each run's logged score (:func:`describes`); where it does not, no test is run and
the reason says why (a corpus metric without its declaration, a percentage, samples of another
set). With a cluster column (``--cluster``, or the one the run declared), the tests treat each
cluster as one unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from warehouse.errors import ConfigurationError, NotFound
from warehouse.models import Metric, sample_column_for
from warehouse.query import aggregates, stats
from warehouse.query.aggregates import Aggregate
from warehouse.stores.base import Store

CHANGES = ("fixed", "broke", "changed")
PAIRED_SHARE = 0.5
"""Two runs are compared sample by sample when the samples they share are at least this share
of the smaller run's (else as two independent sets of samples)."""
DIFF_COLUMNS = ("sample_id", "a", "b", "change", "a_output_uri", "b_output_uri")


def resolve_run(
    store: Store, spec: str, metric: Metric, filter: str | None = None
) -> dict[str, Any]:
    """A run by id or unique prefix, ``best`` (the best run by ``metric``) or
    ``best:EXPERIMENT`` (that experiment's best run)."""
    from warehouse.query.bests import best_run
    from warehouse.query.lookup import get_run

    text = spec.strip()
    if text == "best" or text.startswith("best:"):
        experiment = text.partition(":")[2] or None
        return best_run(store, metric.label, metric.direction, filter, experiment)
    return get_run(store, text)


def recorded(run: dict[str, Any], split: str, metric: Metric) -> dict[str, Any]:
    """What the run recorded about ``metric``'s samples (``metrics_ci.<split>.<name>``)."""
    found: dict[str, Any] = (run.get("metrics_ci") or {}).get(split, {}).get(metric.name) or {}
    return found


def candidate_columns(
    run: dict[str, Any], split: str, metric: Metric, column: str | None
) -> list[str]:
    """The sample columns that may hold ``metric``'s per-sample values, best first: ``column``
    as given, else the one the run's recorded interval used, else the rule's choices (the
    metric's own name, then ``correct`` for accuracy-like names)."""
    if column:
        return [column]
    entry = recorded(run, split, metric)
    found = [str(entry["column"])] if entry.get("column") else []
    for name in (metric.name, "correct"):
        if name not in found and sample_column_for(metric.name, [name]) == name:
            found.append(name)
    return found


def candidate_aggregates(
    runs: Sequence[dict[str, Any]], split: str, metric: Metric, column: str | None
) -> list[Aggregate]:
    """What may be compared, best first: ``column`` as given (a column or a formula), else
    the aggregate a run recorded, else the mean of each rule column."""
    if column:
        return [aggregates.of(column)]
    for run in runs:
        text = recorded(run, split, metric).get("aggregate")
        if text:
            return [aggregates.of(str(text))]
    return [Aggregate("mean", (c,)) for c in candidate_columns(runs[0], split, metric, None)]


def disagreement(
    runs: Sequence[dict[str, Any]], split: str, metric: Metric, column: str | None
) -> str | None:
    """Why the runs' scores cannot be compared on one aggregate (None when they can): they
    recorded different ones (a percentage beside a fraction, a corpus ratio beside a mean),
    and none was named with ``--column``."""
    if column:
        return None
    found = {str(r["run_id"]): recorded(r, split, metric).get("aggregate") for r in runs}
    if len({a for a in found.values() if a}) < 2:
        return None
    shown = "; ".join(f"run {run_id}: {a}" for run_id, a in found.items())
    return (
        f"the runs compute {metric.name} differently ({shown}), so their scores are not on "
        "one scale; compare them on one aggregate with --column (e.g. mean(correct))"
    )


def cluster_of(
    runs: Sequence[dict[str, Any]], split: str, metric: Metric, cluster: str | None
) -> str | None:
    """The cluster column: ``cluster`` as given, else the one a run declared."""
    if cluster:
        return cluster
    for run in runs:
        declared = recorded(run, split, metric).get("cluster")
        if declared:
            return str(declared)
    return None


@dataclass
class Samples:
    """One run's samples of a split: ids, numeric columns, clusters and other columns."""

    run_id: str
    ids: np.ndarray
    values: dict[str, np.ndarray]
    clusters: np.ndarray | None = None
    other: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.ids.size)

    def has(self, aggregate: Aggregate) -> bool:
        return all(c in self.values for c in aggregate.columns)

    def take(self, index: np.ndarray) -> Samples:
        return Samples(
            self.run_id,
            self.ids[index],
            {k: v[index] for k, v in self.values.items()},
            None if self.clusters is None else self.clusters[index],
            {k: [v[i] for i in index] for k, v in self.other.items()},
        )


def sample_table(
    store: Store, run_id: str, split: str, columns: Sequence[str], with_outputs: bool = False
) -> pa.Table:
    """``sample_id``, the ``columns`` present (and ``output_uri``) of one run's split."""
    wanted = list(dict.fromkeys(["sample_id", *columns, *(["output_uri"] if with_outputs else [])]))
    table = pa.Table.from_batches(list(store.sample_batches(run_id, split, wanted)))
    if with_outputs and "output_uri" not in table.schema.names:
        table = table.append_column("output_uri", pa.nulls(table.num_rows, pa.string()))
    return table.combine_chunks()


def load(
    store: Store,
    run_id: str,
    split: str,
    columns: Iterable[str],
    *,
    cluster: str | None = None,
    other: Sequence[str] = (),
    lenient: bool = False,
) -> Samples:
    """One run's samples: the numeric ``columns`` present as float arrays, the ``cluster``
    column, and ``other`` columns as lists. ``NotFound`` when the run has no such split; a
    missing cluster column is an error, or (``lenient``) no clusters."""
    wanted = [*columns, *([cluster] if cluster else []), *other]
    table = sample_table(store, run_id, split, wanted)
    names = table.schema.names
    values = {}
    for name in dict.fromkeys(columns):
        if name in names and _numeric(table.schema.field(name).type):
            values[name] = _floats(table.column(name))
    clusters = None
    if cluster and (cluster in names or not lenient):
        if cluster not in names:
            raise ConfigurationError(
                f"run {run_id} has no sample column {cluster!r} to cluster by in split "
                f"{split!r}; its columns: {', '.join(n for n in names if n != 'sample_id')}"
            )
        clusters = np.asarray(table.column(cluster).cast(pa.string()).to_pylist(), dtype=object)
    return Samples(
        run_id,
        np.asarray(table.column("sample_id").to_pylist(), dtype=object),
        values,
        clusters,
        {
            name: table.column(name).to_pylist() if name in names else [None] * table.num_rows
            for name in other
        },
    )


def _numeric(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_floating(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_null(kind)
    )


def _floats(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    values: np.ndarray = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
    return values


def choose(samples: Sequence[Samples], candidates: Sequence[Aggregate]) -> Aggregate:
    """The first candidate every run's samples can compute (``ConfigurationError`` when
    none can: the columns it lists are the numeric ones read for the candidates)."""
    for aggregate in candidates:
        if all(s.has(aggregate) for s in samples):
            return aggregate
    wanted = " or ".join(a.text for a in candidates)
    runs = " and ".join(s.run_id for s in samples)
    raise ConfigurationError(
        f"runs {runs} have no numeric per-sample columns for {wanted} in common; choose one "
        f"with --column COLUMN (or a formula: {aggregates.EXAMPLES})"
    )


def describes(
    run: dict[str, Any], samples: Samples, metric: Metric, split: str, aggregate: Aggregate
) -> str | None:
    """None when ``aggregate`` over the run's samples is its logged score (or it logged no
    score to describe); else why not."""
    logged = (run.get("metrics") or {}).get(split, {}).get(metric.name)
    if not isinstance(logged, int | float) or not np.isfinite(logged):
        return None
    found = aggregate.interval(samples.values, samples.clusters)
    if found is None or aggregates.reproduces(float(logged), found):
        return None
    from warehouse.output import RUN_ID_WIDTH  # the prefix every table shows, in a cell too

    return f"run {samples.run_id[:RUN_ID_WIDTH]}: " + aggregates.mismatch(
        metric.name, float(logged), aggregate, found
    )


@dataclass
class Pair:
    """Two runs' samples joined on ``sample_id`` (row ``i`` of both is one sample), how many
    samples only one of them has, and all of each run's samples (for an unpaired test)."""

    a: Samples
    b: Samples
    only_a: int = 0
    only_b: int = 0
    all_a: Samples | None = None
    all_b: Samples | None = None

    @property
    def paired(self) -> bool:
        """Whether the shared samples are enough to compare the runs on them
        (:data:`PAIRED_SHARE`)."""
        return self.n >= 2 and self.n >= PAIRED_SHARE * min(
            self.n + self.only_a, self.n + self.only_b
        )

    @property
    def ids(self) -> np.ndarray:
        return self.a.ids

    @property
    def n(self) -> int:
        return self.a.n

    @property
    def clusters(self) -> np.ndarray | None:
        """The shared samples' clusters, from whichever run has them (a sample's passage is
        the sample's, not a run's)."""
        return self.a.clusters if self.a.clusters is not None else self.b.clusters


def join(a: Samples, b: Samples) -> Pair:
    """The shared samples, by sample id (Arrow's hash join: O(samples)), in id order."""
    left = pa.table({"sample_id": pa.array(a.ids.tolist()), "ia": np.arange(a.n)})
    right = pa.table({"sample_id": pa.array(b.ids.tolist()), "ib": np.arange(b.n)})
    if left.schema.field("sample_id").type != right.schema.field("sample_id").type:
        left = left.set_column(0, "sample_id", left.column(0).cast(pa.string()))
        right = right.set_column(0, "sample_id", right.column(0).cast(pa.string()))
    joined = left.join(right, keys="sample_id", join_type="inner").sort_by("sample_id")
    ia = joined.column("ia").to_numpy()
    ib = joined.column("ib").to_numpy()
    shared = int(ia.size)
    return Pair(a.take(ia), b.take(ib), a.n - shared, b.n - shared, a, b)


def compare(joined: Pair, chosen: Aggregate) -> stats.Comparison | str | None:
    """B against A on their aggregate: paired on the shared samples when there are enough
    (:attr:`Pair.paired`), else unpaired; None with too few values, or why no test fits."""
    if joined.paired:
        return chosen.paired(joined.a.values, joined.b.values, clusters=joined.clusters)
    a, b = joined.all_a, joined.all_b
    if a is None or b is None:
        return None
    if (a.clusters is None) != (b.clusters is None):
        has, lacks = (a, b) if a.clusters is not None else (b, a)
        return (
            f"the runs share too few samples ({joined.n:,}) to be compared sample by sample, "
            f"and only run {has.run_id}'s samples say how they are clustered, while run "
            f"{lacks.run_id}'s may be clustered too: log the cluster column with both runs' "
            "samples"
        )
    return chosen.unpaired(a.values, b.values, a.clusters, b.clusters)


@dataclass
class Diff:
    """What changed between two runs, sample by sample, and whether the change is real."""

    run_a: str
    run_b: str
    split: str
    column: str
    rows: list[dict[str, Any]]
    comparison: stats.Comparison | None
    same: int
    only_a: int
    only_b: int
    refused: str | None = None  # why no test was run
    picked: int = 1  # the candidates the two runs were picked from ("best" specs)

    def counts(self) -> dict[str, int]:
        found = dict.fromkeys(CHANGES, 0)
        for row in self.rows:
            found[row["change"]] += 1
        return {**found, "same": self.same}

    def summary(self) -> str:
        """``fixed 12 · broke 3 · same 982 · correct: b - a = +0.009 [+0.002, +0.016],
        p = 0.02``."""
        counts = self.counts()
        shown = [n for n in (*CHANGES, "same") if counts[n] or n != "changed"]
        text = " · ".join(f"{name} {counts[name]}" for name in shown)
        c = self.comparison
        if c is not None:
            text += f" · {self.column}: b - a = {describe(c)}"
            if self.picked > 1:
                text += (
                    f" · a best run is picked on these samples: tested as a pick of "
                    f"{self.picked} (Bonferroni, p x {self.picked})"
                )
        elif self.refused:
            text += f" · no test: {self.refused}"
        if self.only_a or self.only_b:
            text += f" · only in a: {self.only_a}, only in b: {self.only_b}"
        return text


def describe(c: stats.Comparison, level: float | None = None) -> str:
    """``+0.009 [+0.002, +0.016], p = 0.02 (McNemar; detects >= 0.011)``."""
    low, high = c.bounds(level)
    significant = c.p_at(0.0) < 1 - (level or c.level)
    text = f"{c.diff:+.4g} [{low:+.4g}, {high:+.4g}], p = {c.p:.3g}"
    if not significant:
        text += " (not significant)"
    return text + f" ({power_note(c)})"


def power_note(c: stats.Comparison) -> str:
    """Which test, on how much, and the smallest gap it detects (80 % power)."""
    units = f"{c.n:,} shared samples" if c.design == "paired" else f"{c.n:,} and {c.n_b:,}"
    if c.design == "unpaired":
        units += " samples, unpaired (too few shared)"
    elif c.design == "seeds":
        units += " seeds"
    if c.clusters:
        units += f" in {c.clusters:,} clusters"
    mde = c.mde(1 - c.level)
    power = "too few to tell any gap" if mde is None else f"detects ±{mde:.2g} at 80 % power"
    return f"{c.test} over {units}; {power}"


def diff(
    store: Store,
    run_a: dict[str, Any],
    run_b: dict[str, Any],
    *,
    split: str = "val",
    metric: Metric,
    column: str | None = None,
    cluster: str | None = None,
    picked: int = 1,
) -> Diff:
    """The samples whose value of the compared column differs between the two runs (for a
    corpus metric, its first column), and the paired test of the metric itself; ``picked``:
    the runs were picked as the best of that many pairs (``best`` specs: the test is
    corrected for the pick, :func:`warehouse.query.stats.selected`)."""
    runs = (run_a, run_b)
    candidates = candidate_aggregates(runs, split, metric, column)
    grouped = cluster_of(runs, split, metric, cluster)
    needed = [c for a in candidates for c in a.columns]
    a, b = (
        load(store, str(r["run_id"]), split, needed, cluster=grouped, other=("output_uri",))
        for r in runs
    )
    chosen = choose((a, b), candidates)
    refused = disagreement(runs, split, metric, column) or (
        None
        if column
        else (
            describes(run_a, a, metric, split, chosen) or describes(run_b, b, metric, split, chosen)
        )
    )
    joined = join(a, b)
    first = chosen.columns[0]
    va, vb = joined.a.values[first], joined.b.values[first]
    both = np.isfinite(va) & np.isfinite(vb)
    changed = ~both | (va != vb)
    changed &= ~(np.isnan(va) & np.isnan(vb))
    binary = stats.is_binary(va[both]) and stats.is_binary(vb[both])
    rows = []
    for i in np.flatnonzero(changed):
        x, y = _value(va[i]), _value(vb[i])
        rows.append(
            {
                "sample_id": joined.ids[i],
                "a": x,
                "b": y,
                "change": _change(x, y, binary),
                "a_output_uri": joined.a.other["output_uri"][i],
                "b_output_uri": joined.b.other["output_uri"][i],
            }
        )
    comparison = (
        None
        if refused
        else chosen.paired(joined.a.values, joined.b.values, clusters=joined.clusters)
    )
    if comparison is not None:
        comparison = stats.selected(comparison, picked)
    return Diff(
        a.run_id,
        b.run_id,
        split,
        chosen.label,
        rows,
        comparison,
        int(both.sum() - np.count_nonzero(changed & both)),
        joined.only_a,
        joined.only_b,
        refused,
        picked,
    )


def _value(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def _change(a: float | None, b: float | None, binary: bool) -> str:
    if binary and a is not None and b is not None:
        return "fixed" if b > a else "broke"
    return "changed"


def score(run: dict[str, Any], metric: Metric) -> float | None:
    """The run's logged value of ``metric`` (None when it has none, or not a finite one)."""
    value = (run.get("metrics") or {}).get(metric.split, {}).get(metric.name)
    return float(value) if isinstance(value, int | float) and np.isfinite(value) else None


def has_samples(run: dict[str, Any], split: str) -> bool:
    return bool((run.get("sample_counts") or {}).get(split))


def try_load(
    store: Store,
    run: dict[str, Any],
    split: str,
    columns: Iterable[str],
    *,
    cluster: str | None = None,
    other: Sequence[str] = (),
    lenient: bool = False,
) -> Samples | None:
    """:func:`load`, or None when the run recorded no samples of the split."""
    if not has_samples(run, split):
        return None
    try:
        return load(
            store, str(run["run_id"]), split, columns, cluster=cluster, other=other, lenient=lenient
        )
    except NotFound:
        return None


__all__ = [
    "CHANGES",
    "DIFF_COLUMNS",
    "PAIRED_SHARE",
    "Diff",
    "Pair",
    "Samples",
    "candidate_aggregates",
    "candidate_columns",
    "choose",
    "cluster_of",
    "compare",
    "describe",
    "describes",
    "diff",
    "disagreement",
    "has_samples",
    "join",
    "load",
    "power_note",
    "resolve_run",
    "sample_table",
    "score",
    "try_load",
]
