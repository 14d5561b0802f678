"""Kibana: the saved objects (data views, Vega views, a saved search, two dashboards), generated
from the package, checked against the index templates, and imported/exported through Kibana's
saved objects API.

The objects are built here from :mod:`warehouse.dashboards.vega` (the same Vega-Lite specs the HTML
report renders), for one index prefix, so ``kibana/*.ndjson`` never drifts from the package:
``warehouse kibana export-objects`` writes them, a test compares the committed file.

:func:`import_objects` (what `warehouse init` calls) and :func:`export_objects` go through
:mod:`warehouse.dashboards.kibana_client`, Kibana's saved objects API over the standard
library's HTTP.

Saved-object formats follow what Kibana 9 exports: ``coreMigrationVersion`` 8.8.0 and a
``typeMigrationVersion`` per type (no 7.x ``migrationVersion``): data views 8.0.0,
visualizations 8.5.0, dashboards 8.7.0 (migrated forward on import), saved searches 10.5.0 —
the model version Kibana 8.17 and 9.x export, with the attributes such an export has.

The runs data view and the "Runs" search use ``started_at`` as time field: every run has it,
so running, crashed and failed runs show up too (``ended_at`` is missing until a run ends).

:mod:`warehouse.dashboards.kibana_client` (the HTTP client) imports nothing from here; this
module imports it, so the two never form an import cycle.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.dashboards.kibana_client import NDJSON_NAME, ImportReport, KibanaClient, parse_ndjson
from warehouse.dashboards.vega import (
    STEP_PANELS,
    VIEWS,
    slices_spec_for_kibana,
    spec_for_kibana,
    step_series_spec,
    vega_fields_used,
)
from warehouse.models import resolve_metric

if TYPE_CHECKING:
    from warehouse.settings import Settings

__all__ = [
    "LIVE_PANEL",
    "NDJSON_NAME",
    "OVERVIEW_PANELS",
    "ImportReport",
    "check_saved_objects",
    "export_objects",
    "import_objects",
    "objects_for",
    "panel_pixels",
    "parse_ndjson",
    "saved_objects",
    "to_ndjson",
    "write_ndjson",
]

_MIGRATION = {  # what Kibana 9 exports (a dashboard's 8.7.0 is migrated forward on import)
    "index-pattern": "8.0.0",
    "visualization": "8.5.0",
    "search": "10.5.0",
    "dashboard": "8.7.0",
}
_CORE_MIGRATION = "8.8.0"
_PANEL_VERSION = "8.8.0"
_EMPTY_SEARCH_SOURCE = {"query": {"query": "", "language": "kuery"}, "filter": []}
_VIEW_TITLES = {
    "best_over_time": "Best score over time",
    "experiments_ranked": "Experiments ranked",
    "bias_variance": "Bias / variance per experiment",
}
OVERVIEW_PANELS = {  # slug -> (x, y, w, h) on the results overview's 48-column grid
    "best_over_time": (0, 0, 48, 15),
    "experiments_ranked": (0, 15, 24, 16),
    "bias_variance": (24, 15, 24, 16),
    "slices": (0, 31, 48, 18),
    "seeds": (0, 49, 48, 16),
    "runs-table": (0, 65, 48, 18),
}
LIVE_PANEL = (24, 12)  # (w, h) of each live-training chart, two per row
GRID_COLUMNS = 48
ROW_PX = 20  # Kibana's dashboard grid: rows of 20 px ...
GAP_PX = 8  # ... with 8 px between panels (useMargins)
DASHBOARD_PX = 1400  # the width the panels are sized for: a 1440-px screen, Kibana's side nav shut
PANEL_PADDING_PX = 8  # the panel's own padding around the Vega view, each side


def panel_pixels(w: int, h: int) -> tuple[int, int]:
    """The pixels (width, height) a Vega view gets in a panel of ``w`` x ``h`` grid units on
    a :data:`DASHBOARD_PX`-wide dashboard: what Kibana's ``autosize: fit`` sizes a spec to,
    so what the tests render each view at to count the rows it can label."""
    column = (DASHBOARD_PX - (GRID_COLUMNS - 1) * GAP_PX) / GRID_COLUMNS
    width = w * column + (w - 1) * GAP_PX - 2 * PANEL_PADDING_PX
    height = h * ROW_PX + (h - 1) * GAP_PX - 2 * PANEL_PADDING_PX
    return int(width), int(height)


_RUN_COLUMNS = (
    "started_at",
    "experiment",
    "run_id",
    "status",
    "{metric}",
    "primary_metric.value",
    "duration_s",
    "user",
    "git.branch",
    "git.commit",
    "tags",
)


# ---------------------------------------------------------------------------------------------
# generating the saved objects


def saved_objects(
    prefix: str = "warehouse",
    metric: str = "val.acc",
    direction: str | None = None,
    baseline_error: float = 0.0,
    slice: str = "label",
) -> list[dict[str, Any]]:
    """Every saved object, dependencies first: data views, views, the runs search, dashboards.

    The views rank runs by ``metric`` (``split.name``) in ``direction`` (inferred from the name
    when None); the bias/variance view measures errors against ``baseline_error``; the slice
    heat map cuts the metric's split's samples by the sample column ``slice``.
    """
    m = resolve_metric(metric, direction)
    metric_path, direct = m.label, m.direction
    objs: list[dict[str, Any]] = [
        _data_view(prefix, "runs", "Runs", "started_at", {"git.diff_uri": _url_format("a")}),
        _data_view(
            prefix, "samples", "Sample results", "recorded_at", {"output_uri": _url_format("a")}
        ),
        _data_view(prefix, "steps", "Training steps (live)", "@timestamp", {}),
    ]
    for view in VIEWS:
        spec = spec_for_kibana(view, prefix, metric_path, direct, baseline_error)
        objs.append(_vega_vis(_id(prefix, view), _title(_VIEW_TITLES[view], prefix), spec))
    slices = slices_spec_for_kibana(prefix, slice, "correct", m.split)
    objs.append(_vega_vis(_id(prefix, "slices"), _title("Slices heat map", prefix), slices))
    seeds = spec_for_kibana("seed_replicates", prefix, metric_path, direct, baseline_error)
    objs.append(_vega_vis(_id(prefix, "seeds"), _title("Seeds: replicate groups", prefix), seeds))
    for panel in STEP_PANELS:
        spec = step_series_spec(panel, prefix)
        objs.append(_vega_vis(_id(prefix, f"live-{panel.slug}"), _title(panel.title, prefix), spec))
    columns = [c.replace("{metric}", f"metrics.{metric_path}") for c in _RUN_COLUMNS]
    objs.append(_search(prefix, columns))

    overview = [
        ("search" if slug == "runs-table" else "visualization", _id(prefix, slug), *grid)
        for slug, grid in OVERVIEW_PANELS.items()
    ]
    objs.append(
        _dashboard(
            _id(prefix, "results-overview"),
            _title("Results overview", prefix),
            f"Best {metric_path} over time, experiments ranked, bias/variance of each "
            "experiment's best finished run, the per-sample accuracy per slice value, the "
            "seed replicate groups of the best runs, and the runs table. Each chart shows the "
            "20 best rows and says how many of how many; filter with the query bar "
            "(e.g. experiment : digits-*) to see others.",
            overview,
            time_from="now-90d",
            refresh_ms=None,
        )
    )
    live = [
        ("visualization", _id(prefix, f"live-{p.slug}"), 24 * (i % 2), 12 * (i // 2), *LIVE_PANEL)
        for i, p in enumerate(STEP_PANELS)
    ]
    objs.append(
        _dashboard(
            _id(prefix, "live-training"),
            _title("Live training", prefix),
            "Training and system metrics of the most recent runs, one line per run. "
            'Show one run with the query bar: run_id : "<run id>".',
            live,
            time_from="now-6h",
            refresh_ms=10_000,
        )
    )
    return objs


def to_ndjson(objects: Iterable[Mapping[str, Any]]) -> str:
    """One saved object per line, keys sorted (stable output that diffs well)."""
    return "".join(json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n" for obj in objects)


def objects_for(settings: Settings, slice: str = "label") -> list[dict[str, Any]]:
    """The saved objects for the settings' index prefix, primary metric and baseline error
    (and the sample column the slice heat map cuts by)."""
    return saved_objects(
        settings.index_prefix,
        settings.primary_metric,
        settings.direction,
        settings.baseline_error,
        slice,
    )


def write_ndjson(out_dir: Path, objects: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``objects`` to ``<out_dir>/warehouse.ndjson``; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / NDJSON_NAME
    path.write_text(to_ndjson(objects), encoding="utf-8")
    return path


def _id(prefix: str, slug: str) -> str:
    return f"{prefix}-{slug.replace('_', '-')}"


def _title(title: str, prefix: str) -> str:
    return title if prefix == "warehouse" else f"{title} [{prefix}]"


def _meta(kind: str) -> dict[str, Any]:
    return {
        "coreMigrationVersion": _CORE_MIGRATION,
        "typeMigrationVersion": _MIGRATION[kind],
        "managed": False,
    }


def _url_format(kind: str) -> dict[str, Any]:
    return {
        "id": "url",
        "params": {"type": kind, "labelTemplate": "{{value}}", "openLinkInCurrentTab": False},
    }


def _data_view(
    prefix: str, kind: str, name: str, time_field: str, formats: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "type": "index-pattern",
        "id": _id(prefix, kind),
        "attributes": {
            "title": f"{prefix}-{kind}",
            "name": _title(f"Warehouse: {name}", prefix),
            "timeFieldName": time_field,
            "fieldFormatMap": json.dumps(dict(formats), sort_keys=True),
            "allowNoIndex": True,
        },
        "references": [],
        **_meta("index-pattern"),
    }


def _vega_vis(object_id: str, title: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    vis_state = {
        "title": title,
        "type": "vega",
        "aggs": [],
        "params": {"spec": json.dumps(spec, indent=2, ensure_ascii=False)},
    }
    return {
        "type": "visualization",
        "id": object_id,
        "attributes": {
            "title": title,
            "description": spec.get("description", ""),
            "uiStateJSON": "{}",
            "version": 1,
            "visState": json.dumps(vis_state, ensure_ascii=False),
            "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(_EMPTY_SEARCH_SOURCE)},
        },
        "references": [],
        **_meta("visualization"),
    }


def _search(prefix: str, columns: Sequence[str]) -> dict[str, Any]:
    ref = "kibanaSavedObjectMeta.searchSourceJSON.index"
    return {
        "type": "search",
        "id": _id(prefix, "runs-table"),
        "attributes": {
            "title": _title("Runs", prefix),
            "description": (
                "Every run, running and crashed ones too: experiment, status, score, code "
                "version; newest start first."
            ),
            "columns": list(columns),
            "sort": [["started_at", "desc"]],
            "grid": {},
            "hideChart": False,
            "isTextBasedQuery": False,
            "timeRestore": False,
            "kibanaSavedObjectMeta": {
                "searchSourceJSON": json.dumps({**_EMPTY_SEARCH_SOURCE, "indexRefName": ref})
            },
        },
        "references": [{"name": ref, "type": "index-pattern", "id": _id(prefix, "runs")}],
        **_meta("search"),
    }


def _dashboard(
    object_id: str,
    title: str,
    description: str,
    panels: Sequence[tuple[str, str, int, int, int, int]],
    *,
    time_from: str,
    refresh_ms: int | None,
) -> dict[str, Any]:
    panel_json, references = [], []
    for number, (kind, target, x, y, w, h) in enumerate(panels, 1):
        index = f"p{number}"
        config: dict[str, Any] = {"enhancements": {}}
        if kind == "visualization":
            config["hidePanelTitles"] = True  # the Vega spec draws its own title
        panel_json.append(
            {
                "version": _PANEL_VERSION,
                "type": kind,
                "gridData": {"x": x, "y": y, "w": w, "h": h, "i": index},
                "panelIndex": index,
                "embeddableConfig": config,
                "panelRefName": f"panel_{index}",
            }
        )
        references.append({"name": f"{index}:panel_{index}", "type": kind, "id": target})
    return {
        "type": "dashboard",
        "id": object_id,
        "attributes": {
            "title": title,
            "description": description,
            "panelsJSON": json.dumps(panel_json),
            "optionsJSON": json.dumps(
                {
                    "useMargins": True,
                    "syncColors": False,
                    "syncCursor": True,
                    "syncTooltips": False,
                    "hidePanelTitles": False,
                }
            ),
            "timeRestore": True,
            "timeFrom": time_from,
            "timeTo": "now",
            "refreshInterval": {"pause": refresh_ms is None, "value": refresh_ms or 60_000},
            "version": 1,
            "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(_EMPTY_SEARCH_SOURCE)},
        },
        "references": references,
        **_meta("dashboard"),
    }


# ---------------------------------------------------------------------------------------------
# checking them (offline): shape, references, fields against the index mappings


def check_saved_objects(
    objects: Sequence[Mapping[str, Any]], mappings: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Problems of ``objects`` (empty when fine): ids, references, panels, Vega specs, fields.

    ``mappings`` maps an index name (``warehouse-runs``) to the ``mappings`` section of the
    template that index gets; every field a data view, search or view uses must exist there
    (as a property, or through a dynamic template, e.g. ``metrics.*``).
    """
    problems: list[str] = []
    keys = [(o.get("type"), o.get("id")) for o in objects]
    for key in {k for k in keys if keys.count(k) > 1}:
        problems.append(f"duplicate saved object {key[0]}/{key[1]}")
    known = set(keys)
    for obj in objects:
        where = f"{obj.get('type')}/{obj.get('id')}"
        for ref in obj.get("references", []):
            if (ref.get("type"), ref.get("id")) not in known:
                problems.append(
                    f"{where}: reference {ref.get('name')} -> "
                    f"{ref.get('type')}/{ref.get('id')} is not in the file"
                )
        if obj.get("type") == "dashboard":
            problems += _check_panels(where, obj)
        try:
            used = fields_used(obj, objects)
        except (KeyError, ValueError, TypeError) as exc:
            problems.append(f"{where}: cannot read its attributes ({exc!r})")
            continue
        for index, fld, kind in used:
            mapping = mappings.get(index)
            if mapping is None:
                problems.append(f"{where}: index {index} has no template")
                continue
            found = mapping_field_type(mapping, fld)
            if found is None:
                problems.append(f"{where}: field {fld} does not exist in the {index} template")
            elif kind == "date" and found != "date":
                problems.append(f"{where}: time field {fld} of {index} is {found}, not a date")
    return problems


