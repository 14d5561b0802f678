"""Links into this machine's object folder, rewritten to where its objects were pushed.

A run recorded without S3 links its artifacts and outputs as ``file://`` URIs into the local
object folder; once pushed, the shared copy links the same keys in the bucket. ``warehouse
push`` rewrites the links it sends, and ``warehouse sync --verify`` compares the local copy
rewritten the same way with the remote one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.objects.base import ObjectStore
    from warehouse.objects.local import LocalObjectStore


class Relink:
    """Links into this machine's object folder rewritten to where the objects were pushed."""

    def __init__(self, local: LocalObjectStore, remote: ObjectStore | None) -> None:
        self.local_base = local.uri("_")[:-1]
        self.remote_base = None if remote is None else remote.uri("_")[:-1]

    def text(self, value: str) -> str:
        if self.remote_base is not None and value.startswith(self.local_base):
            return self.remote_base + value[len(self.local_base) :]
        return value

    def doc(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.doc(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.doc(v) for v in value]
        return value

    def local_links(self, value: Any) -> bool:
        from warehouse.filters.docpath import strings

        return any(text.startswith(self.local_base) for text in strings(value))

    def batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.remote_base is None or "output_uri" not in batch.schema.names:
            return batch
        column = batch.column("output_uri")
        if not pa.types.is_string(column.type):
            return batch
        base = len(self.local_base)
        moved = pc.binary_join_element_wise(
            pa.scalar(self.remote_base), pc.utf8_slice_codeunits(column, base), ""
        )
        fixed = pc.if_else(pc.starts_with(column, self.local_base), moved, column)
        index = batch.schema.get_field_index("output_uri")
        return batch.set_column(index, "output_uri", fixed)


__all__ = ["Relink"]
