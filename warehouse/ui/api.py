"""What the local UI's JSON endpoints answer: the views of :mod:`warehouse.query.api` (the one
front door every front end asks, so the page shows what ``warehouse query`` and ``warehouse
report`` show, on the local store and on Elasticsearch alike), shaped for the page.

Nothing here writes: every function only reads the store (and the object store, for outputs,
artifacts and git diffs). Runs are paged with a keyset (``search_after`` spelled as a filter on
the sort field and ``run_id``), so a page costs one bounded query however deep it is. The
overview is kept until the store's version changes (:func:`warehouse.query.api.version`: three
``stat`` calls on the local store), so a page refreshing every few seconds costs no read while
nothing is recorded.
"""

from __future__ import annotations

import json
import mimetypes
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote as url_quote

from warehouse.errors import ConfigurationError, QuerySyntaxError, WarehouseError
from warehouse.filters import lucene
from warehouse.output import jsonable as _jsonable
from warehouse.query import api

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.settings import Settings
    from warehouse.stores.base import Store

RUN_COLUMNS = ("run_id", "experiment", "status", "started_at", "ended_at", "duration_s", "tags")
"""The fixed columns of the runs table (metric columns are chosen on the page)."""
SORTABLE = frozenset(("run_id", "experiment", "status", "started_at", "ended_at", "duration_s"))
PAGE_SIZE = 50
MAX_PAGE = 500
SAMPLE_PAGE = 48
FLIPPED_SHOWN = 60
_DIFF_LIMIT = 1 << 20  # git diffs larger than this are cut


def jsonable(value: Any) -> Any:
    """``value`` with only JSON types (NaN → null, datetimes → ISO strings)."""
    return _jsonable(value)


