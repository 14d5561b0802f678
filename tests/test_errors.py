"""Every error class pickles, carries an exit code and keeps its context."""

from __future__ import annotations

import pickle

import pytest

from warehouse import errors

ALL = [getattr(errors, name) for name in errors.__all__]


@pytest.mark.parametrize("cls", ALL, ids=[c.__name__ for c in ALL])
def test_every_error_round_trips_through_pickle_with_its_context(cls: type) -> None:
    exc = cls("cannot reach http://es:9200; run 'warehouse sync' later", url="http://es:9200")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc)
    assert back.url == "http://es:9200"
    assert back.exit_code == cls.exit_code


def test_exit_codes_match_the_documented_table() -> None:
    assert errors.ConfigurationError.exit_code == 2
    assert errors.QuerySyntaxError.exit_code == 2
    assert errors.InvalidRecord.exit_code == 2
    assert errors.StoreUnavailable.exit_code == 3
    assert errors.ObjectStoreUnavailable.exit_code == 3
    assert errors.NotFound.exit_code == 4
    assert errors.SyncIncomplete.exit_code == 5
    assert errors.WarehouseError.exit_code == 70


def test_every_public_error_is_a_warehouse_error() -> None:
    assert all(issubclass(cls, errors.WarehouseError) for cls in ALL)
