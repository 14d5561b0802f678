"""The views from Python: the same names, arguments and columns as ``warehouse query``, as
results that become Arrow tables, pandas DataFrames or plain dicts.

    import warehouse

    board = warehouse.leaderboard(metric="val.acc")
    board.to_pandas()                        # pandas only when asked for
    warehouse.runs("experiment:svm", sort=["metrics.val.acc:desc"], limit=10).to_arrow()
    warehouse.samples(run="best", split="val", sort="confidence", limit=100).to_dicts()

Each function opens the configured store (``warehouse.load_settings()``: ``WAREHOUSE_HOME``,
``WAREHOUSE_ES_URL`` ...) unless given ``store=`` (any :class:`~warehouse.stores.base.Store`)
or ``settings=``. ``to_dicts()`` is exactly what ``warehouse query VIEW --format json`` prints;
``to_arrow()`` and ``to_pandas()`` flatten nested fields into dotted columns
(``metrics.val.acc``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warehouse.filters.docpath import flatten

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from warehouse.settings import Settings
    from warehouse.stores.base import Store


@dataclass
class Result:
    """A view's rows: ``to_dicts()``, ``to_arrow()``, ``to_pandas()``; also iterable."""

    rows: list[dict[str, Any]]
    columns: Sequence[str] = field(default_factory=tuple)

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as the CLI's JSON prints them."""
        return [dict(row) for row in self.rows]

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table, nested fields as dotted columns, in the view's order."""
        import pyarrow as pa

        flat = [flatten(row) for row in self.rows]
        names = list(dict.fromkeys([*self.columns, *(k for row in flat for k in row)]))
        return pa.table({name: _column([row.get(name) for row in flat]) for name in names})

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame (pandas is imported here, only)."""
        frame: pd.DataFrame = self.to_arrow().to_pandas()
        return frame

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def _column(values: list[Any]) -> pa.Array:
    """One column; values of mixed kinds (a number in one run, text in another) become text,
    and empty mappings (no field to hold) are missing values."""
    import pyarrow as pa

    values = [None if v == {} else v for v in values]
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


@contextlib.contextmanager
def _store(store: Store | None, settings: Settings | None) -> Iterator[tuple[Store, Settings]]:
    from warehouse.settings import load

    chosen = settings or load()
    if store is not None:
        yield store, chosen
        return
    from warehouse.stores import open_store

    with open_store(chosen) as opened:
        yield opened, chosen


def _metric(settings: Settings, metric: str | None, direction: str | None) -> tuple[str, Any]:
    if metric is None and direction is None:
        return settings.primary_metric, settings.direction
    return metric or settings.primary_metric, direction


def runs(
    filter: str | None = None,
    *,
    sort: Sequence[str] = (),
    limit: int | None = 100,
    columns: Sequence[str] | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Runs matching a Lucene filter, sorted (``"metrics.val.acc:desc"``), at most ``limit``
    (None: all); ``columns``: only these dotted fields."""
    from warehouse.query import views

    with _store(store, settings) as (opened, _):
        docs = views.runs(opened, filter, sort, limit, columns)
    return Result(docs, tuple(columns or ()))


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
    """The best run by ``metric`` (default: the primary_metric setting), or each experiment's."""
    from warehouse.query import views

    with _store(store, settings) as (opened, s):
        name, way = _metric(s, metric, direction)
        default = None if per_experiment else 1
        rows = views.best(opened, name, way, filter, per_experiment, limit or default)
    columns = views.BEST_PER_EXPERIMENT_COLUMNS if per_experiment else views.BEST_COLUMNS
    return Result(rows, columns)


