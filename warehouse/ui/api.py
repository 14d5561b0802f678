"""What the local UI's JSON endpoints answer: plain dicts from the query views, the report's data
and the evidence module, so the page shows what ``warehouse query`` and ``warehouse report``
show, on the local store and on Elasticsearch alike.

Nothing here writes: every function only reads the store (and the object store, for outputs,
artifacts and git diffs). Runs are paged with a keyset (``search_after`` spelled as a filter on
the sort field and ``run_id``), so a page costs one bounded query however deep it is.
"""

from __future__ import annotations

import json
import mimetypes
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote as url_quote

from warehouse.errors import ConfigurationError, NotFound, QuerySyntaxError, WarehouseError
from warehouse.filters import lucene
from warehouse.output import jsonable as _jsonable

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
CACHE_TTL_S = 30.0  # a cached overview is recomputed at least this often (lost runs age)
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
    """The UI's read-only view of one store, with a small cache for the overview."""

    settings: Settings
    store: Store
    objects: ObjectStore | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    _overview: tuple[Any, float, dict[str, Any]] | None = None

    # --- overview -------------------------------------------------------------------------

    def fingerprint(self) -> Any:
        """What changes whenever a run is written: the run count and the newest save."""
        from warehouse.query import views

        count = self.count(None)
        try:
            newest = views.runs(
                self.store, sort=("updated_at:desc",), limit=1, fields=("run_id", "updated_at")
            )
        except QuerySyntaxError:  # no run has updated_at yet (empty warehouse)
            newest = []
        return (count, jsonable(newest))

    def overview(self) -> dict[str, Any]:
        """The three views' specs, the leaderboard with intervals, the bias/variance table and
        the run count; cached until a run is written (or ``CACHE_TTL_S`` passes)."""
        with self.lock:
            stamp = self.fingerprint()
            cached = self._overview
            if cached and cached[0] == stamp and time.monotonic() - cached[1] < CACHE_TTL_S:
                return cached[2]
            answer = self._overview_now(stamp)
            self._overview = (stamp, time.monotonic(), answer)
            return answer

    def _overview_now(self, stamp: Any) -> dict[str, Any]:
        from warehouse.dashboards.report import collect, describe_source
        from warehouse.dashboards.vega import VIEWS, spec_with_values
        from warehouse.query import views

        s = self.settings
        data = collect(
            self.store,
            metric=s.primary_metric,
            direction=s.direction,
            baseline_error=s.baseline_error,
            source=describe_source(s),
        )
        board = views.leaderboard(self.store, data.metric, data.direction, evidence=True)
        experiments = len(data.runs_per_experiment)
        charts = {}
        if board:
            for view in VIEWS:
                height = 260 if view == "best_over_time" else max(120, 30 * experiments)
                # each view's answer is shaped as Elasticsearch's aggregation answer, the one
                # Kibana draws: O(experiments) or O(time buckets), not O(runs)
                spec = spec_with_values(
                    view,
                    data.responses[view],
                    data.metric,
                    data.direction,
                    data.baseline_error,
                    height=height,
                )
                spec["width"] = "container"
                charts[view] = jsonable(spec)
        return {
            "fingerprint": stamp,
            "title": f"{s.project} results" if s.project else "ML results",
            "source": data.source,
            "metric": data.metric,
            "direction": data.direction,
            "run_count": stamp[0],
            "experiment_count": experiments,
            "best_run_id": board[0]["best_run_id"] if board else None,
            "charts": charts,
            "leaderboard": jsonable(board),
            "decomposition": jsonable(data.decomposition),
        }

    # --- runs -----------------------------------------------------------------------------

    def count(self, filter: str | lucene.Node | None) -> int:
        """How many runs match ``filter`` (an aggregation, no documents read)."""
        from warehouse.query.status import lost_aware
        from warehouse.stores.base import CountQuery

        with self.lock:
            counts = self.store.count_by(CountQuery("experiment", lost_aware(filter)))
        return sum(counts.values())

    def metric_names(self, sample: int = 200) -> list[str]:
        """``split.metric`` names seen on the newest runs (the choosable metric columns)."""
        from warehouse.query import views

        with self.lock:
            docs = views.runs(self.store, limit=sample, fields=("run_id", "metrics"))
        names = {f"{s}.{m}" for d in docs for s, ms in (d.get("metrics") or {}).items() for m in ms}
        return sorted(names)

    def runs_page(
        self,
        filter: str | None,
        sort: str | None,
        metrics: Sequence[str],
        after: str | None = None,
        size: int = PAGE_SIZE,
    ) -> dict[str, Any]:
        """One page of the runs table: rows, the total matching, the cursor of the next page."""
        from warehouse.models import resolve_metric
        from warehouse.query import views

        text = (filter or "").strip() or None
        tree = lucene.parse(text)  # a syntax error says so before any store is asked
        if not 1 <= size <= MAX_PAGE:
            raise ConfigurationError(f"page size {size} is not between 1 and {MAX_PAGE}")
        columns = [f"metrics.{m}" for m in metrics if m]
        for name in columns:
            resolve_metric(name)  # "metrics.val.acc" → checked split.metric
        field_name, order = views.parse_sort(sort or "started_at:desc")
        if field_name not in SORTABLE and not field_name.startswith("metrics."):
            raise QuerySyntaxError(
                f"cannot sort runs by {field_name!r}; sort by one of "
                f"{', '.join(sorted(SORTABLE))} or a metric column"
            )
        where: lucene.Node = tree
        if after:
            where = lucene.And((tree, _after(field_name, order, after)))
        fields = (*RUN_COLUMNS, *columns)
        with self.lock:
            rows = views.runs(
                self.store,
                filter=where,  # type: ignore[arg-type]  # RunQuery takes a parsed tree too
                sort=((field_name, order),),
                limit=size + 1,
                fields=fields,
            )
            total = self.count(tree)
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
        }

    # --- one run --------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any]:
        """The whole run document, its config as YAML (as stored: redacted), its git diff and
        artifacts with links."""
        import yaml

        from warehouse.query import views

        with self.lock:
            doc = views.get_run(self.store, run_id)
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
        from warehouse.query import views

        with self.lock:
            run = views.get_run(self.store, run_id, fields=("run_id", "status"))
            rows = list(views.steps(self.store, str(run["run_id"]), after_seq=after_seq))
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
        from warehouse.models import resolve_metric
        from warehouse.query import views
        from warehouse.query.evidence import candidate_columns
        from warehouse.stores.base import SampleQuery

        if not 1 <= limit <= MAX_PAGE:
            raise ConfigurationError(f"sample page size {limit} is not between 1 and {MAX_PAGE}")
        metric = resolve_metric(self.settings.primary_metric, self.settings.direction)
        with self.lock:
            run = views.get_run(self.store, run_id, fields=views.SAMPLE_RUN_FIELDS)
        counts: dict[str, int] = run.get("sample_counts") or {}
        if not counts:
            return _answer({"run": run, "splits": {}, "rows": [], "columns": []})
        if split is None:
            split = metric.split if metric.split in counts else sorted(counts)[0]
        if split not in counts:
            raise NotFound(
                f"run {run['run_id']} has no {split!r} samples; its splits with samples: "
                f"{', '.join(sorted(counts))}"
            )
        rid = str(run["run_id"])
        with self.lock:
            first = next(iter(self.store.search_samples(SampleQuery(rid, split, limit=1))), {})
        columns = [c for c in first if c not in ("run_id", "experiment", "split", "output_uri")]
        if sort is None:
            found = [c for c in candidate_columns(run, split, metric, None) if c in columns]
            sort = found[0] if found else None
            if order is None:
                order = "asc" if metric.direction == "max" else "desc"  # worst first
        order = order or "asc"
        if order not in ("asc", "desc"):
            raise QuerySyntaxError(f"sample order {order!r} is neither asc nor desc")
        query = SampleQuery(
            rid,
            split,
            sort=sort,
            order="desc" if order == "desc" else "asc",
            limit=limit,
            offset=offset,
        )
        with self.lock:
            rows = list(self.store.search_samples(query))
        shown = []
        for row in rows:
            uri = row.get("output_uri")
            shown.append(
                {
                    "sample_id": row.get("sample_id"),
                    "values": {c: row.get(c) for c in columns if c != "sample_id"},
                    "output": object_href(uri),
                    "kind": content_kind(str(uri)) if uri else None,
                }
            )
        return _answer(
            {
                "run": run,
                "split": split,
                "splits": counts,
                "columns": columns,
                "sort": sort,
                "order": order,
                "offset": offset,
                "total": counts[split],
                "rows": shown,
            }
        )

    # --- compare --------------------------------------------------------------------------

    def compare(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """Runs side by side (identity, metrics, differing config keys) and, where both first
        runs have per-sample results, the samples that flipped between them."""
        from warehouse.models import resolve_metric
        from warehouse.query import evidence, views

        with self.lock:
            rows = views.compare(self.store, run_ids)
        ids = [k for k in rows[0] if k != "field"] if rows else list(run_ids)
        metric = resolve_metric(self.settings.primary_metric, self.settings.direction)
        flipped: dict[str, Any] | None = None
        try:
            with self.lock:
                a = views.get_run(self.store, ids[0])
                b = views.get_run(self.store, ids[1])
                found = evidence.diff(self.store, a, b, split=metric.split, metric=metric)
        except (NotFound, ConfigurationError) as exc:
            flipped = {"error": str(exc)}
        else:
            flipped = {
                "a": found.run_a,
                "b": found.run_b,
                "split": found.split,
                "column": found.column,
                "summary": found.summary(),
                "counts": found.counts(),
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
