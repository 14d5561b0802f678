"""The run document's content digest (``content_sha256``) survives the trip through
Elasticsearch and catches an edit (issue 25)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from warehouse.settings import load
from warehouse.stores.base import RunQuery
from warehouse.stores.doc_digest import digest, intact, stamp
from warehouse.stores.elastic import ElasticStore, init_elasticsearch

# found by the random crash drill: the test server reads 1 - 0.975 back one bit off
OFF_BY_A_BIT = 1 - 0.975  # 0.025000000000000022


def _doc(run_id: str, value: float) -> dict[str, object]:
    return {
        "run_id": run_id,
        "experiment": "digest",
        "status": "completed",
        "metrics": {"val": {"acc": 1 - value}},
        "decomposition": {"val_error": value, "baseline_error": 0.0},
    }


def test_a_document_read_back_from_elasticsearch_is_intact(es_url: str, es_prefix: str) -> None:
    init_elasticsearch(load(cli={"es_url": es_url, "index_prefix": es_prefix}))
    store = ElasticStore(es_url, prefix=es_prefix)
    try:
        store.write_runs([stamp(_doc("r1", OFF_BY_A_BIT))])
        [back] = store.search_runs(RunQuery(limit=None))
    finally:
        store.close()
    assert intact(back) is True


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300))
def test_an_error_in_the_last_bit_is_not_a_change(value: float) -> None:
    near = math.nextafter(value, math.inf)
    a, b = digest({"v": value}), digest({"v": near})
    # equal unless the two sit on either side of a 12-digit rounding boundary
    assert a == b or f"{value:.12g}" != f"{near:.12g}"


def test_an_edited_metric_is_a_change() -> None:
    doc = stamp(_doc("r1", OFF_BY_A_BIT))
    edited = {**doc, "decomposition": {**doc["decomposition"], "val_error": 0.0250001}}
    assert intact(doc) is True
    assert intact(edited) is False
