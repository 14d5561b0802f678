"""The regression gate (``warehouse check``): is a run worse than its reference, with the test
that fits the question and the data, and a false-alarm rate that stays at most 5 %.

Which question, which test:

- **Is the setup worse?** (the default where seeds exist): runs of one experiment, config
  and commit that differ only in their seed are one *setup*. When the reference's setup has
  two seeds or more, its seeds' scores are compared with the run's setup's (Welch's t over
  seeds), or with the run's one score (a t prediction interval). Two seeds of one setup are
  never "worse" than each other: their gap is seed noise (Bouthillier et al. 2021).
- **Is this run worse than that run on these samples?** (else, or ``seeds=False``): paired on
  the samples both have (when they share at least half of the smaller run's samples), else
  unpaired (two proportions, or Welch's t), on the metric's aggregate, clustered where a
  cluster column is given or declared (Dror et al. 2018 for the choice of test).

"Worse" means: the test of "worse by exactly ``margin``" rejects at the gate's level, in the
worse direction (so a run is never failed for a drop that was not tested). The level is 5 %,
divided by the number of runs the reference was picked from when it is ``best`` (the best of
K runs is optimistic: Bonferroni keeps equal runs passing), and with ``--slice`` the overall
test and every slice's form one family, corrected by Holm. No samples, or samples that do
not describe the logged scores, give exit code :data:`INCONCLUSIVE`, never 1.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from warehouse.errors import ConfigurationError
from warehouse.models import Metric
from warehouse.query import evidence, setups, stats
from warehouse.query.aggregates import Aggregate
from warehouse.query.evidence import PAIRED_SHARE as PAIRED_SHARE
from warehouse.stores.base import Store

WORSE = 1
INCONCLUSIVE = 6
"""The exit code when no test was possible (no samples, or samples of another score)."""


@dataclass
class Check:
    """The gate's verdict: exit code (0 not worse, 1 worse, 6 inconclusive), one line, and
    the evidence (``question``: ``setup``, ``run`` or ``none``)."""

    code: int
    line: str
    comparison: stats.Comparison | None
    broken: list[Any] = field(default_factory=list)
    question: str = "run"


@dataclass(frozen=True)
class SliceCheck:
    """One slice's comparison: the run against the reference on that slice's samples."""

    column: str
    value: Any
    comparison: stats.Comparison
    sign: float
    adjusted: float | None = None  # Holm-adjusted p in the gate's family

    def p_worse(self, margin: float) -> float:
        return p_worse(self.comparison, self.sign, margin)

    def worse(self, margin: float, alpha: float = stats.SIGNIFICANT) -> bool:
        p = self.adjusted if self.adjusted is not None else self.p_worse(margin)
        return p < alpha

    def describe(self) -> str:
        c = self.comparison
        low, high = sorted(self.sign * x for x in c.bounds())
        p = f"p = {c.p:.3g}" + ("" if self.adjusted is None else f", Holm {self.adjusted:.3g}")
        change = f"{self.sign * c.diff:+.4g} [{low:+.4g}, {high:+.4g}]"
        return f"{self.column}={self.value} {change}, {p}, n = {c.n}"


def p_worse(c: stats.Comparison, sign: float, margin: float) -> float:
    """The p-value of "the run is worse by exactly ``margin``" (:meth:`Comparison.p_worse`)."""
    return c.p_worse(sign, margin)


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
    cluster: str | None = None,
    selected: int = 1,
    seeds: bool = True,
    seed_keys: Collection[str] = ("seed", "*_seed"),
) -> Check:
    """Whether ``run`` is significantly worse than ``reference`` (by more than ``margin``).
    ``selected``: how many runs the reference was picked from as the best (1: named)."""
    alpha = stats.SIGNIFICANT / max(1, selected)
    names = f"{run['run_id']} against {reference['run_id']}"
    picked = (
        f"; the reference is the best of {selected} runs, so tested at 0.05/{selected}"
        if selected > 1
        else ""
    )
    runs = _run_check(
        store, run, reference, metric, split, column, margin, slice_by, min_n, cluster, alpha
    )
    runs = replace(runs, line=f"{runs.line} ({names}; margin {margin:g}{picked})")
    if not seeds:
        return runs
    setup = setups.setup_check(store, run, reference, metric, margin, alpha, seed_keys)
    if setup is None:
        return runs
    return Check(
        WORSE if setup.worse else 0,
        f"{setup.line}; the runs themselves: {runs.line}",
        setup.comparison,
        runs.broken,
        question="setup",
    )


def _run_check(
    store: Store,
    run: dict[str, Any],
    reference: dict[str, Any],
    metric: Metric,
    split: str | None,
    column: str | None,
    margin: float,
    slice_by: str | None,
    min_n: int,
    cluster: str | None,
    alpha: float,
) -> Check:
    where = split or metric.split
    sign = 1.0 if metric.direction == "max" else -1.0
    both = (reference, run)
    candidates = evidence.candidate_aggregates(both, where, metric, column)
    grouped = evidence.cluster_of(both, where, metric, cluster)
    name, bins = parse_by(slice_by) if slice_by else (None, None)
    needed = [c for a in candidates for c in a.columns]
    other = (name,) if name else ()
    ref, mine = (
        evidence.try_load(store, r, where, needed, cluster=grouped, other=other, lenient=True)
        for r in both
    )
    if ref is None or mine is None:
        lacking = " and ".join(
            str(r["run_id"]) for r, s in zip(both, (ref, mine), strict=True) if s is None
        )
        return Check(
            INCONCLUSIVE,
            f"inconclusive: no per-sample results of {where!r} on "
            f"{lacking}, so no test was possible ({_scores(run, reference, metric)})",
            None,
            question="none",
        )
    if grouped and ref.clusters is None and mine.clusters is None:
        raise ConfigurationError(
            f"neither run {ref.run_id} nor {mine.run_id} has a sample column {grouped!r} to "
            f"cluster by in split {where!r}"
        )
    try:
        chosen = evidence.choose((ref, mine), candidates)
    except ConfigurationError as exc:
        if column:  # the column asked for is not there: a usage error, not a verdict
            raise
        return Check(INCONCLUSIVE, f"inconclusive: {exc}", None, question="none")
    refused = evidence.disagreement(both, where, metric, column) or (
        None
        if column
        else (
            evidence.describes(reference, ref, metric, where, chosen)
            or evidence.describes(run, mine, metric, where, chosen)
        )
    )
    if refused:
        return Check(INCONCLUSIVE, f"inconclusive: {refused}", None, question="none")
    if name is not None and all(v is None for v in mine.other[name]):
        raise ConfigurationError(
            f"run {mine.run_id} has no sample column {name!r} to slice by in split {where!r}"
        )
    return judge(
        ref,
        mine,
        chosen,
        sign=sign,
        margin=margin,
        alpha=alpha,
        slice_by=name,
        bins=bins,
        min_n=min_n,
        scores=_scores(run, reference, metric),
    )


def judge(
    ref: evidence.Samples,
    mine: evidence.Samples,
    chosen: Aggregate,
    *,
    sign: float,
    margin: float = 0.0,
    alpha: float = stats.SIGNIFICANT,
    slice_by: str | None = None,
    bins: int | None = None,
    min_n: int = 30,
    scores: str = "",
) -> Check:
    """The run question on samples already read: the overall test and each slice's, as one
    Holm family at level ``alpha`` (what :func:`check` answers, without a store)."""
    family = _family(ref, mine, chosen, slice_by, bins, min_n, sign)
    if family is None or isinstance(family, str):
        why = family or f"too few samples with values to test ({scores})"
        return Check(INCONCLUSIVE, f"inconclusive: {why}", None, question="none")
    overall, slices, broken = family
    ps = [p_worse(overall, sign, margin), *(s.p_worse(margin) for s in slices)]
    adjusted = stats.holm(ps) if slices else ps
    slices = [replace(s, adjusted=p) for s, p in zip(slices, adjusted[1:], strict=True)]
    detail = _detail(chosen, overall, sign, alpha if not slices else None)
    if adjusted[0] < alpha:
        shown = ", ".join(map(str, broken[:10]))
        tail = f"; broken: {shown}" if shown else ""
        holm = f" (Holm over {len(ps)} tests: p = {adjusted[0]:.3g})" if slices else ""
        return Check(WORSE, f"worse: {detail}{holm}{tail}", overall, broken)
    worse = sorted(
        (s for s in slices if s.worse(margin, alpha)), key=lambda s: sign * s.comparison.diff
    )
    if worse:
        shown = "; ".join(s.describe() for s in worse[:3])
        more = f" (+{len(worse) - 3} more)" if len(worse) > 3 else ""
        return Check(
            WORSE,
            f"worse in {len(worse)} slice(s) (Holm over {len(ps)} tests): "
            f"{shown}{more}; overall {detail}",
            overall,
            broken,
        )
    sliced = (
        f"; no slice of >= {min_n} samples is worse (Holm over {len(ps)} tests)" if slice_by else ""
    )
    return Check(0, f"not significantly worse: {detail}{sliced}", overall, broken)


def _family(
    ref: evidence.Samples,
    mine: evidence.Samples,
    chosen: Aggregate,
    name: str | None,
    bins: int | None,
    min_n: int,
    sign: float,
) -> tuple[stats.Comparison, list[SliceCheck], list[Any]] | str | None:
    """The overall comparison, each slice's, and the samples that got worse (paired); None
    for too few samples, or why no test fits."""
    joined = evidence.join(ref, mine)
    overall = evidence.compare(joined, chosen)
    if isinstance(overall, str):
        return overall
    if joined.paired:
        first = chosen.columns[0]
        drop = sign * (joined.b.values[first] - joined.a.values[first])
        order = np.argsort(drop, kind="stable")
        broken = [joined.ids[i] for i in order if drop[i] < 0]
        slices: list[SliceCheck] = []
        if name is not None:
            keys = _labels(joined.b.other[name], bins)
            for value in sorted({k for k in keys if k is not None}, key=str):
                mask = np.flatnonzero(keys == value)
                if mask.size < max(min_n, 1):
                    continue
                part = evidence.Pair(joined.a.take(mask), joined.b.take(mask))
                c = chosen.paired(part.a.values, part.b.values, clusters=part.clusters)
                if c is not None and c.n >= max(min_n, 1):
                    slices.append(SliceCheck(name, value, c, sign))
    else:
        broken = []
        slices = []
        if name is not None:
            keys_a = _labels(ref.other[name], bins, extra=mine.other[name])
            keys_b = _labels(mine.other[name], bins, extra=ref.other[name])
            for value in sorted({k for k in keys_b if k is not None}, key=str):
                ia, ib = np.flatnonzero(keys_a == value), np.flatnonzero(keys_b == value)
                if min(ia.size, ib.size) < max(min_n, 1):
                    continue
                a, b = ref.take(ia), mine.take(ib)
                c = chosen.unpaired(a.values, b.values, a.clusters, b.clusters)
                if c is not None:
                    slices.append(SliceCheck(name, value, c, sign))
    if overall is None:
        return None
    slices.sort(key=lambda s: (sign * s.comparison.diff, str(s.value)))
    return overall, slices, broken


def _detail(chosen: Aggregate, c: stats.Comparison, sign: float, alpha: float | None) -> str:
    """``correct -0.025 [-0.04, -0.01], p = 0.003 (mcnemar over 1,000 shared samples; ...)``:
    the change in the better direction, the interval at the level tested."""
    level = None if alpha is None else 1 - alpha
    low, high = sorted(sign * x for x in c.bounds(level))
    note = evidence.power_note(replace(c, level=c.level if level is None else level))
    return f"{chosen.label} {sign * c.diff:+.4g} [{low:+.4g}, {high:+.4g}], p = {c.p:.3g} ({note})"


def _scores(run: dict[str, Any], reference: dict[str, Any], metric: Metric) -> str:
    mine, theirs = evidence.score(run, metric), evidence.score(reference, metric)
    shown = [f"{v:.4g}" if v is not None else "none" for v in (mine, theirs)]
    return f"{metric.label} {shown[0]} vs {shown[1]}"


# --- slices -------------------------------------------------------------------------------


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
    cluster: str | None = None,
) -> list[SliceCheck]:
    """Each slice (of at least ``min_n`` samples) compared: ``run`` against ``reference``,
    the worst first, each p-value on its own (the gate corrects them together). Slices are
    read from the judged run's samples."""
    where = split or metric.split
    sign = 1.0 if metric.direction == "max" else -1.0
    both = (reference, run)
    candidates = evidence.candidate_aggregates(both, where, metric, column)
    grouped = evidence.cluster_of(both, where, metric, cluster)
    name, bins = parse_by(slice_by)
    needed = [c for a in candidates for c in a.columns]
    ref, mine = (
        evidence.load(store, str(r["run_id"]), where, needed, cluster=grouped, other=(name,))
        for r in both
    )
    if all(v is None for v in mine.other[name]):
        raise ConfigurationError(
            f"run {mine.run_id} has no sample column {name!r} to slice by in split {where!r}"
        )
    chosen = evidence.choose((ref, mine), candidates)
    family = _family(ref, mine, chosen, name, bins, min_n, sign)
    return family[1] if isinstance(family, tuple) else []


