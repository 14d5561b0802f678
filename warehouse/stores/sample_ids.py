"""The sample-id rule every store applies to a split's rows (one id per sample, no nulls)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.errors import InvalidRecord

if TYPE_CHECKING:
    import pyarrow as pa


class SampleIds:
    """The sample-id rule every store applies to one split's rows: each row has a
    ``sample_id`` (no nulls) and no id appears twice in the split. A refused split is not
    stored (InvalidRecord naming the first offending ids), so the local store and
    Elasticsearch (where ``run_id:split:sample_id`` is the document id) never disagree.

    :meth:`check` each batch as it comes (nulls and repeats inside it), then :meth:`finish`
    before the split counts as written (repeats across batches: one sort over all ids, kept
    as Arrow text, a few bytes per id, never as Python objects)."""

    def __init__(self, run_id: str, split: str) -> None:
        self.run_id, self.split = run_id, split
        self._seen: list[pa.Array] = []
        self.rows = 0

    def check(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if "sample_id" not in batch.schema.names:
            return  # the store's own check names the missing column
        ids = batch.column("sample_id")
        if ids.null_count:
            first = pc.index(pc.is_null(ids), True).as_py()
            raise InvalidRecord(
                f"samples of run {self.run_id} split {self.split!r}: {ids.null_count} row(s) "
                f"have no sample_id (the first is row {self.rows + first}); give every row "
                "an id that identifies its sample. Nothing of this split was stored"
            )
        ids = ids.cast(pa.string())
        self._repeats(ids)  # before the batch (or an output of it) is stored
        self._seen.append(ids)
        self.rows += len(ids)

    def finish(self) -> None:
        """Refuse ids repeated across batches (each batch was checked on its own)."""
        import pyarrow as pa

        seen, self._seen = self._seen, []
        if len(seen) > 1:
            self._repeats(pa.chunked_array(seen, pa.string()).combine_chunks())

    def _repeats(self, ids: pa.Array) -> None:
        """One sort, then a look at each id's neighbour: a hash count of a million strings
        costs several times more."""
        import pyarrow.compute as pc

        if len(ids) < 2:
            return
        ordered = ids.take(pc.array_sort_indices(ids))
        same = pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
        if pc.any(same).as_py():
            self._duplicates(pc.unique(ordered.slice(1).filter(same)).to_pylist())

    def _duplicates(self, ids: list[str]) -> None:
        shown = ", ".join(repr(i) for i in ids[:5]) + (" ..." if len(ids) > 5 else "")
        raise InvalidRecord(
            f"samples of run {self.run_id} split {self.split!r}: sample_id {shown} appear(s) "
            "more than once; each sample of a split needs its own id (log one row per sample, "
            "or add the distinguishing part to the id). Nothing of this split was stored"
        )
