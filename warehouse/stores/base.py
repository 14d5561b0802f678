"""The store contract: what every engine (local, elasticsearch) must do, and its value types.

A store only translates: our queries into its engine's language, our records into its
documents, its errors into ours (``StoreUnavailable``/``NotFound``/``QuerySyntaxError``).
Policy lives above it: the query value types below validate themselves when made (limits,
orders, directions, filter syntax) and carry the defaults (newest runs first; ``run_id``
breaks every tie), so no store checks or defaults anything twice; redaction, NaN handling,
durability, running maxima and bias/variance live in ``recorder.py``, ``run.py``,
``replication/`` and ``query/views.py``.

Documents are plain dicts in the shape of ``Run.to_doc()``; a field is named by its dotted
path (``metrics.val.acc``, ``params.model.C``, ``git.commit``). Filters are Lucene query
strings, exactly as typed into Kibana's search bar.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, cast

from warehouse.errors import QuerySyntaxError
from warehouse.filters import lucene

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.stores.local_export import CsvRows

Direction = Literal["max", "min"]
Order = Literal["asc", "desc"]


DEFAULT_RUN_SORT: tuple[tuple[str, Order], ...] = (("started_at", "desc"),)
"""Newest runs first when no sort is given."""
TIE_BREAK: tuple[str, Order] = ("run_id", "asc")
"""The last sort key of every run ordering, so that the order is total and the same on every
store."""


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise QuerySyntaxError(f"limit {limit} is negative; use 0 or more, or no limit")


def _check_order(order: str, what: str) -> None:
    if order not in ("asc", "desc"):
        raise QuerySyntaxError(f"sort order {order!r} of {what} is neither 'asc' nor 'desc'")


@dataclass(frozen=True)
class RunQuery:
    """Runs matching ``filter`` (Lucene), ordered by ``sort`` (field, order) pairs."""

    filter: str | lucene.Node | None = None  # text as typed, or a tree views rewrote
    sort: Sequence[tuple[str, Order]] = ()
    limit: int | None = 100
    fields: Sequence[str] | None = None  # dotted paths to keep; None = the whole document

    def __post_init__(self) -> None:
        lucene.parse(self.filter)  # syntax errors first, whatever the store holds
        _check_limit(self.limit)
        for name, order in self.sort:
            _check_order(order, name)

    @property
    def order_by(self) -> tuple[tuple[str, Order], ...]:
        """The sort a store applies: ``sort`` (default: newest first), then the tie-break."""
        keys = tuple(self.sort) or DEFAULT_RUN_SORT
        return keys if any(name == TIE_BREAK[0] for name, _ in keys) else (*keys, TIE_BREAK)

    @property
    def explicit_sort(self) -> frozenset[str]:
        """Sort fields the caller named (an unknown one is an error; a default one is not)."""
        return frozenset(name for name, _ in self.sort)


@dataclass(frozen=True)
class RankQuery:
    """Each experiment's best run by ``metric`` (a dotted path) in ``direction``."""

    metric: str
    direction: Direction
    filter: str | lucene.Node | None = None

    def __post_init__(self) -> None:
        if self.direction not in ("max", "min"):
            raise QuerySyntaxError(
                f"direction {self.direction!r} is neither 'max' (higher is better) nor 'min'"
            )
        lucene.parse(self.filter)

    @property
    def order(self) -> Order:
        """Best first: descending for ``max``, ascending for ``min``."""
        return "desc" if self.direction == "max" else "asc"


@dataclass(frozen=True)
class CountQuery:
    """How many runs matching ``filter`` hold each value of ``field`` (a keyword field)."""

    field: str
    filter: str | lucene.Node | None = None

    def __post_init__(self) -> None:
        lucene.parse(self.filter)