def _answer(value: Mapping[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = _jsonable(value)
    return answer


def object_href(uri: Any) -> str | None:
    """The page's link to an object (served or redirected by ``/api/object``)."""
    return f"/api/object?uri={url_quote(str(uri), safe='')}" if uri else None


def content_kind(uri: str, content_type: str | None = None) -> str:
    """``image``, ``audio``, ``video``, ``text`` or ``file``: how the page shows an output."""
    ctype = content_type or mimetypes.guess_type(uri.split("?", 1)[0])[0] or ""
    major = ctype.split("/", 1)[0]
    if major in ("image", "audio", "video"):
        return major
    if major == "text" or ctype in ("application/json", "application/x-yaml"):
        return "text"
    return "file"


@dataclass
class UiData:
    """The UI's read-only view of one store, with the overview kept until the store changes."""

    settings: Settings
    store: Store
    objects: ObjectStore | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    _overview: tuple[Any, dict[str, Any]] | None = None

    def _door(self) -> dict[str, Any]:
        """What every view of the front door is asked with: this UI's store and settings."""
        return {"store": self.store, "settings": self.settings}

    # --- overview -------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        """The three views' specs, the leaderboard with intervals, the bias/variance table and
        the run count: computed again only when the store's version has changed since."""
        with self.lock:
            cached = self._overview
            if cached is not None and cached[0] == api.version(self.store):
                return cached[1]
            found = api.overview(**self._door())
            answer = self._overview_page(found)
            self._overview = (found.version, answer)
            return answer

    def _overview_page(self, o: api.Overview) -> dict[str, Any]:
        from warehouse.dashboards.vega import VIEWS, spec_with_values
        from warehouse.dashboards.vega.responses import overview_responses

        experiments = len(o.runs_per_experiment)
        charts = {}
        if o.leaderboard:
            answers = overview_responses(o)  # Kibana's answer shape: O(experiments), not O(runs)
            for view in VIEWS:
                height = 260 if view == "best_over_time" else max(120, 30 * experiments)
                spec = spec_with_values(
                    view, answers[view], o.metric, o.direction, o.baseline_error, height=height
                )
                spec["width"] = "container"
                charts[view] = jsonable(spec)
        s = self.settings
        return {
            "fingerprint": jsonable(o.version),
            "title": f"{s.project} results" if s.project else "ML results",
            "source": o.source,
            "metric": o.metric,
            "direction": o.direction,
            "run_count": o.run_count,
            "experiment_count": experiments,
            "best_run_id": o.leaderboard[0]["best_run_id"] if o.leaderboard else None,
            "charts": charts,
            "leaderboard": jsonable(o.leaderboard),
            "decomposition": jsonable(o.decomposition),
            "empty": _empty(o.empty, f"no run has a value of {o.metric}"),
            "left_out": o.left_out,
        }

    # --- runs -----------------------------------------------------------------------------

    def count(self, filter: str | lucene.Node | None) -> int:
        """How many runs match ``filter`` (an aggregation, no documents read)."""
        with self.lock:
            return api.count(filter, **self._door())

    def metric_names(self, sample: int = 200) -> list[str]:
        """``split.metric`` names seen on the newest runs (the choosable metric columns)."""
        with self.lock:
            return api.metric_names(sample=sample, **self._door())

    def runs_page(
        self,
        filter: str | None,
        sort: str | None,
        metrics: Sequence[str],
        after: str | None = None,
        size: int = PAGE_SIZE,
    ) -> dict[str, Any]:
        """One page of the runs table: rows, the total matching, the cursor of the next page,
        and when no run matches, why (the filter's likely slips, as the CLI says them)."""
        from warehouse.models import resolve_metric
        from warehouse.query.lookup import parse_sort

        text = (filter or "").strip() or None
        tree = lucene.parse(text)  # a syntax error says so before any store is asked
        if not 1 <= size <= MAX_PAGE:
            raise ConfigurationError(f"page size {size} is not between 1 and {MAX_PAGE}")
        columns = [f"metrics.{m}" for m in metrics if m]
        for name in columns:
            resolve_metric(name)  # "metrics.val.acc" → checked split.metric
        field_name, order = parse_sort(sort or "started_at:desc")
        if field_name not in SORTABLE and not field_name.startswith("metrics."):
            raise QuerySyntaxError(
                f"cannot sort runs by {field_name!r}; sort by one of "
                f"{', '.join(sorted(SORTABLE))} or a metric column"
            )
        where: str | lucene.Node | None = text
        if after:
            where = lucene.And((tree, _after(field_name, order, after)))
        with self.lock:
            found = api.runs(
                where,
                sort=((field_name, order),),
                limit=size + 1,
                columns=(*RUN_COLUMNS, *columns),
                **self._door(),
            )
            total = self.count(tree)
        rows = found.rows
        more = len(rows) > size
        rows = rows[:size]
        cursor = None
        if more and rows:
            from warehouse.filters.docpath import get_path

            last = rows[-1]
            cursor = json.dumps(jsonable([get_path(last, field_name), last.get("run_id")]))
        return {
            "rows": [_flat_run(r, columns) for r in rows],
            "columns": [*RUN_COLUMNS, *columns],
            "total": total,
            "sort": f"{field_name}:{order}",
            "next": cursor,
            "empty": _empty(found.empty, "no run matches"),
        }

    # --- one run --------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any]:
        """The whole run document, its config as YAML (as stored: redacted), its git diff and
        artifacts with links."""
        import yaml

        with self.lock:
            doc = api.show(run_id, **self._door())
        git = doc.get("git") or {}
        diff_text = None
        if git.get("diff_uri"):
            diff_text = self._text(git["diff_uri"])
        artifacts = [
            {**a, "href": object_href(a.get("uri")), "show": content_kind(a.get("uri", ""))}
            for a in doc.get("artifacts") or []
        ]
        config = doc.get("config") or {}
        return _answer(
            {
                "run": doc,
                "config_yaml": yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
                if config
                else "",
                "git_diff": diff_text,
                "artifacts": artifacts,
            }
        )

    def _text(self, uri: str) -> str | None:
        if self.objects is None:
            return None
        try:
            data = self.objects.get(uri)
        except WarehouseError as exc:
            return f"(the diff at {uri} cannot be read: {exc})"
        text = data[:_DIFF_LIMIT].decode("utf-8", errors="replace")
        return text + ("\n… (cut)" if len(data) > _DIFF_LIMIT else "")

    def steps(self, run_id: str, after_seq: int = -1) -> dict[str, Any]:
        """A run's step rows after ``after_seq`` (the page appends them while the run runs)."""
        with self.lock:
            run = api.show(run_id, fields=("run_id", "status"), **self._door())
            rows = api.steps(str(run["run_id"]), after_seq=after_seq, **self._door()).rows
        return _answer({"status": run.get("status"), "rows": rows})

    # --- samples --------------------------------------------------------------------------

    def samples(
        self,
        run_id: str,
        split: str | None = None,
        sort: str | None = None,
        order: str | None = None,
        offset: int = 0,
        limit: int = SAMPLE_PAGE,
    ) -> dict[str, Any]:
        """One page of a run's samples, worst first by default (by the primary metric's
        per-sample column), each output with a link and how to show it."""
        if not 1 <= limit <= MAX_PAGE:
            raise ConfigurationError(f"sample page size {limit} is not between 1 and {MAX_PAGE}")
        with self.lock:
            page = api.sample_page(
                run_id,
                split=split,
                sort=sort,
                order=order,
                offset=offset,
                limit=limit,
                **self._door(),
            )
        if page.split is None:
            return _answer({"run": page.run, "splits": {}, "rows": [], "columns": []})
        shown = []
        for row in page.rows:
            uri = row.get("output_uri")
            shown.append(
                {
                    "sample_id": row.get("sample_id"),
                    "values": {c: row.get(c) for c in page.columns if c != "sample_id"},
                    "output": object_href(uri),
                    "kind": content_kind(str(uri)) if uri else None,
                }
            )
        return _answer(
            {
                "run": page.run,
                "split": page.split,
                "splits": page.splits,
                "columns": page.columns,
                "sort": page.sort,
                "order": page.order,
                "offset": page.offset,
                "total": page.total,
                "rows": shown,
            }
        )

    # --- compare --------------------------------------------------------------------------

    def compare(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """Runs side by side (identity, metrics, differing config keys) and, where both first
        runs have per-sample results, the samples that flipped between them."""
        from warehouse.errors import NotFound

        with self.lock:
            rows = api.compare(run_ids, **self._door()).rows
        ids = [k for k in rows[0] if k != "field"] if rows else list(run_ids)
        flipped: dict[str, Any] | None = None
        try:
            with self.lock:
                found = api.diff(ids[0], ids[1], **self._door())
        except (NotFound, ConfigurationError) as exc:
            flipped = {"error": str(exc)}
        else:
            flipped = {
                "a": found.a.get("run_id"),
                "b": found.b.get("run_id"),
                "split": found.split,
                "column": found.column,
                "summary": found.summary,
                "counts": found.counts,
                "rows": [
                    {
                        "sample_id": r["sample_id"],
                        "a": r["a"],
                        "b": r["b"],
                        "change": r["change"],
                        "a_output": object_href(r["a_output_uri"]),
                        "b_output": object_href(r["b_output_uri"]),
                        "kind": content_kind(str(r["a_output_uri"] or r["b_output_uri"] or "")),
                    }
                    for r in found.rows[:FLIPPED_SHOWN]
                ],
            }
        return _answer({"runs": ids, "rows": rows, "diff": flipped})


def _empty(empty: api.Empty | None, nothing: str) -> dict[str, Any] | None:
    """Why a view is empty, for the page: the line, the filter's slips and its correction."""
    if empty is None:
        return None
    hints = empty.hints
    return {
        "message": empty.message(nothing),
        "holds_no_run": empty.holds_no_run,
        "hints": list(hints.lines) if hints is not None else [],
        "corrected": hints.corrected if hints is not None else None,
    }


def _flat_run(doc: Mapping[str, Any], metric_columns: Sequence[str]) -> dict[str, Any]:
    from warehouse.filters.docpath import get_path

    row = {c: doc.get(c) for c in RUN_COLUMNS}
    for name in metric_columns:
        row[name] = get_path(doc, name)
    return _answer(row)


def _after(field_name: str, order: str, cursor: str) -> lucene.Node:
    """The runs after ``cursor`` (``[value, run_id]`` of the last row shown) in the order
    ``field_name:order`` then ``run_id`` ascending, with runs lacking the field last — the
    order every store returns (a keyset: ``search_after`` as a filter)."""
    try:
        value, run_id = json.loads(cursor)
    except (ValueError, TypeError):
        raise ConfigurationError(
            "the page cursor is not [value, run_id]; open the first page again"
        ) from None
    later_id = lucene.Range("run_id", str(run_id), None, include_low=False)
    missing = lucene.Not(lucene.Exists(field_name))
    if value is None:  # already in the tail of runs without the field
        return lucene.And((missing, later_id))
    text = json.dumps(value) if isinstance(value, int | float) else str(value)
    if order == "desc":
        beyond = lucene.Range(field_name, None, text, include_high=False)
    else:
        beyond = lucene.Range(field_name, text, None, include_low=False)
    same = lucene.And((lucene.Phrase(field_name, text), later_id))
    return lucene.Or((beyond, same, missing))
