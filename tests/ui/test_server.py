"""`warehouse ui` over HTTP: the CSP on every answer, GET only, inline filter errors, host and
object checks, keyset paging over the local store and Elasticsearch, and the CLI command."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pytest
from typer.testing import CliRunner

import warehouse
from tests.ui.conftest import Demo, record_demo
from warehouse.query import views
from warehouse.settings import Settings, load
from warehouse.stores import open_store
from warehouse.ui.server import UiServer, close, serve_in_thread


def request(
    server: UiServer, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    url = urlparse(server.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
    finally:
        conn.close()


def get_json(server: UiServer, path: str) -> tuple[int, Any]:
    status, _, body = request(server, "GET", path)
    return status, json.loads(body)


def test_every_answer_has_the_csp_and_only_get_is_allowed(server: UiServer, demo: Demo) -> None:
    paths = [
        "/",
        "/static/app.js",
        "/static/vega.min.js",
        "/api/overview",
        f"/api/run?id={demo.run_ids[0]}",
        "/api/runs?q=experiment%3A(",
        "/no/such/page",
        "/static/../server.py",
    ]
    seen = set()
    for path in paths:
        status, headers, _ = request(server, "GET", path)
        seen.add(status)
        policy = headers.get("content-security-policy", "")
        assert "default-src 'self'" in policy, path
        assert "script-src 'self'" in policy, path
        assert "unsafe-inline" not in policy, path
        assert headers["x-content-type-options"] == "nosniff"
    assert seen == {200, 400, 404}
    for method in ("POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "FOO"):
        status, headers, _ = request(server, method, "/api/runs")
        assert status == 405, method
        assert headers["allow"] == "GET"
        assert "content-security-policy" in headers, method


def test_the_page_has_no_inline_script_and_ships_vega(server: UiServer) -> None:
    _, _, page = request(server, "GET", "/")
    text = page.decode()
    assert text.count("<script") == text.count('<script src="/static/') == 5
    assert "http" not in text.split("<body>", 1)[0]  # nothing from a CDN
    for name in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js", "vega-interpreter.min.js"):
        status, headers, body = request(server, "GET", f"/static/{name}")
        assert status == 200, name
        assert len(body) > 1000, name
        assert headers["content-type"].startswith("text/javascript")


def test_a_bad_filter_gets_a_clear_error(server: UiServer) -> None:
    status, body = get_json(server, "/api/runs?q=" + quote("experiment:svm AND (tags:x"))
    assert status == 400
    assert "cannot parse filter" in body["error"]
    assert "parenthes" in body["error"]
    status, body = get_json(server, "/api/runs?q=" + quote("no_such_field:1"))
    assert status == 400
    assert "no_such_field" in body["error"]
    status, body = get_json(server, "/api/runs?sort=" + quote("config.seed:asc"))
    assert status == 400
    assert "cannot sort runs by" in body["error"]


def test_requests_naming_another_host_are_refused(server: UiServer) -> None:
    status, _, _ = request(server, "GET", "/api/overview", {"Host": "evil.example:8765"})
    assert status == 403
    status, _, _ = request(server, "GET", "/api/overview", {"Host": "localhost:8765"})
    assert status == 200


def test_objects_are_served_only_from_the_object_store(
    server: UiServer, demo: Demo, tmp_path: Path
) -> None:
    _, page = get_json(server, f"/api/samples?id={demo.run_ids[0]}&limit=1")
    href = page["rows"][0]["output"]
    status, headers, body = request(server, "GET", href)
    assert status == 200
    assert body.startswith(b"\x89PNG")
    assert headers["content-type"] == "image/png"
    assert headers["content-security-policy"].startswith("sandbox")
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    for uri in (secret.as_uri(), "file:///etc/passwd", "https://example.com/x.png"):
        status, _, body = request(server, "GET", "/api/object?uri=" + quote(uri, safe=""))
        assert status == 404, uri
        assert b"not yours" not in body


def test_samples_come_worst_first_and_page(server: UiServer, demo: Demo) -> None:
    rid = demo.run_ids[2]
    status, page = get_json(server, f"/api/samples?id={rid}&limit=10")
    assert status == 200
    assert (page["sort"], page["order"]) == ("correct", "asc")
    wrong = sorted(s for s, ok in demo.correct[rid].items() if not ok)
    shown = [r["sample_id"] for r in page["rows"]]
    assert sorted(shown[: len(wrong)]) == wrong[:10]
    _, more = get_json(
        server, f"/api/samples?id={rid}&limit=10&offset=10&sort=confidence&order=desc"
    )
    conf = [r["values"]["confidence"] for r in more["rows"]]
    assert conf == sorted(conf, reverse=True)
    assert len(conf) == 10


def page_through(server: UiServer, sort: str, size: int, q: str = "") -> list[str]:
    ids: list[str] = []
    after = ""
    for _ in range(100):
        path = f"/api/runs?size={size}&sort={quote(sort)}&metrics=val.acc&q={quote(q)}"
        status, page = get_json(server, path + (f"&after={quote(after)}" if after else ""))
        assert status == 200, page
        assert len(page["rows"]) <= size
        ids += [r["run_id"] for r in page["rows"]]
        if not page["next"]:
            return ids
        after = page["next"]
    raise AssertionError("paging did not end")


def record_paging_runs(settings: Settings, tmp_path: Path) -> None:
    """Runs with tied scores and runs without the metric, to stress the keyset."""
    for i in range(11):
        with warehouse.start_run(f"exp-{i % 3}", {"i": i}, settings=settings, cwd=tmp_path) as run:
            if i % 4:
                run.log_metrics("val", {"acc": round(0.5 + (i % 3) / 10, 2)})


@pytest.mark.parametrize("sort", ["metrics.val.acc:desc", "metrics.val.acc:asc",
                                  "started_at:desc", "experiment:asc", "ended_at:asc"])  # fmt: skip
def test_keyset_pages_cover_every_run_once_in_the_store_order(
    home: Path, tmp_path: Path, sort: str
) -> None:
    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    record_paging_runs(settings, tmp_path)
    check_paging(settings, sort)


def check_paging(settings: Settings, sort: str) -> None:
    with open_store(settings) as store:
        expected = [r["run_id"] for r in views.runs(store, sort=(sort,), limit=None)]
        svm = [r["run_id"] for r in views.runs(store, "experiment:exp-1", (sort,), limit=None)]
    srv, _ = serve_in_thread(settings)
    try:
        for size in (1, 3, 50):
            assert page_through(srv, sort, size) == expected, size
        assert page_through(srv, sort, 2, "experiment:exp-1") == svm
        _, first = get_json(srv, f"/api/runs?size=3&sort={quote(sort)}")
        assert first["total"] == len(expected)
    finally:
        close(srv)


def test_keyset_paging_on_elasticsearch(es_env: dict[str, str], tmp_path: Path) -> None:
    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    assert settings.store_engine == "elasticsearch"
    from warehouse.stores.elastic import init_elasticsearch

    init_elasticsearch(settings)
    record_paging_runs(settings, tmp_path)
    for sort in ("metrics.val.acc:desc", "started_at:desc"):
        check_paging(settings, sort)


def test_overview_matches_the_query_views(server: UiServer, demo: Demo) -> None:
    status, body = get_json(server, "/api/overview")
    assert status == 200
    with open_store(demo.settings) as store:
        board = views.leaderboard(store, "val.acc", evidence=True)
    assert [r["best_run_id"] for r in body["leaderboard"]] == [r["best_run_id"] for r in board]
    assert body["leaderboard"][0]["ci_low"] == board[0]["ci_low"]
    assert body["run_count"] == len(demo.run_ids)
    assert sorted(body["charts"]) == sorted(
        ["best_over_time", "experiments_ranked", "bias_variance"]
    )
    # each chart carries the aggregation-shaped answer Kibana draws: one bucket per experiment
    ranked = body["charts"]["experiments_ranked"]["data"]
    assert ranked["format"]["property"] == "aggregations"
    aggregations = ranked["values"]["aggregations"]
    buckets = aggregations["scored"]["experiments"]["buckets"]
    best = {b["key"]: b["top"]["hits"]["hits"][0]["_source"]["run_id"] for b in buckets}
    assert best == {r["experiment"]: r["best_run_id"] for r in board}
    assert sum(b["doc_count"] for b in aggregations["runs"]["buckets"]) == len(demo.run_ids)


def test_runs_of_a_mistyped_filter_say_what_was_meant(server: UiServer, demo: Demo) -> None:
    status, body = get_json(server, "/api/runs?q=" + quote("experiment=digits-svm"))
    assert status == 200
    assert body["total"] == 0
    assert body["empty"]["corrected"] == "experiment:digits-svm"  # what the CLI suggests
    assert any("has no colon" in line for line in body["empty"]["hints"])
    status, body = get_json(server, "/api/runs?q=" + quote("experiment:digits-svm"))
    assert body["total"] == demo.experiments.count("digits-svm")
    assert body["empty"] is None


def test_an_empty_warehouse_overview_says_where_it_looked(home: Path) -> None:
    srv, _ = serve_in_thread(load())
    try:
        status, body = get_json(srv, "/api/overview")
    finally:
        close(srv)
    assert status == 200
    assert body["charts"] == {}
    assert body["empty"]["holds_no_run"] is True
    assert f"no runs recorded in local store {home}" in body["empty"]["message"]


def test_cli_ui_warns_off_localhost_and_fails_clearly_on_a_busy_port(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warehouse.cli import app

    record_demo(tmp_path)
    busy, _ = serve_in_thread(load())  # started before serve_forever is replaced below
    served: list[str] = []

    def fake_serve(self: UiServer) -> None:  # return at once instead of serving forever
        served.append(self.url)

    monkeypatch.setattr(UiServer, "serve_forever", fake_serve)
    try:
        result = CliRunner().invoke(app, ["ui", "--port", "0", "--host", "0.0.0.0"])
        assert result.exit_code == 0, result.output
        assert "warning" in result.output
        assert "0.0.0.0" in result.output
        assert served
        assert served[0].startswith("http://127.0.0.1:")
        result = CliRunner().invoke(app, ["ui", "--port", "0"])
        assert result.exit_code == 0, result.output
        assert "warning" not in result.output
        result = CliRunner().invoke(app, ["ui", "--port", str(urlparse(busy.url).port)])
        assert result.exit_code != 0
        assert "choose another --port" in str(result.exception) + result.output
    finally:
        close(busy)
