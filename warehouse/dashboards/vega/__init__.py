"""The shared Vega-Lite specs: one JSON file per view, given to Kibana and to the HTML report.

Each view (``best_over_time``, ``experiments_ranked``, ``bias_variance``) is written once, in
``warehouse/dashboards/vega/<view>.json``, with the Elasticsearch ``data.url`` Kibana runs: an
*aggregation* over the runs index (never a page of hits), honouring the dashboard's time range
and filters through ``%context%`` and ``%timefield%``, so a view is exact at any number of runs
and costs O(experiments) or O(time buckets):

- ``experiments_ranked`` and ``bias_variance``: per experiment its run count (``runs``), and
  over its finished runs with the metric (``scored``: one filter above the experiments, never
  one per experiment) a ``top_hits`` of size 1 — the best run by the metric, ties to the
  earlier end, then the smaller run id, exactly the CLI's rule — whose ``_source`` brings the
  *stored* score (never a ``max`` aggregation's float); a running run is never a best;
- ``best_over_time``: a ``date_histogram`` over ``ended_at`` (Kibana's automatic interval) of
  the finished runs with the metric, each bucket's best run from ``top_hits``; the running best
  is Vega's ``window``.

Every sort names its ``unmapped_type`` (a fresh install has no metric mapped yet). The spec's
transforms do the rest (ranking, running best, bias/variance arithmetic) and a manager's panel
draws the ``top_n`` (20) rows its dashboard panel can label, with a line saying how many of
how many it shows; the leader is always its first row. So

- :func:`spec_for_kibana` points the query at an index prefix and fills in the metric and its
  direction (``max``/``min`` aggregations, ``desc``/``asc`` sorts), and
- :func:`spec_with_values` inlines an answer *of the same shape* for the offline report:
  :func:`view_response` builds it from :mod:`warehouse.query.views` (the CLI's answers), so
  the report and Kibana draw the same spec from the same numbers.

``slices_heatmap.json`` is the slice heat map (experiments x values of a sample column, coloured by
a 0/1 column's mean): one aggregation on the *samples* index (a filter on the split, the most
frequent values, then ``terms`` on experiment, on the slice column and on the 0/1 column), the
means and the ranking of experiments computed in the spec; :func:`slices_spec_for_kibana` /
:func:`slices_spec_with_values` fill in ``{slice}``, ``{column}``, ``{split}`` and ``{scope}``,
and :func:`warehouse.dashboards.vega.responses.slices_response` builds its answer from
``warehouse query slices`` for the report.

``seed_replicates.json`` (Kibana only) is one search collapsed on ``config_hash_noseed``: the
configs of the best runs with their seeds as inner hits. ``step_series.json`` is the
live-training line chart (one line per run of the 10 that logged last: the hits of a search
collapsed on ``run_id``, their series from an aggregation); :func:`step_series_spec` fills in
the field it plots.

Strings ``{metric}``, ``{metric_field}``, ``{ci_field}`` (the metric's recorded interval),
``{metric_name}``, ``{best_op}``, ``{order}``, ``{title}``, ``{unit}``, ``{field}`` and
``{format}`` in the files (keys included) are placeholders filled here; a key whose
placeholder is filled with nothing is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from warehouse.errors import ConfigurationError
from warehouse.models import resolve_metric

VIEWS = ("best_over_time", "experiments_ranked", "bias_variance")
"""The three views of the design, in the order dashboards and the report show them."""

VL_VERSION = "5.21"
"""The Vega-Lite the specs are written for: Kibana 8.x-9.3 ship 5.x, 9.4+ ship 6.x (which
draws them the same; a test renders both)."""


@dataclass(frozen=True)
class StepPanel:
    """One chart of the live-training dashboard: a step field over time, one line per run."""

    slug: str
    title: str
    field: str  # dotted path in the step document
    unit: str
    format: str = ""  # d3 number format of the axis and tooltip ("" = Vega's default)
    invert: bool = False  # plot 1/value (steps per second from seconds per step)


STEP_PANELS = (
    StepPanel("loss", "Loss", "metrics.loss", "loss"),
    StepPanel("lr", "Learning rate", "metrics.lr", "learning rate", "~e"),
    StepPanel("steps-per-s", "Throughput (steps/s)", "duration_s", "steps/s", ".3~s", True),
    StepPanel("tokens-per-s", "Throughput (tokens/s)", "metrics.tokens_per_s", "tokens/s", "~s"),
    StepPanel("gpu-util", "GPU utilisation", "system.gpu_util_pct", "GPU util %", ".0f"),
    StepPanel("gpu-memory", "GPU memory used", "system.gpu_mem_used_bytes", "bytes", ".3~s"),
    StepPanel("gpu-power", "GPU power", "system.gpu_power_w", "watts", ".0f"),
    StepPanel("gpu-temperature", "GPU temperature", "system.gpu_temperature_c", "°C", ".0f"),
)


def load_spec(name: str) -> dict[str, Any]:
    """A fresh copy of the spec file ``warehouse/dashboards/vega/<name>.json``."""
    path = resources.files("warehouse") / "dashboards" / "vega" / f"{name}.json"
    if not path.is_file():
        known = ", ".join((*VIEWS, "slices_heatmap", "seed_replicates", "step_series"))
        raise ConfigurationError(f"no Vega-Lite view named {name!r}; known views: {known}")
    spec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return spec


def spec_for_kibana(
    name: str,
    prefix: str = "warehouse",
    metric: str = "val.acc",
    direction: str | None = None,
    baseline_error: float = 0.0,
) -> dict[str, Any]:
    """The view as Kibana runs it: its ``data.url`` query on ``<prefix>-runs``, for ``metric``."""
    spec = _with_metric(load_spec(name), metric, direction, baseline_error)
    url = spec["data"]["url"]
    url["index"] = _prefixed(url["index"], prefix)
    return spec


def spec_with_values(
    name: str,
    response: Mapping[str, Any],
    metric: str = "val.acc",
    direction: str | None = None,
    baseline_error: float = 0.0,
    *,
    width: int | None = None,
    height: int | None = None,
) -> dict[str, Any]:
    """The same view with ``response`` — an Elasticsearch answer to its query, or
    :func:`view_response` — inlined in place of the query (read at the same ``format``)."""
    spec = _with_metric(load_spec(name), metric, direction, baseline_error)
    spec["data"] = {"values": response, "format": spec["data"]["format"]}
    if width is not None:
        spec["width"] = width
    if height is not None:
        spec["height"] = height
    return spec


SLICES_VIEW = "slices_heatmap"
_KIBANA_SCOPE = "every run of each experiment recorded in the time range"
_REPORT_SCOPE = "each experiment's best run"


def slices_spec_for_kibana(
    prefix: str = "warehouse", slice: str = "label", column: str = "correct", split: str = "val"
) -> dict[str, Any]:
    """The slice heat map as Kibana runs it: one aggregation on ``<prefix>-samples``."""
    spec = _slices(slice, column, split, _KIBANA_SCOPE)
    url = spec["data"]["url"]
    url["index"] = _prefixed(url["index"], prefix)
    return spec


def slices_spec_with_values(
    response: Mapping[str, Any],
    slice: str = "label",
    column: str = "correct",
    split: str = "val",
    *,
    width: int | None = None,
    height: int | None = None,
) -> dict[str, Any]:
    """The slice heat map with ``response`` (Kibana's answer, or
    :func:`warehouse.dashboards.vega.responses.slices_response`) inlined, for the report."""
    spec = _slices(slice, column, split, _REPORT_SCOPE)
    spec["data"] = {"values": response, "format": spec["data"]["format"]}
    if width is not None:
        spec["width"] = width
    if height is not None:
        spec["height"] = height
    return spec


def _slices(slice: str, column: str, split: str, scope: str) -> dict[str, Any]:
    for what, name in (("slice column", slice), ("metric column", column), ("split", split)):
        if not re.fullmatch(r"[A-Za-z_][\w.@-]*", name or ""):
            raise ConfigurationError(
                f"{what} {name!r} is not a sample column name; give one such as label"
            )
    values = {"{slice}": slice, "{column}": column, "{split}": split, "{scope}": scope}
    spec: dict[str, Any] = _fill(load_spec(SLICES_VIEW), values)
    return spec


def step_series_spec(panel: StepPanel, prefix: str = "warehouse") -> dict[str, Any]:
    """The live-training chart of ``panel``: its field per time bucket, one line per run."""
    spec: dict[str, Any] = _fill(
        load_spec("step_series"),
        {
            "{title}": panel.title,
            "{unit}": panel.unit,
            "{field}": panel.field,
            "{format}": panel.format,
        },
    )
    spec["params"] = [{"name": "invert", "value": panel.invert}]
    url = spec["data"]["url"]
    url["index"] = _prefixed(url["index"], prefix)
    return spec


def _with_metric(
    spec: dict[str, Any], metric: str, direction: str | None, baseline_error: float
) -> dict[str, Any]:
    m = resolve_metric(metric, direction)
    values = {
        "metric_split": m.split,
        "metric_name": m.name,
        "direction": m.direction,
        "baseline_error": baseline_error,
    }
    spec["params"] = [
        {**param, "value": values.get(param["name"], param.get("value"))}
        for param in spec.get("params", [])
    ]
    filled: dict[str, Any] = _fill(
        spec,
        {
            "{metric_field}": m.path,
            "{ci_field}": f"metrics_ci.{m.split}.{m.name}",
            "{metric_name}": m.name,
            "{metric}": m.label,
            "{best_op}": m.direction,
            "{order}": "desc" if m.direction == "max" else "asc",
        },
    )
    return filled


def _prefixed(index: str, prefix: str) -> str:
    """``warehouse-runs`` (as written in the files) → ``<prefix>-runs``."""
    return f"{prefix}-{index.split('-', 1)[1]}"


def _fill(node: Any, values: Mapping[str, str]) -> Any:
    """``node`` with placeholders replaced; object keys whose value became ``""`` are dropped."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            filled = _fill(value, values)
            if filled == "" and isinstance(value, str) and value in values:
                continue
            out[_fill(key, values)] = filled
        return out
    if isinstance(node, list):
        return [_fill(item, values) for item in node]
    if isinstance(node, str):
        for placeholder, value in values.items():
            node = node.replace(placeholder, value)
        return node
    return node


