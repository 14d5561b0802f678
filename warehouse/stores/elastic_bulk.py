"""Turning records into bulk request bodies, and sending them: the write half of the ES store.

Sample rows are encoded column by column with Arrow compute kernels (numbers cast to their
shortest text, strings quoted, NaN/±inf turned into ``null``), so a million rows never become a
million Python dicts; one bulk request body is then a slice of one Arrow buffer. Runs and steps
are few and small: they go through :func:`encode` (stdlib ``json``, non-finite floats → null).

:func:`send` is a small ``streaming_bulk``: chunks by count and bytes, per-item retries with
exponential backoff for 429/5xx items (whole-request 429/5xx are retried with backoff by the
transport), and a summary instead of an exception: documents Elasticsearch rejected come back
with their reasons, conflicts on ``create``/versioned writes count as *already stored*.
"""

from __future__ import annotations

import bisect
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from warehouse.errors import InvalidRecord
from warehouse.stores.elastic_templates import MAX_TYPED_PARAMS
from warehouse.values import json_safe

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

log = logging.getLogger(__name__)

MAX_CHUNK_DOCS = 2000
MAX_CHUNK_BYTES = 8 * 1024 * 1024
RETRY_STATUSES = frozenset({429, 502, 503, 504})
_NEEDS_ESCAPE = r'["\\\x00-\x1f]'
_dumps = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode


# ----------------------------------------------------------------------------------------
# documents


def encode(doc: Mapping[str, Any]) -> bytes:
    """One document as compact JSON bytes; never contains NaN/Infinity."""
    return _dumps(json_safe(doc)).encode("utf-8")


