"""`warehouse report`: one self-contained HTML file with the three views, the leaderboard and
the run count, from the local store and from Elasticsearch, that opens in headless Chromium
without console errors and shows three non-empty charts."""

from __future__ import annotations

import html
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from tests.kibana.test_vega_views import DEMO_RUNS, record_demo_runs
from warehouse.cli import app
from warehouse.dashboards.report import build_report
from warehouse.query import views
from warehouse.settings import Settings, load
from warehouse.stores import open_store

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)


@pytest.fixture
def local_runs(home: Path, tmp_path: Path) -> Settings:
    """The demo-like runs in this test's local warehouse."""
    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    record_demo_runs(settings, cwd=tmp_path)
    return settings


def report_text(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(app, ["report", "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    assert str(out) in result.stdout
    return out.read_text(encoding="utf-8")


def table_rows(page: str, section_id: str) -> list[list[str]]:
    """The body cells of the table in the section ``section_id``."""
    section = page.split(f'<section id="{section_id}">', 1)[1].split("</section>", 1)[0]
    body = section.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


def card(page: str, label: str) -> str:
    match = re.search(
        rf'<div class="label">{re.escape(label)}</div><div class="value">([^<]*)</div>', page
    )
    assert match, f"no {label} card"
    return html.unescape(match.group(1))


# --- content -----------------------------------------------------------------------------------


def test_report_shows_three_charts_the_leaderboard_and_the_run_count(
    local_runs: Settings, tmp_path: Path
) -> None:
    page = report_text(tmp_path)
    charts = re.findall(r'<section class="chart" data-view="(\w+)"><svg', page)
    assert charts == ["best_over_time", "experiments_ranked", "bias_variance"]
    assert card(page, "Runs") == str(len(DEMO_RUNS) + 1)  # the failed run counts too
    with open_store(local_runs) as store:
        board = views.leaderboard(store, "val.acc", evidence=True)
        parts = views.decomposition(store, "val.acc")
    assert card(page, "Best val.acc") == f"{board[0]['best_score']:.4f}"
    assert card(page, "Best experiment") == board[0]["experiment"]
    assert (
        [r[:7] for r in table_rows(page, "leaderboard")]
        == [
            [
                str(b["rank"]),
                b["experiment"],
                f"{b['best_score']:.4f}",
                "—",  # these runs logged no per-sample results: no interval ...
                "—",  # ... and no paired test of the lead
                b["best_run_id"][:12],
                str(b["run_count"]),
            ]
            for b in board
        ]
    )
    assert all(b["ci_low"] is None and b["vs_next_p"] is None for b in board)
    rows = table_rows(page, "decomposition")
    assert [(r[0], r[-3]) for r in rows] == [
        (p["experiment"], f"{p['avoidable_bias']:.4f}") for p in parts
    ]


def test_report_filter_and_metric_change_what_is_shown(
    local_runs: Settings, tmp_path: Path
) -> None:
    page = report_text(
        tmp_path, "-q", 'experiment:"digits-svm"', "--metric", "val.loss", "--title", "SVM losses"
    )
    assert "<h1>SVM losses</h1>" in page
    assert "val.loss (lower is better)" in page
    rows = table_rows(page, "leaderboard")
    assert [r[1] for r in rows] == ["digits-svm"]
    svm_losses = [
        round(1.5 * (1 - v) + 0.01, 6) for e, _, v, _ in DEMO_RUNS if e == "digits-svm" and v
    ]
    assert rows[0][2] == f"{min(svm_losses):.4f}"
    assert card(page, "Runs") == "3"


def test_report_is_self_contained_and_fetches_nothing(local_runs: Settings, tmp_path: Path) -> None:
    page = report_text(tmp_path)
    assert "<script" not in page
    assert "default-src 'none'" in page  # the page may not load anything at all
    links = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert all(link.startswith(("data:", "#")) for link in links), links
    assert not re.search(r"url\((?!#)", page)
    assert "@import" not in page


def test_empty_warehouse_report_says_how_to_record_runs(home: Path, tmp_path: Path) -> None:
    page = report_text(tmp_path)
    assert "<svg" not in page
    assert "warehouse demo" in page
    assert card(page, "Runs") == "0"


def test_report_on_elasticsearch_matches_the_local_copy(
    es_env: dict[str, str], tmp_path: Path
) -> None:
    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    assert settings.store_engine == "elasticsearch"
    from warehouse.stores.elastic import init_elasticsearch

    init_elasticsearch(settings)
    record_demo_runs(settings, cwd=tmp_path, failed_run=False)
    from_es = build_report(settings)
    from_local = build_report(load(cli={"store": "local"}))
    assert f"Elasticsearch {es_env['WAREHOUSE_ES_URL']}" in from_es
    for section in ("leaderboard", "decomposition"):
        assert table_rows(from_es, section) == table_rows(from_local, section)
    assert card(from_es, "Runs") == card(from_local, "Runs") == str(len(DEMO_RUNS))
    es_charts = re.findall(r"<svg.*?</svg>", from_es, re.S)
    assert len(es_charts) == 3
    assert es_charts == re.findall(r"<svg.*?</svg>", from_local, re.S)


# --- in a browser --------------------------------------------------------------------------------


def open_in_chromium(
    chromium: str, page: Path, tmp_path: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.iterdir()))}"
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )


