"""The static HTML report: the three views, the leaderboard and the run count, in one file.

A manager opens it offline: no script, no font or network fetch — the charts are inline SVG
rendered by ``vl-convert`` (the ``report`` extra) from the very Vega-Lite specs Kibana uses, fed
an answer of the same shape as Kibana's aggregations built from the overview
(:func:`warehouse.dashboards.vega.responses.overview_responses`), and a Content-Security-Policy
forbids the page from loading anything. Everything shown comes from one
:func:`warehouse.query.api.overview` — the views' front door, the answers ``warehouse query``
and the local UI give — on the local store and on Elasticsearch alike.
"""

from __future__ import annotations

import html
import logging
import math
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.dashboards.vega import (
    SLICES_VIEW,
    VL_VERSION,
    slices_spec_with_values,
    spec_with_values,
)
from warehouse.errors import ConfigurationError
from warehouse.models import resolve_metric
from warehouse.output import table_cell

if TYPE_CHECKING:
    from warehouse.query.overview import Overview
    from warehouse.settings import Settings

log = logging.getLogger(__name__)


CHART_WIDTH = 760
_CHART_HEIGHT = {"best_over_time": 280, "experiments_ranked": None, "bias_variance": None}
_ROW_HEIGHT = 30  # per experiment in the bar charts
_SVG_ID = re.compile(r'\bid="([^"]+)"')
_SVG_REF = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')
_FONT = "-apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
_CHART_CONFIG = {
    "font": _FONT,
    "view": {"stroke": None},
    "axis": {
        "labelColor": "#475569",
        "titleColor": "#334155",
        "gridColor": "#e2e8f0",
        "domainColor": "#cbd5e1",
        "tickColor": "#cbd5e1",
        "labelFontSize": 11,
    },
    "legend": {"labelColor": "#334155", "titleColor": "#334155", "labelFontSize": 11},
    "style": {"guide-label": {"fill": "#475569"}},  # what Kibana's theme sets (score labels)
    "title": {
        "color": "#0f172a",
        "subtitleColor": "#64748b",
        "fontSize": 15,
        "subtitleFontSize": 12,
        "fontWeight": 600,
    },
}


REPORT_EXTRA = "pip install 'results-warehouse[report]'"
"""What installs the chart renderer (vl-convert, ~80 MB: not in the core install)."""


def build_report(
    settings: Settings,
    *,
    filter: str | None = None,
    title: str | None = None,
    slice: str | None = None,
) -> str:
    """The report HTML for the configured store, metric and ``filter`` (Lucene); ``slice``:
    the sample column of the slice heat map (default ``label``, shown when present)."""
    from warehouse.query import api

    found = api.overview(
        filter=filter, slices=True, slice=slice, replicates=True, settings=settings
    )
    heading = title or (f"{settings.project} results" if settings.project else "ML results")
    return render_html(found, heading)


def write_report(
    settings: Settings,
    out: Path,
    *,
    filter: str | None = None,
    title: str | None = None,
    slice: str | None = None,
) -> Path:
    """Write the report to ``out`` (folders created); return the path."""
    if out.is_dir():
        raise ConfigurationError(
            f"--out {out} is a folder; give a file name, e.g. --out {out / 'report.html'}"
        )
    _renderer()  # before any query: a missing extra is said first
    text = build_report(settings, filter=filter, title=title, slice=slice)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the report to {out}: {exc.strerror or exc}; choose another --out"
        ) from exc
    log.info("report written to %s", out)
    return out


def _renderer() -> Any:
    """``vl_convert``, or a ConfigurationError (exit 2) that says how to install it."""
    try:
        import vl_convert
    except ImportError:
        raise ConfigurationError(
            "the report draws its charts with vl-convert, which is not installed; install the "
            f"report extra: {REPORT_EXTRA}"
        ) from None
    return vl_convert


