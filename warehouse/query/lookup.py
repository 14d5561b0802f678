"""Finding runs: the small pieces every view builds on.

Lucene filter pieces (:func:`quote`, :func:`and_filters`), sort specs (:func:`parse_sort`),
finite numbers (:func:`finite`), run searches with each run's status as shown, and run ids
(a unique prefix of at least four hex digits names a run: :func:`get_run`). Split out of
:mod:`warehouse.query.views`, which re-exports every name here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from warehouse.errors import ConfigurationError, NotFound, QuerySyntaxError
from warehouse.models import infer_direction
from warehouse.query.status import STATUS_FIELDS, lost_aware, with_shown_status
from warehouse.stores.base import Order, RunQuery, Store

_HEX_PREFIX = re.compile(r"[0-9a-f]{4,31}")
_SORT_ORDERS = ("asc", "desc")


# --- small pieces -----------------------------------------------------------------------


def quote(value: str) -> str:
    """``value`` as a Lucene phrase (``"a \\"b\\""``), safe inside a filter."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def and_filters(*filters: str | None) -> str | None:
    """The Lucene conjunction of the given filters (each parenthesised); None when none."""
    parts = [f.strip() for f in filters if f and f.strip()]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return " AND ".join(f"({p})" for p in parts)


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def parse_sort(spec: str | tuple[str, str]) -> tuple[str, Order]:
    """``"metrics.val.acc:desc"`` → ``("metrics.val.acc", "desc")``.

    Without ``:asc``/``:desc`` a metric sorts best first (by its name's direction, so
    ``metrics.val.loss`` ascending) and any other field ascending.
    """
    if isinstance(spec, tuple):
        name, order = spec
    else:
        name, _, order = spec.strip().rpartition(":")
        if not name:
            name, order = order, ""
    name = name.strip()
    order = order.strip().lower()
    if not name:
        raise QuerySyntaxError(f"empty sort field in {spec!r}; write field[:asc|desc]")
    if not order:
        if name.startswith("metrics.") and name.count(".") >= 2:
            order = "asc" if infer_direction(name.rsplit(".", 1)[1]) == "min" else "desc"
        else:
            order = "asc"
    if order not in _SORT_ORDERS:
        raise QuerySyntaxError(
            f"sort order {order!r} in {spec!r} is neither asc nor desc; "
            "write field[:asc|desc], e.g. metrics.val.acc:desc"
        )
    return name, order  # type: ignore[return-value]


# --- runs and run ids -------------------------------------------------------------------


def _search(store: Store, query: RunQuery) -> list[dict[str, Any]]:
    """``store.search_runs`` as every view calls it: ``status:lost``/``status:running``
    filters spelled in stored fields, and each run's status as shown (``lost`` for a running
    run whose heartbeat stopped: :mod:`warehouse.query.status`)."""
    fields = query.fields
    extra: tuple[str, ...] = ()
    if fields is not None and "status" in fields:
        extra = tuple(f for f in STATUS_FIELDS if f not in fields)
    found = store.search_runs(
        replace(
            query,
            filter=lost_aware(query.filter),
            fields=None if fields is None else (*fields, *extra),
        )
    )
    with_shown_status(found)
    for doc in found:
        for name in extra:
            doc.pop(name, None)
    return found


def runs(
    store: Store,
    filter: str | None = None,
    sort: Sequence[str | tuple[str, str]] = (),
    limit: int | None = 100,
    fields: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Run documents matching ``filter``, in ``sort`` order (newest first), at most ``limit``."""
    order = tuple(parse_sort(s) for s in sort)
    return _search(store, RunQuery(filter=filter, sort=order, limit=limit, fields=fields))


def get_run(store: Store, run_id: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
    """The run with id ``run_id``, or the only run whose id starts with it (≥ 4 hex digits)."""
    wanted = run_id.strip()
    if not wanted:
        raise ConfigurationError("empty run id; `warehouse query runs` lists the run ids")
    found = _search(store, RunQuery(filter=f"run_id:{quote(wanted)}", limit=1, fields=fields))
    if found:
        return found[0]
    if _HEX_PREFIX.fullmatch(wanted):
        found = _search(
            store,
            RunQuery(filter=f"run_id:{wanted}*", sort=(("run_id", "asc"),), limit=3, fields=fields),
        )
        if len(found) == 1:
            return found[0]
        if found:
            ids = ", ".join(str(d.get("run_id")) for d in found)
            raise ConfigurationError(
                f"run id prefix {wanted!r} matches several runs ({ids} ...); "
                "give more characters of the id"
            )
    if re.fullmatch(r"[0-9a-f]{1,3}", wanted):
        raise ConfigurationError(
            f"run id {wanted!r} is too short to look up; give at least 4 characters of the id "
            "(`warehouse query runs` lists them)"
        )
    raise NotFound(
        f"no run with id {wanted!r} in this warehouse; `warehouse query runs` lists the run "
        "ids (check WAREHOUSE_HOME / es_url if you expected it here)",
        run_id=wanted,
    )
