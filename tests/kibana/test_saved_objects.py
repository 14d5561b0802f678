"""Kibana saved objects: the committed NDJSON, its shape and references, the fields it uses,
and the import/export client's requests (checked against the documented API shape)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from email import message_from_bytes
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from warehouse.cli import app
from warehouse.dashboards.kibana import (
    NDJSON_NAME,
    check_saved_objects,
    export_objects,
    fields_used,
    import_objects,
    mapping_field_type,
    parse_ndjson,
    saved_objects,
    to_ndjson,
)
from warehouse.dashboards.vega import VIEWS, spec_for_kibana
from warehouse.errors import BackendUnavailable, ConfigurationError, NotFound
from warehouse.settings import load

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "kibana" / NDJSON_NAME


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return parse_ndjson(COMMITTED.read_text(encoding="utf-8"))


def by_id(objects: list[dict[str, Any]], object_id: str) -> dict[str, Any]:
    return next(o for o in objects if o["id"] == object_id)


# --- the committed file ----------------------------------------------------------------------


def test_committed_ndjson_equals_the_generated_objects() -> None:
    expected = to_ndjson(saved_objects("warehouse", "val.acc"))
    assert COMMITTED.read_text(encoding="utf-8") == expected, (
        "kibana/warehouse.ndjson is stale: run 'warehouse kibana export-objects'"
    )


def test_every_line_parses_and_ids_are_unique() -> None:
    lines = COMMITTED.read_text(encoding="utf-8").splitlines()
    parsed = [json.loads(line) for line in lines]
    keys = [(o["type"], o["id"]) for o in parsed]
    assert len(keys) == len(set(keys))
    assert len({o["id"] for o in parsed}) == len(parsed)


def test_file_holds_the_data_views_views_search_and_dashboards(
    objects: list[dict[str, Any]],
) -> None:
    kinds = {(o["type"], o["id"]) for o in objects}
    assert {("index-pattern", f"warehouse-{k}") for k in ("runs", "samples", "steps")} <= kinds
    for view in ("best-over-time", "experiments-ranked", "bias-variance"):
        assert ("visualization", f"warehouse-{view}") in kinds
    assert ("search", "warehouse-runs-table") in kinds
    assert ("dashboard", "warehouse-results-overview") in kinds
    assert ("dashboard", "warehouse-live-training") in kinds


def test_data_views_have_their_time_fields_and_output_uri_is_a_link(
    objects: list[dict[str, Any]],
) -> None:
    times = {
        o["id"]: o["attributes"]["timeFieldName"] for o in objects if o["type"] == "index-pattern"
    }
    assert times == {
        "warehouse-runs": "started_at",  # every run has it; ended_at only once it ended
        "warehouse-samples": "recorded_at",
        "warehouse-steps": "@timestamp",
    }
    formats = json.loads(by_id(objects, "warehouse-samples")["attributes"]["fieldFormatMap"])
    assert formats["output_uri"]["id"] == "url"
    assert formats["output_uri"]["params"]["type"] in ("a", "img")


def test_no_reference_dangles_and_dashboard_panels_resolve(objects: list[dict[str, Any]]) -> None:
    assert check_saved_objects(objects, mappings=_permissive(objects)) == []


def test_overview_dashboard_shows_the_three_views_and_the_runs_table(
    objects: list[dict[str, Any]],
) -> None:
    dash = by_id(objects, "warehouse-results-overview")
    panels = json.loads(dash["attributes"]["panelsJSON"])
    refs = {r["name"]: (r["type"], r["id"]) for r in dash["references"]}
    targets = {refs[f"{p['panelIndex']}:{p['panelRefName']}"] for p in panels}
    assert targets == {
        ("visualization", "warehouse-best-over-time"),
        ("visualization", "warehouse-experiments-ranked"),
        ("visualization", "warehouse-slices"),
        ("visualization", "warehouse-seeds"),
        ("visualization", "warehouse-bias-variance"),
        ("search", "warehouse-runs-table"),
    }


def test_live_dashboard_plots_training_and_gpu_series_over_the_steps_stream(
    objects: list[dict[str, Any]],
) -> None:
    dash = by_id(objects, "warehouse-live-training")
    assert dash["attributes"]["refreshInterval"]["pause"] is False
    fields = set()
    for ref in dash["references"]:
        for index, field, _ in fields_used(by_id(objects, ref["id"]), objects):
            assert index == "warehouse-steps"
            fields.add(field)
    wanted = {
        "metrics.loss",
        "metrics.lr",
        "duration_s",
        "system.gpu_util_pct",
        "system.gpu_mem_used_bytes",
        "system.gpu_power_w",
        "system.gpu_temperature_c",
    }
    assert wanted <= fields


def test_vega_visualizations_carry_the_package_specs(objects: list[dict[str, Any]]) -> None:
    for view in VIEWS:
        vis = by_id(objects, f"warehouse-{view.replace('_', '-')}")
        state = json.loads(vis["attributes"]["visState"])
        assert state["type"] == "vega"
        assert json.loads(state["params"]["spec"]) == spec_for_kibana(view, "warehouse", "val.acc")
        assert vis["references"] == []


def test_saved_search_lists_useful_run_columns(objects: list[dict[str, Any]]) -> None:
    search = by_id(objects, "warehouse-runs-table")["attributes"]
    assert {"experiment", "run_id", "status", "metrics.val.acc", "git.commit"} <= set(
        search["columns"]
    )
    assert search["sort"] == [["started_at", "desc"]]


def test_runs_time_field_is_set_on_every_run_running_and_crashed_included() -> None:
    """The data view's time field must exist on a run the moment it starts."""
    from warehouse.models import Run

    run = Run(experiment="e").model_dump(mode="json")
    assert run["status"] == "running"
    assert run.get("ended_at") is None
    objects = saved_objects("warehouse", "val.acc")
    runs_view = by_id(objects, "warehouse-runs")["attributes"]
    search = by_id(objects, "warehouse-runs-table")["attributes"]
    assert run.get(runs_view["timeFieldName"]) is not None
    assert run.get(search["sort"][0][0]) is not None
    assert "status" in search["columns"]