def render_svg(view: str, data: Overview, answer: dict[str, Any]) -> str:
    """One view as an inline SVG from its Kibana-shaped ``answer`` (ids made unique so
    several charts share a page)."""
    vl_convert = _renderer()
    aggs = answer.get("aggregations", {})
    aggs = aggs.get("split", aggs)  # the slice heat map's experiments are under its split
    experiments = len(aggs.get("experiments", {}).get("buckets", []))
    height = _CHART_HEIGHT.get(view) or max(120, _ROW_HEIGHT * experiments)
    if view == SLICES_VIEW:
        m = resolve_metric(data.metric, data.direction)
        spec = slices_spec_with_values(  # the column in titles: the 0/1 column slices read
            answer, data.slice, "correct", m.split, width=CHART_WIDTH, height=height
        )
        means = [r["mean"] for r in data.slices or [] if _num(r.get("mean")) is not None]
        if means:
            _label_colour_ends(spec, min(means), max(means))
    else:
        spec = spec_with_values(
            view,
            answer,
            data.metric,
            data.direction,
            data.baseline_error,
            width=CHART_WIDTH,
            height=height,
        )
    spec["config"] = _CHART_CONFIG
    spec["padding"] = {"left": 28, "right": 28, "top": 6, "bottom": 6}  # slack for wider fonts
    svg: str = vl_convert.vegalite_to_svg(spec, vl_version=VL_VERSION, allowed_base_urls=[])
    # vl-convert numbers clip paths across calls (clip7 ...): renumber them per chart
    ids = {old: f"{view}-{n}" for n, old in enumerate(dict.fromkeys(_SVG_ID.findall(svg)), 1)}
    return _SVG_REF.sub(
        lambda m: m.group(0).replace(m.group(2), ids.get(m.group(2), m.group(2))), svg
    )


def _label_colour_ends(spec: dict[str, Any], low: float, high: float) -> None:
    """Label the colour legend of the heat map from its worst cell to its best: left to
    Vega, a gradient's labels are round ticks inside the data, so a worst cell of 0.86 sits
    below a scale that seems to stop at 0.90. The scale runs from ``low`` to ``high`` (to
    the hundredth outside) and the legend names both ends and round values between."""
    bottom, top = math.floor(low * 100) / 100, math.ceil(high * 100) / 100
    span = top - bottom
    if span <= 0:
        return  # one value: nothing to scale
    step = next((s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5) if span / s <= 4), 1.0)
    ticks = [k * step for k in range(math.ceil(bottom / step), math.floor(top / step) + 1)]
    inner = [round(t, 4) for t in ticks if t - bottom > step / 2 and top - t > step / 2]
    values = [bottom, *inner, top]
    for layer in _views_of(spec):
        colour = layer.get("encoding", {}).get("color")
        if isinstance(colour, dict) and colour.get("type") == "quantitative":
            colour.setdefault("scale", {})["domain"] = (
                [bottom, top] if span else [bottom - 0.01, top]
            )
            colour["legend"] = {**colour.get("legend", {}), "values": values, "format": ".2f"}