# ---------------------------------------------------------------------------------------------
# what Kibana sends for a ``data.url`` (to run the views' queries outside Kibana, in tests)

_CALENDAR_UNITS = {"w", "M", "q", "y"}
_MIXED_UNITS = {"m", "h", "d"}
_ROUND_INTERVALS = (  # Kibana's EsQueryParser._roundInterval: (upper bound in ms, interval)
    (500, "100ms"),
    (5_000, "1s"),
    (7_500, "5s"),
    (15_000, "10s"),
    (45_000, "30s"),
    (180_000, "1m"),
    (450_000, "5m"),
    (1_200_000, "10m"),
    (2_700_000, "30m"),
    (7_200_000, "1h"),
    (21_600_000, "3h"),
    (86_400_000, "12h"),
    (604_800_000, "24h"),
    (1_814_400_000, "1w"),
    (3_628_800_000 - 1, "30d"),
)


def kibana_request(
    url: Mapping[str, Any],
    time_from: datetime,
    time_to: datetime,
    context: Mapping[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(index, body)`` Kibana searches for a Vega ``data.url`` under a time range and filters.

    Mirrors Kibana's ``EsQueryParser``: ``%timefield%`` becomes a range on that field,
    ``%context%`` the dashboard's query and filters (``context``, a ``bool`` query; default:
    a ``match_all`` filter — an empty query bar) holding that range in ``must``; in a body's
    own ``query`` the strings ``%dashboard_context-must_clause%`` (``-filter_clause%``,
    ``-must_not_clause%``) become the dashboard's clauses of that kind and
    ``{"%timefilter%": true}`` the time range; and a
    ``date_histogram``'s ``interval`` (``{"%autointerval%": true}`` = ~50 buckets over the
    range) becomes ``fixed_interval`` or ``calendar_interval``; in the aggregations
    ``{"%timefilter%": "min"|"max"}`` becomes that bound (epoch ms) and
    ``{"%timefilter%": true}`` the range's ``gte``/``lte``.
    """
    request: dict[str, Any] = json.loads(json.dumps(url))
    body: dict[str, Any] = request.get("body", {})
    base_context = context or {
        "bool": {"must": [], "filter": [{"match_all": {}}], "should": [], "must_not": []}
    }
    if "query" in body:  # a hand-built query: Kibana's clause strings and %timefilter%
        body["query"] = _context_clauses(body["query"], base_context["bool"])
        _inject(body["query"], (time_from, time_to))
    use_context = request.pop("%context%", None)
    timefield = request.pop("%timefield%", None)
    if (use_context or timefield) and "query" in body:
        raise ConfigurationError("a Vega data.url with %context% or %timefield% has no body.query")
    query: dict[str, Any] | None = None
    if timefield:
        query = {
            "range": {
                timefield: {
                    "gte": _iso(time_from),
                    "lte": _iso(time_to),
                    "format": "strict_date_optional_time",
                }
            }
        }
    if use_context:
        base = json.loads(json.dumps(base_context))
        if query is not None:
            base["bool"].setdefault("must", []).append(query)
        query = base
    if query is not None:
        body["query"] = query
    _inject(body.get("aggs", {}), (time_from, time_to))
    return str(request["index"]), body


_CONTEXT_CLAUSES = {
    "%dashboard_context-must_clause%": "must",
    "%dashboard_context-filter_clause%": "filter",
    "%dashboard_context-must_not_clause%": "must_not",
}


def _context_clauses(node: Any, context: Mapping[str, Any]) -> Any:
    """Kibana's ``%dashboard_context-must_clause%`` (and ``-filter_clause%``,
    ``-must_not_clause%``) in a list: replaced by the dashboard's clauses of that kind."""
    if isinstance(node, list):
        out: list[Any] = []
        for item in node:
            if isinstance(item, str) and item in _CONTEXT_CLAUSES:
                out += json.loads(json.dumps(context.get(_CONTEXT_CLAUSES[item], [])))
            else:
                out.append(_context_clauses(item, context))
        return out
    if isinstance(node, dict):
        return {key: _context_clauses(value, context) for key, value in node.items()}
    return node


