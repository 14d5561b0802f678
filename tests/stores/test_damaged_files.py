"""Issue 14 item 10: a flipped byte in a Parquet file of the local store never answers
garbage. Sample files carry page checksums (verified on read) and their footer's two schemas
are compared; a damaged file is reported by its path. The run catalog, a cache of runs/, is
rebuilt instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.errors import StoreUnavailable
from warehouse.models import Run
from warehouse.stores.base import RunQuery, SampleQuery
from warehouse.stores.local import LocalStore

ROWS = [
    {"sample_id": f"s{i:03d}", "loss": 1.0 / (i + 1), "label": i % 7, "ok": i % 3 == 0}
    for i in range(120)
]


def _read(home: Path, run_id: str, sort: str | None) -> list[dict[str, Any]]:
    with LocalStore(home) as store:
        query = SampleQuery(run_id=run_id, split="val", sort=sort, limit=None)
        rows = list(store.search_samples(query))
    return sorted(
        ({k: r[k] for k in ("sample_id", "loss", "label", "ok")} for r in rows),
        key=lambda r: str(r["sample_id"]),
    )


@pytest.fixture
def written(home: Path) -> tuple[str, Path]:
    run = Run(experiment="damage")
    with LocalStore(home) as store:
        store.write_runs([run.to_doc()])
        store.write_samples(run.run_id, "damage", "val", [pa.RecordBatch.from_pylist(ROWS)])
    return run.run_id, home / "samples" / run.run_id / "val.parquet"


def test_sample_files_are_written_with_page_checksums(written: tuple[str, Path]) -> None:
    _, path = written
    # a CRC in every page header: flip a byte of a data page and pyarrow itself notices
    meta = pq.ParquetFile(path).metadata
    column = meta.row_group(0).column(meta.schema.names.index("loss"))
    data = bytearray(path.read_bytes())
    start = column.dictionary_page_offset or column.data_page_offset
    data[start + column.total_compressed_size - 1] ^= 0x55  # the last page's last data byte
    path.write_bytes(bytes(data))
    with pytest.raises(OSError, match=r"(?i)crc|checksum"):
        pq.ParquetFile(path, page_checksum_verification=True).read()


@pytest.mark.parametrize("sort", [None, "loss"])  # the streaming and the cached read paths
def test_every_flipped_byte_is_either_harmless_or_reported_by_path(
    written: tuple[str, Path], home: Path, sort: str | None
) -> None:
    run_id, path = written
    original = path.read_bytes()
    expected = sorted(ROWS, key=lambda r: str(r["sample_id"]))
    assert _read(home, run_id, sort) == expected
    reported = 0
    for offset in range(0, len(original), 5):
        damaged = bytearray(original)
        damaged[offset] ^= 0xFF
        path.write_bytes(bytes(damaged))
        error = ""
        try:
            got = _read(home, run_id, sort)
        except StoreUnavailable as exc:
            error = str(exc)
        if error:
            assert str(path) in error, (offset, error)
            assert "damaged" in error, (offset, error)
            reported += 1
        else:
            assert got == expected, f"a flipped byte at {offset} answered different rows"
    assert reported > len(original) // 5 // 2  # most bytes matter: the check is not vacuous


def test_a_damaged_run_catalog_is_rebuilt_from_the_run_files(home: Path) -> None:
    docs = [Run(experiment="damage", metrics={"val": {"acc": i / 10}}).to_doc() for i in range(5)]
    with LocalStore(home) as store:
        store.write_runs(docs)
        store.compact()
    catalog = home / "catalog" / "runs.parquet"
    original = catalog.read_bytes()
    expected = sorted(d["run_id"] for d in docs)
    for offset in range(0, len(original), max(1, len(original) // 40)):
        damaged = bytearray(original)
        damaged[offset] ^= 0xFF
        catalog.write_bytes(bytes(damaged))
        with LocalStore(home) as store:
            runs = store.search_runs(RunQuery(limit=None, fields=("run_id", "metrics.val.acc")))
        assert sorted(r["run_id"] for r in runs) == expected, offset
        assert sorted(r["metrics"]["val"]["acc"] for r in runs) == [i / 10 for i in range(5)]
