"""The checking layer in front of the test server (``tests/strict_es.py``): every rule refuses
what Elasticsearch 9 refuses, with its status and error type, and lets the rest through
untouched. Each request goes through the session's layer with the official client."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from elasticsearch import ApiError, BadRequestError, Elasticsearch, helpers

from tests.servers import StrictProxy
from tests.strict_es import MAX_BUCKETS, count_buckets


@pytest.fixture
def client(es_url: str) -> Iterator[Elasticsearch]:
    with Elasticsearch(es_url, request_timeout=60) as es:
        yield es


@pytest.fixture
def index(client: Elasticsearch, es_prefix: str) -> str:
    """An index of this test with a keyword, a number, a date, a text and a flattened field."""
    name = f"{es_prefix}-probe"
    client.indices.create(
        index=name,
        mappings={
            "properties": {
                "group": {"type": "keyword"},
                "score": {"type": "double"},
                "at": {"type": "date"},
                "note": {"type": "text"},
                "params": {"type": "flattened"},
            }
        },
    )
    docs = [
        {
            "group": f"g{i % 7}",
            "score": i / 100,
            "at": f"2026-01-{1 + i % 28:02d}T00:00:00Z",
            "note": f"run number {i}",
            "params": {"lr": str(i % 3), "opt": "adam" if i % 2 else "sgd"},
        }
        for i in range(60)
    ]
    helpers.bulk(client, [{"_index": name, "_source": d} for d in docs], refresh=True)
    return name


def refused(call: Any, kind: str, status: int = 400) -> str:
    """The reason of the refusal ``call`` meets (its type must be ``kind``)."""
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status_code == status
    body = caught.value.body
    assert body["error"]["root_cause"][0]["type"] == kind, body
    return str(body["error"]["root_cause"][0]["reason"])


def test_requests_within_the_rules_pass_through_unchanged(
    client: Elasticsearch, index: str, strict_es: StrictProxy
) -> None:
    with Elasticsearch(f"http://{strict_es.upstream[0]}:{strict_es.upstream[1]}") as direct:
        body = {
            "size": 3,
            "sort": [{"score": "desc"}],
            "aggs": {"g": {"terms": {"field": "group", "size": 10}}},
        }
        through = client.search(index=index, **body).body
        plain = direct.search(index=index, **body).body
    assert through["hits"] == plain["hits"]
    assert through["aggregations"] == plain["aggregations"]
    assert len(through["aggregations"]["g"]["buckets"]) == 7


def test_more_buckets_than_search_max_buckets_are_refused(
    client: Elasticsearch, index: str
) -> None:
    def histogram(days: int) -> Any:
        bounds = {"min": "2026-01-01T00:00:00Z", "max": f"2026-{1 + days // 28:02d}-01T00:00:00Z"}
        return lambda: client.search(
            index=index,
            size=0,
            aggs={
                "h": {
                    "date_histogram": {
                        "field": "at",
                        "fixed_interval": "1m",
                        "min_doc_count": 0,
                        "extended_bounds": bounds,
                    }
                }
            },
        )

    answer = histogram(28)()  # 31 days of minutes: 44,641 buckets
    assert count_buckets(answer.body["aggregations"]) == 44_641 < MAX_BUCKETS
    reason = refused(histogram(56), "too_many_buckets_exception")  # 59 days: 84,961
    assert "[65536]" in reason
    assert "search.max_buckets" in reason


def test_buckets_count_at_every_level_but_single_bucket_aggregations_do_not() -> None:
    answer = {
        "outer": {
            "buckets": [
                {"key": "a", "inner": {"buckets": [{"key": 1}, {"key": 2}]}},
                {"key": "b", "f": {"doc_count": 3, "inner": {"buckets": [{"key": 1}]}}},
            ]
        },
        "one": {"doc_count": 4},
        "keyed": {"buckets": {"x": {"doc_count": 1}, "y": {"doc_count": 2}}},
        "top": {"hits": {"hits": [{"_source": {"buckets": [1, 2, 3]}}]}},
    }
    assert count_buckets(answer) == 2 + 2 + 1 + 2


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"sort": [{"nope": {"order": "desc"}}]}, id="search-sort"),
        pytest.param({"sort": ["nope"]}, id="search-sort-by-name"),
        pytest.param(
            {"aggs": {"t": {"top_hits": {"size": 1, "sort": [{"nope": "desc"}]}}}},
            id="top-hits-sort",
        ),
        pytest.param(
            {
                "collapse": {
                    "field": "group",
                    "inner_hits": {"name": "i", "size": 2, "sort": [{"nope": "asc"}]},
                }
            },
            id="inner-hits-sort",
        ),
    ],
)
def test_a_sort_on_an_unmapped_field_needs_unmapped_type(
    client: Elasticsearch, index: str, body: dict[str, Any]
) -> None:
    reason = refused(lambda: client.search(index=index, size=1, **body), "query_shard_exception")
    assert reason == "No mapping found for [nope] in order to sort on"
    typed = {"sort": [{"nope": {"order": "desc", "unmapped_type": "double"}}]}
    assert client.search(index=index, size=1, **typed).body["hits"]["hits"]


def test_sorts_on_id_and_on_text_have_no_field_data(client: Elasticsearch, index: str) -> None:
    reason = refused(lambda: client.search(index=index, sort=["_id"]), "illegal_argument_exception")
    assert "indices.id_field_data.enabled" in reason
    reason = refused(
        lambda: client.search(index=index, sort=[{"note": "asc"}]), "illegal_argument_exception"
    )
    assert "fielddata=true on [note]" in reason
    aggs = {"n": {"terms": {"field": "note"}}}
    refused(lambda: client.search(index=index, size=0, aggs=aggs), "illegal_argument_exception")


def test_result_windows(client: Elasticsearch, index: str) -> None:
    reason = refused(
        lambda: client.search(index=index, from_=9_995, size=6), "illegal_argument_exception"
    )
    assert "[10000] but was [10001]" in reason
    top = {"t": {"top_hits": {"size": 101}}}
    reason = refused(lambda: client.search(index=index, aggs=top), "illegal_argument_exception")
    assert "[100] but was [101]" in reason
    assert "index.max_inner_result_window" in reason
    client.search(index=index, aggs={"t": {"top_hits": {"size": 100}}})
    inner = {"field": "group", "inner_hits": {"name": "all", "size": 101}}
    refused(lambda: client.search(index=index, collapse=inner), "illegal_argument_exception")
    after = {"sort": [{"score": "asc"}], "search_after": [0.5], "from_": 3}
    reason = refused(lambda: client.search(index=index, **after), "illegal_argument_exception")
    assert "search_after" in reason
    metrics = {"m": {"top_metrics": {"metrics": {"field": "score"}, "sort": "_score", "size": 11}}}
    refused(lambda: client.search(index=index, aggs=metrics), "illegal_argument_exception")


def test_a_collapse_field_must_be_mapped(client: Elasticsearch, index: str) -> None:
    reason = refused(
        lambda: client.search(index=index, collapse={"field": "nope"}), "illegal_argument_exception"
    )
    assert reason == "no mapping found for `nope` in order to collapse on"
    assert client.search(index=index, collapse={"field": "group"}, size=20).body["hits"]["hits"]


def test_keyed_flattened_fields_refuse_wildcards_and_one_sided_ranges(
    client: Elasticsearch, index: str
) -> None:
    wild = {"wildcard": {"params.opt": {"value": "a*"}}}
    reason = refused(lambda: client.search(index=index, query=wild), "query_shard_exception")
    assert "[wildcard] queries are not currently supported on keyed [flattened]" in reason
    one_sided = {"range": {"params.lr": {"gte": "1"}}}
    reason = refused(
        lambda: client.search(index=index, query=one_sided), "illegal_argument_exception"
    )
    assert "must include both an upper and a lower bound" in reason
    both = {"range": {"params.lr": {"gte": "1", "lte": "\U0010ffff"}}}
    assert client.count(index=index, query=both).body["count"] == 40
    prefix = {"prefix": {"params.opt": {"value": "ad"}}}
    assert client.count(index=index, query=prefix).body["count"] == 30
    nested = {"bool": {"filter": [{"bool": {"should": [wild]}}]}}
    refused(lambda: client.count(index=index, query=nested), "query_shard_exception")


def test_wildcards_on_numbers_and_dates_are_refused(client: Elasticsearch, index: str) -> None:
    query = {"wildcard": {"score": {"value": "0.1*"}}}
    reason = refused(lambda: client.search(index=index, query=query), "query_shard_exception")
    assert "not on [score] which is of type [double]" in reason


def test_date_histograms_take_kibanas_rewritten_intervals_only(
    client: Elasticsearch, index: str
) -> None:
    def histogram(**interval: str) -> Any:
        aggs = {"h": {"date_histogram": {"field": "at", **interval}}}
        return lambda: client.search(index=index, size=0, aggs=aggs)

    refused(histogram(interval="1d"), "x_content_parse_exception")  # gone since 8.0
    refused(histogram(calendar_interval="2d"), "illegal_argument_exception")
    refused(histogram(fixed_interval="1M"), "illegal_argument_exception")
    assert histogram(calendar_interval="1d")().body["aggregations"]["h"]["buckets"]
    assert histogram(fixed_interval="12h")().body["aggregations"]["h"]["buckets"]


def test_numeric_metrics_refuse_keywords(client: Elasticsearch, index: str) -> None:
    aggs = {"m": {"avg": {"field": "group"}}}
    reason = refused(
        lambda: client.search(index=index, size=0, aggs=aggs), "illegal_argument_exception"
    )
    assert reason == "Field [group] of type [keyword] is not supported for aggregation [avg]"


@pytest.mark.parametrize(
    ("order", "ok"),
    [
        pytest.param({"best": "desc"}, True, id="metric"),
        pytest.param({"f>best": "desc"}, True, id="through-a-filter"),
        pytest.param({"st.max": "desc"}, True, id="multi-value-metric"),
        pytest.param({"st": "desc"}, False, id="multi-value-metric-without-value"),
        pytest.param({"inner": "desc"}, False, id="multi-bucket"),
        pytest.param({"nope": "desc"}, False, id="missing"),
    ],
)
def test_terms_order_paths(
    client: Elasticsearch, index: str, order: dict[str, str], ok: bool
) -> None:
    aggs = {
        "g": {
            "terms": {"field": "group", "order": order},
            "aggs": {
                "best": {"max": {"field": "score"}},
                "st": {"stats": {"field": "score"}},
                "f": {"filter": {"match_all": {}}, "aggs": {"best": {"max": {"field": "score"}}}},
                "inner": {"terms": {"field": "group"}},
            },
        }
    }

    def call() -> Any:
        return client.search(index=index, size=0, aggs=aggs)

    if ok:
        assert call().body["aggregations"]["g"]["buckets"]
    else:
        assert "Invalid aggregation order path" in refused(call, "aggregation_execution_exception")


def test_a_terms_query_takes_at_most_65536_values(client: Elasticsearch, index: str) -> None:
    many = {"terms": {"group": [f"v{i}" for i in range(65_537)]}}
    reason = refused(lambda: client.count(index=index, query=many), "illegal_argument_exception")
    assert "index.max_terms_count" in reason


@pytest.fixture
def stream(client: Elasticsearch, es_prefix: str) -> Iterator[str]:
    """A data stream's name (its template installed; the stream made by the first create)."""
    template = f"{es_prefix}-ds-template"
    client.indices.put_index_template(
        name=template,
        index_patterns=[f"{es_prefix}-ds*"],
        data_stream={},
        priority=900,
        template={"mappings": {"properties": {"@timestamp": {"type": "date"}}}},
    )
    yield f"{es_prefix}-ds"
    with contextlib.suppress(ApiError):
        client.indices.delete_data_stream(name=f"{es_prefix}-ds")
    with contextlib.suppress(ApiError):
        client.indices.delete_index_template(name=template)


def test_a_data_stream_takes_only_create_ops(
    client: Elasticsearch, stream: str, index: str
) -> None:
    doc = {"@timestamp": "2026-01-01T00:00:00Z", "v": 1}
    answer = client.bulk(
        operations=[
            {"create": {"_index": stream, "_id": "a"}},
            doc,
            {"index": {"_index": stream, "_id": "b"}},
            doc,
            {"index": {"_index": index, "_id": "c"}},
            {"group": "g9", "score": 1.0},
        ],
        refresh=True,
    ).body
    assert answer["errors"] is True
    statuses = [next(iter(item.values()))["status"] for item in answer["items"]]
    assert statuses == [201, 400, 201]
    error = answer["items"][1]["index"]["error"]
    assert error["reason"] == "only write ops with an op_type of create are allowed in data streams"
    assert client.count(index=stream).body["count"] == 1  # the create went through, once
    assert client.count(index=index, query={"term": {"group": "g9"}}).body["count"] == 1
    with pytest.raises(BadRequestError):
        client.index(index=stream, id="d", document=doc)
    client.create(index=stream, id="e", document=doc, refresh=True)
    assert client.count(index=stream).body["count"] == 2