def _check_panels(where: str, obj: Mapping[str, Any]) -> list[str]:
    problems = []
    refs = {r["name"]: r for r in obj.get("references", [])}
    for panel in json.loads(obj["attributes"]["panelsJSON"]):
        name = f"{panel.get('panelIndex')}:{panel.get('panelRefName')}"
        ref = refs.get(name)
        if ref is None:
            problems.append(f"{where}: panel {panel.get('panelIndex')} has no reference {name}")
        elif ref["type"] != panel.get("type"):
            problems.append(
                f"{where}: panel {name} is a {panel.get('type')} but refers to a {ref['type']}"
            )
        grid = panel.get("gridData", {})
        if grid.get("i") != panel.get("panelIndex") or grid.get("x", 0) + grid.get("w", 0) > 48:
            problems.append(f"{where}: panel {panel.get('panelIndex')} has bad gridData {grid}")
    return problems


def fields_used(
    obj: Mapping[str, Any], objects: Sequence[Mapping[str, Any]] = ()
) -> list[tuple[str, str, str]]:
    """``(index, field, kind)`` for every field ``obj`` reads; kind ``date`` for time fields."""
    attrs = obj.get("attributes", {})
    kind = obj.get("type")
    if kind == "index-pattern":
        used = [(attrs["title"], attrs["timeFieldName"], "date")]
        used += [
            (attrs["title"], f, "any") for f in json.loads(attrs.get("fieldFormatMap") or "{}")
        ]
        return used
    if kind == "search":
        views = {(o["type"], o["id"]): o for o in objects}
        ref = next(r for r in obj["references"] if r["type"] == "index-pattern")
        index = views[("index-pattern", ref["id"])]["attributes"]["title"]
        fields = [*attrs.get("columns", []), *(s[0] for s in attrs.get("sort", []))]
        return [(index, f, "any") for f in fields]
    if kind == "visualization":
        spec = json.loads(json.loads(attrs["visState"])["params"]["spec"])
        return vega_fields_used(spec)
    return []