@dataclass(frozen=True)
class GroupQuery:
    """Per-sample results of some runs, grouped: how many rows have a value of ``column``
    and, for a 0/1 column, how many are 1 (true); for a numeric one, their sum.

    Groups are the values of the sample column ``by`` (per run with ``per_run``), or with
    ``bins`` that many equal-width ranges between the smallest and largest value of ``by``
    among the rows (the last range closed). ``order="wrong"``: the groups with the most rows
    whose ``column`` is 0/false first (then by key), at most ``limit`` of them."""

    run_ids: Sequence[str]
    split: str
    by: str
    column: str
    per_run: bool = True
    bins: int | None = None
    order: Literal["key", "wrong"] = "key"
    limit: int | None = None

    def __post_init__(self) -> None:
        _check_limit(self.limit)
        if self.bins is not None and self.bins < 1:
            raise QuerySyntaxError(f"bins={self.bins}: give 1 or more bins, e.g. size:bins=5")
        if not self.run_ids:
            raise QuerySyntaxError("a grouped sample query needs at least one run")

    def cuts(self, low: float, high: float) -> list[float]:
        """The edges of the ``bins`` equal-width ranges from ``low`` to ``high``."""
        bins = self.bins or 1
        if high <= low:
            return [low, high]
        step = (high - low) / bins
        return [low + i * step for i in range(bins)] + [high]

    def arrange(self, groups: list[Group]) -> list[Group]:
        """The order every store returns groups in (by run and key, or most wrong first),
        cut at ``limit``."""

        def key(group: Group) -> tuple[Any, ...]:
            k = group.key
            sortable = (0, k) if isinstance(k, float | tuple) else (1, str(k))
            return (
                (-group.wrong, sortable, group.run_id or "")
                if self.order == "wrong"
                else (
                    group.run_id or "",
                    sortable,
                )
            )

        groups = sorted(groups, key=key)
        return groups[: self.limit] if self.limit is not None else groups


@dataclass(frozen=True)
class Group:
    """One group of :class:`GroupQuery`: ``n`` rows with a value, ``total`` their sum (for a
    0/1 column: the number that are 1), ``wrong`` the number that are 0/false."""

    key: Any  # the value of ``by``, or ``(low, high)`` for a bin
    n: int
    total: float
    wrong: int
    run_id: str | None = None  # with per_run

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None


@dataclass(frozen=True)
class ExperimentBest:
    """One leaderboard row: an experiment's best run by a metric, and how many runs it has."""

    experiment: str
    score: float
    run: dict[str, Any]  # the best run's document
    run_count: int  # runs in the experiment that match the filter (scored or not)


@dataclass(frozen=True)
class TimelineQuery:
    """Runs matching ``filter`` with an ``ended_at`` and a finite value of ``metric``, in
    end-time order (ties: the smaller ``run_id`` first); with ``records_only`` only those
    that set a new best in ``direction`` (strictly better than every run before them)."""

    metric: str
    direction: Direction
    filter: str | lucene.Node | None = None
    records_only: bool = True

    def __post_init__(self) -> None:
        RankQuery(self.metric, self.direction, self.filter)  # the same checks


@dataclass(frozen=True)
class Timeline:
    """The answer to :class:`TimelineQuery`: parallel columns, one entry per run, in order;
    ``ended_at`` as the records write it (ISO 8601 UTC, ``Z``)."""

    ended_at: list[str] = field(default_factory=list)
    run_id: list[str] = field(default_factory=list)
    experiment: list[str | None] = field(default_factory=list)
    score: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SampleQuery:
    """Per-sample rows of one run, optionally one split, sorted by a sample column."""

    run_id: str
    split: str | None = None
    sort: str | None = None
    order: Order = "asc"
    limit: int | None = 100
    filter: str | None = None  # Lucene over sample columns
    offset: int = 0

    def __post_init__(self) -> None:
        lucene.parse(self.filter)
        _check_limit(self.limit)
        _check_order(self.order, self.sort or "samples")
        if self.offset < 0:
            raise QuerySyntaxError(f"offset {self.offset} is negative; use 0 or more")


@dataclass(frozen=True)
class StepRange:
    """Which steps of a run to read back (all by default)."""

    run_id: str
    after_seq: int = -1
    limit: int | None = None
    fields: Sequence[str] | None = field(default=None)

    def __post_init__(self) -> None:
        _check_limit(self.limit)


