"""The Elasticsearch store beyond the shared contract: templates, mapping robustness, errors.

Runs against the session's Elasticsearch-API server (noida-db, or WAREHOUSE_TEST_ES_URL);
each test works under its own index prefix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig, Urllib3HttpNode
from elasticsearch import (
    AuthenticationException,
    AuthorizationException,
    BadRequestError,
    Elasticsearch,
    NotFoundError,
    UnsupportedProductError,
)

from tests.servers import free_port
from warehouse.errors import (
    ConfigurationError,
    InvalidRecord,
    NotFound,
    QuerySyntaxError,
    StoreUnavailable,
)
from warehouse.models import Run
from warehouse.settings import load
from warehouse.stores.base import RankQuery, RunQuery, SampleQuery, StepRange
from warehouse.stores.elastic import ElasticStore, map_error, public_url
from warehouse.stores.elastic_templates import MAX_TYPED_PARAMS, export, templates

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def es(es_url: str, es_prefix: str) -> Iterator[ElasticStore]:
    with ElasticStore(es_url, prefix=es_prefix) as store:
        store.install()
        yield store


@pytest.fixture
def raw(es_url: str) -> Iterator[Elasticsearch]:
    with Elasticsearch(es_url) as client:
        yield client


def run_doc(experiment: str = "exp", acc: float | None = 0.9, **extra: Any) -> dict[str, Any]:
    extra.setdefault("metrics", {"val": {"acc": acc}} if acc is not None else {})
    extra.setdefault("status", "completed")  # a running run is never an experiment's best
    return Run(experiment=experiment, **extra).to_doc()


# templates ----------------------------------------------------------------------------------
def test_committed_index_templates_equal_the_generated_ones(tmp_path: Path) -> None:
    generated = {p.name: p.read_text() for p in export(tmp_path / "t")}
    committed = {p.name: p.read_text() for p in (REPO / "index_templates").glob("*.json")}
    assert committed == generated, "run 'warehouse export-templates' and commit the files"


def test_templates_outrank_builtin_ones_and_never_overlap_each_other() -> None:
    index = [t for t in templates("warehouse") if t.kind == "index"]
    patterns = [p for t in index for p in t.body["index_patterns"]]
    assert all(t.body["priority"] >= 500 for t in index)
    assert len(set(patterns)) == len(patterns) == 3
    assert not any(p.startswith(("logs-", "metrics-")) for p in patterns)


def test_init_creates_everything_then_keeps_it(es_url: str, es_prefix: str) -> None:
    with ElasticStore(es_url, prefix=es_prefix) as store:
        assert set(store.template_status().values()) == {"missing"}
        first = store.install()
        second = store.install()
        assert set(store.template_status().values()) == {"installed"}
    assert {outcome for _, _, outcome in first[:6]} == {"created"}
    assert [o for _, _, o in second if o not in ("kept",) and "first step" not in o] == []


def test_writing_before_init_asks_for_warehouse_init(es_url: str, es_prefix: str) -> None:
    with ElasticStore(es_url, prefix=es_prefix) as store, pytest.raises(ConfigurationError) as e:
        store.write_runs([run_doc()])
    assert "warehouse init" in str(e.value)
    assert f"{es_prefix}-runs" in str(e.value)


# mapping robustness ----------------------------------------------------------------------------
def test_a_10000_key_config_indexes_and_later_runs_stay_searchable(es: ElasticStore) -> None:
    config = {f"block{i // 100}": {f"key{i % 100}": i * 0.5} for i in range(10_000)}
    params = {f"block{i // 100}.key{i % 100}": i * 0.5 for i in range(10_000)}
    huge = run_doc("huge", 0.5, config=config, params=params)
    es.write_runs([huge])
    later = run_doc(
        "later", None, metrics={"test": {"brand_new_metric": 0.7}}, params={"model.C": 2.0}
    )
    es.write_runs([later])

    (back,) = es.search_runs(RunQuery(filter=f"run_id:{huge['run_id']}"))
    assert back["params"] == params
    assert back["config"] == config
    assert len(back["params"]) > MAX_TYPED_PARAMS
    found = es.search_runs(RunQuery(filter="metrics.test.brand_new_metric:>0.5"))
    assert [r["run_id"] for r in found] == [later["run_id"]]
    assert [
        r.run["run_id"]
        for r in es.best_per_experiment(RankQuery("metrics.test.brand_new_metric", "max"))
    ] == [later["run_id"]]
    assert [r["run_id"] for r in es.search_runs(RunQuery(filter="params.model.C:>=2"))] == [
        later["run_id"]
    ]
    # a key kept beyond the typed ones is still found by exact value
    last_key = sorted(params)[-1]
    hits = es.search_runs(RunQuery(filter=f'params.{last_key}:"{params[last_key]}"'))
    assert [r["run_id"] for r in hits] == [huge["run_id"]]


def test_a_config_key_changing_type_never_rejects_a_run(es: ElasticStore) -> None:
    runs = [
        run_doc("a", 0.1, config={"lr": 0.1, "model": "x"}, params={"lr": 0.1, "model": "x"}),
        run_doc(
            "b",
            0.2,
            config={"lr": "auto", "model": {"depth": 3}},
            params={"lr": "auto", "model.depth": 3},
        ),
        run_doc("c", 0.3, config={"lr": True}, params={"lr": True}),
    ]
    for doc in runs:
        es.write_runs([doc])
    back = {r["run_id"]: r for r in es.search_runs(RunQuery(limit=None))}
    assert {r["run_id"]: r["params"] for r in runs} == {k: v["params"] for k, v in back.items()}
    assert [r["run_id"] for r in es.search_runs(RunQuery(filter="params.lr:<1"))] == [
        runs[0]["run_id"]
    ]
    assert len(es.search_runs(RunQuery(filter="params.model.depth:3"))) == 1
    assert len(es.search_runs(RunQuery(filter="experiment:c"))) == 1


def test_non_finite_floats_reach_elasticsearch_as_null(
    es: ElasticStore, raw: Elasticsearch
) -> None:
    doc = run_doc(config={"lr": math.nan, "cap": math.inf}, params={"lr": math.nan})
    es.write_runs([doc])
    batch = pa.record_batch(
        {
            "sample_id": ["a", "b"],
            "loss": [math.nan, 0.5],
            "conf": pa.array([math.inf, 1.0], pa.float32()),
        }
    )
    es.write_samples(doc["run_id"], "exp", "val", [batch])
    es.write_steps(
        doc["run_id"],
        "exp",
        [{"seq": 0, "step": 0, "@timestamp": doc["started_at"], "metrics": {"loss": -math.inf}}],
    )
    source = raw.get(index=f"{es.prefix}-runs", id=doc["run_id"]).body["_source"]
    assert source["config"] == {"lr": None, "cap": None}
    rows = {r["sample_id"]: r for r in es.search_samples(SampleQuery(doc["run_id"]))}
    assert rows["a"]["loss"] is None
    assert rows["a"]["conf"] is None
    assert rows["b"]["loss"] == 0.5
    (step,) = es.steps(StepRange(doc["run_id"]))
    assert step["metrics"] == {"loss": None}


# writes ---------------------------------------------------------------------------------------
def test_steps_written_twice_are_stored_once(es: ElasticStore, raw: Elasticsearch) -> None:
    steps = [
        {
            "seq": i,
            "step": i * 10,
            "@timestamp": "2026-01-01T00:00:00Z",
            "metrics": {"loss": 1.0 / (i + 1)},
        }
        for i in range(5)
    ]
    es.write_steps("r1", "exp", steps[:3])
    es.write_steps("r1", "exp", steps)
    assert [s["seq"] for s in es.steps(StepRange("r1"))] == [0, 1, 2, 3, 4]
    assert [s["seq"] for s in es.steps(StepRange("r1", after_seq=2, limit=1))] == [3]
    assert raw.count(index=f"{es.prefix}-steps").body["count"] == 5


class _RecordingNode(Urllib3HttpNode):
    """A real HTTP node that also notes every request it sends (method, path, body)."""

    sent: ClassVar[list[tuple[str, str, bytes]]] = []

    def perform_request(self, method: str, target: str, body: bytes | None = None, **kw: Any):  # type: ignore[no-untyped-def]
        type(self).sent.append((method, target, body or b""))
        return super().perform_request(method, target, body, **kw)


def test_a_step_batch_sent_again_is_already_stored_never_rewritten(
    es_url: str, es_prefix: str, raw: Elasticsearch
) -> None:
    # a retry after a timeout re-sends a batch the data stream already holds: every 409 on
    # create (our deterministic run_id:seq ids) is "already stored"; a rewrite with `index`
    # ops, which real Elasticsearch refuses on a data stream and its backing indices, would
    # fail the batch on every retry and hold back every newer step of the run
    _RecordingNode.sent = []
    client = Elasticsearch(es_url, node_class=_RecordingNode)
    with ElasticStore(client, prefix=es_prefix) as store:
        store.install()
        stream = f"{es_prefix}-steps"
        first = [_loss_step(i, loss=1.0) for i in range(3)]
        store.write_steps("r1", "exp", first)
        _RecordingNode.sent.clear()
        again = [_loss_step(i, loss=2.0) for i in range(5)]  # 0-2 again (other values), 3-4 new
        store.write_steps("r1", "exp", again)
        bulks = [(t, b) for m, t, b in _RecordingNode.sent if t.split("?")[0].endswith("_bulk")]
        stored = list(store.steps(StepRange("r1")))
    assert len(bulks) == 1, "one bulk request: nothing re-sent"
    lines = [json.loads(line) for line in bulks[0][1].splitlines() if line.strip()]
    actions = [next(iter(line)) for line in lines[::2]]
    targets = {next(iter(line.values()))["_index"] for line in lines[::2]}
    assert actions == ["create"] * 5, "a data stream takes only create ops"
    assert targets == {stream}, "never aimed at a backing index"
    assert [s["seq"] for s in stored] == [0, 1, 2, 3, 4]
    assert [s["metrics"]["loss"] for s in stored] == [1.0, 1.0, 1.0, 2.0, 2.0]
    assert raw.count(index=stream).body["count"] == 5


def test_over_time_asks_for_records_not_for_every_run(es_url: str, es_prefix: str) -> None:
    from datetime import UTC, datetime, timedelta

    from warehouse.query import views

    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    scores = [0.5 + 0.4 * ((i * 37) % 101) / 101 for i in range(240)]  # ups and downs
    docs = [
        Run(
            run_id=f"run-{i:03d}",
            experiment=f"e{i % 3}",
            ended_at=start + timedelta(hours=9 * i),
            metrics={"val": {"acc": score}},
        ).to_doc()
        for i, score in enumerate(scores)
    ]
    records, best = 0, -1.0
    for score in scores:
        if score > best:
            records, best = records + 1, score
    _RecordingNode.sent = []
    client = Elasticsearch(es_url, node_class=_RecordingNode)
    with ElasticStore(client, prefix=es_prefix) as store:
        store.install()
        store.write_runs(docs)
        everything = views.over_time(store, "val.acc")  # lists every run: reads them all
        _RecordingNode.sent.clear()
        latest = views.over_time(store, "val.acc", limit=5)
        latest_sent = list(_RecordingNode.sent)
        _RecordingNode.sent.clear()
        monthly = views.over_time(store, "val.acc", interval="month")
        monthly_sent = list(_RecordingNode.sent)
        _RecordingNode.sent.clear()
        only_records = views.over_time(store, "val.acc", every_run=False)  # the CLI's default
        records_sent = [b for _, t, b in _RecordingNode.sent if "_search" in t]
    assert only_records == [p for p in everything if p["is_new_best"]]
    assert len(records_sent) == records + 1  # one one-run question per record, one finds none
    assert latest == everything[-5:]
    assert [p["run_id"] for p in everything if p["is_new_best"]] == [
        p["best_run_id"] for p in everything if p["is_new_best"]
    ]
    assert sum(p["is_new_best"] for p in everything) == records
    searches = [b for _, t, b in latest_sent if "_search" in t]
    # one question per record, one that finds none, one for the latest runs
    assert len(searches) == records + 2
    sizes = [json.loads(b).get("size") for b in searches]
    assert sorted(sizes) == [1] * (records + 1) + [5]
    assert sum(p["run_count"] for p in monthly) == len(docs)
    assert [p["period"] for p in monthly][:2] == ["2026-01-01", "2026-02-01"]
    monthly_searches = [b for _, t, b in monthly_sent if "_search" in t]
    months = len(monthly)
    # records chase + the last run + per month its best run and its count
    assert len(monthly_searches) <= records + 2 + 2 * months
    assert all((json.loads(b).get("size") or 0) <= 1 for b in monthly_searches)
    assert len(docs) > 5 * (records + 2 + 2 * months)  # far fewer questions than runs


def _loss_step(seq: int, loss: float) -> dict[str, Any]:
    return {
        "seq": seq,
        "step": seq,
        "@timestamp": "2026-01-01T00:00:00Z",
        "metrics": {"loss": loss},
    }


@pytest.mark.slow
def test_samples_beyond_one_page_stream_in_write_order(es: ElasticStore) -> None:
    doc = run_doc()
    es.write_runs([doc])
    ids = [f"s{i:05d}" for i in range(12_345)][::-1]
    batches = [
        pa.record_batch(
            {
                "sample_id": ids[i : i + 5000],
                "loss": [float(i + j) for j in range(len(ids[i : i + 5000]))],
            }
        )
        for i in range(0, len(ids), 5000)
    ]
    assert es.write_samples(doc["run_id"], "exp", "val", batches) == len(ids)
    streamed = [r["sample_id"] for r in es.search_samples(SampleQuery(doc["run_id"], limit=None))]
    assert streamed == ids
    worst = list(
        es.search_samples(
            SampleQuery(doc["run_id"], sort="loss", order="desc", limit=3, offset=10_000)
        )
    )
    assert [r["loss"] for r in worst] == [2344.0, 2343.0, 2342.0]
    assert es.write_samples(doc["run_id"], "exp", "val", [batches[0].slice(0, 10)]) == 10
    assert len(list(es.search_samples(SampleQuery(doc["run_id"], limit=None)))) == 10


def test_a_sample_value_the_mapping_cannot_take_is_reported(es: ElasticStore) -> None:
    doc = run_doc()
    es.write_runs([doc])
    es.write_samples(
        doc["run_id"], "exp", "val", [pa.record_batch({"sample_id": ["1"], "correct": [True]})]
    )
    bad = pa.record_batch({"sample_id": ["2"], "correct": ["perhaps"]})
    with pytest.raises(InvalidRecord) as e:
        es.write_samples(doc["run_id"], "exp", "test", [bad])
    assert "correct" in str(e.value)
    assert "warehouse sync" in str(e.value)


# reads ----------------------------------------------------------------------------------------
def test_an_unknown_filter_field_names_the_closest_known_ones(es: ElasticStore) -> None:
    es.write_runs([run_doc()])
    with pytest.raises(QuerySyntaxError) as e:
        es.search_runs(RunQuery(filter="metrics.val.accuracy:>0.5"))
    assert "metrics.val.acc" in str(e.value)


def test_samples_of_an_unknown_run_are_not_found(es: ElasticStore) -> None:
    with pytest.raises(NotFound):
        list(es.search_samples(SampleQuery("no-such-run")))


def test_the_test_server_reports_8x_yet_speaks_the_9_api(es: ElasticStore) -> None:
    info = es.server_info()
    assert es.server_version == info["version"]["number"]


# construction, connection and errors ------------------------------------------------------
def test_from_settings_is_offline_and_unreachable_is_store_unavailable(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    # construction is offline: nothing listens on that port, and nothing fails yet
    store = ElasticStore.from_settings(load(cli={"home": tmp_path, "es_url": url}))
    with store, pytest.raises(StoreUnavailable) as e:
        store.write_runs([run_doc()])
    text = str(e.value)
    assert url in text
    assert "connection refused" in text
    assert "warehouse sync" in text


def test_credentials_never_appear_in_messages(tmp_path: Path) -> None:
    url = f"http://alice:s3cret@127.0.0.1:{free_port()}"
    settings = load(cli={"home": tmp_path, "es_url": url, "es_api_key": "k3y-value"})
    with ElasticStore.from_settings(settings) as store, pytest.raises(StoreUnavailable) as e:
        store.search_runs(RunQuery())
    assert "s3cret" not in str(e.value)
    assert "k3y-value" not in str(e.value)
    assert public_url(url) == url.replace("alice:s3cret@", "")


def _meta(status: int) -> ApiResponseMeta:
    return ApiResponseMeta(status, "1.1", HttpHeaders(), 0.01, NodeConfig("http", "es", 9200))


def test_401_asks_for_credentials() -> None:
    exc = AuthenticationException(
        "security_exception",
        _meta(401),
        {"error": {"type": "security_exception", "reason": "unable to authenticate user [bob]"}},
    )
    error = map_error(exc, "http://es:9200", doing="write runs", writing=True)
    assert isinstance(error, ConfigurationError)
    assert "WAREHOUSE_ES_API_KEY" in str(error)
    assert "WAREHOUSE_ES_USERNAME" in str(error)


def test_403_names_the_missing_privilege() -> None:
    reason = (
        "action [indices:data/write/bulk[s]] is unauthorized for user [bob] with roles "
        "[viewer] on indices [warehouse-runs-000001], this action is granted by the index "
        "privileges [create_doc,create,index,write,all]"
    )
    exc = AuthorizationException(
        "security_exception",
        _meta(403),
        {
            "error": {
                "root_cause": [{"type": "security_exception", "reason": reason}],
                "type": "security_exception",
                "reason": reason,
            }
        },
    )
    error = map_error(exc, "http://es:9200", doing="write runs", writing=True)
    assert isinstance(error, ConfigurationError)
    assert "indices:data/write/bulk" in str(error)
    assert "create_doc,create,index,write" in str(error)


def test_an_8x_server_is_reported_as_unsupported() -> None:
    exc = BadRequestError(
        "media_type_header_exception",
        _meta(400),
        {
            "error": {
                "type": "media_type_header_exception",
                "reason": "Invalid media-type value on headers [Accept, Content-Type]",
            }
        },
    )
    error = map_error(exc, "http://es:9200", doing="connect")
    assert isinstance(error, ConfigurationError)
    assert "9.x" in str(error)


def test_a_server_that_is_not_elasticsearch_is_named() -> None:
    exc = UnsupportedProductError("not es", _meta(200), {})
    assert "not Elasticsearch" in str(map_error(exc, "http://x:9200", doing="connect"))


def test_a_missing_index_suggests_warehouse_init() -> None:
    exc = NotFoundError(
        "index_not_found_exception",
        _meta(404),
        {"error": {"type": "index_not_found_exception", "reason": "no such index [team-runs]"}},
    )
    error = map_error(exc, "http://es:9200", doing="search runs")
    assert isinstance(error, ConfigurationError)
    assert "warehouse init" in str(error)
    assert "team-runs" in str(error)


def test_no_client_exception_escapes_the_store(es: ElasticStore) -> None:
    with pytest.raises(QuerySyntaxError):
        es.search_runs(RunQuery(filter="experiment:(a OR"))
    es.write_runs([run_doc()])
    with pytest.raises(QuerySyntaxError):
        es.search_runs(RunQuery(filter="metrics.val.acc:high"))


def test_index_template_files_are_valid_json_with_meta() -> None:
    for path in (REPO / "index_templates").glob("*.json"):
        body = json.loads(path.read_text())
        assert body["_meta"]["managed_by"] == "results-warehouse", path


def test_sample_columns_past_the_field_limit_are_named_not_silently_unindexed(
    es_url: str, es_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The samples template leaves fields past its limit unindexed (so a document is never
    refused): the write says which columns that hit, and they still read back."""
    import logging

    import pyarrow as pa

    from warehouse.stores.elastic_templates import FIELD_LIMITS

    wide = FIELD_LIMITS["samples"] + 20
    columns: dict[str, list[Any]] = {"sample_id": ["a", "b"]}
    columns.update({f"m{i:04d}": [float(i), 1.0] for i in range(wide)})
    with ElasticStore(es_url, prefix=es_prefix) as store:
        store.install()
        narrow = pa.record_batch({"sample_id": ["a"], "label": ["cat"]})
        with caplog.at_level(logging.WARNING, logger="warehouse.stores.elastic"):
            store.write_samples("few", "e", "val", [narrow])
        assert "unindexed" not in caplog.text
        with caplog.at_level(logging.WARNING, logger="warehouse.stores.elastic"):
            store.write_samples("many", "e", "val", [pa.record_batch(columns)])
        assert "went unindexed past the samples index's field limit" in caplog.text
        assert "m" + f"{wide - 1:04d}" in caplog.text or "more" in caplog.text
        (back,) = list(store.sample_batches("many", "val", [f"m{wide - 1:04d}"]))
        assert back.column(f"m{wide - 1:04d}").to_pylist() == [float(wide - 1), 1.0]