def console_messages(stderr: str) -> list[str]:
    """What the page wrote to the console (errors, CSP violations) per Chromium's log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_console_check_catches_a_page_that_breaks_its_policy(chromium: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><head><meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'\"></head><body><img src='https://example.invalid/x.png'>"
        "</body></html>",
        encoding="utf-8",
    )
    result = open_in_chromium(chromium, bad, tmp_path, "--dump-dom")
    assert any("example.invalid" in line for line in console_messages(result.stderr))


@pytest.fixture
def screenshot(local_runs: Settings, tmp_path: Path, chromium: str) -> Iterator[Image.Image]:
    """The report, each chart outlined in magenta (to find it), shot at 1280x2000."""
    page = report_text(tmp_path)
    marked = page.replace(
        "</head>",
        "<style>section.chart{outline:4px solid #ff00ff;outline-offset:-4px}</style></head>",
    )
    path = tmp_path / "marked.html"
    path.write_text(marked, encoding="utf-8")
    plain = tmp_path / "plain.html"
    plain.write_text(page, encoding="utf-8")
    result = open_in_chromium(chromium, plain, tmp_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_messages(result.stderr) == []
    assert result.stdout.count("<svg") == 3  # Chromium parsed the page with its charts
    shot = tmp_path / "shot.png"
    result = open_in_chromium(
        chromium, path, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000"
    )
    assert shot.is_file(), result.stderr[-2000:]
    assert console_messages(result.stderr) == []
    with Image.open(shot) as image:
        yield image.convert("RGB")


def magenta_boxes(image: Image.Image) -> list[tuple[int, int, int, int]]:
    """(left, top, right, bottom) of each magenta outline (its horizontal edges found)."""
    width, height = image.size
    data = image.tobytes()
    edges: list[tuple[int, int, int]] = []  # (row, first x, last x) of long magenta runs
    for y in range(height):
        row = data[y * width * 3 : (y + 1) * width * 3]
        xs = [x for x in range(width) if row[3 * x : 3 * x + 3] == b"\xff\x00\xff"]
        if len(xs) > 300:
            edges.append((y, xs[0], xs[-1]))
    groups: list[list[tuple[int, int, int]]] = []
    for edge in edges:
        if groups and edge[0] == groups[-1][-1][0] + 1:
            groups[-1].append(edge)
        else:
            groups.append([edge])
    boxes = []
    for top, bottom in zip(groups[0::2], groups[1::2], strict=False):
        boxes.append((top[0][1], top[-1][0] + 1, top[0][2], bottom[0][0]))
    return boxes


def test_report_in_chromium_shows_three_non_empty_charts(screenshot: Image.Image) -> None:
    boxes = magenta_boxes(screenshot)
    assert len(boxes) == 3, boxes
    for left, top, right, bottom in boxes:
        assert bottom - top > 120
        inside = screenshot.crop((left + 6, top + 6, right - 6, bottom - 6))
        data = inside.tobytes()
        pixels = list(zip(data[0::3], data[1::3], data[2::3], strict=True))
        marks = sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) > 60)
        ink = sum(1 for r, g, b in pixels if r + g + b < 600)  # text, axes, marks
        assert marks > 100, (left, top, marks)  # coloured points, bars, stacks
        assert ink > 2000, (left, top, ink)
        assert len(set(pixels)) > 20


# --- slices and seeds ----------------------------------------------------------------------------


def _record_seeded(settings: Settings, cwd: Path) -> None:
    """Two experiments, three seeds each, with a ``label`` and a boolean ``correct``."""
    import random

    import warehouse

    rng = random.Random(18)
    for experiment, acc in (("exp-a", 0.7), ("exp-b", 0.85)):
        for seed in range(3):
            rows = [
                {"sample_id": f"s{i}", "correct": rng.random() < acc, "label": "ab"[i % 3 == 0]}
                for i in range(60)
            ]
            config = {"model": experiment, "seed": seed}
            with warehouse.start_run(experiment, config, settings=settings, cwd=cwd) as run:
                run.log_samples("val", rows)
                run.log_metrics("val", {"acc": sum(r["correct"] for r in rows) / len(rows)})


def test_report_shows_the_slice_heat_map_and_seeds_as_the_cli_does(
    home: Path, tmp_path: Path
) -> None:
    from tests.kibana.test_vega_views import plotted
    from warehouse.dashboards.vega import SLICES_VIEW, slices_spec_with_values
    from warehouse.dashboards.vega.responses import overview_responses
    from warehouse.models import resolve_metric
    from warehouse.query import api
    from warehouse.query.replicates import replicates
    from warehouse.query.slices import slices

    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    _record_seeded(settings, tmp_path)
    metric = resolve_metric("val.acc")
    with open_store(settings) as store:
        expected = slices(store, metric, "label")
        groups = replicates(store, metric, flips=False)
        data = api.overview(slices=True, store=store, settings=settings)
    # the heat map: the cells it plots are the CLI's slices of the best runs
    spec = slices_spec_with_values(overview_responses(data)[SLICES_VIEW])
    cells = {
        (r["experiment"], r["slice"]): (int(r["n"]), float(r["mean"]))
        for r in plotted(spec, ["experiment", "slice", "n", "mean"])
        if r["mean"] != "null"
    }
    assert len(expected) == 4
    assert cells == {
        (r["experiment"], r["label"]): (r["n"], pytest.approx(r["mean"], abs=1e-12))
        for r in expected
    }
    page = report_text(tmp_path)
    assert f'data-view="{SLICES_VIEW}"><svg' in page
    # the seeds table: the replicates view's numbers
    seeds = table_rows(page, "seeds")
    assert [row[0] for row in seeds] == [g["experiment"] for g in groups]
    for row, group in zip(seeds, groups, strict=True):
        assert row[1] == str(group["n_seeds"]) == "3"
        assert float(row[2]) == pytest.approx(group["mean"], abs=5e-5)
        assert float(row[3]) == pytest.approx(group["std"], abs=5e-5)
        assert row[5] == {True: "yes", False: "no", None: "—"}[group["lucky_seed"]]


def test_a_group_too_small_to_judge_shows_no_lucky_seed_call(home: Path, tmp_path: Path) -> None:
    """Two seeds cannot make a lucky-seed call: the CLI shows "—" (None), and so does the
    report, where it once said "no"."""
    import warehouse
    from warehouse.models import resolve_metric
    from warehouse.query.replicates import replicates

    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    for seed, acc in enumerate((0.7, 0.8)):
        config = {"model": "pair", "seed": seed}
        with warehouse.start_run("pair", config, settings=settings, cwd=tmp_path) as run:
            run.log_metrics("val", {"acc": acc})
    with open_store(settings) as store:
        [group] = replicates(store, resolve_metric("val.acc"), flips=False)
    assert group["n_seeds"] == 2
    assert group["lucky_seed"] is None
    [row] = table_rows(report_text(tmp_path), "seeds")
    assert row[0] == "pair"
    assert row[5] == "—"


def test_report_without_labels_leaves_the_heat_map_out(
    local_runs: Settings, tmp_path: Path
) -> None:
    page = report_text(tmp_path)
    assert 'data-view="slices_heatmap"' not in page
    result = CliRunner().invoke(
        app, ["report", "--out", str(tmp_path / "r.html"), "--slice", "size"]
    )
    assert result.exit_code != 0
    assert "no 'size' column" in str(result.exception or "") + result.output


# --- what an empty or sparse report says, and its heat map's scale (issue 32, item 6) ------


def test_a_report_whose_filter_matches_nothing_says_so_and_what_was_meant(
    local_runs: Settings, tmp_path: Path
) -> None:
    page = report_text(tmp_path, "-q", "experiment:nope")
    assert "No run matches the filter <code>experiment:nope</code>" in page
    assert "record runs" not in page  # the warehouse holds runs: recording is not the fix
    mistyped = html.unescape(report_text(tmp_path, "-q", "experiment=digits-svm"))
    assert "experiment=digits-svm has no colon" in mistyped
    assert "did you mean -q 'experiment:digits-svm'?" in mistyped
    empty_metric = report_text(tmp_path, "--metric", "val.nope")
    assert "No run has a value of <code>val.nope</code>" in empty_metric
    assert "record runs" not in empty_metric


def test_the_heat_map_legend_runs_from_its_worst_cell_to_its_best(
    home: Path, tmp_path: Path
) -> None:
    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    _record_seeded(settings, tmp_path)
    page = report_text(tmp_path)
    chart = page.split('data-view="slices_heatmap">', 1)[1].split("</section>", 1)[0]

    def numbers(role: str) -> list[list[float]]:
        """The texts of each ``role`` text group whose texts are all numbers (a caption such
        as '2 of 2 experiments shown' is a text mark too)."""
        found = []
        for group in re.findall(
            rf'<g class="mark-text role-{role}[^"]*"[^>]*>(.*?)</g>', chart, re.S
        ):
            texts = re.findall(r"<text[^>]*>([^<]*)</text>", group)
            if texts and all(re.fullmatch(r"-?\d+(\.\d+)?", t.strip()) for t in texts):
                found.append([float(t) for t in texts])
        return found

    [cells] = numbers("mark")  # each cell's mean, as written on it
    [legend] = numbers("legend-label")
    assert len(cells) == 4
    assert min(legend) <= min(cells)  # the worst cell's colour has a label at or below it
    assert max(legend) >= max(cells)
    assert legend == sorted(legend)


def test_the_report_without_its_extra_says_how_to_install_it(
    local_runs: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import sys

    from warehouse.cli import main

    monkeypatch.setitem(sys.modules, "vl_convert", None)  # as in a core install: no renderer
    out = tmp_path / "r.html"
    monkeypatch.setattr(sys, "argv", ["warehouse", "report", "--out", str(out)])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    assert "pip install 'results-warehouse[report]'" in " ".join(capsys.readouterr().err.split())
    assert not out.exists()
