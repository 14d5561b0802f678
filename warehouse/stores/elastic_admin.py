"""Installing the warehouse into an Elasticsearch cluster: templates, aliased indices, stream.

Used by :meth:`ElasticStore.install` (``warehouse init``) inside its error mapping, so the
functions here may let client errors through. Every step is idempotent and reports what it
did as ``(what, name, outcome)``: ``created``, ``updated`` or ``kept``.
"""

from __future__ import annotations

import logging
from typing import Any

from elasticsearch import BadRequestError, Elasticsearch, NotFoundError

from warehouse.stores.elastic_templates import (
    KINDS,
    Kind,
    Template,
    first_index,
    index_names,
    mappings,
    templates,
)

log = logging.getLogger(__name__)

Row = tuple[str, str, str]


def _installed(client: Elasticsearch, template: Template) -> dict[str, Any] | None:
    try:
        if template.kind == "component":
            found = client.cluster.get_component_template(name=template.name).body
            return dict(found["component_templates"][0]["component_template"])
        found = client.indices.get_index_template(name=template.name).body
        return dict(found["index_templates"][0]["index_template"])
    except NotFoundError:
        return None


def _put(client: Elasticsearch, template: Template) -> None:
    body = dict(template.body)
    meta = body.pop("_meta")
    if template.kind == "component":
        client.cluster.put_component_template(name=template.name, meta=meta, **body)
    else:
        client.indices.put_index_template(name=template.name, meta=meta, **body)


def _state(client: Elasticsearch, template: Template) -> str:
    current = _installed(client, template)
    if current is None:
        return "missing"
    wanted = template.body["_meta"]["hash"]
    return "installed" if (current.get("_meta") or {}).get("hash") == wanted else "outdated"


def template_status(client: Elasticsearch, prefix: str, retention: str) -> dict[str, str]:
    """``{template name: installed|outdated|missing}`` for every warehouse template."""
    return {t.name: _state(client, t) for t in templates(prefix, steps_retention=retention)}


def install(client: Elasticsearch, prefix: str, retention: str) -> list[Row]:
    """Bring the cluster to the templates of this version; create what is missing."""
    rows: list[Row] = []
    changed_kinds: set[Kind] = set()
    component_kinds: dict[str, Kind] = {f"{prefix}-{k}-mappings": k for k in KINDS}
    for template in templates(prefix, steps_retention=retention):
        state = _state(client, template)
        if state != "installed":
            _put(client, template)
        outcome = {"missing": "created", "outdated": "updated"}.get(state, "kept")
        if outcome == "updated" and template.name in component_kinds:
            changed_kinds.add(component_kinds[template.name])
        rows.append((f"{template.kind} template", template.name, outcome))
    names = index_names(prefix)
    rows.append(_ensure_alias(client, prefix, "runs"))
    rows.append(_ensure_alias(client, prefix, "samples"))
    rows.append(_ensure_stream(client, names["steps"]))
    for kind in sorted(changed_kinds):
        rows.append(_update_mapping(client, names[kind], kind))
    return rows


def _ensure_alias(client: Elasticsearch, prefix: str, kind: Kind) -> Row:
    alias = f"{prefix}-{kind}"
    if client.indices.exists_alias(name=alias).body:
        return ("alias", alias, "kept")
    index = first_index(prefix, kind)
    if client.indices.exists(index=index).body:
        client.indices.put_alias(index=index, name=alias, is_write_index=True)
        return ("alias", f"{alias} -> {index}", "created")
    try:
        client.indices.create(index=index, aliases={alias: {"is_write_index": True}})
    except BadRequestError as exc:  # another `init` created it a moment ago
        if "already_exists" not in str(exc):
            raise
        return ("index", f"{index} (alias {alias})", "kept")
    return ("index", f"{index} (alias {alias})", "created")


def _ensure_stream(client: Elasticsearch, name: str) -> Row:
    if client.indices.exists(index=name).body:
        return ("data stream", name, "kept")
    try:
        client.indices.create_data_stream(name=name)
    except BadRequestError as exc:
        text = str(exc)
        if "already_exists" in text:
            return ("data stream", name, "kept")
        if "no handler found" in text:  # servers without PUT _data_stream (the test server)
            return ("data stream", name, "created by the first step written")
        raise
    return ("data stream", name, "created")


def _update_mapping(client: Elasticsearch, target: str, kind: Kind) -> Row:
    """Apply an updated mapping to the existing index (new fields and dynamic templates)."""
    if not client.indices.exists(index=target).body:
        return ("mapping", target, "kept")
    body = mappings(kind)
    try:
        client.indices.put_mapping(index=target, **body)
    except BadRequestError as exc:
        log.warning(
            "the mapping of %s could not be updated in place (%s); new indices get the new "
            "template; reindex into a new index behind the alias to apply it to old records",
            target,
            exc,
        )
        return ("mapping", target, "kept (reindex to apply the update)")
    return ("mapping", target, "updated")
