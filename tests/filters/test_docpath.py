"""Dotted paths into documents, where keys may hold dots themselves."""

from __future__ import annotations

from warehouse.filters.docpath import flatten, get_path, project

DOC = {
    "run_id": "r1",
    "ended_at": None,
    "params": {"model.C": 3, "seed": 1},
    "metrics": {"val": {"acc": 0.5}, "train": {"acc": 0.9}},
    "git": {"commit": None, "branch": "main"},
}


def test_get_path_reads_keys_that_contain_dots() -> None:
    assert get_path(DOC, "params.model.C") == 3
    assert get_path(DOC, "metrics.val.acc") == 0.5
    assert get_path(DOC, "metrics.val.f1") is None
    assert get_path(DOC, "nowhere") is None


def test_project_keeps_the_paths_asked_for_nested_as_stored() -> None:
    assert project(DOC, ["run_id", "params.model.C", "metrics.val.acc", "absent"]) == {
        "run_id": "r1",
        "params": {"model.C": 3},
        "metrics": {"val": {"acc": 0.5}},
    }


def test_project_keeps_present_nulls_as_elasticsearch_source_filtering_does() -> None:
    assert project(DOC, ["ended_at", "git.commit"]) == {"ended_at": None, "git": {"commit": None}}


def test_flatten_makes_dotted_keys_and_keeps_lists_and_empty_maps_as_leaves() -> None:
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": {}, "e": "x"}) == {
        "a.b": 1,
        "a.c": [1, 2],
        "d": {},
        "e": "x",
    }
