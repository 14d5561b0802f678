"""The shared Vega-Lite specs: one JSON file per view, given to Kibana and to the HTML report.

Each view (``best_over_time``, ``experiments_ranked``, ``bias_variance``) is written once, in
``warehouse/vega/<view>.json``, with the Elasticsearch ``data.url`` Kibana runs (per-run hits of
the runs index, honouring the dashboard's time range and filters through ``%context%`` and
``%timefield%``). All the arithmetic — the running best, each experiment's best run, the
ranking — is done by the spec's own transforms over those per-run documents, so

- :func:`spec_for_kibana` only points the query at an index prefix and sets the metric, and
- :func:`spec_with_values` swaps the query for the same documents inlined (``{"_source": doc}``,
  exactly the shape of ``hits.hits``) for the offline report.

``step_series.json`` is the live-training line chart (one line per run over the steps data
stream); :func:`step_series_spec` fills in the field it plots.

Strings ``{metric}``, ``{title}``, ``{unit}``, ``{field}`` and ``{format}`` in the files are
placeholders filled here; a key whose placeholder is filled with nothing is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Literal

from warehouse.errors import ConfigurationError
from warehouse.models import infer_direction, parse_metric_path

VIEWS = ("best_over_time", "experiments_ranked", "bias_variance")
"""The three views of the design, in the order dashboards and the report show them."""

VL_VERSION = "5.21"
"""The Vega-Lite the specs are written for: Kibana 8.x-9.3 ship 5.x, 9.4+ ship 6.x (which
draws them the same; a test renders both)."""

Direction = Literal["max", "min"]


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
    """A fresh copy of the spec file ``warehouse/vega/<name>.json``."""
    path = resources.files("warehouse") / "vega" / f"{name}.json"
    if not path.is_file():
        known = ", ".join((*VIEWS, "step_series"))
        raise ConfigurationError(f"no Vega-Lite view named {name!r}; known views: {known}")
    spec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return spec


def resolve_metric(metric: str, direction: str | None = None) -> tuple[str, str, Direction]:
    """``("val", "acc", "max")`` for ``"val.acc"``; the direction inferred when not given."""
    try:
        split, name = parse_metric_path(metric)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    direct = direction or infer_direction(name)
    if direct not in ("max", "min"):
        raise ConfigurationError(f"direction must be 'max' or 'min', not {direct!r}")
    return split, name, direct  # type: ignore[return-value]


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
    rows: Iterable[Mapping[str, Any]],
    metric: str = "val.acc",
    direction: str | None = None,
    baseline_error: float = 0.0,
    *,
    width: int | None = None,
    height: int | None = None,
) -> dict[str, Any]:
    """The same view with run documents ``rows`` inlined in place of the Elasticsearch query."""
    spec = _with_metric(load_spec(name), metric, direction, baseline_error)
    spec["data"] = {"values": [{"_source": dict(row)} for row in rows]}
    if width is not None:
        spec["width"] = width
    if height is not None:
        spec["height"] = height
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
    split, name, direct = resolve_metric(metric, direction)
    values = {
        "metric_split": split,
        "metric_name": name,
        "direction": direct,
        "baseline_error": baseline_error,
    }
    spec["params"] = [
        {**param, "value": values.get(param["name"], param.get("value"))}
        for param in spec.get("params", [])
    ]
    filled: dict[str, Any] = _fill(spec, {"{metric}": f"{split}.{name}"})
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
            out[key] = filled
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
    a ``match_all`` filter — an empty query bar) holding that range in ``must``, and a
    ``date_histogram``'s ``interval`` (``{"%autointerval%": true}`` = ~50 buckets over the
    range) becomes ``fixed_interval`` or ``calendar_interval``.
    """
    request: dict[str, Any] = json.loads(json.dumps(url))
    body: dict[str, Any] = request.get("body", {})
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
        base = context or {
            "bool": {"must": [], "filter": [{"match_all": {}}], "should": [], "must_not": []}
        }
        base = json.loads(json.dumps(base))
        if query is not None:
            base["bool"].setdefault("must", []).append(query)
        query = base
    if query is not None:
        body["query"] = query
    span_ms = (time_to - time_from).total_seconds() * 1000
    _expand_intervals(body.get("aggs", {}), span_ms)
    return str(request["index"]), body


def _expand_intervals(node: Any, span_ms: float, key: str | None = None) -> None:
    if isinstance(node, list):
        for item in node:
            _expand_intervals(item, span_ms)
        return
    if not isinstance(node, dict):
        return
    if key == "date_histogram" and "interval" in node:
        interval = node.pop("interval")
        if isinstance(interval, dict):
            size = interval.get("%autointerval%")
            buckets = 50 if size is True else float(size or 50)
            interval = next(
                (iv for bound, iv in _ROUND_INTERVALS if span_ms / buckets <= bound), "1y"
            )
        unit = re.sub(r"^\d+", "", interval)
        calendar = unit in _CALENDAR_UNITS or (unit in _MIXED_UNITS and interval[:-1] == "1")
        node["calendar_interval" if calendar else "fixed_interval"] = interval
    for name, value in node.items():
        _expand_intervals(value, span_ms, name)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_SOURCE_PATH = re.compile(r"datum\._source\.([A-Za-z_@][\w@]*(?:\.[A-Za-z_@][\w@]*)*)")


def vega_fields_used(spec: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(index, field, kind)`` read by a Vega-Lite spec's Elasticsearch query and transforms."""
    url = spec["data"]["url"]
    index = url["index"]
    body = url.get("body", {})
    used = [(index, url["%timefield%"], "date")] if "%timefield%" in url else []
    for item in body.get("sort", []):
        used += [(index, f, "any") for f in (item if isinstance(item, dict) else [item])]
    used += [(index, f, "any") for f in body.get("_source", [])]
    used += [(index, f, "any") for f in _agg_fields(body.get("aggs", {}))]
    transforms = json.dumps(spec.get("transform", []))
    used += [(index, m, "any") for m in _SOURCE_PATH.findall(transforms)]
    params = {p["name"]: p.get("value") for p in spec.get("params", [])}
    if "metric_split" in params and "metric_name" in params:
        used.append((index, f"metrics.{params['metric_split']}.{params['metric_name']}", "any"))
    return sorted(set(used))


def _agg_fields(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["field"]] if isinstance(node.get("field"), str) else []
        for value in node.values():
            found += _agg_fields(value)
        return found
    if isinstance(node, list):
        return [f for item in node for f in _agg_fields(item)]
    return []
