"""The views' one front door: the same names, arguments and answers for every front end.

    import warehouse

    board = warehouse.leaderboard(metric="val.acc")
    board.to_pandas()                        # pandas only when asked for
    warehouse.runs("experiment:svm", sort=["metrics.val.acc:desc"], limit=10).to_arrow()
    warehouse.samples(run="best", split="val", sort="confidence", limit=100).to_dicts()

``warehouse query`` (the CLI), the local UI (:mod:`warehouse.ui.api`), the HTML report
(:mod:`warehouse.dashboards.report`) and Python all ask these functions and only parse and
render what comes back: settings → metric in force → the store, opened once → the view →
its columns, what it left out and why it is empty happen here, once
(:mod:`warehouse.query.door`). A new view is one function here and one line in each front end.

Each function loads the settings (``warehouse.load_settings()``: ``WAREHOUSE_HOME``,
``WAREHOUSE_ES_URL`` ...) unless given ``settings=``, and opens the configured store unless
given ``store=`` (any :class:`~warehouse.stores.base.Store`, left open: a front end asking
several views opens one with :func:`connect`). Most return a
:class:`~warehouse.query.result.Result`: ``to_dicts()`` is exactly what ``warehouse query
VIEW --format json`` prints; ``to_arrow()`` and ``to_pandas()`` flatten nested fields into
dotted columns (``metrics.val.acc``). The ``*_rows``/``*_stream`` functions stream from a
store the caller keeps open.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from warehouse.query.door import (
    connect,
    describe_source,
    metric_in_force,
    open_store,
    opened,
    ranked,
    setting_metric,
    why_empty,
)
from warehouse.query.live_table import POSITION_COLUMNS as STEP_COLUMNS
from warehouse.query.overview import Overview, overview
from warehouse.query.result import DiffResult, Empty, Result, SamplePage
from warehouse.query.streams import run_csv, run_stream, sample_batches, sample_rows, step_rows

if TYPE_CHECKING:
    from warehouse.filters import lucene
    from warehouse.query.gate import Check
    from warehouse.settings import Settings
    from warehouse.stores.base import Store


# --- runs -------------------------------------------------------------------------------


def runs(
    filter: str | lucene.Node | None = None,
    *,
    sort: Sequence[str | tuple[str, str]] = (),
    limit: int | None = 100,
    columns: Sequence[str] | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Runs matching a Lucene filter, sorted (``"metrics.val.acc:desc"``), at most ``limit``
    (None: all); ``columns``: only these dotted fields."""
    from warehouse.query import views

    with opened(store, settings) as (found, s):
        docs = views.runs(found, filter, sort, limit, columns)  # type: ignore[arg-type]
        text = filter if isinstance(filter, str) else None
        empty = None if docs else why_empty(text, store=found, settings=s)
    return Result(docs, tuple(columns or ()), empty=empty)


# --- views ranked by a metric -----------------------------------------------------------


