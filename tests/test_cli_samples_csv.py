"""`query samples --limit 0 --format csv` streams Arrow batches, and says exactly what the
row-by-row CSV writer says for the same rows, on both stores."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import warehouse
from tests.helpers import run_main
from warehouse.output import write_csv
from warehouse.query import views
from warehouse.settings import load
from warehouse.stores import open_store


@pytest.fixture(params=["local", "elasticsearch"])
def engine(request: pytest.FixtureRequest, home: Path) -> str:
    if request.param == "elasticsearch":
        from warehouse.stores.elastic import init_elasticsearch

        request.getfixturevalue("es_env")
        init_elasticsearch(load())
    return str(request.param)


def test_every_sample_as_csv_equals_the_row_by_row_writer(
    engine: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with warehouse.start_run("csv") as run:
        for split, n in (("val", 1200), ("train", 30)):
            run.log_samples(
                split,
                [
                    {
                        "sample_id": f"{split}-{i}",
                        "correct": i % 3 > 0,
                        "loss": None if i % 7 == 0 else i / 7,
                        "label": f'cat "{i % 4}", ok',
                    }
                    for i in range(n)
                ],
            )
    from warehouse.stores.elastic import ElasticStore
    from warehouse.stores.local import LocalStore

    row_reads: list[str] = []  # the dict-per-row path must not be taken

    def counted(patch: pytest.MonkeyPatch, cls: type) -> None:
        original = cls.search_samples

        def search_samples(self: object, query: object) -> object:
            row_reads.append(cls.__name__)
            return original(self, query)

        patch.setattr(cls, "search_samples", search_samples)

    for split in ("val", None):
        args = ["query", "samples", "--run", run.run_id, "--limit", "0", "-f", "csv"]
        with monkeypatch.context() as patch:
            counted(patch, LocalStore)
            counted(patch, ElasticStore)
            code, out, err = run_main(
                [*args, *(["--split", split] if split else [])], patch, capsys
            )
        assert code == 0, err
        assert row_reads == []
        with open_store(load()) as store:
            rows = views.samples(store, run.run_id, split=split, limit=None)
            expected = io.StringIO()
            write_csv(rows, expected)
        assert out == expected.getvalue()
        assert out.count("\n") == 1 + (1200 if split else 1230)
