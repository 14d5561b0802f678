"""The Elasticsearch store's one error border: client and transport errors become ours.

:func:`map_error` decides, for every ``elasticsearch``/``elastic_transport`` exception, which
warehouse error it is and what the message tells the user to do. ``ElasticStore._map_errors``
applies it around every call, so no client exception type leaves ``warehouse.stores``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

import elastic_transport
from elasticsearch import ApiError, UnsupportedProductError

from warehouse.errors import (
    ConfigurationError,
    InvalidRecord,
    NotFound,
    QuerySyntaxError,
    StoreUnavailable,
    WarehouseError,
)
from warehouse.url_credentials import strip_url_credentials

CLIENT_ERRORS = (ApiError, elastic_transport.TransportError, ValueError)
"""What ``_map_errors`` catches (ValueError: the client's own check of its options)."""

_CREDENTIALS_HELP = "set WAREHOUSE_ES_API_KEY, or WAREHOUSE_ES_USERNAME and WAREHOUSE_ES_PASSWORD"


def public_url(url: str) -> str:
    """``url`` without any ``user:password@`` part, fit for messages and logs."""
    return strip_url_credentials(url)


def quiet_transport_logs() -> None:
    """The transport logs a warning with a traceback per retry; we report failures once, in
    our words. Left alone when the application has set the ``elastic_transport`` level."""
    transport = logging.getLogger("elastic_transport")
    if transport.level == logging.NOTSET:
        transport.setLevel(logging.ERROR)


def not_initialised(url: str, name: str) -> ConfigurationError:
    return ConfigurationError(
        f"Elasticsearch at {public_url(url)} has no {name} (index templates not installed); "
        "run 'warehouse init' once, then 'warehouse sync' for records waiting in the outbox"
    )


def _api_reason(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, Mapping) else {}
    error = body.get("error")
    if isinstance(error, Mapping):
        causes = error.get("root_cause") or []
        cause = causes[0] if causes and isinstance(causes[0], Mapping) else error
        return f"{cause.get('type', error.get('type'))}: {cause.get('reason', error.get('reason'))}"
    return str(exc.message) if exc.message else str(exc)


def _connection_reason(exc: Exception) -> str:
    text = str(exc)
    for needle, reason in (
        ("Connection refused", "connection refused"),
        ("timed out", "timed out"),
        ("Name or service not known", "unknown host"),
        ("nodename nor servname", "unknown host"),
        ("Temporary failure in name resolution", "unknown host"),
        ("CERTIFICATE_VERIFY_FAILED", "TLS certificate not trusted"),
    ):
        if needle in text:
            return reason
    return text[:200]


_PRIVILEGE = re.compile(r"action \[([^\]]+)\].*?(?:privileges? \[([^\]]+)\])?", re.S)


def map_error(exc: BaseException, url: str, *, doing: str, writing: bool = False) -> WarehouseError:
    """The warehouse error for a client/transport error met while ``doing`` something."""
    where = public_url(url)
    kept = (
        "the run is kept in the outbox; run 'warehouse sync' when it is back"
        if writing
        else "check that it is running and that WAREHOUSE_ES_URL points at it"
    )
    if isinstance(exc, UnsupportedProductError):
        return ConfigurationError(
            f"the server at {where} is not Elasticsearch (it does not send the "
            "X-Elastic-Product header); point WAREHOUSE_ES_URL at Elasticsearch 9.x"
        )
    if isinstance(exc, elastic_transport.TlsError):
        return ConfigurationError(
            f"TLS handshake with Elasticsearch at {where} failed ({_connection_reason(exc)}); "
            "set WAREHOUSE_ES_CA_CERTS to the cluster's CA file or WAREHOUSE_ES_FINGERPRINT"
        )
    if isinstance(exc, elastic_transport.SerializationError):
        return InvalidRecord(f"a record could not be encoded for Elasticsearch: {exc}")
    if isinstance(exc, elastic_transport.ConnectionError | elastic_transport.ConnectionTimeout):
        return StoreUnavailable(
            f"cannot reach Elasticsearch at {where} ({_connection_reason(exc)}); {kept}",
            url=where,
        )
    if isinstance(exc, ValueError):
        return ConfigurationError(f"invalid Elasticsearch settings for {where}: {exc}")
    if not isinstance(exc, ApiError):
        return StoreUnavailable(
            f"Elasticsearch at {where} failed to {doing}: {exc}; {kept}", url=where
        )
    status = exc.status_code
    reason = _api_reason(exc)
    if status == 401:
        return ConfigurationError(
            f"Elasticsearch at {where} refused the credentials (401 while trying to {doing}); "
            f"{_CREDENTIALS_HELP}"
        )
    if status == 403:
        match = _PRIVILEGE.search(reason)
        need = ""
        if match:
            need = f" (action {match.group(1)}"
            need += f", granted by privileges {match.group(2)})" if match.group(2) else ")"
        return ConfigurationError(
            f"the Elasticsearch user lacks a privilege to {doing} on {where}{need}; grant the "
            f"role 'write', 'read', 'view_index_metadata' on the warehouse indices and "
            f"'manage_index_templates' for 'warehouse init'. Server said: {reason}"
        )
    text = f"{reason} {exc.message}"
    if status == 400 and ("media-type" in text.lower() or "compatible-with" in text):
        return ConfigurationError(
            f"Elasticsearch at {where} refused the 9.x client's API version: the server is "
            "8.x or older. Upgrade the server to 9.x (docker-compose.yml runs 9.x)"
        )
    if status == 404 and "index_not_found" in text:
        return not_initialised(url, _index_in(reason) or "index")
    if status == 404:
        return NotFound(f"Elasticsearch at {where}: not found while trying to {doing}: {reason}")
    if status == 400 and doing.startswith(("search", "rank")):
        return QuerySyntaxError(f"Elasticsearch could not run the query ({reason})")
    if status in (429, 502, 503, 504) or status >= 500:
        return StoreUnavailable(
            f"Elasticsearch at {where} answered {status} while trying to {doing} ({reason}); "
            f"{kept}",
            url=where,
        )
    return StoreUnavailable(
        f"Elasticsearch at {where} answered {status} while trying to {doing}: {reason}",
        url=where,
    )


def _index_in(reason: str) -> str | None:
    match = re.search(r"no such index \[([^\]]+)\]", reason)
    return match.group(1) if match else None


__all__ = ["CLIENT_ERRORS", "map_error", "not_initialised", "public_url", "quiet_transport_logs"]
