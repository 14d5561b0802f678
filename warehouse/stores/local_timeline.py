"""The local store's :meth:`~warehouse.stores.base.Store.timeline`: numpy over catalog columns.

The scored runs (an end and a finite value) are put in end-time order by one stable argsort
of the ``ended_at`` column (int64 microseconds); only runs sharing an end time are sorted
again by run id. The records are where the score beats the running best of the runs before
it (``np.maximum.accumulate``/``minimum``): no Python per run, and only the answer's rows
become Python values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.lazy import lazy_module
from warehouse.stores.base import Timeline, TimelineQuery
from warehouse.stores.local_docs import indices

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


def timeline_rows(
    table: pa.Table, rows: np.ndarray, every: bool, query: TimelineQuery
) -> np.ndarray:
    """The catalog rows answering ``query`` among ``rows`` (all of them with ``every``),
    in end-time order, then run id."""
    if "ended_at" not in table.schema.names or not pa.types.is_timestamp(
        table.schema.field("ended_at").type
    ):
        return np.zeros(0, dtype=np.int64)

    def column(name: str) -> pa.ChunkedArray:
        return table.column(name) if every else table.column(name).take(indices(rows))

    values = column(query.metric).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    ended = column("ended_at")
    valid = pc.is_valid(ended).to_numpy(zero_copy_only=False)
    kept = np.flatnonzero(np.isfinite(values) & valid)
    if not kept.size:
        return kept
    times = ended.cast(pa.int64()).to_numpy(zero_copy_only=False)[kept]
    order = np.argsort(times, kind="stable")
    ordered = times[order]
    same = ordered[1:] == ordered[:-1]
    if same.any():  # runs that end together: by run id (only those runs are sorted again)
        tied = np.flatnonzero(np.r_[same, False] | np.r_[False, same])
        group = order[tied]
        ids = column("run_id").take(indices(kept[group]))
        sub = pa.table({"t": ordered[tied], "r": ids})
        order[tied] = group[pc.sort_indices(sub, [("t", "ascending"), ("r", "ascending")])]
    scored = kept[order]
    if query.records_only:
        scores = values[scored]
        if query.direction == "max":
            new = scores[1:] > np.maximum.accumulate(scores)[:-1]
        else:
            new = scores[1:] < np.minimum.accumulate(scores)[:-1]
        scored = scored[np.r_[True, new]]
    picked: np.ndarray = scored if every else rows[scored]
    return picked


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
