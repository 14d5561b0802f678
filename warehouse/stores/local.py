"""LocalStore: the embedded store — run, sample and step records as files in the warehouse folder.

Layout under ``home`` (nothing is created before the first write)::

    runs/<run_id>.json               the run document: the truth (atomic replace: tmp + fsync)
    samples/<run_id>/<split>.parquet a split's sample rows (streamed to a tmp file, replaced)
    steps/<run_id>.jsonl             step documents, appended (one write per batch, flock'd)
    catalog/                         the compacted query index of runs (``local_catalog.py``)

Any number of processes may write at once: files are replaced atomically, so a reader sees
the old or the new record, never part of one. A corrupt file is logged (by path) and skipped;
the other runs stay readable. Queries run in-process on pyarrow/numpy over the cached catalog
and cached sample files, so a warm query costs a few ``os.stat`` calls plus the work itself.
File locking uses ``fcntl``: Linux and macOS.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, TypeVar

from warehouse.errors import (
    InvalidRecord,
    NotFound,
    StoreUnavailable,
    WarehouseError,
)
from warehouse.files import atomic_write, write_all
from warehouse.filters import lucene
from warehouse.filters.docpath import project
from warehouse.home import Home
from warehouse.models import run_version
from warehouse.stores.base import (
    CountQuery,
    ExperimentBest,
    Group,
    GroupQuery,
    RankQuery,
    RunQuery,
    SampleQuery,
    StepRange,
    Timeline,
    TimelineQuery,
)
from warehouse.stores.lazy import np, pa, pc
from warehouse.stores.local_catalog import RunCatalog
from warehouse.stores.local_docs import indices
from warehouse.stores.local_export import CsvRows, documents, floats, from_columns
from warehouse.stores.local_query import arrow_kinds, to_mask
from warehouse.stores.local_samples import (
    SampleCache,
    SampleWriter,
    check_present,
    emit_rows,
    iter_parquet,
    open_parquet,
    order_samples,
    prepare_batch,
    stream_rows,
)
from warehouse.stores.local_timeline import timeline_of, timeline_rows
from warehouse.stores.sample_ids import SampleIds
from warehouse.values import iso_utc

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_SAFE_ID = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,199}$")
_SAMPLE_FIELDS = ("sample_id",)  # what a bare term searches in a sample filter
_SAMPLE_BATCH_ROWS = 16_384


class LocalStore:
    """The embedded store in ``home`` (see the module docstring); cheap to construct."""

    def __init__(
        self, home: Home | Path, *, compact_after: int = 500, sample_cache_bytes: int = 512 << 20
    ) -> None:
        self.home = home if isinstance(home, Home) else Home(Path(home))
        self._catalog = RunCatalog(self.home.root, compact_after)
        self._samples = SampleCache(sample_cache_bytes)

    # writes -------------------------------------------------------------------------------
    def write_runs(self, docs: Sequence[dict[str, Any]]) -> None:
        """Replace run files by ``run_id``, unless the stored copy is newer (``updated_at``)."""
        prepared: dict[str, bytes] = {}  # the last version of a run id in the batch wins
        versions: dict[str, int] = {}
        for doc in docs:
            run_id = _check_id(doc.get("run_id"), "run_id")
            if not isinstance(doc.get("experiment"), str) or not doc["experiment"]:
                raise InvalidRecord(f"run {run_id} has no experiment name; set 'experiment'")
            try:
                data = json.dumps(doc, ensure_ascii=False).encode()
            except (TypeError, ValueError) as exc:
                raise InvalidRecord(
                    f"run {run_id} is not a JSON document ({exc}); pass Run.to_doc()"
                ) from None
            version = run_version(doc)
            if version >= versions.get(run_id, -1):
                prepared.pop(run_id, None)
                prepared[run_id] = data
                versions[run_id] = version
        with self._map_errors(f"write run records to {self.home.runs}"):
            prepared = {r: d for r, d in prepared.items() if not self._stored_newer(r, versions[r])}
            if not prepared:
                return
            self.home.ensure()
            self.home.runs.mkdir(parents=True, exist_ok=True)
            if len(prepared) == 1:
                ((run_id, data),) = prepared.items()
                atomic_write(self.home.run_file(run_id), data)
            else:  # fsyncs overlap: several times faster than one after another
                with ThreadPoolExecutor(max_workers=min(8, len(prepared))) as pool:
                    jobs = [
                        pool.submit(atomic_write, self.home.run_file(r), d)
                        for r, d in prepared.items()
                    ]
                    for job in jobs:
                        job.result()
            self._catalog.record(list(prepared))

    def _stored_newer(self, run_id: str, version: int) -> bool:
        """Whether the run file holds a newer version than ``version`` (a stale replay)."""
        try:
            text = self.home.run_file(run_id).read_bytes()
        except FileNotFoundError:
            return False
        try:
            stored = json.loads(text)
        except ValueError:
            return False  # a damaged file is replaced
        return isinstance(stored, dict) and run_version(stored) > version

    def write_samples(
        self, run_id: str, experiment: str, split: str, batches: Iterable[pa.RecordBatch]
    ) -> int:
        _check_id(run_id, "run_id")
        _check_id(split, "split")
        target = self.home.sample_file(run_id, split)
        recorded_at = iso_utc(datetime.now(UTC))
        consts = {"run_id": run_id, "experiment": experiment, "split": split}
        with self._map_errors(f"write samples to {target}"):
            self.home.ensure()
            target.parent.mkdir(parents=True, exist_ok=True)
            writer = SampleWriter(target.parent)
            ids = SampleIds(run_id, split)
            try:
                for batch in batches:
                    prepared = prepare_batch(batch, consts, recorded_at, split)
                    ids.check(prepared)
                    writer.write(prepared)
                ids.finish()
                if writer.writer is None:  # no rows: the split is replaced by an empty file
                    empty = pa.record_batch({"sample_id": pa.array([], pa.string())})
                    writer.write(prepare_batch(empty, consts, recorded_at, split))
                return writer.finish(target)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                raise InvalidRecord(
                    f"samples of run {run_id} split {split}: columns cannot be stored ({exc}); "
                    "give each column one type in every batch"
                ) from None
            finally:
                writer.discard()

    def write_steps(self, run_id: str, experiment: str, steps: Sequence[dict[str, Any]]) -> None:
        from warehouse.stores.step_lines import encode_lines

        _check_id(run_id, "run_id")
        if not steps:
            return
        docs = steps if isinstance(steps, list) else list(steps)
        seqs = [step.get("seq") for step in docs]
        if not set(map(type, seqs)) <= {int}:  # the usual batch passes in one look
            for seq in seqs:
                if not isinstance(seq, int) or isinstance(seq, bool):
                    raise InvalidRecord(
                        f"a step of run {run_id} has seq={seq!r}; seq is an integer"
                    )
        data = encode_lines(docs, run_id, experiment)  # the batch at once
        path = self.home.steps_file(run_id)
        with self._map_errors(f"append steps to {path}"):
            self.home.ensure()
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                write_all(fd, data)
            finally:
                os.close(fd)

    def compact(self, rebuild: bool = False) -> None:
        """Fold recent writes into the catalog now; ``rebuild`` rescans every run file."""
        with self._map_errors(f"compact the run catalog in {self.home.catalog}"):
            self._catalog.compact(rebuild=rebuild)

    # run queries --------------------------------------------------------------------------
    def search_runs(self, query: RunQuery) -> list[dict[str, Any]]:
        with self._map_errors("query runs"):
            table, rows = self._select(query)
            if table is None or not len(rows):
                return []
            if query.fields is not None:
                projected = from_columns(table, rows, query.fields)
                if projected is not None:
                    return projected
            texts = self._catalog.texts(table, rows)
            docs = [json.loads(text) for text in texts]
        if query.fields is not None:
            return [project(doc, query.fields) for doc in docs]
        return docs

    def csv_rows(
        self,
        query: RunQuery,
        first: Sequence[str],
        shown_status: Callable[[dict[str, Any]], Any],
    ) -> CsvRows | None:
        """``warehouse query runs --format csv`` read from the catalog's columns, in chunks
        (:class:`~warehouse.stores.local_export.CsvRows`; None: ask :meth:`search_runs`)."""
        with self._map_errors("query runs"):
            table, rows = self._select(query)
            found = CsvRows.plan(table, rows, first, shown_status, self._catalog.texts)
        if found is not None:
            found.guard = self._guard
        return found

    def run_documents(self, query: RunQuery) -> tuple[int, Iterator[dict[str, Any]]]:
        """How many runs ``query`` asks for and their whole documents (its ``fields``
        aside), parsed a chunk at a time: ``warehouse query runs --format json`` in flat
        memory."""
        with self._map_errors("query runs"):
            table, rows = self._select(query)
        if table is None or not len(rows):
            return 0, iter(())
        return len(rows), self._guard("query runs", documents(table, rows, self._catalog.texts))

    def _select(self, query: RunQuery) -> tuple[pa.Table | None, np.ndarray]:
        """The catalog and the rows of the runs ``query`` asks for, in its order."""
        node = lucene.parse(query.filter)
        table = self._catalog.table()
        if table is None or table.num_rows == 0:
            return table, np.zeros(0, dtype=np.int64)
        rows = self._matching(node, table)
        keys = _sort_keys(query, arrow_kinds(table.schema))
        if len(rows) > 1 and keys:
            every = node == lucene.MATCH_ALL
            sub = pa.table(
                {f"k{i}": _rows_of(table.column(f), rows, every) for i, (f, _) in enumerate(keys)}
            )
            spec = [(f"k{i}", order, "at_end") for i, (_, order) in enumerate(keys)]
            rows = rows[pc.sort_indices(sub, spec).to_numpy(zero_copy_only=False)]
        if query.limit is not None:
            rows = rows[: query.limit]
        return table, rows

    def best_per_experiment(self, query: RankQuery) -> list[ExperimentBest]:
        metric = query.metric
        node = lucene.parse(query.filter)
        with self._map_errors("rank experiments"):
            table = self._catalog.table()
            if table is None or table.num_rows == 0:
                return []
            kind = lucene.check_metric(metric, arrow_kinds(table.schema))
            rows = self._matching(node, table)
            if kind == lucene.EMPTY or not len(rows):
                return []
            every = node == lucene.MATCH_ALL  # rows is 0..n-1: no column is copied by take
            experiments = _rows_of(table.column("experiment"), rows, every).combine_chunks()
            coded = experiments.dictionary_encode()
            if coded.null_count:  # no run is stored without an experiment; be safe anyway
                coded = pc.fill_null(experiments, "").dictionary_encode()
            codes = coded.indices.to_numpy(zero_copy_only=False)
            names = coded.dictionary.to_pylist()
            counts = np.bincount(codes, minlength=len(names))
            values = _rows_of(table.column(metric), rows, every).to_numpy(zero_copy_only=False)
            scored = np.flatnonzero(np.isfinite(values))
            if not scored.size:
                return []
            # each experiment's best score in one pass; its runs with that score are the
            # candidates, and only those few are sorted for the ties
            top = np.full(len(names), -np.inf if query.direction == "max" else np.inf)
            (np.maximum if query.direction == "max" else np.minimum).at(
                top, codes[scored], values[scored]
            )
            candidates = scored[values[scored] == top[codes[scored]]]
            picks = rows[candidates]
            sub = pa.table(
                {
                    "e": experiments.take(indices(candidates)),
                    "v": floats(values[candidates]),
                    "t": _column_or_nulls(table, "ended_at").take(indices(picks)),
                    "r": table.column("run_id").take(indices(picks)),
                }
            )
            best = _best_per_group(sub, "descending" if query.direction == "max" else "ascending")
            winners, picks = sub.take(indices(best)), picks[best]
            docs = self._catalog.texts(table, picks)
            run_count = {name: int(n) for name, n in zip(names, counts.tolist(), strict=True)}
            return [
                ExperimentBest(
                    experiment=e, score=float(v), run=json.loads(d), run_count=run_count[e]
                )
                for e, v, d in zip(
                    winners.column("e").to_pylist(),
                    winners.column("v").to_pylist(),
                    docs,
                    strict=True,
                )
            ]

    def timeline(self, query: TimelineQuery) -> Timeline:
        node = lucene.parse(query.filter)
        with self._map_errors("chart the best over time"):
            table = self._catalog.table()
            if table is None or table.num_rows == 0:
                return Timeline()
            if lucene.check_metric(query.metric, arrow_kinds(table.schema)) == lucene.EMPTY:
                return Timeline()
            some = None if node == lucene.MATCH_ALL else self._matching(node, table)
            rows = timeline_rows(table, some, query)
            return timeline_of(table, rows, query.metric)

    def count_by(self, query: CountQuery) -> dict[str, int]:
        node = lucene.parse(query.filter)
        with self._map_errors("count runs"):
            table = self._catalog.table()
            if table is None or table.num_rows == 0 or query.field not in table.schema.names:
                return {}
            rows = self._matching(node, table)
            column = _rows_of(table.column(query.field), rows, node == lucene.MATCH_ALL)
            if pa.types.is_list(column.type):
                column = pc.list_flatten(column)
            counts = pc.value_counts(column.drop_null())
            return {
                _text_of(v): int(n)
                for v, n in zip(
                    counts.field("values").to_pylist(),
                    counts.field("counts").to_pylist(),
                    strict=True,
                )
            }

    def version(self) -> Hashable:
        """The catalog's version (:meth:`RunCatalog.version`): no file is read."""
        return self._catalog.version()

    def _matching(self, node: lucene.Node, table: pa.Table) -> np.ndarray:
        if node == lucene.MATCH_ALL:
            return np.arange(table.num_rows)
        return np.flatnonzero(to_mask(node, table))

    # sample and step queries --------------------------------------------------------------
    def search_samples(self, query: SampleQuery) -> Iterator[dict[str, Any]]:
        run_dir = self.home.samples / _check_id(query.run_id, "run_id", NotFound)
        node = lucene.parse(query.filter)
        limit = query.limit
        with self._map_errors(f"read samples of run {query.run_id}"):
            self._require_run(query.run_id, run_dir)
            check_present(self.home.run_file(query.run_id), run_dir, query.split)
            if query.split is not None:
                paths = [run_dir / f"{_check_id(query.split, 'split', NotFound)}.parquet"]
            else:
                paths = sorted(run_dir.glob("*.parquet")) if run_dir.is_dir() else []
            paths = [p for p in paths if p.is_file()]
            if query.sort is None and node == lucene.MATCH_ALL:
                return self._guard("stream samples", stream_rows(paths, query.offset, limit))
            files = [f for f in (self._samples.load(p) for p in paths) if f is not None]
            if not files:
                return iter(())
            table = (
                files[0].table
                if len(files) == 1
                else pa.concat_tables([f.table for f in files], promote_options="permissive")
            )
            rows = None
            if node != lucene.MATCH_ALL:
                rows = np.flatnonzero(to_mask(node, table, _SAMPLE_FIELDS))
            if query.sort is not None:
                rows = order_samples(files, table, rows, query, limit)
            else:
                assert rows is not None  # no sort and no filter streamed above
                rows = rows[query.offset : None if limit is None else query.offset + limit]
            return self._guard("read samples", emit_rows(table, rows))

    def steps(self, query: StepRange) -> Iterator[dict[str, Any]]:
        path = self.home.steps_file(_check_id(query.run_id, "run_id", NotFound))
        limit = query.limit
        with self._map_errors(f"read steps from {path}"):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                self._require_run(query.run_id, path)
                return iter(())
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                with os.fdopen(os.dup(fd), "rb") as src:
                    data = src.read()
            finally:
                os.close(fd)
        by_seq: dict[int, dict[str, Any]] = {}
        for number, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                seq = doc["seq"]
                if not isinstance(seq, int):
                    raise TypeError("seq is not an integer")
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("skipping corrupt line %d of %s (%s)", number, path, exc)
                continue
            if seq > query.after_seq and seq not in by_seq:
                by_seq[seq] = doc  # the first write of a seq wins, as in Elasticsearch
        docs = [by_seq[seq] for seq in sorted(by_seq)][:limit]
        if query.fields is not None:
            docs = [project(doc, query.fields) for doc in docs]
        return iter(docs)

    def sample_batches(
        self, run_id: str, split: str, columns: Sequence[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The stored rows of one split as Arrow batches, in write order (NotFound if none)."""
        path = self.home.sample_file(
            _check_id(run_id, "run_id", NotFound), _check_id(split, "split", NotFound)
        )
        with self._map_errors(f"read samples from {path}"):
            if not path.is_file():
                check_present(self.home.run_file(run_id), path.parent, split)
                raise NotFound(
                    f"run {run_id} has no {split!r} samples in the local store at {self.home.root}",
                    run_id=run_id,
                )
            source = open_parquet(path)
            wanted = None if columns is None else [c for c in columns if c in source.schema.names]
            batches = iter_parquet(path, _SAMPLE_BATCH_ROWS, wanted, source)
        return self._guard(f"read samples from {path}", batches)

    def group_samples(self, query: GroupQuery) -> list[Group]:
        from warehouse.stores.local_groups import group_samples

        files = {r: self.home.sample_file(r, query.split) for r in query.run_ids}
        with self._map_errors(f"group samples of {len(files)} run(s)"):
            return group_samples(files, query)

    def last_seq(self, run_id: str) -> int:
        """The highest step ``seq`` stored for ``run_id`` (-1 when it has none)."""
        return max((int(d["seq"]) for d in self.steps(StepRange(run_id=run_id))), default=-1)

    def _require_run(self, run_id: str, *seen: Path) -> None:
        if self.home.run_file(run_id).exists() or any(p.exists() for p in seen):
            return
        raise NotFound(
            f"no run {run_id!r} in the local store at {self.home.root}; list runs with "
            "'warehouse query runs'",
            run_id=run_id,
        )

    # life ---------------------------------------------------------------------------------
    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Remove the run files, sample folders and step files, then tell the catalog (a
        journaled id whose file is gone leaves every view)."""
        import shutil

        ids = [_check_id(r, "run_id") for r in run_ids]
        found = 0
        with self._map_errors(f"delete runs from {self.home.root}"):
            for run_id in ids:
                path = self.home.run_file(run_id)
                if path.exists():
                    found += 1
                    path.unlink()
                shutil.rmtree(self.home.samples / run_id, ignore_errors=True)
                self.home.steps_file(run_id).unlink(missing_ok=True)
            if ids and self.home.root.exists():
                self._catalog.record(ids)
            self._samples.clear()
        return found

    def close(self) -> None:
        self._catalog.clear()
        self._samples.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _guard(self, action: str, items: Iterator[_T]) -> Iterator[_T]:
        with self._map_errors(action):
            yield from items

    @contextmanager
    def _map_errors(self, action: str) -> Iterator[None]:
        """The one border: OSError and pyarrow errors become StoreUnavailable."""
        try:
            yield
        except WarehouseError:
            raise
        except OSError as exc:
            where = exc.filename or self.home.root
            raise StoreUnavailable(
                f"local store: cannot {action}: {exc.strerror or exc} ({where}); check that the "
                "folder exists, is writable and has free space, or set WAREHOUSE_HOME",
                path=str(where),
            ) from exc
        except pa.ArrowException as exc:
            raise StoreUnavailable(
                f"local store: cannot {action}: {exc}; if a file in {self.home.root} is damaged, "
                "delete it (the run catalog is rebuilt from runs/)",
                path=str(self.home.root),
            ) from exc


# helpers --------------------------------------------------------------------------------
def _check_id(value: Any, what: str, error: type[WarehouseError] = InvalidRecord) -> str:
    if not isinstance(value, str) or not _SAFE_ID.match(value):
        raise error(
            f"{what} {value!r} cannot name a file: use letters, digits, '_', '-' and '.' "
            "(not first), at most 200 characters"
        )
    return value


def _text_of(value: Any) -> str:
    """A counted value as Elasticsearch's terms aggregation keys it (``key_as_string``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _sort_keys(query: RunQuery, kinds: dict[str, str]) -> list[tuple[str, str]]:
    """The query's order as Arrow sort keys (fields no run has, or that are always empty,
    sort nothing)."""
    keys: list[tuple[str, str]] = []
    for field, order in query.order_by:
        explicit = field in query.explicit_sort
        kind = lucene.sort_kind(field, kinds, explicit=explicit, what="sort field")
        if kind is not None and kind != lucene.EMPTY:
            keys.append((field, "ascending" if order == "asc" else "descending"))
    return keys


def _best_per_group(sub: pa.Table, order: str) -> np.ndarray:
    """Rows of ``sub`` (columns e=experiment, v=score, t=ended_at, r=run_id) that are each
    experiment's best, best first; ties go to the earlier end, then the smaller run id."""
    ties = [("v", order, "at_end"), ("t", "ascending", "at_end"), ("r", "ascending", "at_end")]
    ranked = pc.sort_indices(sub, [("e", "ascending", "at_end"), *ties]).to_numpy()
    names = sub.column("e").take(indices(ranked)).to_numpy(zero_copy_only=False)
    firsts = ranked[np.flatnonzero(np.r_[True, names[1:] != names[:-1]])]
    best: np.ndarray = firsts[pc.sort_indices(sub.take(firsts), ties).to_numpy()]
    return best


def _rows_of(column: pa.ChunkedArray, rows: np.ndarray, every: bool) -> pa.ChunkedArray:
    """``column`` at ``rows``; the column itself when ``rows`` are all of them, in order."""
    return column if every else column.take(indices(rows))


def _column_or_nulls(table: pa.Table, name: str) -> pa.ChunkedArray:
    if name in table.schema.names:
        return table.column(name)
    return pa.chunked_array([pa.nulls(table.num_rows, pa.timestamp("us", tz="UTC"))])
