"""Kibana's saved objects API over HTTP: import (with per-object errors) and export.

Kibana has no official Python client, so this speaks HTTP with the standard library (and
imports nothing from :mod:`warehouse.dashboards.kibana`, which builds on it: no import cycle):
``POST [/s/<space>]/api/saved_objects/_import?overwrite=true`` with the NDJSON as the multipart
part ``file`` and the ``kbn-xsrf`` header; ``POST .../_export`` with a JSON body. It
authenticates with the Elasticsearch credentials of the settings (API key, else basic auth) and,
for ``https``, their CA certificate. Kibana answers 200 even when some objects fail: the
:class:`ImportReport` keeps the success count and every per-object error. HTTP failures become
warehouse errors that say what to fix.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warehouse.errors import BackendUnavailable, ConfigurationError, NotFound

if TYPE_CHECKING:
    from warehouse.settings import Settings

log = logging.getLogger(__name__)

NDJSON_NAME = "warehouse.ndjson"
"""The one file ``export-objects`` writes into ``kibana/`` (one import uploads everything)."""


def parse_ndjson(text: str) -> list[dict[str, Any]]:
    """The saved objects of an NDJSON export (the export-summary line left out)."""
    objects = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"line {number} of the NDJSON is not JSON: {exc}") from None
        if "exportedCount" not in obj:
            objects.append(obj)
    return objects


@dataclass(frozen=True)
class ImportFailure:
    """One object Kibana refused, and why (``conflict``, ``missing_references`` ...)."""

    type: str
    id: str
    title: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.type}/{self.id} ({self.title}) not imported — {self.reason}{detail}"


@dataclass(frozen=True)
class ImportReport:
    """What one ``_import`` did: how many objects went in, and each one that did not."""

    kibana_url: str
    space: str | None
    total: int
    success_count: int
    errors: tuple[ImportFailure, ...] = ()
    imported: tuple[tuple[str, str], ...] = field(default=())  # (type, id) as Kibana keeps them

    @property
    def ok(self) -> bool:
        return not self.errors and self.success_count == self.total

    def summary(self) -> str:
        """``imported 16 of 16 saved objects into Kibana at http://... (space: default)``."""
        where = f"Kibana at {self.kibana_url} (space: {self.space or 'default'})"
        return f"imported {self.success_count} of {self.total} saved objects into {where}"


class KibanaClient:
    """Saved-object import/export over HTTP with the settings' URL, space and credentials."""

    def __init__(self, settings: Settings, *, timeout_s: float = 30.0) -> None:
        if not settings.kibana_url:
            raise ConfigurationError(
                "no Kibana URL: set WAREHOUSE_KIBANA_URL (e.g. http://localhost:5601) or "
                "kibana_url in warehouse.toml"
            )
        self.base_url = settings.kibana_url.rstrip("/")
        self.space = settings.kibana_space or None
        if self.space and not re.fullmatch(r"[a-z0-9_\-]+", self.space):
            raise ConfigurationError(
                f"Kibana space id {self.space!r} is not valid: space ids are lowercase letters, "
                "digits, '_' and '-' (the id in the space's URL, not its display name)"
            )
        self.timeout_s = timeout_s
        self._headers = {"kbn-xsrf": "true", **_auth_header(settings)}
        from warehouse.url_credentials import check_credentials_transport

        check_credentials_transport(
            self.base_url,
            service="Kibana",
            setting="WAREHOUSE_KIBANA_URL",
            credentials="Authorization" in self._headers,
            require_tls=settings.require_tls,
        )
        self._ssl = _ssl_context(settings) if self.base_url.startswith("https:") else None

    def api_url(self, path: str) -> str:
        """``<kibana>[/s/<space>]/api/<path>``."""
        space = f"/s/{self.space}" if self.space and self.space != "default" else ""
        return f"{self.base_url}{space}/api/{path.lstrip('/')}"

    def import_ndjson(self, ndjson: str, *, overwrite: bool = True) -> ImportReport:
        """Upload saved objects (``overwrite`` replaces older copies with the same ids)."""
        total = len(parse_ndjson(ndjson))
        boundary = f"warehouse-{uuid.uuid4().hex}"
        body = (
            (
                f"--{boundary}\r\n"
                f'Content-Disposition: form-data; name="file"; filename="{NDJSON_NAME}"\r\n'
                "Content-Type: application/ndjson\r\n\r\n"
            ).encode()
            + ndjson.encode("utf-8")
            + f"\r\n--{boundary}--\r\n".encode()
        )
        query = "?overwrite=true" if overwrite else ""
        answer = self._request(
            "POST",
            self.api_url(f"saved_objects/_import{query}"),
            body,
            f"multipart/form-data; boundary={boundary}",
        )
        result = json.loads(answer)
        errors = tuple(_failure(e) for e in result.get("errors") or [])
        imported = tuple(
            (str(s.get("type")), str(s.get("destinationId") or s.get("id")))
            for s in result.get("successResults") or []
        )
        report = ImportReport(
            kibana_url=self.base_url,
            space=self.space,
            total=total,
            success_count=int(result.get("successCount", 0)),
            errors=errors,
            imported=imported,
        )
        log.info("%s", report.summary())
        return report

    def export_ndjson(
        self,
        objects: Sequence[tuple[str, str]] = (),
        types: Sequence[str] = (),
    ) -> str:
        """The NDJSON Kibana exports for ``objects`` ``(type, id)`` or every object of ``types``."""
        request: dict[str, Any] = {"includeReferencesDeep": True, "excludeExportDetails": True}
        if objects:
            request["objects"] = [{"type": t, "id": i} for t, i in objects]
        else:
            request["type"] = list(types)
        answer = self._request(
            "POST",
            self.api_url("saved_objects/_export"),
            json.dumps(request).encode(),
            "application/json",
        )
        return answer.decode("utf-8")

    def _request(self, method: str, url: str, body: bytes, content_type: str) -> bytes:
        headers = {**self._headers, "Content-Type": content_type}
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self._ssl) as r:
                data: bytes = r.read()
                return data
        except urllib.error.HTTPError as exc:
            raise _http_error(exc, url, self.space) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BackendUnavailable(
                f"cannot reach Kibana at {self.base_url} ({reason}); check that it is running "
                "and WAREHOUSE_KIBANA_URL, then run the command again"
            ) from None