def _labels(values: Sequence[Any], bins: int | None, extra: Sequence[Any] = ()) -> np.ndarray:
    """Slice keys: the values, or equal-width bins ``[low, high)`` over the range of these
    values and ``extra`` (the other run's, so both are cut alike)."""
    if bins is None:
        return np.asarray(values, dtype=object)
    numbers = np.asarray([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    pool = np.asarray([np.nan if v is None else float(v) for v in [*values, *extra]])
    finite = pool[np.isfinite(pool)]
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


# --- the reference's selection and the setups ----------------------------------------------


def selection_size(
    store: Store, spec: str, metric: Metric, filter: str | None = None, exclude: str = ""
) -> int:
    """How many scored runs ``spec`` picked its run from: K for ``best``/``best:EXP`` (the
    scored runs in scope, the judged one left out), 1 for a named run."""
    from warehouse.query.lookup import and_filters, quote
    from warehouse.stores.base import CountQuery

    text = spec.strip()
    if not (text == "best" or text.startswith("best:")):
        return 1
    experiment = text.partition(":")[2]
    scope = and_filters(
        filter,
        f"experiment:{quote(experiment)}" if experiment else None,
        f"_exists_:{metric.path}",
        f"NOT run_id:{quote(exclude)}" if exclude else None,
    )
    return max(1, sum(store.count_by(CountQuery("status", scope)).values()))


__all__ = [
    "INCONCLUSIVE",
    "PAIRED_SHARE",
    "WORSE",
    "Check",
    "SliceCheck",
    "check",
    "judge",
    "p_worse",
    "parse_by",
    "selection_size",
    "slice_checks",
]
