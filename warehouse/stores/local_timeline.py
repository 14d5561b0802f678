"""The local store's :meth:`~warehouse.stores.base.Store.timeline`: numpy over catalog columns.

The scored runs (an end and a finite value) are put in end-time order by one stable argsort
of the ``ended_at`` column (int64 microseconds); only runs sharing an end time are sorted
again by run id. The records are where the score beats the running best of the runs before
it (``np.maximum.accumulate``/``minimum``): no Python per run, and only the answer's rows
become Python values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.stores.base import Timeline, TimelineQuery
from warehouse.stores.lazy import np, pa, pc
from warehouse.stores.local_docs import indices

if TYPE_CHECKING:
    from collections.abc import Callable

    _Ids = Callable[[np.ndarray], pa.ChunkedArray]


def timeline_rows(table: pa.Table, rows: np.ndarray | None, query: TimelineQuery) -> np.ndarray:
    """The catalog rows answering ``query`` among ``rows`` (None: all of them), in end-time
    order, then run id."""
    if "ended_at" not in table.schema.names or not pa.types.is_timestamp(
        table.schema.field("ended_at").type
    ):
        return np.zeros(0, dtype=np.int64)

    def column(name: str) -> pa.ChunkedArray:
        return table.column(name) if rows is None else table.column(name).take(indices(rows))

    values = column(query.metric).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    ended = column("ended_at")
    valid = pc.is_valid(ended).to_numpy(zero_copy_only=False)
    kept = np.flatnonzero(np.isfinite(values) & valid)
    if not kept.size:
        return kept
    times = ended.cast(pa.int64()).to_numpy(zero_copy_only=False)
    scores = values
    if kept.size < len(values):  # else every run is scored: no copies
        times, scores = times[kept], values[kept]
    run_ids = column("run_id")

    def ids(at: np.ndarray) -> pa.ChunkedArray:
        return run_ids.take(indices(kept[at]))

    if query.records_only:
        scored = kept[_records(times, scores, ids, query.direction == "max")]
    else:
        scored = kept[_in_order(times, np.arange(len(kept)), ids)]
    picked: np.ndarray = scored if rows is None else rows[scored]
    return picked


_PEEL_ROUNDS = 64
_SORT_BELOW = 2048


def _records(times: np.ndarray, scores: np.ndarray, ids: _Ids, higher: bool) -> np.ndarray:
    """Positions of the runs that beat every run before them, in order.

    Peeled from the end: the last record is the earliest run with the best score; the one
    before it, the earliest with the best score among the runs before that one; and so on,
    each round one vectorised pass over the runs left (about half of them, on any order of
    scores that is not a steady climb). Once few runs are left, or after ``_PEEL_ROUNDS``
    rounds (a steady climb), the rest are sorted by end time and their records found with
    a running best (``np.maximum.accumulate``)."""
    peeled: list[int] = []
    left: np.ndarray | None = None  # None: all of them (the first round copies nothing)
    while (len(times) if left is None else len(left)) > _SORT_BELOW and (
        len(peeled) < _PEEL_ROUNDS
    ):
        values = scores if left is None else scores[left]
        best = values.max() if higher else values.min()
        tops = np.flatnonzero(values == best)
        if left is not None:
            tops = left[tops]
        end = times[tops].min()
        tops = tops[times[tops] == end]
        first = int(tops[0] if len(tops) == 1 else _in_order(times, tops, ids)[0])
        peeled.append(first)
        ends = times if left is None else times[left]
        before = ends < end
        same = np.flatnonzero(ends == end)
        if left is not None:
            same = left[same]
        if len(same) > 1:  # runs ending with it: those with a smaller run id are before it
            smaller = pc.less(ids(same), ids(np.array([first])).to_pylist()[0])
            earlier = same[smaller.to_numpy(zero_copy_only=False)]
        else:
            earlier = same[:0]
        left = np.flatnonzero(before) if left is None else left[before]
        if len(earlier):
            left = np.sort(np.concatenate([left, earlier]))
    order = _in_order(times, np.arange(len(times)) if left is None else left, ids)
    ranked = scores[order]
    if len(ranked):
        running = (np.maximum if higher else np.minimum).accumulate(ranked)[:-1]
        order = order[np.r_[True, ranked[1:] > running if higher else ranked[1:] < running]]
    return np.concatenate([order, np.array(peeled[::-1], dtype=order.dtype)])


def _in_order(times: np.ndarray, at: np.ndarray, ids: _Ids) -> np.ndarray:
    """``at`` (positions) by end time, then run id: one stable argsort of the times; only
    the runs sharing an end time are sorted again, by run id."""
    order = at[np.argsort(times[at], kind="stable")]
    ordered = times[order]
    same = ordered[1:] == ordered[:-1]
    if same.any():
        tied = np.flatnonzero(np.r_[same, False] | np.r_[False, same])
        group = order[tied]
        sub = pa.table({"t": ordered[tied], "r": ids(group)})
        order[tied] = group[pc.sort_indices(sub, [("t", "ascending"), ("r", "ascending")])]
    return order


def timeline_of(table: pa.Table, rows: np.ndarray, metric: str) -> Timeline:
    """The :class:`Timeline` of these catalog rows (times written as the records write them:
    ``iso_utc``, built column-wise)."""
    if not len(rows):
        return Timeline()
    take = indices(rows)
    micros = table.column("ended_at").take(take).cast(pa.int64()).to_numpy()
    seconds, fraction = np.divmod(micros, 1_000_000)
    stamp = pc.strftime(pa.array(seconds, pa.timestamp("s")), format="%Y-%m-%dT%H:%M:%S")
    digits = pc.utf8_lpad(pa.array(fraction).cast(pa.string()), width=6, padding="0")
    tail = pc.if_else(pa.array(fraction == 0), "", pc.binary_join_element_wise(".", digits, ""))
    ended = pc.binary_join_element_wise(stamp, tail, "Z", "")
    return Timeline(
        ended_at=ended.to_pylist(),
        run_id=table.column("run_id").take(take).to_pylist(),
        experiment=table.column("experiment").take(take).to_pylist(),
        score=table.column(metric).take(take).to_numpy(zero_copy_only=False).tolist(),
    )