def _auth_header(settings: Settings) -> dict[str, str]:
    if settings.es_api_key is not None:
        return {"Authorization": f"ApiKey {settings.es_api_key.get_secret_value()}"}
    if settings.es_username and settings.es_password is not None:
        pair = f"{settings.es_username}:{settings.es_password.get_secret_value()}"
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
    return {}


def _ssl_context(settings: Settings) -> ssl.SSLContext:
    ca = str(settings.es_ca_certs) if settings.es_ca_certs else None
    context = ssl.create_default_context(cafile=ca)
    if not settings.es_verify_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _failure(error: Mapping[str, Any]) -> ImportFailure:
    info = error.get("error") or {}
    reason = str(info.get("type", "unknown"))
    if reason == "missing_references":
        detail = ", ".join(f"{r.get('type')}/{r.get('id')}" for r in info.get("references", []))
    elif reason == "unsupported_type":
        detail = "this Kibana does not know the type (too old a version?)"
    else:
        detail = str(info.get("message") or info.get("reason") or "")
    title = error.get("title") or (error.get("meta") or {}).get("title") or ""
    return ImportFailure(str(error.get("type")), str(error.get("id")), str(title), reason, detail)


def _http_error(exc: urllib.error.HTTPError, url: str, space: str | None) -> Exception:
    try:
        text = exc.read().decode("utf-8", "replace")
        message = str(json.loads(text).get("message", text))
    except (OSError, ValueError, AttributeError):
        message = exc.reason if isinstance(exc.reason, str) else ""
    message = message[:500]
    if exc.code == 401:
        return ConfigurationError(
            f"Kibana refused the credentials ({message}); set WAREHOUSE_ES_API_KEY or "
            "WAREHOUSE_ES_USERNAME/WAREHOUSE_ES_PASSWORD to a user Kibana accepts"
        )
    if exc.code == 403:
        return ConfigurationError(
            f"the Kibana user may not manage saved objects ({message}); give it a role with "
            "'Saved Objects Management' (all) in the target space"
        )
    if exc.code == 404 and space:
        return NotFound(
            f"Kibana has no space {space!r} ({message}); create it or fix WAREHOUSE_KIBANA_SPACE"
        )
    if exc.code == 413:
        return ConfigurationError(
            f"Kibana refused the upload as too large ({message}); raise "
            "savedObjects.maxImportPayloadBytes in kibana.yml"
        )
    if exc.code >= 500 or exc.code in (408, 429):
        return BackendUnavailable(
            f"Kibana answered HTTP {exc.code} at {url} ({message}); try again when it is healthy"
        )
    return ConfigurationError(f"Kibana answered HTTP {exc.code} at {url}: {message}")