def _views_of(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``spec`` and every view nested in it (layers, concatenations), depth first."""
    yield spec
    for key in ("layer", "concat", "hconcat", "vconcat"):
        for child in spec.get(key, []):
            if isinstance(child, dict):
                yield from _views_of(child)


def render_html(data: Overview, title: str, generated_at: datetime | None = None) -> str:
    """The whole self-contained page of an overview (read with slices and seed groups)."""
    from warehouse.dashboards.vega.responses import overview_responses

    e = html.escape
    moment = generated_at or datetime.now(UTC)
    scored = [r for r in data.leaderboard if _num(r.get("best_score")) is not None]
    best = scored[0] if scored else None
    cards = [
        ("Runs", f"{sum(data.runs_per_experiment.values()):,}"),
        ("Experiments", f"{len(data.runs_per_experiment):,}"),
        (f"Best {data.metric}", _fmt(best.get("best_score")) if best else "—"),
        ("Best experiment", str(best.get("experiment")) if best else "—"),
    ]
    card_html = "".join(
        f'<div class="card"><div class="label">{e(k)}</div><div class="value">{e(v)}</div></div>'
        for k, v in cards
    )
    if scored:
        answers = overview_responses(data)
        charts = "".join(
            f'<section class="chart" data-view="{view}">{render_svg(view, data, answer)}</section>'
            for view, answer in answers.items()
        )
    else:
        charts = f'<section class="empty">{_nothing_ranked(data)}</section>'

    better = "higher" if data.direction == "max" else "lower"
    flt = f" · filter <code>{e(data.filter)}</code>" if data.filter else ""
    return _PAGE.format(
        title=e(title),
        subtitle=(
            f"{e(data.metric)} ({better} is better) · {e(data.source)}{flt} · generated "
            f"{moment:%Y-%m-%d %H:%M} UTC"
        ),
        cards=card_html,
        charts=charts,
        leaderboard=_leaderboard_table(data),
        decomposition=_decomposition_table(data),
        seeds=_seeds_section(data),
        baseline=e(
            f"Errors of {data.metric.split('.', 1)[1]} in the train, val and test splits; "
            f"avoidable bias is measured against a baseline error of {data.baseline_error:g}."
        ),
        style=_STYLE,
    )


def _nothing_ranked(data: Overview) -> str:
    """Why no chart is drawn: an empty warehouse (then how to record runs), a filter that
    matches no run (its likely slips), or runs without the metric (the ones they have)."""
    e = html.escape
    empty = data.empty
    metric = f"<code>{e(data.metric)}</code>"
    if empty is not None and empty.holds_no_run:
        return (
            f"No runs recorded in {e(data.source)} yet: record runs (for example "
            "<code>warehouse demo</code>), then build the report again."
        )
    if data.filter and not data.run_count:
        said = "".join(f"<li>{e(line)}</li>" for line in (empty.hint_lines() if empty else []))
        return (
            f"No run matches the filter <code>{e(data.filter)}</code>: change it (--query) or "
            "leave it out." + (f"<ul>{said}</ul>" if said else "")
        )
    scope = " matching the filter" if data.filter else ""
    instead = f" ({e(data.left_out)})" if data.left_out else ""
    return f"No run{scope} has a value of {metric}{instead}: choose another --metric."


def _leaderboard_table(data: Overview) -> str:
    rows = [
        [
            str(row.get("rank", "")),
            str(row.get("experiment", "")),
            _fmt(row.get("best_score")),
            _interval(row.get("ci_low"), row.get("ci_high")),
            _gap(row.get("vs_next_p")),
            _short(row.get("best_run_id")),
            _fmt_int(row.get("run_count")),
            _date(row.get("ended_at")),
        ]
        for row in data.leaderboard
    ]
    return _table(
        [
            "#",
            "experiment",
            f"best {data.metric}",
            "95% interval",
            "lead over next",
            "best run",
            "runs",
            "ended",
        ],
        rows,
        numeric={0, 2, 6},
    )


def _interval(low: Any, high: Any) -> str:
    """``[0.9678, 0.9955]``, or a dash where the run logged no per-sample results."""
    lo, hi = _num(low), _num(high)
    return "—" if lo is None or hi is None else f"[{lo:.4f}, {hi:.4f}]"


def _gap(p: Any) -> str:
    """Whether the lead over the next row is evidence (paired test on shared samples)."""
    value = _num(p)
    if value is None:
        return "—"
    return f"p = {value:.2g}" + (" (≈ not significant)" if value >= 0.05 else "")


def _seeds_section(data: Overview) -> str:
    """`warehouse query replicates` as a small table, when some group has two seeds or more."""
    groups = data.replicates or []
    if not any((r.get("n_seeds") or 0) >= 2 for r in groups):
        return ""
    rows = [
        [
            str(r.get("experiment", "")),
            _fmt_int(r.get("n_seeds")),
            _fmt(r.get("mean")),
            _fmt(r.get("std")),
            _interval(r.get("ci_low"), r.get("ci_high")),
            table_cell(r.get("lucky_seed"), "lucky_seed", ""),  # None: "—", as the CLI
        ]
        for r in groups
    ]
    head = ["experiment", "seeds", f"mean {data.metric}", "std", "95% interval", "lucky seed"]
    note = (
        "Runs whose configs differ only in their seed, per group: a lucky seed is a best seed "
        "beyond what the group's other seeds predict (a leave-one-out prediction bound); "
        "— where no call can be made: fewer than 3 seeds, or other seeds that agree exactly."
    )
    table = _table(head, rows, numeric={1, 2, 3})
    muted = f'<p class="muted">{html.escape(note)}</p>'
    return f'<section id="seeds"><h2>Seeds</h2>{muted}{table}</section>'


def _decomposition_table(data: Overview) -> str:
    keys = ("train_error", "val_error", "test_error", "avoidable_bias", "variance", "dev_overfit")
    rows = [
        [str(r.get("experiment", "")), _short(r.get("run_id")), *(_fmt(r.get(k)) for k in keys)]
        for r in data.decomposition
    ]
    head = ["experiment", "best run", *(k.replace("_", " ") for k in keys)]
    return _table(head, rows, numeric=set(range(2, 2 + len(keys))))


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> str:
    e = html.escape
    if not rows:
        return '<p class="muted">No runs yet.</p>'
    th = "".join(
        f'<th class="{"num" if i in numeric else ""}">{e(h)}</th>' for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"num" if i in numeric else ""}">{e(c)}</td>' for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt(value: Any) -> str:
    number = _num(value)
    if number is None:
        return "—"
    return f"{number + 0.0:.4f}" if round(number, 4) else "0.0000"  # never "-0.0000"


def _fmt_int(value: Any) -> str:
    return "—" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _short(run_id: Any) -> str:
    from warehouse.output import RUN_ID_WIDTH

    return "—" if not run_id else str(run_id)[:RUN_ID_WIDTH]


def _date(value: Any) -> str:
    if not value:
        return "—"
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return text[:16].replace("T", " ")


_STYLE = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f8fafc; color: #0f172a;
       font: 14px/1.5 -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif; }
main { max-width: 1000px; margin: 0 auto; padding: 32px 24px 48px; }
header h1 { font-size: 26px; margin: 0 0 4px; letter-spacing: -0.01em; }
header p { margin: 0; color: #64748b; }
code { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; background: #f1f5f9;
       padding: 1px 5px; border-radius: 4px; }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin: 24px 0; }
.card { background: #fff; border: 1px solid #e2e8f0; border-radius: 10px; padding: 14px 16px; }
.card .label { color: #64748b; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 22px; font-weight: 600; margin-top: 2px; overflow-wrap: anywhere; }
section { background: #fff; border: 1px solid #e2e8f0; border-radius: 10px; padding: 18px;
          margin: 0 0 16px; overflow-x: auto; }
section.chart svg { display: block; max-width: 100%; height: auto; overflow: visible; }
section.empty { color: #475569; }
h2 { font-size: 17px; margin: 0 0 12px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 7px 8px; border-bottom: 1px solid #e2e8f0; text-align: left;
         white-space: nowrap; }
th { color: #475569; font-weight: 600; background: #f8fafc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:first-child td { font-weight: 600; }
.muted { color: #64748b; }
footer { color: #94a3b8; font-size: 12px; margin-top: 24px; }
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<link rel="icon" href="data:,">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<main>
<header><h1>{title}</h1><p>{subtitle}</p></header>
<div class="cards">{cards}</div>
{charts}
<section id="leaderboard"><h2>Leaderboard</h2>{leaderboard}</section>
<section id="decomposition"><h2>Bias / variance of each experiment's best run</h2>
<p class="muted">{baseline}</p>{decomposition}</section>
{seeds}
<footer>Made by <code>warehouse report</code> from the same Vega-Lite views as the Kibana
dashboards. Opens offline; nothing is fetched.</footer>
</main>
</body>
</html>
"""
