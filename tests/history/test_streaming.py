"""The streaming writers give what the row-by-row writers give, a batch at a time."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.history.streaming import (
    chunks,
    jsonl_line,
    write_csv_batches,
    write_jsonl_batches,
    write_parquet_rows,
)
from warehouse.output import write_csv
from warehouse.query.api import Result

T = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def tricky_batches() -> list[pa.RecordBatch]:
    rows = [
        {
            "sample_id": "a,b",
            "loss": 0.1,
            "n": 3,
            "ok": True,
            "when": T,
            "tags": ["x", "y"],
            "box": {"w": 1.5, "h": None},
            "nothing": None,
        },
        {
            "sample_id": 'q"x',
            "loss": float("nan"),
            "n": -5,
            "ok": False,
            "when": None,
            "tags": [],
            "box": None,
            "nothing": None,
        },
        {
            "sample_id": "line\nbreak",
            "loss": float("inf"),
            "n": None,
            "ok": None,
            "when": T,
            "tags": None,
            "box": {"w": 2.0, "h": 3.0},
            "nothing": None,
        },
        {
            "sample_id": "",
            "loss": 1e-05,
            "n": 2**62,
            "ok": True,
            "when": T,
            "tags": ["é"],
            "box": None,
            "nothing": None,
        },
        {
            "sample_id": " sp",
            "loss": -0.0,
            "n": 0,
            "ok": False,
            "when": T,
            "tags": None,
            "box": None,
            "nothing": None,
        },
        {
            "sample_id": "big",
            "loss": 1e16,
            "n": 1,
            "ok": True,
            "when": T,
            "tags": None,
            "box": None,
            "nothing": None,
        },
    ]
    table = pa.Table.from_pylist(rows)
    return table.to_batches(max_chunksize=2)


def as_rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for b in batches for row in b.to_pylist()]


@pytest.mark.parametrize(
    "columns", [None, ["n", "loss", "absent", "sample_id", "ok", "when", "tags", "box"]]
)
def test_csv_from_batches_is_byte_for_byte_the_row_writers(columns: list[str] | None) -> None:
    batches = tricky_batches()
    want, got = io.StringIO(), io.StringIO()
    n_want = write_csv(as_rows(batches), want, columns=columns)
    n_got = write_csv_batches(batches, got, columns=columns)
    assert n_got == n_want == 6
    assert got.getvalue() == want.getvalue()
    assert "nan" not in got.getvalue()  # non-finite numbers are empty cells


def test_csv_constants_fill_a_column_on_every_row() -> None:
    batches = tricky_batches()
    got = io.StringIO()
    write_csv_batches(batches, got, columns=["run_id", "n"], constants={"run_id": "r1"})
    want = io.StringIO()
    write_csv([{"run_id": "r1", **r} for r in as_rows(batches)], want, columns=["run_id", "n"])
    assert got.getvalue() == want.getvalue()


def test_csv_without_rows_writes_the_header_it_is_given() -> None:
    for columns, empty in ((None, ["a", "b"]), (["c"], None), (None, None)):
        want, got = io.StringIO(), io.StringIO()
        write_csv([], want, columns=columns, empty_header=empty)
        write_csv_batches([], got, columns=columns, empty_header=empty)
        assert got.getvalue() == want.getvalue()


def test_csv_holds_one_batch_at_a_time() -> None:
    """Each batch is written before the next one is asked for (the writer keeps none)."""
    out = io.StringIO()
    written_when_asked: list[int] = []

    def source() -> Iterator[pa.RecordBatch]:
        for k in range(5):
            written_when_asked.append(out.getvalue().count("\n"))
            yield pa.record_batch({"i": list(range(k * 100, (k + 1) * 100))})

    assert write_csv_batches(source(), out) == 500
    assert written_when_asked == [0, 101, 201, 301, 401]  # header + every earlier row


def test_jsonl_from_batches_equals_one_line_per_row() -> None:
    import json

    batches = tricky_batches()
    out = io.StringIO()
    assert write_jsonl_batches(batches, out) == 6
    lines = out.getvalue().splitlines()
    assert lines == [jsonl_line(r).rstrip("\n") for r in as_rows(batches)]
    assert json.loads(lines[1])["loss"] is None
    assert json.loads(lines[0])["when"].startswith("2026-01-02T03:04:05")


def run_like_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(23):
        row: dict[str, Any] = {"run_id": f"r{i}", "metrics": {"val": {"acc": i / 10}}}
        if i < 10:
            row["params"] = {"seed": i}  # ints in the first chunks ...
        else:
            row["params"] = {"seed": i + 0.5}  # ... floats later: one double column
        row["config"] = {"name": i if i % 7 else f"n{i}"}  # numbers and text: text
        if i == 17:
            row["late"] = {"only": True}  # a column first seen in a late chunk
            row["empty"] = {}
        row["tags"] = ["a"] * (i % 3)
        rows.append(row)
    return rows


@pytest.mark.parametrize("chunk_rows", [1, 5, 10_000])
def test_parquet_in_chunks_reads_back_as_the_whole_table(tmp_path: Path, chunk_rows: int) -> None:
    rows = run_like_rows()
    path = tmp_path / "runs.parquet"
    assert write_parquet_rows(lambda: rows, path, chunk_rows=chunk_rows) == len(rows)
    got = pq.read_table(path)
    want = Result(rows).to_arrow()
    assert got.column_names == want.column_names
    assert got.to_pylist() == want.to_pylist()
    assert got.schema.field("params.seed").type == pa.float64()
    assert got.schema.field("config.name").type == pa.string()


def test_parquet_of_no_rows_is_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "none.parquet"
    assert write_parquet_rows(lambda: [], path) == 0
    assert pq.read_table(path).num_rows == 0


def test_chunks_cover_every_row_once() -> None:
    parts = list(chunks(range(25), 10))
    assert [len(p) for p in parts] == [10, 10, 5]
    assert [x for p in parts for x in p] == list(range(25))


def test_float_text_in_bulk_is_pythons_repr_for_floats_of_every_magnitude() -> None:
    import math
    import random

    import numpy as np

    from warehouse.history.csv_columns import float_reprs

    rng = random.Random(20261124)
    values = [0.1, 1.0, -0.0, 0.0, 1e-05, 9.99e-05, 1e-4, 1e-7, 5e-324, 1e15, 1e16, 1e22]
    values += [9.999999999999999e15, 123456789012.0, 2.0**53, 1.7976931348623157e308]
    values += [float("nan"), float("inf"), -float("inf")]
    values += [
        rng.random() * 10.0 ** rng.randint(-12, 20) * rng.choice((1, -1)) for _ in range(200_000)
    ]
    values += [float(rng.randint(-(10**6), 10**6)) for _ in range(20_000)]
    values += [rng.randint(1, 9) * 10.0 ** rng.randint(-12, 20) for _ in range(20_000)]
    got = float_reprs(np.array(values)).to_pylist()
    want = [repr(v) if math.isfinite(v) else None for v in values]
    wrong = [(v, g, w) for v, g, w in zip(values, got, want, strict=True) if g != w]
    assert wrong == []


def test_csv_cells_needing_quotes_dictionaries_and_constants_match_the_row_writer() -> None:
    table = pa.table(
        {
            "name": pa.array(["plain", "", None, 'say "hi"', "a,b", "x\ny"]),
            "group": pa.array(["g,1", "g2", None, "g2", "g,1", "g2"]).dictionary_encode(),
            "score": pa.array([0.5, None, 1.0, 2.5e-05, float("nan"), 3.0]),
            "n": pa.array([1, None, -2, 0, 5, 6], pa.int16()),
        }
    )
    batches = table.to_batches(max_chunksize=4)
    want, got = io.StringIO(), io.StringIO()
    rows = [{"split": "val,test", **r} for r in as_rows(batches)]
    columns = ["split", "name", "group", "score", "n"]
    write_csv(rows, want, columns=columns)
    write_csv_batches(batches, got, columns=columns, constants={"split": "val,test"})
    assert got.getvalue() == want.getvalue()


@pytest.mark.parametrize("columns", [["sample_id"], ["loss"], ["absent"]])
def test_a_one_column_csv_writes_a_lone_empty_field_as_the_row_writer_does(
    columns: list[str],
) -> None:
    batches = tricky_batches()
    want, got = io.StringIO(), io.StringIO()
    write_csv(as_rows(batches), want, columns=columns)
    write_csv_batches(batches, got, columns=columns)
    assert got.getvalue() == want.getvalue()
    assert '""' in got.getvalue()  # csv.writer quotes an empty field alone on its line
