"""Credentials in URLs: strip them from what is shown or stored, and warn when they travel
over plain HTTP.

:func:`strip_url_credentials` is the one place a URL's ``user:password@`` is removed: the
Elasticsearch URL in messages, the report and the demo, the git remote of a run, and (marked
``***@``) every URL in the text redaction scrubs.

The Elasticsearch, Kibana and S3 clients call :func:`check_credentials_transport` when they
are built (before anything is sent). Loopback addresses (``localhost``, ``127.0.0.0/8``,
``::1``) are fine: the traffic never leaves the machine (the compose stack binds its ports
there). Any other host over ``http://`` gets one warning per process and address, or, with
``require_tls``, a :class:`~warehouse.errors.ConfigurationError` (exit 2).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
from urllib.parse import urlsplit

from warehouse.errors import ConfigurationError

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()

# A URL's scheme and authority; the credentials are what precedes the authority's last '@'.
# A password may hold '#' or '?' unencoded (``redis://:pa#ss@host``), so the authority is read
# up to the first '/' or blank, and the userinfo is cut at its last '@' when what follows it
# is a host (:data:`_HOST`); else the authority ends at the first '?' or '#'.
# Possessive repeats (``*+``) never give characters back: one pass over any text (linear).
URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,31})://(?P<authority>[^/\s]*+)")
# a host, maybe with a port, then where an authority ends
_HOST = re.compile(
    r"(?:[\w\-.~%!$&'()*+,;=]++|\[[0-9A-Fa-f:.]++\])(?::[0-9]*+)?+(?=[?#\\\"'<>)\]},]|$)"
)
# an scp-style git remote, ``user@host:path`` (a whole string, never inside free text)
_SCP = re.compile(r"(?P<user>[^@/\s:]++)@(?P<rest>[^@/\s:]++:(?!//)\S*+)")
TOKEN_USER_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ws", "wss"})
"""Schemes where a bare ``user@`` is usually a token (``https://ghp_x@github.com``)."""


def strip_url_credentials(text: str, mark: str | None = None) -> str:
    """``text`` with the credentials of every URL in it removed.

    Without ``mark`` (a URL to show or to record: the Elasticsearch URL, a git remote) the
    whole ``user[:password]@`` goes, whatever the scheme: ``https://u:tok@github.com/x.git`` →
    ``https://github.com/x.git``, ``ssh://git@host/x`` → ``ssh://host/x``, and an scp-style
    remote ``git@github.com:x/y.git`` → ``github.com:x/y.git``.

    With ``mark`` (free text: a config value, an error message) the credentials become
    ``mark`` (``postgres://u:pw@h/db`` → ``postgres://***@h/db``), and a bare user name
    without a password is kept where it names rather than proves who connects
    (``ssh://git@``, ``postgres://user@``); for http(s), where the "user" is usually a token
    (``https://ghp_x@github.com``), it is marked too.
    """
    if mark is None and "://" not in text and (scp := _SCP.fullmatch(text.strip())):
        return scp["rest"]
    if "://" not in text:
        return text

    def userinfo(match: re.Match[str]) -> str:
        scheme, authority = match["scheme"], match["authority"]
        info, at, host = authority.rpartition("@")  # a password may hold '@': the last one
        if not at or _HOST.match(host) is None or not _userinfo_like(info):
            plain = re.split(r"[?#]", authority, maxsplit=1)[0]
            info, at, host = plain.rpartition("@")
            host += authority[len(plain) :]
            if not at:
                return match.group(0)
        if mark is None:
            return f"{scheme}://{host}"
        if ":" in info or scheme.lower() in TOKEN_USER_SCHEMES:
            return f"{scheme}://{mark}@{host}"
        return match.group(0)

    return URL.sub(userinfo, text)


def _userinfo_like(info: str) -> bool:
    """Whether ``info`` (what precedes an authority's last '@') is a user and password rather
    than a host and a query: before a '?' or '#' in it comes ``user:password``, not a host
    and its port (``host?email=a@b.org``, ``host:8080#x@y``)."""
    head = re.split(r"[?#]", info, maxsplit=1)
    if len(head) == 1:
        return True
    _, colon, password = head[0].partition(":")
    return bool(colon) and not password.isdigit()


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


__all__ = [
    "TOKEN_USER_SCHEMES",
    "URL",
    "check_credentials_transport",
    "is_loopback",
    "strip_url_credentials",
]
