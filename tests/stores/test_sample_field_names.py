"""Field names inside structured sample values follow the column-name rule on every store.

Elasticsearch reads a dot in a field name as a path: ``{"a.b": 1, "a.b.c": 2}`` inside a
sample column was refused there (``a.b`` is a number and an object at once) while the local
store kept it, so the two stores answered differently. Struct fields (in lists too) are now
normalised as column names are (``a.b`` → ``a_b``), and two fields that become one are
refused with the path named, before anything is stored.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import warehouse
from tests.helpers import run_main
from warehouse.errors import InvalidRecord
from warehouse.models import normalise_name
from warehouse.query import views
from warehouse.recording.run_rules import nested_names
from warehouse.settings import load
from warehouse.stores.elastic import ElasticStore, init_elasticsearch
from warehouse.stores.local import LocalStore

COLUMNS = itertools.count()
KEY = st.text(st.sampled_from("ab.c _-é/"), min_size=1, max_size=5)


def _unique_once_normalised(keys: list[str]) -> bool:
    return len({normalise_name(k) for k in keys}) == len(keys)


LEAF = st.one_of(st.integers(-5, 5), st.text("xyz", max_size=3))
VALUE = st.recursive(
    LEAF,
    lambda inner: st.dictionaries(KEY, inner, min_size=1, max_size=3).filter(
        lambda d: _unique_once_normalised(list(d))
    ),
    max_leaves=6,
).filter(lambda v: isinstance(v, dict))


def _names(kind: pa.DataType) -> list[str]:
    if pa.types.is_struct(kind):
        return [n for i in range(kind.num_fields) for n in _field_names(kind.field(i))]
    if pa.types.is_list(kind):
        return _names(kind.value_type)
    return []


def _field_names(field: pa.Field) -> list[str]:
    return [field.name, *_names(field.type)]


@given(VALUE)
def test_every_nested_field_name_is_one_a_column_could_have(value: dict) -> None:
    kind = pa.array([value, None]).type
    safe = nested_names(kind, "x")
    assert all(name == normalise_name(name) and "." not in name for name in _names(safe))
    assert pa.array([value]).view(safe).to_pylist()[0] is not None  # the same data


def test_two_fields_that_become_one_are_refused_with_the_path() -> None:
    kind = pa.array([{"outer": {"a.b": 1, "a b": 2}}]).type
    with pytest.raises(InvalidRecord, match=r"sample column 'x\.outer'.*collide"):
        nested_names(kind, "x")


@pytest.fixture
def both(es_env: dict[str, str], home: Path) -> Path:
    init_elasticsearch(load())
    return home


PATH = st.text(st.sampled_from("abc"), min_size=1, max_size=3)


@settings(max_examples=12)
@given(value=VALUE, path=PATH, tail=PATH, listed=st.booleans())
def test_structured_samples_read_the_same_on_both_stores(
    both: Path, value: dict, path: str, tail: str, listed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever else the value holds, it has a dotted name and that name extended (``a.b``
    and ``a.b.c``): a number and an object at once for Elasticsearch's dotted paths."""
    value = {**value, f"{path}.{tail}": 1, f"{path}.{tail}.{tail}": 2}
    assume(_unique_once_normalised(list(value)))
    # a column of its own per example: across runs, one name given an object in one run and
    # a number in another is a conflict of shapes, not of names (see the closing note)
    column = f"detail{next(COLUMNS)}"
    rows = [{"sample_id": k, column: [value, value] if listed else value} for k in range(3)]
    with caplog.at_level(logging.WARNING), warehouse.start_run(experiment="nested") as run:
        run.log_samples("val", rows)
        run.log_metrics("val", {"acc": 0.5})
    assert not [r for r in caplog.records if "rejected" in r.getMessage()]
    with LocalStore(both) as local, ElasticStore.from_settings(load()) as remote:
        got = [list(views.samples(store, run.run_id)) for store in (local, remote)]
    assert len(got[0]) == 3
    assert got[0] == got[1]


def test_a_column_whose_shape_changes_across_runs_is_named_and_kept_locally(
    both: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not a fix, a stated limit: Elasticsearch maps a column once for every run, so a name
    that held an object is refused a number later. The local store keeps the rows, a warning
    says so, and the samples wait in the outbox: ``sync`` names the refusal and fails, and
    nothing is dropped."""
    ids = []
    with caplog.at_level(logging.WARNING):
        for value in ({"y": 1}, 2.5):
            with warehouse.start_run(experiment="shapes") as run:
                run.log_samples("val", [{"sample_id": k, "shape": value} for k in range(2)])
                run.log_metrics("val", {"acc": 0.5})
            ids.append(run.run_id)
    refused = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(refused) == 1
    assert "[shape]" in refused[0]
    with LocalStore(both) as local, ElasticStore.from_settings(load()) as remote:
        assert [len(list(views.samples(local, r))) for r in ids] == [2, 2]
        assert [len(list(views.samples(remote, r))) for r in ids] == [2, 0]
    for _ in range(2):  # still waiting the second time: refused, never dropped
        code, _, err = run_main(["sync"], monkeypatch, capsys)
        assert code != 0
        assert "1 still waiting" in err
        assert f"samples of run {ids[1]} split val" in err
        assert "[shape]" in err
