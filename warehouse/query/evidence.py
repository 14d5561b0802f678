"""Evidence from per-sample results: which samples a change fixed or broke, whether a gap is
real, and the regression gate — the same numbers on every store.

Every answer here is computed from one store primitive, ``sample_batches`` (the stored rows of a
split, a few columns at a time): two runs' columns are joined on ``sample_id`` and compared with
:mod:`warehouse.query.stats`. Only the samples both runs have are compared; the others are
counted.

Which column holds a run-level metric's per-sample values follows one rule
(:func:`warehouse.models.sample_column_for`), and a run that recorded intervals names the
column it used (``metrics_ci.<split>.<metric>.column``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from warehouse.errors import ConfigurationError, NotFound
from warehouse.models import Metric, sample_column_for
from warehouse.query import stats
from warehouse.stores.base import Store

CHANGES = ("fixed", "broke", "changed")
DIFF_COLUMNS = ("sample_id", "a", "b", "change", "a_output_uri", "b_output_uri")


def resolve_run(
    store: Store, spec: str, metric: Metric, filter: str | None = None
) -> dict[str, Any]:
    """A run by id or unique prefix, ``best`` (the best run by ``metric``) or
    ``best:EXPERIMENT`` (that experiment's best run)."""
    from warehouse.query import views

    text = spec.strip()
    if text == "best" or text.startswith("best:"):
        experiment = text.partition(":")[2] or None
        return views.best_run(store, metric.label, metric.direction, filter, experiment)
    return views.get_run(store, text)


def candidate_columns(
    run: dict[str, Any], split: str, metric: Metric, column: str | None
) -> list[str]:
    """The sample columns that may hold ``metric``'s per-sample values, best first: ``column``
    as given, else the one the run's recorded interval used, else the rule's choices (the
    metric's own name, then ``correct`` for accuracy-like names)."""
    if column:
        return [column]
    recorded = (run.get("metrics_ci") or {}).get(split, {}).get(metric.name, {})
    found = [str(recorded["column"])] if recorded.get("column") else []
    for name in (metric.name, "correct"):
        if name not in found and sample_column_for(metric.name, [name]) == name:
            found.append(name)
    return found


def sample_table(
    store: Store, run_id: str, split: str, columns: Sequence[str], with_outputs: bool = False
) -> pa.Table:
    """``sample_id``, the candidate ``columns`` present (and ``output_uri``) of one run's split."""
    wanted = ["sample_id", *columns, *(["output_uri"] if with_outputs else [])]
    table = pa.Table.from_batches(list(store.sample_batches(run_id, split, wanted)))
    if with_outputs and "output_uri" not in table.schema.names:
        table = table.append_column("output_uri", pa.nulls(table.num_rows, pa.string()))
    elif with_outputs and pa.types.is_null(table.schema.field("output_uri").type):
        # a store may answer a column no row has as all-null (Arrow's null type), which
        # Arrow's join refuses: make it the strings it would have held
        index = table.schema.get_field_index("output_uri")
        table = table.set_column(index, "output_uri", pa.nulls(table.num_rows, pa.string()))
    return table.combine_chunks()


def _chosen(tables: Sequence[pa.Table], columns: Sequence[str], runs: Sequence[str]) -> str:
    for name in columns:
        if all(name in t.schema.names for t in tables):
            return name
    have = sorted({n for t in tables for n in t.schema.names} - {"sample_id", "output_uri"})
    raise ConfigurationError(
        f"runs {' and '.join(runs)} have no sample column {' or '.join(map(repr, columns))} in "
        f"common; their columns: {', '.join(have) or 'none'}; choose one with --metric COLUMN"
    )


@dataclass
class Pair:
    """Two runs' values of one sample column on the samples both have."""

    ids: np.ndarray
    a: np.ndarray
    b: np.ndarray
    only_a: int
    only_b: int
    a_uris: list[Any] = field(default_factory=list)
    b_uris: list[Any] = field(default_factory=list)


def pair(
    store: Store,
    run_a: str,
    run_b: str,
    split: str,
    columns: Sequence[str],
    *,
    with_outputs: bool = False,
) -> tuple[str, Pair]:
    """The first of ``columns`` both runs have, and their values joined on ``sample_id``
    (Arrow's hash join: O(samples))."""
    left = sample_table(store, run_a, split, columns, with_outputs)
    right = sample_table(store, run_b, split, columns, with_outputs)
    column = _chosen((left, right), columns, (run_a, run_b))
    keep = ["sample_id", column, *(["output_uri"] if with_outputs else [])]
    left = left.select(keep).rename_columns(
        ["sample_id", "a", *(["a_uri"] if with_outputs else [])]
    )
    right = right.select(keep).rename_columns(
        ["sample_id", "b", *(["b_uri"] if with_outputs else [])]
    )
    joined = left.join(right, keys="sample_id", join_type="inner").sort_by("sample_id")
    shared = joined.num_rows
    return column, Pair(
        ids=np.asarray(joined.column("sample_id").to_pylist(), dtype=object),
        a=_floats(joined.column("a")),
        b=_floats(joined.column("b")),
        only_a=left.num_rows - shared,
        only_b=right.num_rows - shared,
        a_uris=joined.column("a_uri").to_pylist() if with_outputs else [],
        b_uris=joined.column("b_uri").to_pylist() if with_outputs else [],
    )


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    values: np.ndarray = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
    return values


@dataclass
class Diff:
    """What changed between two runs, sample by sample, and whether the change is real."""

    run_a: str
    run_b: str
    split: str
    column: str
    rows: list[dict[str, Any]]
    comparison: stats.Paired | None
    same: int
    only_a: int
    only_b: int

    def counts(self) -> dict[str, int]:
        found = dict.fromkeys(CHANGES, 0)
        for row in self.rows:
            found[row["change"]] += 1
        return {**found, "same": self.same}

    def summary(self) -> str:
        """``fixed 12 · broke 3 · same 982 · b - a = +0.009 [+0.002, +0.016], p = 0.02``."""
        counts = self.counts()
        shown = [n for n in (*CHANGES, "same") if counts[n] or n != "changed"]
        text = " · ".join(f"{name} {counts[name]}" for name in shown)
        c = self.comparison
        if c is not None:
            text += (
                f" · {self.column}: b - a = {c.diff:+.4g} [{c.low:+.4g}, {c.high:+.4g}], "
                f"p = {c.p:.3g}{'' if c.significant else ' (not significant)'}"
            )
        if self.only_a or self.only_b:
            text += f" · only in a: {self.only_a}, only in b: {self.only_b}"
        return text


def diff(
    store: Store,
    run_a: dict[str, Any],
    run_b: dict[str, Any],
    *,
    split: str = "val",
    metric: Metric,
    column: str | None = None,
) -> Diff:
    """The samples whose value of the column differs between the two runs."""
    a_id, b_id = str(run_a["run_id"]), str(run_b["run_id"])
    candidates = candidate_columns(run_a, split, metric, column)
    name, joined = pair(store, a_id, b_id, split, candidates, with_outputs=True)
    both = np.isfinite(joined.a) & np.isfinite(joined.b)
    changed = ~both | (joined.a != joined.b)
    changed &= ~(np.isnan(joined.a) & np.isnan(joined.b))
    binary = stats.is_binary(joined.a[both]) and stats.is_binary(joined.b[both])
    rows = []
    for i in np.flatnonzero(changed):
        a, b = _value(joined.a[i]), _value(joined.b[i])
        rows.append(
            {
                "sample_id": joined.ids[i],
                "a": a,
                "b": b,
                "change": _change(a, b, binary),
                "a_output_uri": joined.a_uris[i],
                "b_output_uri": joined.b_uris[i],
            }
        )
    return Diff(
        a_id,
        b_id,
        split,
        name,
        rows,
        stats.paired(joined.a, joined.b),
        int(both.sum() - np.count_nonzero(changed & both)),
        joined.only_a,
        joined.only_b,
    )


def _value(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def _change(a: float | None, b: float | None, binary: bool) -> str:
    if binary and a is not None and b is not None:
        return "fixed" if b > a else "broke"
    return "changed"


@dataclass
class Check:
    """The regression gate's verdict: exit code, one line, and the evidence."""

    code: int  # 0: not significantly worse; 1: worse
    line: str
    comparison: stats.Paired | None
    broken: list[Any] = field(default_factory=list)


def check(
    store: Store,
    run: dict[str, Any],
    reference: dict[str, Any],
    *,
    metric: Metric,
    split: str | None = None,
    column: str | None = None,
    margin: float = 0.0,
    slice_by: str | None = None,
    min_n: int = 30,
) -> Check:
    """Whether ``run`` is significantly worse than ``reference`` (by more than ``margin``):
    paired on their shared samples when both have per-sample results, else by their scores
    (and then no test is possible, which the line says). With ``slice_by`` (a sample column,
    or ``size:bins=5``), also worse when any slice of at least ``min_n`` shared samples is
    significantly worse than the reference's same slice."""
    verdict = _check_overall(store, run, reference, metric, split, column, margin)
    if slice_by is None or verdict.comparison is None or verdict.code:
        return verdict
    worse = [
        s
        for s in slice_checks(
            store, run, reference, metric, slice_by, split=split, column=column, min_n=min_n
        )
        if s.worse(margin)
    ]
    if not worse:
        return replace(verdict, line=f"{verdict.line}; no slice of >= {min_n} samples is worse")
    shown = "; ".join(s.describe() for s in worse[:3])
    more = f" (+{len(worse) - 3} more)" if len(worse) > 3 else ""
    return replace(verdict, code=1, line=f"worse in {len(worse)} slice(s): {shown}{more}")


@dataclass(frozen=True)
class SliceCheck:
    """One slice's paired comparison: the run against the reference on that slice's samples."""

    column: str
    value: Any
    comparison: stats.Paired
    sign: float

    def worse(self, margin: float) -> bool:
        c = self.comparison
        best_case = c.high if self.sign > 0 else -c.low
        return c.p < stats.SIGNIFICANT and best_case < -margin

    def describe(self) -> str:
        c = self.comparison
        return (
            f"{self.column}={self.value} {self.sign * c.diff:+.4g} "
            f"[{min(self.sign * c.low, self.sign * c.high):+.4g}, "
            f"{max(self.sign * c.low, self.sign * c.high):+.4g}], p = {c.p:.3g}, n = {c.n}"
        )


def slice_checks(
    store: Store,
    run: dict[str, Any],
    reference: dict[str, Any],
    metric: Metric,
    slice_by: str,
    *,
    split: str | None = None,
    column: str | None = None,
    min_n: int = 30,
) -> list[SliceCheck]:
    """Each slice (of at least ``min_n`` shared samples) paired: ``run`` against
    ``reference``, the worst first. Slices are read from the judged run's samples."""
    from warehouse.query.slices import parse_by

    where = split or metric.split
    name, bins = parse_by(slice_by)
    run_id, ref_id = str(run["run_id"]), str(reference["run_id"])
    candidates = candidate_columns(reference, where, metric, column)
    _, joined = pair(store, ref_id, run_id, where, candidates)
    labels = sample_table(store, run_id, where, [name])
    if name not in labels.schema.names:
        raise ConfigurationError(
            f"run {run_id} has no sample column {name!r} to slice by in split {where!r}"
        )
    by_id = dict(
        zip(labels.column("sample_id").to_pylist(), labels.column(name).to_pylist(), strict=True)
    )
    keys = np.asarray([by_id.get(i) for i in joined.ids], dtype=object)
    if bins is not None:
        keys = _binned(keys, bins)
    sign = 1.0 if metric.direction == "max" else -1.0
    found = []
    for value in {k for k in keys if k is not None}:
        mask = keys == value
        if int(mask.sum()) < max(min_n, 1):
            continue
        c = stats.paired(joined.a[mask], joined.b[mask])
        if c is not None and c.n >= max(min_n, 1):
            found.append(SliceCheck(name, value, c, sign))
    found.sort(key=lambda s: (sign * s.comparison.diff, str(s.value)))
    return found


def _binned(values: np.ndarray, bins: int) -> np.ndarray:
    """Numeric values as equal-width bins ``[low, high)`` over their range, as text."""
    numbers = np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    finite = numbers[np.isfinite(numbers)]
    if finite.size == 0:
        return np.asarray([None] * len(values), dtype=object)
    edges = np.linspace(float(finite.min()), float(finite.max()), bins + 1)
    index = np.clip(np.searchsorted(edges, numbers, side="right") - 1, 0, bins - 1)
    return np.asarray(
        [
            None
            if not np.isfinite(x)
            else f"[{edges[i]:.6g}, {edges[i + 1]:.6g}{']' if i == bins - 1 else ')'}"
            for x, i in zip(numbers, index, strict=True)
        ],
        dtype=object,
    )


def _check_overall(
    store: Store,
    run: dict[str, Any],
    reference: dict[str, Any],
    metric: Metric,
    split: str | None,
    column: str | None,
    margin: float,
) -> Check:
    where = split or metric.split
    sign = 1.0 if metric.direction == "max" else -1.0
    names = f"{run['run_id']} against {reference['run_id']}"
    try:
        found = diff(store, reference, run, split=where, metric=metric, column=column)
    except (NotFound, ConfigurationError):
        found = None
    if found is None or found.comparison is None:
        mine, theirs = _score(run, metric), _score(reference, metric)
        if mine is None or theirs is None:
            raise NotFound(
                f"{names}: no {metric.label} on both runs and no per-sample results to compare"
            )
        worse = sign * (mine - theirs) < -margin
        verdict = "worse" if worse else "not worse"
        return Check(
            1 if worse else 0,
            f"{verdict}: {metric.label} {mine:.4g} vs {theirs:.4g} ({names}); no per-sample "
            "results on both runs, so no significance test was possible",
            None,
        )
    c = found.comparison
    change = sign * c.diff  # the observed improvement (negative: worse)
    best_case = c.high if sign > 0 else -c.low  # the most improvement the data allows
    significant = c.p < stats.SIGNIFICANT and best_case < -margin
    worse_rows = [r for r in found.rows if r["a"] is not None and r["b"] is not None]
    worse_rows = [r for r in worse_rows if sign * (r["b"] - r["a"]) < 0]
    worse_rows.sort(key=lambda r: sign * (r["b"] - r["a"]))
    broken = [r["sample_id"] for r in worse_rows]
    detail = (
        f"{found.column} {change:+.4g} [{min(sign * c.low, sign * c.high):+.4g}, "
        f"{best_case:+.4g}], p = {c.p:.3g} over {c.n} shared samples ({names}; "
        f"margin {margin:g})"
    )
    if significant:
        shown = ", ".join(map(str, broken[:10]))
        return Check(1, f"worse: {detail}; broken: {shown}", c, broken)
    return Check(0, f"not significantly worse: {detail}", c, broken)


def _score(run: dict[str, Any], metric: Metric) -> float | None:
    value = (run.get("metrics") or {}).get(metric.split, {}).get(metric.name)
    return float(value) if isinstance(value, int | float) and np.isfinite(value) else None


LEADERBOARD_EVIDENCE = (
    "ci_low",
    "ci_high",
    "n",
    "vs_next_diff",
    "vs_next_ci_low",
    "vs_next_ci_high",
    "vs_next_p",
)


def with_evidence(
    store: Store, rows: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]], metric: Metric
) -> list[dict[str, Any]]:
    """Leaderboard rows with each best run's interval and a paired comparison with the next
    row's best run (``vs_next_*``: next minus this one, on their shared samples). Each run's
    samples are read once, though most runs are compared twice (with the row above and the
    row below), and dropped once its second comparison is done."""
    tables: dict[str, pa.Table | None] = {}
    out = []
    for i, (row, run) in enumerate(zip(rows, runs, strict=True)):
        ci = (run.get("metrics_ci") or {}).get(metric.split, {}).get(metric.name) or {}
        extra: dict[str, Any] = {
            "ci_low": ci.get("low"),
            "ci_high": ci.get("high"),
            "n": ci.get("n"),
            **dict.fromkeys(LEADERBOARD_EVIDENCE[3:]),
        }
        if i + 1 < len(runs):
            compared = _compare(store, run, runs[i + 1], metric, tables)
            tables.pop(str(run["run_id"]), None)  # done with: at most two tables held
            if compared is not None:
                extra.update(
                    vs_next_diff=compared.diff,
                    vs_next_ci_low=compared.low,
                    vs_next_ci_high=compared.high,
                    vs_next_p=compared.p,
                )
        out.append({**row, **extra})
    return out


