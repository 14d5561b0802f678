"""How ElasticStore reaches its server: client options from the settings, the client itself.

Bounded against a server that accepts connections but never answers: a request that times out
(``request_timeout``, WAREHOUSE_ES_TIMEOUT_S) is not sent again, so the first contact of a
command costs one timeout, not one per retry. Refused connections and 429/502/503/504 answers
are retried (twice, 0.25 s then 0.5 s apart). Credentials never travel over plain HTTP unless
allowed (:func:`~warehouse.url_credentials.check_credentials_transport`). A server that answers the
9.x client's first request is accepted whatever version it reports.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from elasticsearch import Elasticsearch

from warehouse.errors import ConfigurationError, StoreUnavailable
from warehouse.stores.elastic_errors import public_url, quiet_transport_logs
from warehouse.url_credentials import check_credentials_transport

if TYPE_CHECKING:
    from warehouse.settings import Settings

log = logging.getLogger("warehouse.stores.elastic")  # the store's own logger, as before

DEFAULT_TIMEOUT_S = 4.0  # as the setting es_timeout_s: one timeout + start-up fits in 5 s
MAX_RETRIES = 2  # of refused connections and 429/5xx answers; a time-out is never retried
_TLS_ONLY = ("ca_certs", "ssl_assert_fingerprint", "verify_certs", "ssl_show_warn")


def settings_options(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The URL and client options ``settings`` describe (timeout, credentials, TLS); offline."""
    if not settings.es_url:
        raise ConfigurationError(
            "the store is elasticsearch but no URL is set: set WAREHOUSE_ES_URL "
            "(e.g. http://localhost:9200) or es_url in warehouse.toml"
        )
    options: dict[str, Any] = {
        "request_timeout": settings.es_timeout_s,
        "verify_certs": settings.es_verify_certs,
    }
    if settings.es_api_key is not None:
        options["api_key"] = settings.es_api_key.get_secret_value()
    elif settings.es_username:
        password = settings.es_password.get_secret_value() if settings.es_password else ""
        options["basic_auth"] = (settings.es_username, password)
    if not settings.es_verify_certs:
        options["ssl_show_warn"] = False  # asked for explicitly; no warning per request
    if settings.es_ca_certs is not None:
        options["ca_certs"] = str(settings.es_ca_certs)
    if settings.es_fingerprint:
        options["ssl_assert_fingerprint"] = settings.es_fingerprint
    return settings.es_url, options


def connect(url: str, given: Mapping[str, Any], *, require_tls: bool) -> Elasticsearch:
    """A client for ``url`` with our retry policy under the ``given`` options (no request)."""
    options = {
        "request_timeout": DEFAULT_TIMEOUT_S,
        "max_retries": MAX_RETRIES,
        "retry_on_status": (429, 502, 503, 504),
        "retry_on_timeout": False,
        "retry_backoff_base": 0.25,
        "retry_backoff_cap": 1.0,
        **given,
    }
    if not url.startswith("https:"):
        for key in _TLS_ONLY:
            options.pop(key, None)
    check_credentials_transport(
        url,
        service="Elasticsearch",
        setting="WAREHOUSE_ES_URL",
        credentials="api_key" in options or "basic_auth" in options or "@" in urlsplit(url).netloc,
        require_tls=require_tls,
    )
    quiet_transport_logs()
    try:
        return Elasticsearch(url, **options)
    except ValueError as exc:
        raise ConfigurationError(
            f"invalid Elasticsearch connection settings for {public_url(url)}: {exc}"
        ) from None


def read_info(client: Elasticsearch) -> tuple[dict[str, Any], str]:
    """``GET /`` of the server and the version number it reports."""
    info = dict(client.info().body)
    number = str(info.get("version", {}).get("number", "?"))
    if not number.split(".")[0].isdigit() or int(number.split(".")[0]) < 9:
        # A real 8.x refuses the 9 client's compatible-with=9 headers (400 on this very
        # request); a server that answers speaks the 9 API whatever number it reports.
        log.debug("server reports version %s but accepts API version 9; using it", number)
    return info, number


def not_answering(url: str, given: Mapping[str, Any]) -> StoreUnavailable:
    """The error for a server that took the connection but let the first request time out."""
    timeout = given.get("request_timeout", DEFAULT_TIMEOUT_S)
    return StoreUnavailable(
        f"Elasticsearch at {public_url(url)} accepted the connection but did "
        f"not answer within {timeout:g} s (WAREHOUSE_ES_TIMEOUT_S); check that it "
        "is healthy (not overloaded, out of disk or stopped in a debugger); "
        "records wait in the outbox until 'warehouse sync'",
        url=public_url(url),
        hung=True,  # the shipper remembers it for the process, as its own waits
    )


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_RETRIES",
    "connect",
    "not_answering",
    "read_info",
    "settings_options",
]
