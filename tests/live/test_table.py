"""Step documents as flat rows (what `warehouse query steps` prints)."""

from __future__ import annotations

import csv
import io

from warehouse.query.live_table import step_columns, step_rows

DOCS = [
    {
        "@timestamp": "2026-01-01T00:00:00.000000Z",
        "run_id": "r",
        "experiment": "e",
        "seq": 0,
        "step": 0,
        "epoch": 0,
        "metrics": {"loss": 1.0},
        "system": {"cpu_pct": 50.0, "ram_used_bytes": 10},
    },
    {
        "@timestamp": "2026-01-01T00:00:01.000000Z",
        "run_id": "r",
        "experiment": "e",
        "seq": 1,
        "step": 1,
        "epoch": 0,
        "duration_s": 1.0,
        "metrics": {"loss": 0.5, "lr": 0.1, "step": 9.0},
        "flags": {"loss_trend": "down"},
    },
    {
        "@timestamp": "2026-01-01T00:00:02.000000Z",
        "run_id": "r",
        "experiment": "e",
        "seq": 2,
        "step": 1,
        "epoch": 0,
        "metrics": {},
        "system": {"cpu_pct": 20.0, "gpu_util_pct": 97.0, "gpu_mem_used_bytes": 5},
        "gpus": [{"index": 0, "util_pct": 97.0}],
    },
]


def test_columns_follow_the_flodl_csv_order_and_only_hold_what_exists() -> None:
    assert step_columns(DOCS) == [
        "timestamp",
        "seq",
        "step",
        "epoch",
        "duration_s",
        "loss",
        "lr",
        "metrics.step",
        "loss_trend",
        "cpu_pct",
        "ram_used_bytes",
        "gpu_util_pct",
        "gpu_mem_used_bytes",
    ]


def test_every_row_has_every_column_and_writes_as_csv() -> None:
    rows = list(step_rows(DOCS))
    assert len(rows) == 3
    assert all(list(r) == list(rows[0]) for r in rows)
    assert rows[1]["loss"] == 0.5
    assert rows[1]["metrics.step"] == 9.0
    assert rows[1]["step"] == 1
    assert rows[0]["duration_s"] is None
    assert rows[2]["gpu_util_pct"] == 97.0
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    assert out.getvalue().splitlines()[0].startswith("timestamp,seq,step,epoch,duration_s,loss")


def test_given_columns_stream_documents_without_reading_them_first() -> None:
    def docs():  # a generator: can be read once only
        yield from DOCS

    rows = list(step_rows(docs(), columns=["step", "loss", "cpu_pct"]))
    assert rows == [
        {"step": 0, "loss": 1.0, "cpu_pct": 50.0},
        {"step": 1, "loss": 0.5, "cpu_pct": None},
        {"step": 1, "loss": None, "cpu_pct": 20.0},
    ]
