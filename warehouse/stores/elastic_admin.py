"""Installing the warehouse into an Elasticsearch cluster: templates, aliased indices, stream.

Used by :meth:`ElasticStore.install` (``warehouse init``) inside its error mapping, so the
functions here may let client errors through. Every step is idempotent and reports what it
did as ``(what, name, outcome)``: ``created``, ``updated`` or ``kept``.

:func:`create_roles` (``warehouse init --create-roles``) adds the least-privilege roles and
users: ``<prefix>-writer`` for training jobs and ``sync`` (no index deletion, no template or
security changes) and ``<prefix>-reader`` for the dashboards and queries.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from warehouse.settings import Settings

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


# least-privilege roles and users (`warehouse init --create-roles`) -----------------------------
KIBANA_APPLICATION = "kibana-.kibana"
WRITER_INDEX_PRIVILEGES = (
    "read",  # queries, `sync --verify`
    "view_index_metadata",  # aliases and mappings (is `init` done? which fields exist?)
    "write",  # index runs, bulk-create steps, replace a split's samples (delete by query)
    "create_index",  # the steps data stream when it does not exist yet
    "auto_configure",  # ... created by the first step written
    "maintenance",  # refresh after writing samples
)
READER_INDEX_PRIVILEGES = ("read", "view_index_metadata")
MIN_PASSWORD_LENGTH = 6  # Elasticsearch's own minimum for native users


def role_names(prefix: str) -> dict[str, str]:
    """``{"writer": "<prefix>-writer", "reader": "<prefix>-reader"}``: roles and users."""
    return {kind: f"{prefix}-{kind}" for kind in ("writer", "reader")}


def writer_role(prefix: str) -> dict[str, Any]:
    """The role of training jobs and `warehouse sync`: write and read ``<prefix>-*``, create
    its data stream; no index deletion, no template or cluster changes, no security."""
    return {
        "description": f"results-warehouse: record runs into {prefix}-* (no index deletion)",
        "cluster": ["monitor"],  # GET / and reading (not changing) the index templates
        "indices": [{"names": [f"{prefix}-*"], "privileges": list(WRITER_INDEX_PRIVILEGES)}],
        "metadata": {"managed_by": "results-warehouse"},
    }


def reader_role(prefix: str, kibana_space: str | None = None) -> dict[str, Any]:
    """The role of the dashboards and `warehouse query`: read ``<prefix>-*`` and the Kibana
    space read-only."""
    space = kibana_space or "default"
    return {
        "description": f"results-warehouse: read {prefix}-* and the Kibana dashboards",
        "cluster": ["monitor"],
        "indices": [{"names": [f"{prefix}-*"], "privileges": list(READER_INDEX_PRIVILEGES)}],
        "applications": [
            {
                "application": KIBANA_APPLICATION,
                "privileges": ["space_read"],
                "resources": [f"space:{space}"],
            }
        ],
        "metadata": {"managed_by": "results-warehouse"},
    }


def check_passwords(passwords: dict[str, str | None]) -> None:
    """Refuse, before anything is sent, a password Elasticsearch would refuse."""
    from warehouse.errors import ConfigurationError

    for kind, password in passwords.items():
        if password is not None and len(password) < MIN_PASSWORD_LENGTH:
            raise ConfigurationError(
                f"the {kind} password is shorter than {MIN_PASSWORD_LENGTH} characters; set "
                f"WAREHOUSE_ES_{kind.upper()}_PASSWORD to a longer one"
            )


def install_security(
    client: Elasticsearch,
    prefix: str,
    kibana_space: str | None,
    passwords: dict[str, str | None],
) -> list[Row]:
    """Create or update the writer and reader roles, and their users where a password is
    given (a user that exists keeps its password when none is). Idempotent."""
    names = role_names(prefix)
    rows: list[Row] = []
    for kind, body in (
        ("writer", writer_role(prefix)),
        ("reader", reader_role(prefix, kibana_space)),
    ):
        answer = client.security.put_role(name=names[kind], **body).body
        created = bool((answer.get("role") or {}).get("created"))
        rows.append(("role", names[kind], "created" if created else "updated"))
    for kind, name in names.items():
        password = passwords.get(kind)
        if password is None:
            try:
                client.security.get_user(username=name)
            except NotFoundError:
                rows.append(
                    ("user", name, f"not created: set WAREHOUSE_ES_{kind.upper()}_PASSWORD")
                )
                continue
            client.security.put_user(username=name, roles=[name])  # the password is kept
            rows.append(("user", name, "updated (password kept)"))
            continue
        answer = client.security.put_user(
            username=name,
            password=password,
            roles=[name],
            full_name=f"results-warehouse {kind}",
            metadata={"managed_by": "results-warehouse"},
        ).body
        rows.append(("user", name, "created" if answer.get("created") else "updated"))
    return rows


def create_roles(settings: Settings, passwords: dict[str, str | None]) -> list[Row]:
    """`warehouse init --create-roles`: the writer and reader roles and users, as the
    configured (admin) user. Errors are warehouse errors, with what to do."""
    from elasticsearch import ApiError

    from warehouse.errors import ConfigurationError
    from warehouse.stores.elastic_errors import CLIENT_ERRORS, map_error, public_url
    from warehouse.stores.elastic_indices import ElasticIndices

    check_passwords(passwords)
    store = ElasticIndices.from_settings(settings)
    try:
        store.server_info()  # connects once: an unreachable server is exit 3, as for `init`
        where = public_url(store.url)
        try:
            return install_security(store.client, store.prefix, settings.kibana_space, passwords)
        except ApiError as exc:
            text = f"{exc.message} {exc.body}"
            off = ("no handler found", "explicitly enabled", "security is not enabled")
            if any(needle in text.lower() for needle in off):
                raise ConfigurationError(
                    f"Elasticsearch at {where} has no security API (security is off): "
                    "--create-roles needs xpack.security.enabled=true (docker-compose.yml "
                    "turns it on); without security there is nothing to restrict"
                ) from None
            if exc.status_code == 403:
                raise ConfigurationError(
                    f"the Elasticsearch user may not manage roles and users on {where} (it "
                    "lacks the manage_security privilege): run 'warehouse init --create-roles' "
                    "once as the elastic user (WAREHOUSE_ES_USERNAME=elastic)"
                ) from None
            raise map_error(exc, store.url, doing="create roles and users") from exc
        except CLIENT_ERRORS as exc:
            raise map_error(exc, store.url, doing="create roles and users") from exc
    finally:
        store.close()