def test_every_object_claims_a_version_kibana_9_accepts() -> None:
    """No 7.x migrationVersion: typeMigrationVersion/coreMigrationVersion as Kibana 9 exports
    (a saved search as model version 10.5.0, with the attributes such an export has)."""
    for obj in saved_objects("warehouse", "val.acc"):
        assert "migrationVersion" not in obj, obj["id"]
        assert obj["coreMigrationVersion"] == "8.8.0"
        major = int(obj["typeMigrationVersion"].split(".")[0])
        assert major >= 8, (obj["id"], obj["typeMigrationVersion"])
    search = by_id(saved_objects("warehouse", "val.acc"), "warehouse-runs-table")
    assert search["typeMigrationVersion"] == "10.5.0"
    assert set(search["attributes"]) == {
        "columns", "description", "grid", "hideChart", "isTextBasedQuery",
        "kibanaSavedObjectMeta", "sort", "timeRestore", "title",
    }  # fmt: skip


# --- fields against the index templates ------------------------------------------------------


def test_every_field_used_exists_in_the_index_templates(objects: list[dict[str, Any]]) -> None:
    mappings = _template_mappings("warehouse")
    assert check_saved_objects(objects, mappings) == []


def test_field_lookup_follows_properties_dotted_leaves_and_dynamic_templates() -> None:
    mapping = {
        "properties": {
            "ended_at": {"type": "date"},
            "git": {"properties": {"commit": {"type": "keyword"}}},
            "config": {"type": "flattened"},
            "params": {"properties": {"model.C": {"type": "double"}}},
        },
        "dynamic_templates": [
            {"metrics": {"path_match": "metrics.*.*", "mapping": {"type": "double"}}}
        ],
    }
    assert mapping_field_type(mapping, "ended_at") == "date"
    assert mapping_field_type(mapping, "git.commit") == "keyword"
    assert mapping_field_type(mapping, "config.model.lr") == "flattened"
    assert mapping_field_type(mapping, "params.model.C") == "double"
    assert mapping_field_type(mapping, "metrics.val.acc") == "double"
    assert mapping_field_type(mapping, "metrics") == "object"
    assert mapping_field_type(mapping, "git.nope") is None
    assert mapping_field_type(mapping, "nope") is None


def test_checker_reports_missing_fields_dangling_references_and_bad_panels() -> None:
    objs = saved_objects("warehouse", "val.acc")
    mappings = _permissive(objs)
    del mappings["warehouse-runs"]["properties"]["ended_at"]
    dash = next(o for o in objs if o["id"] == "warehouse-results-overview")
    dash["references"][0]["id"] = "gone"
    live = next(o for o in objs if o["id"] == "warehouse-live-training")
    live["references"].pop()
    problems = check_saved_objects([*objs, objs[0]], mappings)
    text = "\n".join(problems)
    assert "field ended_at does not exist in the warehouse-runs template" in text
    assert "-> visualization/gone is not in the file" in text
    assert "has no reference p8:panel_p8" in text
    assert "duplicate saved object index-pattern/warehouse-runs" in text


