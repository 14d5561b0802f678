"""``warehouse ui``: a small read-only web server (the standard library's ``ThreadingHTTPServer``)
over the configured store.

- Only ``GET`` is answered; every other method gets 405. No endpoint writes anything.
- Every response carries a strict Content-Security-Policy: scripts and styles come only from
  this server's own files (no inline script), nothing from a CDN; images and audio also from
  the S3 endpoint when outputs live there (through presigned URLs made per request, never
  stored, living :data:`PRESIGN_S`).
- Bound to 127.0.0.1 by default, and then requests naming another host are refused (a DNS
  rebinding page cannot read the warehouse).

Pages are one static HTML file with ``app.js``; data comes from the JSON endpoints under
``/api/`` (:mod:`warehouse.ui.api`).
"""

from __future__ import annotations

import json
import logging
import mimetypes
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from warehouse.errors import (
    ConfigurationError,
    NotFound,
    QuerySyntaxError,
    StoreUnavailable,
    WarehouseError,
)
from warehouse.ui.api import UiData, content_kind

log = logging.getLogger(__name__)

PRESIGN_S = 300
"""Lifetime of the presigned S3 URLs the object endpoint redirects to."""
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
_INLINE = ("image/", "audio/", "video/")
_SAFE_TEXT = ("text/plain", "application/json")


def csp(extra_origins: str = "") -> str:
    """The policy of every page and API answer."""
    media = f"'self' data: {extra_origins}".strip()
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        f"img-src {media}; media-src {media}; connect-src 'self' {extra_origins}".strip()
        + "; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


OBJECT_CSP = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"
"""Objects (artifacts, outputs) are shown as data, never run: a sandbox without scripts."""