def best(
    metric: str | None = None,
    *,
    direction: str | None = None,
    filter: str | None = None,
    per_experiment: bool = False,
    limit: int | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """The best run by ``metric`` (default: the primary metric), or each experiment's."""
    from warehouse.query import views

    columns = views.BEST_PER_EXPERIMENT_COLUMNS if per_experiment else views.BEST_COLUMNS
    most = limit or (None if per_experiment else 1)
    with opened(store, settings) as (found, s):
        return ranked(
            found,
            s,
            metric,
            direction,
            filter,
            columns,
            lambda m: views.best(found, m.label, m.direction, filter, per_experiment, most),
        )


def leaderboard(
    metric: str | None = None,
    *,
    direction: str | None = None,
    filter: str | None = None,
    limit: int | None = None,
    evidence: bool = True,
    by_group: bool = False,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Experiments ranked by their best score, with intervals and the gap to the next row
    (``by_group``: by their best replicate group's mean, runs differing only in seeds)."""
    from warehouse.query import replicates, views

    if by_group:
        columns: Sequence[str] = replicates.BY_GROUP_COLUMNS
    else:
        columns = views.LEADERBOARD_EVIDENCE_COLUMNS if evidence else views.LEADERBOARD_COLUMNS
    with opened(store, settings) as (found, s):

        def ask(m: Any) -> list[dict[str, Any]]:
            if by_group:
                return replicates.leaderboard_by_group(
                    found, m, filter=filter, limit=limit, seed_keys=s.seed_keys
                )
            return views.leaderboard(found, m.label, m.direction, filter, limit, evidence=evidence)

        return ranked(found, s, metric, direction, filter, columns, ask)


def leaderboard_marks(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Leaderboard rows for people: a ``≈ ±d`` column where a lead is not significant, and
    the caption lines that say what the marks and intervals mean
    (:func:`warehouse.query.leaderboard_evidence.marked`)."""
    from warehouse.query.leaderboard_evidence import marked

    return marked(rows)


def over_time(
    metric: str | None = None,
    *,
    direction: str | None = None,
    filter: str | None = None,
    interval: Any = None,
    limit: int | None = None,
    every_run: bool = False,
    by_group: bool = False,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """The best score so far by run end time: the runs that set a new best (``every_run``:
    one point per run; ``interval``: day, week or month; ``by_group``: the running best of
    replicate-group means)."""
    from warehouse.errors import ConfigurationError
    from warehouse.query import replicates, views

    if by_group and interval is not None:
        raise ConfigurationError("--by-group gives one point per group; leave out --interval")
    if by_group:
        columns: Sequence[str] = replicates.OVER_TIME_BY_GROUP_COLUMNS
    else:
        columns = views.OVER_TIME_COLUMNS if interval is None else views.OVER_TIME_PERIOD_COLUMNS
    with opened(store, settings) as (found, s):

        def ask(m: Any) -> list[dict[str, Any]]:
            if by_group:
                return replicates.over_time_by_group(
                    found, m, filter=filter, limit=limit, seed_keys=s.seed_keys
                )
            return views.over_time(
                found, m.label, m.direction, filter, interval, limit, every_run=every_run
            )

        return ranked(found, s, metric, direction, filter, columns, ask)


def decomposition(
    metric: str | None = None,
    *,
    direction: str | None = None,
    filter: str | None = None,
    baseline_error: float | None = None,
    limit: int | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Bias/variance of each experiment's best run (``baseline_error``: the human/Bayes
    level, default the ``baseline_error`` setting)."""
    from warehouse.query import views

    with opened(store, settings) as (found, s):
        baseline = s.baseline_error if baseline_error is None else baseline_error
        return ranked(
            found,
            s,
            metric,
            direction,
            filter,
            views.DECOMPOSITION_COLUMNS,
            lambda m: views.decomposition(found, m.label, m.direction, filter, baseline, limit),
        )


# --- samples ----------------------------------------------------------------------------


def samples(
    run: str = "best",
    *,
    split: str | None = None,
    sort: str | None = None,
    ascending: bool = True,
    where: str | None = None,
    limit: int | None = 100,
    metric: str | None = None,
    filter: str | None = None,
    experiment: str | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Per-sample results of a run (an id or prefix, or ``"best"``), sorted by a sample column."""
    with opened(store, settings) as (found, s):
        rows = sample_rows(
            None if run == "best" else run,
            split=split,
            sort=sort,
            order="asc" if ascending else "desc",
            where=where,
            limit=limit,
            metric=metric,
            filter=filter,
            experiment=experiment,
            store=found,
            settings=s,
        )
        return Result(list(rows))


def sample_page(
    run: str,
    *,
    split: str | None = None,
    sort: str | None = None,
    order: str | None = None,
    offset: int = 0,
    limit: int = 48,
    store: Store | None = None,
    settings: Settings | None = None,
) -> SamplePage:
    """A page of a run's samples, worst first unless told otherwise: by default the split of
    the primary metric (else the first), sorted by that metric's per-sample column (the one
    its interval was computed from) from the worst value."""
    from warehouse.errors import NotFound, QuerySyntaxError
    from warehouse.query import views
    from warehouse.query.evidence import candidate_columns
    from warehouse.stores.base import SampleQuery

    with opened(store, settings) as (found, s):
        m = setting_metric(s, None, None)
        doc = views.get_run(found, run, fields=views.SAMPLE_RUN_FIELDS)
        counts: dict[str, int] = doc.get("sample_counts") or {}
        if not counts:
            return SamplePage(doc, {})
        if split is None:
            split = m.split if m.split in counts else sorted(counts)[0]
        if split not in counts:
            raise NotFound(
                f"run {doc['run_id']} has no {split!r} samples; its splits with samples: "
                f"{', '.join(sorted(counts))}"
            )
        rid = str(doc["run_id"])
        first = next(iter(found.search_samples(SampleQuery(rid, split, limit=1))), {})
        columns = [c for c in first if c not in ("run_id", "experiment", "split", "output_uri")]
        if sort is None:
            usable = [c for c in candidate_columns(doc, split, m, None) if c in columns]
            sort = usable[0] if usable else None
            if order is None:
                order = "asc" if m.direction == "max" else "desc"  # worst first
        order = order or "asc"
        if order not in ("asc", "desc"):
            raise QuerySyntaxError(f"sample order {order!r} is neither asc nor desc")
        query = SampleQuery(
            rid,
            split,
            sort=sort,
            order="desc" if order == "desc" else "asc",
            limit=limit,
            offset=offset,
        )
        rows = list(found.search_samples(query))
    return SamplePage(doc, counts, split, columns, sort, order, offset, rows)


def hardest(
    *,
    experiment: str | None = None,
    split: str | None = None,
    filter: str | None = None,
    limit: int | None = 100,
    metric: str | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """The samples most runs get wrong (of ``experiment``, or of the runs ``filter``
    selects), with how many runs saw each."""
    from warehouse.query.slices import HARDEST_COLUMNS
    from warehouse.query.slices import hardest as wrong_most

    with opened(store, settings) as (found, s):
        m = setting_metric(s, metric, None)
        rows = wrong_most(
            found, m, experiment=experiment, split=split, filter=filter, limit=limit or 100
        )
        empty = None if rows else why_empty(filter, store=found, settings=s)
    return Result(rows, HARDEST_COLUMNS, metric=m.label, direction=m.direction, empty=empty)


# --- given runs -------------------------------------------------------------------------


def show(
    run: str,
    *,
    fields: Sequence[str] | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """One run's whole document (``fields``: only these dotted fields), by id or prefix."""
    from warehouse.query import views

    with opened(store, settings) as (found, _):
        return views.get_run(found, run, fields)


def steps(
    run: str,
    *,
    limit: int | None = None,
    after_seq: int = -1,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """A run's steps and system metrics, one row per step (``after_seq``: only later ones)."""
    with opened(store, settings) as (found, _):
        rows = list(step_rows(run, limit=limit, after_seq=after_seq, store=found))
    return Result(rows, STEP_COLUMNS)


def compare(
    *run_ids: str | Sequence[str], store: Store | None = None, settings: Settings | None = None
) -> Result:
    """Runs side by side (two or more ids or prefixes, or one list of them): one row per
    field that matters."""
    from warehouse.query import views

    ids = _run_ids(run_ids)
    with opened(store, settings) as (found, _):
        rows = views.compare(found, ids)
    return Result(rows, ("field", *(k for k in (rows[0] if rows else {}) if k != "field")))


def _run_ids(given: Sequence[str | Sequence[str]]) -> list[str]:
    """``compare("a", "b")`` or ``compare(["a", "b"])``: the ids; anything else a TypeError
    that says how to call it."""
    items: list[Any] = list(given)
    if len(items) == 1 and not isinstance(items[0], str):
        items = list(items[0])
    wrong = [i for i in items if not isinstance(i, str)]
    if wrong:
        raise TypeError(
            f"compare() takes run ids as strings, e.g. compare('3f2a9c1d', '8d41c07a') or "
            f"compare(['3f2a9c1d', '8d41c07a']); got {type(wrong[0]).__name__} {wrong[0]!r}"
        )
    return items


def diff(
    run_a: str,
    run_b: str,
    *,
    split: str | None = None,
    column: str | None = None,
    metric: str | None = None,
    cluster: str | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> DiffResult:
    """The samples whose value changed between two runs (``best``, ``best:EXP``, ids), with
    the paired difference as ``summary``."""
    from warehouse.query import evidence
    from warehouse.query.gate import selection_size

    with opened(store, settings) as (found, s):
        m = setting_metric(s, metric, None)
        a, b = (evidence.resolve_run(found, spec, m) for spec in (run_a, run_b))
        # a `best` run was picked from its candidates on these very samples
        picked = selection_size(found, run_a, m) * selection_size(found, run_b, m)
        got = evidence.diff(
            found,
            a,
            b,
            split=split or m.split,
            metric=m,
            column=column,
            cluster=cluster,
            picked=picked if a["run_id"] != b["run_id"] else 1,
        )
    return DiffResult(
        got.rows,
        evidence.DIFF_COLUMNS,
        metric=m.label,
        direction=m.direction,
        summary=got.summary(),
        a=a,
        b=b,
        split=got.split,
        column=got.column,
        counts=got.counts(),
    )


def check(
    run: str,
    *,
    against: str = "best",
    metric: str | None = None,
    margin: float = 0.0,
    split: str | None = None,
    column: str | None = None,
    slice_by: str | None = None,
    min_n: int = 30,
    cluster: str | None = None,
    seeds: bool = True,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Check:
    """The regression gate: whether ``run`` is significantly worse than ``against``
    (:func:`warehouse.query.gate.check`; a ``best`` reference counts as the best of the
    runs it was picked from)."""
    from warehouse.query import evidence, gate

    with opened(store, settings) as (found, s):
        m = setting_metric(s, metric, None)
        judged = evidence.resolve_run(found, run, m)
        reference = evidence.resolve_run(found, against, m)
        return gate.check(
            found,
            judged,
            reference,
            metric=m,
            split=split,
            column=column,
            margin=margin,
            slice_by=slice_by,
            min_n=min_n,
            cluster=cluster,
            selected=gate.selection_size(found, against, m, exclude=str(judged["run_id"])),
            seeds=seeds,
            seed_keys=s.seed_keys,
        )


# --- per-sample evidence ----------------------------------------------------------------


def slices(
    by: str,
    *,
    metric: str | None = None,
    column: str | None = None,
    split: str | None = None,
    runs: Sequence[str] = (),
    min_n: int = 0,
    filter: str | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """The metric per slice of the samples (``by``: a column, or ``size:bins=5``)."""
    from warehouse.query import slices as slicing

    name = slicing.parse_by(by)[0]
    columns = tuple(c.replace("{by}", name) for c in slicing.SLICE_COLUMNS)
    with opened(store, settings) as (found, s):
        m = setting_metric(s, metric, None)
        rows = slicing.slices(
            found, m, by, column=column, split=split, runs=runs, filter=filter, min_n=min_n
        )
    return Result(rows, columns, metric=m.label, direction=m.direction)


def replicates(
    *,
    metric: str | None = None,
    experiment: str | None = None,
    filter: str | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Seed replicate groups: mean, spread, interval, lucky seeds, flips across seeds."""
    from warehouse.query import replicates as seeds

    with opened(store, settings) as (found, s):
        m = setting_metric(s, metric, None)
        rows = seeds.replicates(
            found, m, experiment=experiment, filter=filter, seed_keys=s.seed_keys
        )
    return Result(rows, seeds.REPLICATE_COLUMNS, metric=m.label, direction=m.direction)


def count(
    filter: str | lucene.Node | None = None,
    *,
    store: Store | None = None,
    settings: Settings | None = None,
) -> int:
    """How many runs match ``filter`` (an aggregation: no document is read)."""
    from warehouse.query.status import lost_aware
    from warehouse.stores.base import CountQuery

    with opened(store, settings) as (found, _):
        return sum(found.count_by(CountQuery("experiment", lost_aware(filter))).values())


def metric_names(
    *, sample: int = 200, store: Store | None = None, settings: Settings | None = None
) -> list[str]:
    """The ``split.metric`` names recorded by the newest ``sample`` runs, sorted."""
    from warehouse.query import views

    with opened(store, settings) as (found, _):
        docs = views.runs(found, limit=sample, fields=("run_id", "metrics"))
    names = {f"{s}.{m}" for d in docs for s, ms in (d.get("metrics") or {}).items() for m in ms}
    return sorted(names)


def version(store: Store) -> Hashable:
    """What a front end caches answers by: changes whenever a run is written or deleted
    (:meth:`~warehouse.stores.base.Store.version`)."""
    return store.version()


__all__ = [
    "STEP_COLUMNS",
    "DiffResult",
    "Empty",
    "Overview",
    "Result",
    "SamplePage",
    "best",
    "check",
    "compare",
    "connect",
    "count",
    "decomposition",
    "describe_source",
    "diff",
    "hardest",
    "leaderboard",
    "leaderboard_marks",
    "metric_in_force",
    "metric_names",
    "open_store",
    "over_time",
    "overview",
    "replicates",
    "run_csv",
    "run_stream",
    "runs",
    "sample_batches",
    "sample_page",
    "sample_rows",
    "samples",
    "show",
    "slices",
    "step_rows",
    "steps",
    "version",
    "why_empty",
]