def run_source(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The ES form of a run document: params past :data:`MAX_TYPED_PARAMS` in ``params_extra``."""
    params = doc.get("params") or {}
    if not isinstance(params, Mapping) or len(params) <= MAX_TYPED_PARAMS:
        return dict(doc)
    keys = sorted(params)
    out = dict(doc)
    out["params"] = {k: params[k] for k in keys[:MAX_TYPED_PARAMS]}
    out["params_extra"] = {k: params[k] for k in keys[MAX_TYPED_PARAMS:]}
    return out


def run_from_source(source: dict[str, Any]) -> dict[str, Any]:
    """Undo :func:`run_source`: the run document exactly as it was written."""
    extra = source.pop("params_extra", None)
    if extra:
        params = source.setdefault("params", {})
        params.update(extra)
        source["params"] = dict(sorted(params.items()))
    return source


def action(op: str, index: str, doc_id: str, **meta: Any) -> bytes:
    """One bulk action line (with its trailing newline)."""
    return _dumps({op: {"_index": index, "_id": doc_id, **meta}}).encode("utf-8") + b"\n"


def item_lines(
    op: str, index: str, docs: Sequence[tuple[str, Mapping[str, Any]]], **meta: Any
) -> list[bytes]:
    """Bulk items (action + source lines) for ``(doc_id, doc)`` pairs."""
    return [action(op, index, doc_id, **meta) + encode(doc) + b"\n" for doc_id, doc in docs]


# ----------------------------------------------------------------------------------------
# sample rows, column-wise


def _json_text(column: pa.Array) -> pa.Array:
    """Each value of ``column`` as JSON text (null for missing and non-finite numbers)."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    if pa.types.is_floating(kind):
        column = column.cast(pa.float64())  # float32 0.1 reads back as 0.10000000149011612
        finite = pc.is_finite(column)
        text = pc.cast(pc.if_else(finite, column, pa.scalar(None, pa.float64())), pa.string())
        # 6.0 must read back as a float, as it does from Parquet: "6" -> "6.0"
        integral = pc.match_substring_regex(text, r"^-?[0-9]+$")
        text = pc.if_else(integral, pc.binary_join_element_wise(text, ".0", ""), text)
    elif pa.types.is_integer(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_boolean(kind):
        text = pc.if_else(column, "true", "false")
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        column = column.cast(pa.string())
        if pc.any(pc.match_substring_regex(column, _NEEDS_ESCAPE)).as_py():
            text = pa.array(
                [None if v is None else _dumps(v) for v in column.to_pylist()], pa.string()
            )
        else:
            text = pc.binary_join_element_wise('"', column, '"', "")
    elif pa.types.is_timestamp(kind):
        utc = column.cast(pa.timestamp(kind.unit, tz="UTC"))
        stamp = pc.strftime(utc, format="%Y-%m-%dT%H:%M:%S")
        text = pc.binary_join_element_wise('"', stamp, 'Z"', "")
    elif pa.types.is_date(kind):
        text = pc.binary_join_element_wise('"', pc.cast(column, pa.string()), '"', "")
    elif pa.types.is_null(kind):
        return pa.array(["null"] * len(column), pa.string())
    else:  # lists, structs, decimals, binary ...: rare, per value
        text = pa.array(
            [None if v is None else _dumps(json_safe(v)) for v in column.to_pylist()], pa.string()
        )
    return pc.fill_null(text, "null")


def check_batch(batch: pa.RecordBatch, run_id: str, split: str) -> None:
    """Refuse a sample batch without a complete ``sample_id`` column (InvalidRecord)."""
    if "sample_id" not in batch.schema.names:
        raise InvalidRecord(
            f"samples of run {run_id} split {split!r} have no 'sample_id' column (columns: "
            f"{', '.join(batch.schema.names)}); add one that identifies each sample"
        )
    if batch.column("sample_id").null_count:
        raise InvalidRecord(
            f"samples of run {run_id} split {split!r} have rows without a sample_id; give "
            "every row one"
        )


ROW_FIELD = "warehouse_row"
"""Hidden per-document row number: unsorted reads return rows in the order they were written."""


def sample_items(
    batch: pa.RecordBatch,
    index: str,
    run_id: str,
    experiment: str,
    split: str,
    recorded_at: str,
    first_row: int,
) -> pa.Array:
    """Bulk ``index`` items (action line + document line, each ending in a newline).

    Fields come in the local store's order: ``run_id``, ``experiment``, ``split`` (these
    replace any columns of those names), ``sample_id``, the other columns, then
    ``output_uri`` (null) and ``recorded_at`` when the batch has none, and the hidden
    :data:`ROW_FIELD`. ``_id`` = ``run_id:split:sample_id``.
    """
    import numpy as np

    names = batch.schema.names
    fixed = {"run_id": run_id, "experiment": experiment, "split": split}
    head = ",".join(f"{_dumps(k)}:{_dumps(v)}" for k, v in fixed.items())
    ids = batch.column("sample_id").cast(pa.string())
    pieces: list[Any] = [
        "{" + head,
        pc.binary_join_element_wise(',"sample_id":', _json_text(ids), ""),
    ]
    for number, name in enumerate(names):
        if name in fixed or name == "sample_id":
            continue
        pieces.append(
            pc.binary_join_element_wise(f",{_dumps(name)}:", _json_text(batch.column(number)), "")
        )
    tail = ""
    if "output_uri" not in names:
        tail += ',"output_uri":null'
    if "recorded_at" not in names:
        tail += f',"recorded_at":{_dumps(recorded_at)}'
    rows = pa.array(np.arange(first_row, first_row + len(batch), dtype=np.int64))
    pieces.append(
        pc.binary_join_element_wise(f'{tail},"{ROW_FIELD}":', pc.cast(rows, pa.string()), "")
    )
    doc = pc.binary_join_element_wise(*pieces, "}\n", "")
    prefix = f"{run_id}:{split}:"
    if pc.any(pc.match_substring_regex(ids, _NEEDS_ESCAPE)).as_py() or _dumps(prefix) != (
        f'"{prefix}"'
    ):
        quoted = pa.array([_dumps(f"{prefix}{s}") for s in ids.to_pylist()], pa.string())
    else:
        quoted = pc.binary_join_element_wise(f'"{prefix}', ids, '"', "")
    head_line = pc.binary_join_element_wise(
        f'{{"index":{{"_index":{_dumps(index)},"_id":', quoted, "}}\n", ""
    )
    return pc.binary_join_element_wise(head_line, doc, "")


def batches_of(rows: Iterator[dict[str, Any]], size: int = 16_384) -> Iterator[pa.RecordBatch]:
    """Sample rows read back (``_source`` dicts) as Arrow batches of at most ``size`` rows."""
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield pa.RecordBatch.from_pylist(chunk)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk)


# ----------------------------------------------------------------------------------------
# sending


@dataclass
class BulkResult:
    """What one bulk write did."""

    ok: int = 0
    existing: int = 0  # create on an existing _id, or an older version: already stored
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (_id, reason)

    def add(self, other: BulkResult) -> None:
        self.ok += other.ok
        self.existing += other.existing
        self.rejected.extend(other.rejected)


class _Items:
    """Bulk items held either as one Arrow string array or as a list of bytes."""

    def __init__(self, items: pa.Array | Sequence[bytes]) -> None:
        self._list: Sequence[bytes] | None = None
        self._buf = b""
        self._offsets: Sequence[int] = (0,)
        if isinstance(items, pa.Array):
            if len(items):
                items = items.cast(pa.large_string())
                self._buf = items.buffers()[2].to_pybytes()
                view = memoryview(items.buffers()[1]).cast("q")
                self._offsets = view[items.offset : items.offset + len(items) + 1]
        else:
            self._list = items
        self.n = len(items)

    def chunks(self, max_docs: int, max_bytes: int) -> Iterator[tuple[int, int]]:
        """``(start, end)`` item ranges of at most ``max_docs`` items and about ``max_bytes``."""
        if self._list is None:
            offsets, start = self._offsets, 0
            while start < self.n:
                limit = bisect.bisect_right(offsets, offsets[start] + max_bytes) - 1
                end = max(start + 1, min(start + max_docs, limit, self.n))
                yield start, end
                start = end
            return
        size, first = 0, 0
        for number, item in enumerate(self._list):
            if number > first and (number - first >= max_docs or size + len(item) > max_bytes):
                yield first, number
                first, size = number, 0
            size += len(item)
        if first < self.n:
            yield first, self.n

    def body(self, start: int, end: int) -> bytes:
        if self._list is not None:
            return b"".join(self._list[start:end])
        return self._buf[self._offsets[start] : self._offsets[end]]

    def item(self, number: int) -> bytes:
        return self.body(number, number + 1)


def send(
    client: Elasticsearch,
    items: pa.Array | Sequence[bytes],
    *,
    refresh: str | bool = False,
    max_docs: int = MAX_CHUNK_DOCS,
    max_bytes: int = MAX_CHUNK_BYTES,
    max_retries: int = 5,
    initial_backoff_s: float = 0.5,
    max_backoff_s: float = 30.0,
) -> BulkResult:
    """Send bulk items in chunks; 429/5xx items are retried with backoff, others reported."""
    held = _Items(items)
    result = BulkResult()
    for start, end in held.chunks(max_docs, max_bytes):
        body = held.body(start, end)
        positions = list(range(start, end))
        for attempt in range(max_retries + 1):
            if attempt:
                time.sleep(min(max_backoff_s, initial_backoff_s * 2 ** (attempt - 1)))
            answer = client.bulk(operations=body, refresh=refresh)  # type: ignore[arg-type]
            retry: list[int] = []
            for position, entry in zip(positions, answer.body["items"], strict=True):
                ((op, outcome),) = entry.items()
                status = int(outcome.get("status", 500))
                if 200 <= status < 300:
                    result.ok += 1
                elif status == 409:  # create on our deterministic _id: already stored
                    result.existing += 1
                elif status in RETRY_STATUSES and attempt < max_retries:
                    retry.append(position)
                else:
                    result.rejected.append((str(outcome.get("_id")), _reason(op, outcome)))
            if not retry:
                break
            log.info("Elasticsearch pushed back on %d bulk item(s); retrying", len(retry))
            positions = retry
            body = b"".join(held.item(p) for p in retry)
    return result


def _reason(op: str, outcome: Mapping[str, Any]) -> str:
    error = outcome.get("error")
    status = outcome.get("status")
    if isinstance(error, Mapping):
        text = f"{error.get('type')}: {error.get('reason')}"
        cause = error.get("caused_by")
        if isinstance(cause, Mapping) and cause.get("reason"):
            text += f" ({cause.get('reason')})"
        return f"{op} rejected with {status}: {text}"
    return f"{op} rejected with {status}: {error}"


__all__ = [
    "ROW_FIELD",
    "BulkResult",
    "action",
    "batches_of",
    "check_batch",
    "encode",
    "item_lines",
    "run_from_source",
    "run_source",
    "sample_items",
    "send",
]