def leaderboard(
    metric: str | None = None,
    *,
    direction: str | None = None,
    filter: str | None = None,
    limit: int | None = None,
    evidence: bool = True,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Experiments ranked by their best score, with intervals and the gap to the next row."""
    from warehouse.query import views

    with _store(store, settings) as (opened, s):
        name, way = _metric(s, metric, direction)
        rows = views.leaderboard(opened, name, way, filter, limit, evidence=evidence)
    cols = views.LEADERBOARD_EVIDENCE_COLUMNS if evidence else views.LEADERBOARD_COLUMNS
    return Result(rows, cols)


def over_time(
    metric: str | None = None,
    *,
    direction: str | None = None,
    filter: str | None = None,
    interval: Any = None,
    limit: int | None = None,
    every_run: bool = False,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """The best score so far by run end time: the runs that set a new best (``every_run``:
    one point per run; ``interval``: day, week or month)."""
    from warehouse.query import views

    with _store(store, settings) as (opened, s):
        name, way = _metric(s, metric, direction)
        rows = views.over_time(opened, name, way, filter, interval, limit, every_run=every_run)
    cols = views.OVER_TIME_COLUMNS if interval is None else views.OVER_TIME_PERIOD_COLUMNS
    return Result(rows, cols)


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
    """Bias/variance of each experiment's best run."""
    from warehouse.query import views

    with _store(store, settings) as (opened, s):
        name, way = _metric(s, metric, direction)
        baseline = s.baseline_error if baseline_error is None else baseline_error
        rows = views.decomposition(opened, name, way, filter, baseline, limit)
    return Result(rows, views.DECOMPOSITION_COLUMNS)


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
    from warehouse.query import views

    with _store(store, settings) as (opened, s):
        name, way = _metric(s, metric, None)
        chosen = None if run == "best" else run
        found = views.samples(
            opened,
            chosen,
            best=chosen is None,
            metric=name,
            direction=way,
            filter=filter,
            experiment=experiment,
            split=split,
            sort=sort,
            order="asc" if ascending else "desc",
            limit=limit,
            where=where,
        )
        rows = list(found)
    return Result(rows)


def steps(
    run: str,
    *,
    limit: int | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """A run's steps and system metrics, one row per step."""
    from warehouse.query import views

    with _store(store, settings) as (opened, _):
        rows = list(views.steps(opened, run, limit))
    return Result(rows)


def compare(*run_ids: str, store: Store | None = None, settings: Settings | None = None) -> Result:
    """Runs side by side (two or more ids or prefixes): one row per field that matters."""
    from warehouse.query import views

    with _store(store, settings) as (opened, _):
        rows = views.compare(opened, list(run_ids))
    return Result(rows)


def diff(
    run_a: str,
    run_b: str,
    *,
    split: str | None = None,
    column: str | None = None,
    metric: str | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """The samples whose value changed between two runs (``best``, ``best:EXP``, ids)."""
    from warehouse.models import resolve_metric
    from warehouse.query import evidence

    with _store(store, settings) as (opened, s):
        m = resolve_metric(*_metric(s, metric, None))
        a, b = (evidence.resolve_run(opened, spec, m) for spec in (run_a, run_b))
        found = evidence.diff(opened, a, b, split=split or m.split, metric=m, column=column)
    return Result(found.rows, evidence.DIFF_COLUMNS)


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
    from warehouse.models import resolve_metric
    from warehouse.query import slices as slicing

    with _store(store, settings) as (opened, s):
        m = resolve_metric(*_metric(s, metric, None))
        rows = slicing.slices(
            opened, m, by, column=column, split=split, runs=runs, filter=filter, min_n=min_n
        )
    name = slicing.parse_by(by)[0]
    return Result(rows, tuple(c.replace("{by}", name) for c in slicing.SLICE_COLUMNS))


def replicates(
    *,
    metric: str | None = None,
    experiment: str | None = None,
    filter: str | None = None,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Result:
    """Seed replicate groups: mean, spread, interval, lucky seeds, flips across seeds."""
    from warehouse.models import resolve_metric
    from warehouse.query import replicates as seeds

    with _store(store, settings) as (opened, s):
        m = resolve_metric(*_metric(s, metric, None))
        rows = seeds.replicates(opened, m, experiment=experiment, filter=filter)
    return Result(rows, seeds.REPLICATE_COLUMNS)


__all__ = [
    "Result",
    "best",
    "compare",
    "decomposition",
    "diff",
    "leaderboard",
    "over_time",
    "replicates",
    "runs",
    "samples",
    "slices",
    "steps",
]
