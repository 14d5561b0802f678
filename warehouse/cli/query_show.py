"""`warehouse query show | compare | steps`: one run in full, runs side by side, a run's steps
(from :mod:`warehouse.query.api`; this module renders)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from warehouse.cli.query_flags import (
    FailEmptyOpt,
    FormatOpt,
    finish,
    limit_opt,
    limit_or,
    load_settings,
    query_app,
    render_rows,
)
from warehouse.filters.docpath import flatten
from warehouse.output import RUN_ID_WIDTH, Format


@query_app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run's id (or a unique prefix).")],
    fmt: FormatOpt = Format.table,
) -> None:
    """One run in full: identity, status, git, metrics, decomposition, artifacts, config (YAML).

    Example: warehouse query show 3f2a9c1d0b7e
    """
    from warehouse.query import api

    doc = api.show(run_id, settings=load_settings())
    if fmt is Format.json:
        render_rows([doc], fmt)
    elif fmt is Format.csv:
        flat = flatten(doc)
        render_rows(({"field": k, "value": v} for k, v in flat.items()), fmt)
    else:
        _show_table(doc)


def _show_table(doc: Mapping[str, Any]) -> None:
    import sys

    import yaml

    from warehouse.output import table_width, write_mapping, write_table, write_text

    out = sys.stdout
    identity = {
        k: doc.get(k)
        for k in (
            "run_id",
            "experiment",
            "project",
            "status",
            "tags",
            "user",
            "host",
            "started_at",
            "ended_at",
            "duration_s",
            "schema_version",
        )
        if doc.get(k) not in (None, [], "")
    }
    primary = doc.get("primary_metric") or {}
    if primary:
        identity["primary_metric"] = f"{primary.get('name')} ({primary.get('direction')})"
        identity["score"] = primary.get("value")
    error = doc.get("error") or {}
    sections: dict[str, Mapping[str, Any]] = {
        "run": identity,
        "error": {k: v for k, v in error.items() if k != "traceback" and v},
        "git": {k: v for k, v in (doc.get("git") or {}).items() if v not in (None, "")},
        "hydra": _hydra_section(doc.get("hydra") or {}),
        "decomposition": {
            k: v for k, v in (doc.get("decomposition") or {}).items() if v is not None
        },
        "sample counts": dict(doc.get("sample_counts") or {}),
    }
    write_mapping({"run": sections.pop("run")}, out)
    metrics = doc.get("metrics") or {}
    if metrics:
        splits = list(metrics)
        names = sorted({n for values in metrics.values() for n in values})
        rows = [{"metric": n, **{s: metrics[s].get(n) for s in splits}} for n in names]
        write_table(rows, out, columns=["metric", *splits], title="metrics")
    if doc.get("invalid_metrics"):
        write_mapping({"invalid metrics": {"dropped": ", ".join(doc["invalid_metrics"])}}, out)
    write_mapping(sections, out)
    artifacts = doc.get("artifacts") or []
    if artifacts:
        cols = ["name", "kind", "size_bytes", "uri"]
        write_table(artifacts, out, columns=cols, title="artifacts")
    # text to copy, not tables: YAML folds long values at spaces, a long word stays whole
    width = table_width(out)
    if doc.get("overrides"):
        write_text(" ".join(doc["overrides"]), out, title="overrides")
    if doc.get("config"):
        text = yaml.safe_dump(
            doc["config"], sort_keys=False, allow_unicode=True, width=max(40, (width or 80) - 20)
        )
        write_text(text, out, title="config")


def _hydra_section(hydra: Mapping[str, Any]) -> dict[str, Any]:
    """The Hydra job and its sweep, as the JSON has them: mode, job name and number, the
    sweep's id and folder, the job's folder, the folder it was started from."""
    order = ("mode", "job_name", "job_num", "sweep_id", "sweep_dir", "run_dir", "original_cwd")
    keys = [*order, *(k for k in hydra if k not in order)]
    return {k: hydra[k] for k in keys if hydra.get(k) not in (None, "", [], {})}


@query_app.command()
def compare(
    run_ids: Annotated[list[str], typer.Argument(help="Two or more run ids (or unique prefixes).")],
    fmt: FormatOpt = Format.table,
) -> None:
    """Runs side by side: identity, every metric, and only the config keys that differ.

    Example: warehouse query compare 3f2a9c1d0b7e 8d41c07a2f90
    """
    from warehouse.query import api

    rows = api.compare(run_ids, settings=load_settings()).rows
    if fmt is Format.table:
        rows = [{k if k == "field" else _short_id(k): v for k, v in row.items()} for row in rows]
    render_rows(rows, fmt, repeat=("field",))  # every run, in as many tables as they need


@query_app.command()
def steps(
    run_id: Annotated[str, typer.Argument(help="The run's id (or a unique prefix).")],
    limit: Annotated[int | None, limit_opt("default all")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
) -> None:
    """A run's training steps and system metrics, one row per step (in seq order).

    Example: warehouse query steps 3f2a9c1d0b7e --format csv > steps.csv
    """
    from warehouse.query import api

    with api.connect(load_settings()) as store:  # the rows stream from it
        rows = api.step_rows(run_id, limit=limit_or(limit, None), store=store)
        count = render_rows(rows, fmt, empty=api.STEP_COLUMNS)
    finish(count, fail_empty, "steps recorded for this run")


def _short_id(run_id: Any) -> str:
    return str(run_id)[:RUN_ID_WIDTH]
