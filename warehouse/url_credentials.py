"""Credentials over plain HTTP: warn once per process, or refuse with WAREHOUSE_REQUIRE_TLS=1.

The Elasticsearch, Kibana and S3 clients call :func:`check_credentials_transport` when they
are built (before anything is sent). Loopback addresses (``localhost``, ``127.0.0.0/8``,
``::1``) are fine: the traffic never leaves the machine (the compose stack binds its ports
there). Any other host over ``http://`` gets one warning per process and address, or, with
``require_tls``, a :class:`~warehouse.errors.ConfigurationError` (exit 2).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from urllib.parse import urlsplit

from warehouse.errors import ConfigurationError

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an IP address) is this machine's loopback interface."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # another name: it may resolve anywhere


def check_credentials_transport(
    url: str, *, service: str, setting: str, credentials: bool, require_tls: bool
) -> None:
    """Warn (once per process and address) or refuse when ``credentials`` would go to ``url``
    over plain HTTP to a host other than this machine.

    ``service`` names the server in the message ("Elasticsearch", "S3"); ``setting`` is the
    variable holding the URL, named in the advice.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "http" or not credentials:
        return
    host = parts.hostname or ""
    if is_loopback(host):
        return
    where = f"{host}:{parts.port}" if parts.port else host
    if require_tls:
        raise ConfigurationError(
            f"refusing to send {service} credentials over plain HTTP to {where} "
            f"(WAREHOUSE_REQUIRE_TLS=1): use an https:// URL in {setting}, or reach the server "
            "through localhost (an SSH tunnel)"
        )
    with _lock:
        if (service, where) in _warned:
            return
        _warned.add((service, where))
    log.warning(
        "%s credentials go over plain HTTP to %s, which is not this machine: anyone on the "
        "network path can read them. Use an https:// URL in %s, and set "
        "WAREHOUSE_REQUIRE_TLS=1 to refuse plain HTTP",
        service,
        where,
        setting,
    )


__all__ = ["check_credentials_transport", "is_loopback"]