def _inject(node: Any, bounds: tuple[datetime, datetime], key: str | None = None) -> None:
    """Kibana's ``_injectContextVars`` over the aggregations: intervals and ``%timefilter%``."""
    if isinstance(node, list):
        for item in node:
            _inject(item, bounds)
        return
    if not isinstance(node, dict):
        return
    span_ms = (bounds[1] - bounds[0]).total_seconds() * 1000
    for name, value in list(node.items()):
        if not isinstance(value, dict) or "%timefilter%" not in value:
            continue
        which = value["%timefilter%"]
        if which in ("min", "max"):
            node[name] = int(bounds[0 if which == "min" else 1].timestamp() * 1000)
        elif which is True:
            node[name] = {
                "gte": _iso(bounds[0]),
                "lte": _iso(bounds[1]),
                "format": "strict_date_optional_time",
            }
        else:
            raise ConfigurationError('"%timefilter%" must be true, "min" or "max"')
    if key == "date_histogram" and "interval" in node:
        interval = node.pop("interval")
        if isinstance(interval, dict):
            size = interval.get("%autointerval%")
            buckets = 50 if size is True else float(size or 50)
            interval = auto_interval(span_ms / buckets)
        unit = re.sub(r"^\d+", "", interval)
        calendar = unit in _CALENDAR_UNITS or (unit in _MIXED_UNITS and interval[:-1] == "1")
        node["calendar_interval" if calendar else "fixed_interval"] = interval
    for name, value in node.items():
        _inject(value, bounds, name)