def test_checker_reports_a_time_field_that_is_not_a_date() -> None:
    objs = saved_objects("warehouse", "val.acc")
    mappings = _permissive(objs)
    mappings["warehouse-steps"]["properties"]["@timestamp"] = {"type": "keyword"}
    assert any(
        "@timestamp of warehouse-steps is keyword" in p for p in check_saved_objects(objs, mappings)
    )


# --- generation for other prefixes and metrics -----------------------------------------------


def test_export_objects_command_writes_objects_for_an_index_prefix(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "kibana",
            "export-objects",
            "--out-dir",
            str(tmp_path),
            "--prefix",
            "team-a",
            "--metric",
            "val.loss",
        ],
    )
    assert result.exit_code == 0, result.output
    objs = parse_ndjson((tmp_path / NDJSON_NAME).read_text(encoding="utf-8"))
    assert all(o["id"].startswith("team-a-") for o in objs)
    views = [o for o in objs if o["type"] == "index-pattern"]
    assert {v["attributes"]["title"] for v in views} == {
        "team-a-runs",
        "team-a-samples",
        "team-a-steps",
    }
    ranked = json.loads(
        json.loads(
            next(o for o in objs if o["id"] == "team-a-experiments-ranked")["attributes"][
                "visState"
            ]
        )["params"]["spec"]
    )
    assert ranked["data"]["url"]["index"] == "team-a-runs"
    params = {p["name"]: p["value"] for p in ranked["params"]}
    assert params == {"metric_split": "val", "metric_name": "loss", "direction": "min", "top_n": 20}
    assert check_saved_objects(objs, _permissive(objs)) == []


# --- the saved objects API client ------------------------------------------------------------