def mapping_field_type(mapping: Mapping[str, Any], path: str) -> str | None:
    """The type ``path`` gets in ``mapping`` (``object`` for an object), or None if it can't.

    Follows ``properties``; a path inside a ``flattened`` field or a disabled object exists;
    paths no property names are matched against the dynamic templates (``path_match``,
    ``match``, ``path_unmatch``), as Elasticsearch would when the first document brings them.
    """
    node: Mapping[str, Any] = {"properties": mapping.get("properties", {})}
    parts = path.split(".")
    for number, part in enumerate(parts):
        props = node.get("properties")
        if node.get("type") == "flattened" or node.get("enabled") is False:
            return str(node.get("type", "object"))
        if props is None or part not in props:
            # a dotted leaf name stored as one field (``params`` keys contain dots)
            rest = ".".join(parts[number:])
            if props is not None and rest in props:
                return str(props[rest].get("type", "object"))
            return _dynamic_type(mapping, path)
        node = props[part]
    return str(node.get("type", "object"))


def _dynamic_type(mapping: Mapping[str, Any], path: str) -> str | None:
    from fnmatch import fnmatchcase

    leaf = path.rsplit(".", 1)[-1]
    for entry in mapping.get("dynamic_templates", []):
        (rule,) = entry.values()
        patterns = rule.get("path_match", [])
        patterns = [patterns] if isinstance(patterns, str) else patterns
        unmatch = rule.get("path_unmatch", [])
        unmatch = [unmatch] if isinstance(unmatch, str) else unmatch
        match = rule.get("match")
        if any(fnmatchcase(path, u) for u in unmatch):
            continue
        if patterns and any(fnmatchcase(path, p) for p in patterns):
            return str(rule.get("mapping", {}).get("type", "object"))
        # an object holding dynamically mapped leaves (``metrics`` for ``metrics.*``)
        if patterns and any(p.startswith(path + ".") for p in patterns):
            return "object"
        if match and not patterns and fnmatchcase(leaf, match):
            return str(rule.get("mapping", {}).get("type", "object"))
    return None


# ---------------------------------------------------------------------------------------------
# putting them into Kibana (the HTTP client is warehouse.dashboards.kibana_client)


def import_objects(settings: Settings, ndjson: str | None = None) -> ImportReport:
    """Import the warehouse's saved objects into ``settings.kibana_url`` (overwriting them).

    ``ndjson`` defaults to :func:`objects_for` the settings (index prefix, primary metric,
    baseline error). Per-object failures come back in the report, not raised; an unreachable
    Kibana raises ``BackendUnavailable``, refused credentials ``ConfigurationError``.
    """
    if ndjson is None:
        ndjson = to_ndjson(objects_for(settings))
    return KibanaClient(settings).import_ndjson(ndjson, overwrite=True)


def export_objects(settings: Settings, *, all_types: bool = False) -> str:
    """NDJSON of the warehouse's saved objects as Kibana holds them now (edits included).

    ``all_types`` exports every data view, visualization, search and dashboard of the space.
    """
    client = KibanaClient(settings)
    if all_types:
        return client.export_ndjson(types=("index-pattern", "visualization", "search", "dashboard"))
    return client.export_ndjson(objects=[(o["type"], o["id"]) for o in objects_for(settings)])