class UiServer(ThreadingHTTPServer):
    """The HTTP server holding the store and the page's policy."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], data: UiData, *, check_host: bool) -> None:
        self.data = data
        self.check_host = check_host
        self.policy = csp(_s3_origin(data))
        self.overview_bytes: tuple[dict[str, Any], bytes] | None = None
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else str(host)
        return f"http://{shown}:{port}/"


class Handler(BaseHTTPRequestHandler):
    server: UiServer
    protocol_version = "HTTP/1.1"
    server_version = "warehouse-ui"

    # --- every response -------------------------------------------------------------------

    def end_headers(self) -> None:
        if not getattr(self, "_object_policy", False):
            self.send_header("Content-Security-Policy", self.server.policy)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, ctype: str, cache: str = "no-store") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        body = json.dumps(payload, allow_nan=False, separators=(",", ":")).encode()
        self._send(status, body, "application/json; charset=utf-8")

    def _refuse(self) -> None:
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET")
        body = json.dumps({"error": f"{self.command} is not allowed: this UI is read-only"})
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body.encode())
        self.close_connection = True

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_TRACE = _refuse

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code == HTTPStatus.NOT_IMPLEMENTED:  # a method no do_X answers
            self._refuse()
            return
        super().send_error(code, message, explain)

    # --- GET ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if self.server.check_host and not self._local_host():
            self._json(HTTPStatus.FORBIDDEN, {"error": "requests must name a local host"})
            return
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if url.path.startswith("/api/"):
                self._api(url.path[5:], query)
            elif url.path in ("/", "/index.html"):
                self._static("index.html")
            elif url.path.startswith("/static/"):
                self._static(url.path[len("/static/") :])
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {url.path}"})
        except (QuerySyntaxError, ConfigurationError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        except NotFound as exc:
            self._json(HTTPStatus.NOT_FOUND, {"error": str(exc)})
        except StoreUnavailable as exc:
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(exc)})
        except WarehouseError as exc:
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:
            log.exception("the UI failed on %s", self.path)
            self._json(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                {"error": f"unexpected error: {type(exc).__name__}: {exc}"},
            )

    def _local_host(self) -> bool:
        host = (self.headers.get("Host") or "").strip()
        if host.startswith("["):
            name = host[1:].split("]", 1)[0]
        else:
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        return name in LOCAL_HOSTS

    def _static(self, name: str) -> None:
        root = resources.files("warehouse") / "ui" / "static"
        target = root / name
        if "/" in name or "\\" in name or name.startswith(".") or not target.is_file():
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no file {name}"})
            return
        ctype = STATIC_TYPES.get(Path(name).suffix, "text/plain")
        cache = "no-cache" if name in ("index.html", "app.js", "style.css") else "max-age=86400"
        self._send(HTTPStatus.OK, target.read_bytes(), f"{ctype}; charset=utf-8", cache)

    def _api(self, name: str, q: dict[str, str]) -> None:
        data = self.server.data
        if name == "overview":
            answer = data.overview()
            cached = self.server.overview_bytes
            if cached is None or cached[0] is not answer:  # serialise each new answer once
                cached = (answer, json.dumps(answer, allow_nan=False).encode())
                self.server.overview_bytes = cached
            self._send(HTTPStatus.OK, cached[1], "application/json; charset=utf-8")
        elif name == "metrics":
            primary = data.settings.primary_metric
            self._json(HTTPStatus.OK, {"metrics": data.metric_names(), "primary": primary})
        elif name == "runs":
            cols = [c for c in q.get("metrics", "").split(",") if c.strip()]
            page = data.runs_page(
                q.get("q"), q.get("sort"), cols, q.get("after") or None, _int(q, "size", 50)
            )
            self._json(HTTPStatus.OK, page)
        elif name == "run":
            self._json(HTTPStatus.OK, data.run(_need(q, "id")))
        elif name == "steps":
            self._json(HTTPStatus.OK, data.steps(_need(q, "id"), _int(q, "after", -1)))
        elif name == "samples":
            answer = data.samples(
                _need(q, "id"),
                q.get("split") or None,
                q.get("sort") or None,
                q.get("order") or None,
                _int(q, "offset", 0),
                _int(q, "limit", 48),
            )
            self._json(HTTPStatus.OK, answer)
        elif name == "compare":
            ids = [i.strip() for i in _need(q, "ids").split(",") if i.strip()]
            self._json(HTTPStatus.OK, data.compare(ids))
        elif name == "object":
            self._object(_need(q, "uri"))
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no API endpoint {name!r}"})

    def _object(self, uri: str) -> None:
        objects = self.server.data.objects
        if objects is None:
            raise NotFound("no object store is configured")
        from warehouse.objects.local import LocalObjectStore

        if isinstance(objects, LocalObjectStore):
            root = objects.root.resolve()
            path = Path(unquote(urlparse(objects.url(uri)).path)).resolve()
            if not path.is_relative_to(root):
                raise NotFound(f"{uri} is not in this warehouse's object store")
            body = objects.get(uri)
        elif uri.startswith("s3://"):
            base = getattr(objects, "base_uri", "")
            if base and not uri.startswith(base.rstrip("/") + "/"):
                raise NotFound(f"{uri} is not in this warehouse's bucket and prefix")
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", objects.url(uri, PRESIGN_S))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
            raise NotFound(f"{uri} is not an object of this warehouse")
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self._object_policy = True
        self.send_response(HTTPStatus.OK)
        if ctype.startswith(_INLINE) or ctype in _SAFE_TEXT or content_kind(path.name) == "text":
            shown = ctype if ctype.startswith(_INLINE) else "text/plain; charset=utf-8"
            self.send_header("Content-Disposition", "inline")
        else:
            shown = "application/octet-stream"
            self.send_header("Content-Disposition", f'attachment; filename="{path.name}"')
        self.send_header("Content-Type", shown)
        self.send_header("Content-Security-Policy", OBJECT_CSP)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "private, max-age=60")
        self.end_headers()
        self.wfile.write(body)
        self._object_policy = False


def _need(q: dict[str, str], name: str) -> str:
    value = q.get(name, "").strip()
    if not value:
        raise ConfigurationError(f"the request needs ?{name}=...")
    return value


def _int(q: dict[str, str], name: str, default: int) -> int:
    text = q.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ConfigurationError(f"?{name}={text!r} is not a whole number") from None


def _s3_origin(data: UiData) -> str:
    """The origin presigned URLs point at (allowed for images and audio), or ''."""
    if not data.settings.s3_url or data.objects is None:
        return ""
    try:
        probe = urlparse(data.objects.url(data.objects.uri("probe"), 60))
    except WarehouseError:
        return ""
    return f"{probe.scheme}://{probe.netloc}"


def make_server(
    settings: Any, host: str = "127.0.0.1", port: int = 8765
) -> tuple[UiServer, UiData]:
    """A server bound to ``host:port`` (0 = any free port) over the configured stores."""
    from warehouse.objects import open_object_store
    from warehouse.query.api import open_store

    store = open_store(settings)
    try:
        objects = open_object_store(settings)
    except WarehouseError as exc:
        log.warning("outputs and artifacts cannot be shown: %s", exc)
        objects = None
    data = UiData(settings, store, objects)
    try:
        server = UiServer((host, port), data, check_host=host in LOCAL_HOSTS)
    except OSError as exc:
        store.close()
        raise ConfigurationError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port"
        ) from exc
    return server, data


def serve_in_thread(
    settings: Any, host: str = "127.0.0.1", port: int = 0
) -> tuple[UiServer, threading.Thread]:
    """Start a server in a daemon thread (tests, benchmarks); ``server.shutdown()`` stops it."""
    server, _ = make_server(settings, host, port)
    thread = threading.Thread(target=server.serve_forever, name="warehouse-ui", daemon=True)
    thread.start()
    return server, thread


def close(server: UiServer) -> None:
    """Stop serving and release the stores."""
    server.shutdown()
    server.server_close()
    server.data.store.close()
    if server.data.objects is not None:
        server.data.objects.close()