class Store(Protocol):
    """The contract both the local store and the Elasticsearch store implement.

    Writes are idempotent by id: writing a run (``run_id``) or a run's samples of a split
    (``run_id:split:sample_id``) twice replaces, never duplicates; a step (``run_id:seq``)
    written twice keeps its first copy (Elasticsearch's data stream only creates).
    """

    def write_runs(self, docs: Sequence[dict[str, Any]]) -> None:
        """Insert or replace run documents by ``run_id``; visible to the next query."""
        ...

    def write_samples(
        self, run_id: str, experiment: str, split: str, batches: Iterable[pa.RecordBatch]
    ) -> int:
        """Replace the samples of ``run_id``/``split`` with ``batches``; return rows written.

        Every batch has a string ``sample_id`` column; the other columns are per-sample
        metrics, labels and ``output_uri``. ``run_id``/``experiment``/``split`` are added here.
        """
        ...

    def write_steps(self, run_id: str, experiment: str, steps: Sequence[dict[str, Any]]) -> None:
        """Append step documents (each with ``seq``, ``step``, ``@timestamp``); ids dedupe."""
        ...

    def search_runs(self, query: RunQuery) -> list[dict[str, Any]]:
        """Run documents matching the query, in its order, at most ``limit``."""
        ...

    def best_per_experiment(self, query: RankQuery) -> list[ExperimentBest]:
        """For each experiment with a value of ``query.metric``, its best run.

        Experiments whose runs have no finite value of the metric are left out. Rows come
        best first; ties are broken by the earlier ``ended_at``, then ``run_id``. An unknown
        or non-numeric metric is a QuerySyntaxError (:func:`warehouse.filters.lucene.check_metric`).
        """
        ...

    def timeline(self, query: TimelineQuery) -> Timeline:
        """The scored runs of ``query`` by end time (the records only, by default): what the
        best-over-time view is computed from. Without ``records_only`` every scored run is
        listed; with it the cost follows the records, never the runs. An unknown or
        non-numeric metric is a QuerySyntaxError, as for :meth:`best_per_experiment`."""
        ...

    def count_by(self, query: CountQuery) -> dict[str, int]:
        """``{value: runs}`` for the runs matching the filter that hold a value of the field
        (text values as stored, numbers and booleans as their text); none for runs without."""
        ...

    def version(self) -> Hashable:
        """A token that changes whenever a run is written or deleted, so that equal tokens
        mean the run queries answer the same (what a front end caches an answer by); it may
        also change when the store reorganises itself (the local store folding its journal).
        Cheap: the local store stats two files and reads none; Elasticsearch asks one search
        of one hit (the run count and the newest ``updated_at``)."""
        ...

    def search_samples(self, query: SampleQuery) -> Iterator[dict[str, Any]]:
        """Sample rows of one run, streamed in order (``limit=None`` streams them all)."""
        ...

    def sample_batches(
        self, run_id: str, split: str, columns: Sequence[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """One split's stored rows as Arrow batches, in write order (``columns``: only these,
        where present). ``NotFound`` when the run has no such split. For bulk reads: shipping,
        export, per-sample statistics."""
        ...

    def group_samples(self, query: GroupQuery) -> list[Group]:
        """Grouped counts over the samples of several runs (slices, the hardest samples):
        an aggregation, never a read of every row through the client."""
        ...

    def steps(self, query: StepRange) -> Iterator[dict[str, Any]]:
        """A run's step documents in ``seq`` order."""
        ...

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete these runs with their samples and steps; returns how many runs were there.
        Deleting a run that is not there is not an error (a deletion may be replayed)."""
        ...

    def close(self) -> None:
        """Release connections and caches; the store may not be used afterwards."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class StreamsRuns(Protocol):
    """What a store that can stream whole runs in flat memory adds to :class:`Store` (the
    local store, from its catalog's columns). Optional: a view asks :func:`streams_runs`
    and otherwise pages :meth:`Store.search_runs`."""

    def run_documents(self, query: RunQuery) -> tuple[int, Iterator[dict[str, Any]]]:
        """How many runs ``query`` asks for, and their whole documents a chunk at a time."""
        ...

    def csv_rows(
        self,
        query: RunQuery,
        first: Sequence[str],
        shown_status: Callable[[dict[str, Any]], Any],
    ) -> CsvRows | None:
        """``query``'s runs as CSV rows read from columns (``first``: the leading columns;
        ``shown_status`` the status as shown); None: page :meth:`Store.search_runs`."""
        ...


def streams_runs(store: Store) -> StreamsRuns | None:
    """``store`` as a :class:`StreamsRuns` where it has those methods, else None (checked on
    the object each time: a capability is never cached per class)."""
    has = all(callable(getattr(store, name, None)) for name in ("run_documents", "csv_rows"))
    return cast("StreamsRuns", store) if has else None