def auto_interval(target_ms: float) -> str:
    """Kibana's ``EsQueryParser._roundInterval``: the interval it sends for ``target_ms``."""
    return next((iv for bound, iv in _ROUND_INTERVALS if target_ms <= bound), "1y")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_SOURCE_PATH = re.compile(r"datum\._source\.([A-Za-z_@][\w@]*(?:\.[A-Za-z_@][\w@]*)*)")


def vega_fields_used(spec: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(index, field, kind)`` read by a Vega-Lite spec's Elasticsearch query and transforms:
    aggregated fields, sort keys and ``_source`` paths anywhere in the body (``top_hits``
    included), the time field, and the metric the params name — not the sample columns the
    params ``slice_column``/``metric_column`` name (any column a run's samples bring)."""
    url = spec["data"]["url"]
    index = url["index"].rstrip("*")  # ``<prefix>-steps*``: the stream, or nothing yet
    body = url.get("body", {})
    used = [(index, url["%timefield%"], "date")] if "%timefield%" in url else []
    used += [(index, f, "any") for f in _body_fields(body)]
    transforms = json.dumps(spec.get("transform", []))
    used += [(index, m, "any") for m in _SOURCE_PATH.findall(transforms)]
    params = {p["name"]: p.get("value") for p in spec.get("params", [])}
    if "metric_split" in params and "metric_name" in params:
        used.append((index, f"metrics.{params['metric_split']}.{params['metric_name']}", "any"))
    # the slice heat map's sample columns are the user's own, mapped when data brings them
    own = {params.get("slice_column"), params.get("metric_column")} - {None}
    return sorted({u for u in used if u[1] not in own})


def _body_fields(node: Any) -> list[str]:
    if isinstance(node, list):
        return [f for item in node for f in _body_fields(item)]
    if not isinstance(node, dict):
        return []
    found = [node["field"]] if isinstance(node.get("field"), str) else []
    for item in node.get("sort", []) if isinstance(node.get("sort"), list) else []:
        keys = item if isinstance(item, dict) else [item]
        found += [k for k in keys if isinstance(k, str) and not k.startswith("_")]
    source = node.get("_source")
    if isinstance(source, dict):
        source = source.get("includes", [])
    if isinstance(source, list):
        found += [f for f in source if isinstance(f, str) and "*" not in f]
    for name, value in node.items():
        if name not in ("sort", "_source", "field"):
            found += _body_fields(value)
    return found