def _compare(
    store: Store,
    run: dict[str, Any],
    other: dict[str, Any],
    metric: Metric,
    tables: dict[str, pa.Table | None],
) -> stats.Paired | None:
    counts = (run.get("sample_counts") or {}, other.get("sample_counts") or {})
    if not all(counts[k].get(metric.split) for k in (0, 1)):
        return None
    candidates = candidate_columns(run, metric.split, metric, None)

    def table(run_id: str) -> pa.Table | None:
        if run_id not in tables:
            try:
                tables[run_id] = sample_table(store, run_id, metric.split, candidates)
            except NotFound:
                tables[run_id] = None
        return tables[run_id]

    left, right = table(str(run["run_id"])), table(str(other["run_id"]))
    if left is None or right is None:
        return None
    try:
        column = _chosen((left, right), candidates, (str(run["run_id"]), str(other["run_id"])))
    except ConfigurationError:
        return None
    if left.num_rows == right.num_rows and left.column("sample_id").equals(
        right.column("sample_id")
    ):  # the same samples in the same order (the usual case): no join needed
        return stats.paired(_floats(left.column(column)), _floats(right.column(column)))
    joined = (
        left.select(["sample_id", column])
        .rename_columns(["sample_id", "a"])
        .join(
            right.select(["sample_id", column]).rename_columns(["sample_id", "b"]),
            keys="sample_id",
            join_type="inner",
        )
    )
    return stats.paired(_floats(joined.column("a")), _floats(joined.column("b")))


__all__ = [
    "DIFF_COLUMNS",
    "LEADERBOARD_EVIDENCE",
    "Check",
    "Diff",
    "Pair",
    "check",
    "diff",
    "pair",
    "resolve_run",
    "with_evidence",
]