class Recorder:
    """A local HTTP endpoint that keeps each request and answers what the test set."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.answer: bytes = b"{}"
        self.content_type = "application/json"


@pytest.fixture
def kibana() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            recorder.requests.append(
                {
                    "method": "POST",
                    "path": self.path,
                    "headers": self.headers,
                    "body": self.rfile.read(length),
                }
            )
            self.send_response(recorder.status)
            self.send_header("Content-Type", recorder.content_type)
            self.send_header("Content-Length", str(len(recorder.answer)))
            self.end_headers()
            self.wfile.write(recorder.answer)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    server.shutdown()
    server.server_close()
    thread.join()


def _import_answer(objs: list[dict[str, Any]], failed: int = 0) -> bytes:
    ok = objs[failed:]
    return json.dumps(
        {
            "success": failed == 0,
            "successCount": len(ok),
            "successResults": [{"type": o["type"], "id": o["id"], "meta": {}} for o in ok],
            "errors": [
                {
                    "type": o["type"],
                    "id": o["id"],
                    "title": o["attributes"].get("title"),
                    "meta": {},
                    "error": {
                        "type": "missing_references",
                        "references": [{"type": "index-pattern", "id": "x"}],
                    },
                }
                for o in objs[:failed]
            ],
        }
    ).encode()


def test_import_posts_the_ndjson_as_multipart_file_with_overwrite_and_xsrf(
    kibana: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, recorder = kibana
    objs = saved_objects("warehouse", "val.acc")
    recorder.answer = _import_answer(objs)
    monkeypatch.setenv("WAREHOUSE_ES_API_KEY", "c2VjcmV0OmtleQ==")
    report = import_objects(load(cli={"kibana_url": url}))

    assert report.ok
    assert report.success_count == report.total == len(objs)
    (request,) = recorder.requests
    assert request["path"] == "/api/saved_objects/_import?overwrite=true"
    assert request["headers"]["kbn-xsrf"]
    assert request["headers"]["Authorization"] == "ApiKey c2VjcmV0OmtleQ=="
    content_type = request["headers"]["Content-Type"]
    assert content_type.startswith("multipart/form-data; boundary=")
    message = message_from_bytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + request["body"], policy=HTTP
    )
    (part,) = list(message.iter_parts())
    assert part.get_param("name", header="content-disposition") == "file"
    assert str(part.get_filename()).endswith(".ndjson")
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    uploaded = payload.decode()
    assert parse_ndjson(uploaded) == objs


def test_import_into_a_space_with_basic_auth(
    kibana: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, recorder = kibana
    recorder.answer = _import_answer(saved_objects())
    monkeypatch.setenv("WAREHOUSE_ES_USERNAME", "elastic")
    monkeypatch.setenv("WAREHOUSE_ES_PASSWORD", "changeme")
    import_objects(load(cli={"kibana_url": url + "/", "kibana_space": "ml-team"}))
    (request,) = recorder.requests
    assert request["path"] == "/s/ml-team/api/saved_objects/_import?overwrite=true"
    assert request["headers"]["Authorization"] == "Basic ZWxhc3RpYzpjaGFuZ2VtZQ=="


def test_import_reports_each_object_kibana_refused(kibana: tuple[str, Recorder]) -> None:
    url, recorder = kibana
    objs = saved_objects()
    recorder.answer = _import_answer(objs, failed=2)
    report = import_objects(load(cli={"kibana_url": url}))
    assert not report.ok
    assert report.success_count == len(objs) - 2
    assert [(f.type, f.id, f.reason) for f in report.errors] == [
        (o["type"], o["id"], "missing_references") for o in objs[:2]
    ]
    assert "index-pattern/x" in str(report.errors[0])
    assert report.summary().startswith(f"imported {len(objs) - 2} of {len(objs)} saved objects")


def test_import_command_prints_errors_and_exits_2_when_objects_fail(
    kibana: tuple[str, Recorder],
) -> None:
    url, recorder = kibana
    recorder.answer = _import_answer(saved_objects(), failed=1)
    result = CliRunner().invoke(app, ["kibana", "import", "--url", url])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigurationError)


def test_import_command_uploads_a_given_file(kibana: tuple[str, Recorder]) -> None:
    url, recorder = kibana
    text = COMMITTED.read_text(encoding="utf-8")
    recorder.answer = _import_answer(parse_ndjson(text))
    result = CliRunner().invoke(app, ["kibana", "import", "--url", url, "--file", str(COMMITTED)])
    assert result.exit_code == 0, result.output
    assert text.encode() in recorder.requests[0]["body"]


@pytest.mark.parametrize(
    ("status", "error", "words"),
    [
        pytest.param(401, ConfigurationError, "refused the credentials", id="unauthorized"),
        pytest.param(403, ConfigurationError, "may not manage saved objects", id="forbidden"),
        pytest.param(404, NotFound, "no space 'ml'", id="unknown-space"),
        pytest.param(503, BackendUnavailable, "HTTP 503", id="unavailable"),
    ],
)
def test_http_errors_become_warehouse_errors_with_the_fix(
    kibana: tuple[str, Recorder], status: int, error: type[Exception], words: str
) -> None:
    url, recorder = kibana
    recorder.status = status
    recorder.answer = json.dumps({"statusCode": status, "message": "nope"}).encode()
    with pytest.raises(error, match=words):
        import_objects(load(cli={"kibana_url": url, "kibana_space": "ml"}))


def test_unreachable_kibana_is_backend_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match=r"cannot reach Kibana at http://127\.0\.0\.1:9"):
        import_objects(load(cli={"kibana_url": "http://127.0.0.1:9"}))


def test_import_without_a_kibana_url_says_which_setting_to_set() -> None:
    with pytest.raises(ConfigurationError, match="WAREHOUSE_KIBANA_URL"):
        import_objects(load())


def test_export_asks_for_our_objects_with_their_references(kibana: tuple[str, Recorder]) -> None:
    url, recorder = kibana
    recorder.content_type = "application/ndjson"
    recorder.answer = COMMITTED.read_bytes()
    text = export_objects(load(cli={"kibana_url": url}))
    assert parse_ndjson(text) == parse_ndjson(COMMITTED.read_text(encoding="utf-8"))
    (request,) = recorder.requests
    assert request["path"] == "/api/saved_objects/_export"
    assert request["headers"]["kbn-xsrf"]
    body = json.loads(request["body"])
    assert body["includeReferencesDeep"] is True
    assert {(o["type"], o["id"]) for o in body["objects"]} == {
        (o["type"], o["id"]) for o in saved_objects()
    }


# --- helpers ---------------------------------------------------------------------------------


def _permissive(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mappings holding exactly the fields the objects use (to test references alone)."""
    mappings: dict[str, dict[str, Any]] = {}
    for obj in objects:
        for index, field, kind in fields_used(obj, objects):
            node = mappings.setdefault(index, {"properties": {}})
            *parents, leaf = field.split(".")
            for part in parents:
                node = node["properties"].setdefault(part, {"properties": {}})
                node.setdefault("properties", {})
            if kind == "date" or leaf not in node["properties"]:
                node["properties"].setdefault(leaf, {})["type"] = (
                    "date" if kind == "date" else "keyword"
                )
    return mappings


def _template_mappings(prefix: str) -> dict[str, dict[str, Any]]:
    """The mapping each index (alias, data stream) gets from the warehouse's index templates."""
    from warehouse.stores.elastic_templates import KINDS, index_names, mappings

    return {index_names(prefix)[kind]: mappings(kind) for kind in KINDS}
