"""S3ObjectStore: artifacts and model outputs in S3 or an S3-compatible server (MinIO), via boto3.

Owns the boto3 client (created on first use, never in ``__init__``), the transfer settings
(multipart above :data:`MULTIPART_THRESHOLD`, parts uploaded concurrently), the sha256 kept as
object metadata (``x-amz-meta-sha256``) that makes uploads idempotent, presigned URLs, bucket
creation for ``warehouse init``, and the one border (:meth:`S3ObjectStore._map_errors`) where
boto3/botocore exceptions become :mod:`warehouse.errors`.

Key layout, with ``WAREHOUSE_S3_URL=s3://bucket/prefix``::

    s3://bucket/prefix/{experiment}/{run_id}/{kind}/{name}

``put`` returns exactly ``f"{s3_url.rstrip('/')}/{key}"``, the URI the recorder writes into
records while the upload still waits in the outbox.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlparse

import boto3
import botocore.exceptions
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from warehouse.errors import ConfigurationError, NotFound, ObjectStoreUnavailable, WarehouseError
from warehouse.objects.base import ProgressCallback, PutItem

if TYPE_CHECKING:
    from warehouse.settings import Settings

log = logging.getLogger(__name__)

_MiB = 1024 * 1024
MULTIPART_THRESHOLD = 8 * _MiB
"""Objects at least this big are uploaded in parts (boto3 TransferConfig)."""
MULTIPART_CHUNKSIZE = 8 * _MiB
TRANSFER_CONCURRENCY = 8
"""Parts of one large object uploaded at once."""
BATCH_CONCURRENCY = 16
"""Objects uploaded at once by :meth:`S3ObjectStore.put_many`."""
PRESIGN_MAX_S = 7 * 24 * 3600
"""SigV4 presigned URLs live at most seven days."""


_CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "InvalidClientTokenId",
        "AuthorizationHeaderMalformed",
    }
)
_DENIED_CODES = frozenset({"AccessDenied", "403", "AllAccessDisabled", "AccountProblem"})
_MISSING_KEY_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


class S3ObjectStore:
    """Objects in one bucket under one prefix; URIs are ``s3://bucket/prefix/key``."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        presign_expiry_s: int = PRESIGN_MAX_S,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
        max_attempts: int = 3,
        batch_concurrency: int = BATCH_CONCURRENCY,
        require_tls: bool = False,
    ) -> None:
        if not bucket:
            raise ConfigurationError(
                "the S3 bucket name is empty; set WAREHOUSE_S3_URL=s3://bucket/prefix"
            )
        if (access_key_id is None) != (secret_access_key is None):
            raise ConfigurationError(
                "only one of WAREHOUSE_S3_ACCESS_KEY_ID and WAREHOUSE_S3_SECRET_ACCESS_KEY is set; "
                "set both, or neither to use the AWS credential chain"
            )
        if endpoint_url is not None:
            parsed = urlparse(endpoint_url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ConfigurationError(
                    f"WAREHOUSE_S3_ENDPOINT must be an http(s) URL such as http://localhost:9000, "
                    f"not {endpoint_url!r}"
                )
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url.rstrip("/") if endpoint_url else None
        self.region = region
        self.presign_expiry_s = presign_expiry_s
        self.batch_concurrency = max(1, batch_concurrency)
        self._access_key_id = access_key_id
        self._secret_access_key = secret_access_key
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._max_attempts = max(1, max_attempts)
        self.require_tls = require_tls
        self._lock = threading.Lock()
        self._s3: Any = None  # the boto3 S3 client, created by _client() on first use
        self._transfer = TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD,
            multipart_chunksize=MULTIPART_CHUNKSIZE,
            max_concurrency=TRANSFER_CONCURRENCY,
            use_threads=True,
        )

    @classmethod
    def from_settings(cls, settings: Settings, **options: Any) -> S3ObjectStore:
        """The store that ``WAREHOUSE_S3_URL`` / ``_ENDPOINT`` / ``_REGION`` / credentials name."""
        if not settings.s3_url:
            raise ConfigurationError("WAREHOUSE_S3_URL is not set; set it to s3://bucket/prefix")
        bucket, prefix = parse_s3_url(settings.s3_url)
        key_id = settings.s3_access_key_id
        secret = settings.s3_secret_access_key
        return cls(
            bucket,
            prefix,
            endpoint_url=settings.s3_endpoint or None,
            region=settings.s3_region or None,
            access_key_id=(key_id.get_secret_value() or None) if key_id is not None else None,
            secret_access_key=(secret.get_secret_value() or None) if secret is not None else None,
            presign_expiry_s=settings.presign_expiry_s,
            require_tls=settings.require_tls,
            **options,
        )

    def __repr__(self) -> str:  # never shows credentials
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"S3ObjectStore({self.base_uri!r}{where})"

    @property
    def base_uri(self) -> str:
        """``s3://bucket/prefix`` without a trailing slash; URIs are ``base_uri/key``."""
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    # the contract ---------------------------------------------------------------------------

    def put(self, key: str, source: bytes | Path, *, content_type: str | None, sha256: str) -> str:
        """Upload ``source`` unless the object there already has this sha256; its URI."""
        uri = self.uri(key)
        with self._map_errors("upload", uri):
            if self._remote_sha256(self._full_key(key)) == sha256:
                log.debug("%s already holds sha256 %s; not uploaded again", uri, sha256)
                return uri
            self._upload(self._full_key(key), source, content_type, sha256)
        return uri

    def put_many(
        self,
        items: Iterable[PutItem],
        progress: ProgressCallback | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[str]:
        """Upload many objects concurrently (same dedupe as ``put``); their URIs, in order.

        ``progress`` is a ``(done, total)`` callback (the caller draws any progress bar: a
        backend never writes to the terminal). Keys absent from one listing of their folder
        are uploaded without the per-object HEAD that ``put`` makes. The first error stops
        the batch and is raised; what was uploaded stays, and running the batch again skips
        it.
        """
        batch = list(items)
        if not batch:
            return []
        with self._map_errors("list", self.base_uri):
            absent = self._absent_keys([self._full_key(item[0]) for item in batch])
        workers = max(1, min(concurrency or self.batch_concurrency, len(batch)))

        def one(item: PutItem) -> str:
            key, source, content_type, sha256 = item
            full_key = self._full_key(key)
            if full_key not in absent:
                return self.put(key, source, content_type=content_type, sha256=sha256)
            with self._map_errors("upload", self.uri(key)):
                self._upload(full_key, source, content_type, sha256)
            return self.uri(key)

        total = len(batch)
        report = (lambda done: progress(done, total)) if progress else (lambda done: None)
        with ThreadPoolExecutor(workers, thread_name_prefix="s3-put") as pool:
            return _run_all(pool, one, batch, report)

    def get(self, uri: str) -> bytes:
        """The object's bytes (``NotFound`` if it is not there)."""
        bucket, key = self._split(uri)
        with self._map_errors("download", uri, bucket=bucket):
            response = self._client().get_object(Bucket=bucket, Key=key)
            with contextlib.closing(response["Body"]) as body:
                data: bytes = body.read()
        return data

    def exists(self, uri: str) -> bool:
        """Whether the object is there (one HEAD request)."""
        bucket, key = self._split(uri)
        with self._map_errors("look up", uri, bucket=bucket):
            if self._head(bucket, key) is not None:
                return True
            # a HEAD answers a bare 404 for a missing bucket too: tell the two apart
            try:
                self._client().head_bucket(Bucket=bucket)
            except botocore.exceptions.ClientError as exc:
                if _code(exc) in _MISSING_KEY_CODES:
                    raise self._missing_bucket(bucket) from exc
                raise
            return False

    def url(self, uri: str, expires_s: int | None = None) -> str:
        """A presigned GET URL (HTTPS on AWS) valid for ``expires_s`` (default: the setting)."""
        expires = self.presign_expiry_s if expires_s is None else expires_s
        if not 1 <= expires <= PRESIGN_MAX_S:
            raise ConfigurationError(
                f"a presigned URL can live 1 to {PRESIGN_MAX_S} s (7 days, the SigV4 maximum), "
                f"not {expires}; keep expires_s and WAREHOUSE_PRESIGN_EXPIRY_S within that range"
            )
        bucket, key = self._split(uri)
        with self._map_errors("sign a URL for", uri, bucket=bucket):
            signed: str = self._client().generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expires
            )
        return signed

    def delete_prefix(self, prefix: str) -> int:
        """List the keys under ``prefix`` and delete them, 1,000 per request."""
        full = self._full_key(prefix)
        count = 0
        with self._map_errors("delete", self.uri(prefix)):
            client = self._client()
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                keys = [{"Key": obj["Key"]} for obj in page.get("Contents", ())]
                for start in range(0, len(keys), 1000):
                    chunk = keys[start : start + 1000]
                    client.delete_objects(
                        Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True}
                    )
                    count += len(chunk)
        return count

    def close(self) -> None:
        """Close the HTTP connections; the store reconnects if used again."""
        with self._lock:
            client, self._s3 = self._s3, None
        if client is not None:
            client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # operations ----------------------------------------------------------------------------

    def ensure_bucket(self) -> bool:
        """Create the bucket if it is missing; True when it was created (``warehouse init``)."""
        with self._map_errors("create the bucket", self.base_uri):
            client = self._client()
            try:
                client.head_bucket(Bucket=self.bucket)
                return False
            except botocore.exceptions.ClientError as exc:
                if _code(exc) not in ("404", "NoSuchBucket", "NotFound"):
                    raise
            options: dict[str, Any] = {}
            if self.region and self.region != "us-east-1":
                options["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
            try:
                client.create_bucket(Bucket=self.bucket, **options)
            except botocore.exceptions.ClientError as exc:
                if _code(exc) == "BucketAlreadyOwnedByYou":  # created meanwhile by another init
                    return False
                if _code(exc) == "BucketAlreadyExists":
                    raise ConfigurationError(
                        f"the bucket name {self.bucket!r} is taken by another account; choose "
                        "another bucket in WAREHOUSE_S3_URL"
                    ) from exc
                raise
        log.info("created bucket %s", self.bucket)
        return True

    # internals -------------------------------------------------------------------------------

    def _client(self) -> Any:
        """The boto3 S3 client (thread-safe), created on first use."""
        with self._lock:
            if self._s3 is None:
                custom = self.endpoint_url is not None
                if custom:
                    from warehouse.url_credentials import check_credentials_transport

                    # every request is signed with the keys (explicit or from boto3's chain)
                    check_credentials_transport(
                        str(self.endpoint_url),
                        service="S3",
                        setting="WAREHOUSE_S3_ENDPOINT",
                        credentials=True,
                        require_tls=self.require_tls,
                    )
                config = Config(
                    connect_timeout=self._connect_timeout_s,
                    read_timeout=self._read_timeout_s,
                    retries={"total_max_attempts": self._max_attempts, "mode": "standard"},
                    max_pool_connections=self.batch_concurrency + TRANSFER_CONCURRENCY,
                    signature_version="s3v4",
                    # MinIO/moto: bucket in the path, not in a host name that does not resolve
                    s3={"addressing_style": "path"} if custom else {},
                    # S3-compatible servers vary in support of the newer default CRC headers
                    request_checksum_calculation="when_required" if custom else "when_supported",
                    response_checksum_validation="when_required" if custom else "when_supported",
                )
                session = boto3.session.Session()
                self._s3 = session.client(
                    "s3",
                    endpoint_url=self.endpoint_url,
                    region_name=self.region,
                    aws_access_key_id=self._access_key_id,
                    aws_secret_access_key=self._secret_access_key,
                    config=config,
                )
            return self._s3

    def uri(self, key: str) -> str:
        """``s3://bucket/prefix/key``: the URI ``put`` returns (the records keep it)."""
        return f"{self.base_uri}/{key}"

    def _full_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _split(self, uri: str) -> tuple[str, str]:
        """(bucket, key) of an ``s3://`` URI; a bare key is taken relative to the prefix."""
        if uri.startswith("s3://"):
            bucket, _, key = uri[len("s3://") :].partition("/")
            if bucket and key:
                return bucket, key
        elif "://" not in uri:
            return self.bucket, self._full_key(uri)
        raise NotFound(f"{uri} is not an S3 object URI (s3://bucket/key)")

    def _head(self, bucket: str, key: str) -> dict[str, Any] | None:
        """HEAD of the object, or None when it is not there."""
        try:
            head: dict[str, Any] = self._client().head_object(Bucket=bucket, Key=key)
        except botocore.exceptions.ClientError as exc:
            if _code(exc) in _MISSING_KEY_CODES:
                return None
            raise
        return head

    def _remote_sha256(self, full_key: str) -> str | None:
        """The sha256 recorded on the object, None if absent or not knowable."""
        try:
            head = self._head(self.bucket, full_key)
        except botocore.exceptions.ClientError as exc:
            # Without s3:ListBucket, S3 answers 403 for a missing key; the upload then tells
            # a missing permission (or bad credentials) apart from a missing object.
            if _code(exc) in _DENIED_CODES:
                return None
            raise
        if head is None:
            return None
        sha: str | None = head.get("Metadata", {}).get("sha256")
        return sha

    def _absent_keys(self, full_keys: Sequence[str]) -> frozenset[str]:
        """Keys surely absent, from one listing per folder; empty when listing would not pay."""
        folders = {key.rpartition("/")[0] for key in full_keys}
        if len(folders) * 8 > len(full_keys):
            return frozenset()
        present: set[str] = set()
        paginator = self._client().get_paginator("list_objects_v2")
        try:
            for folder in folders:
                pages = paginator.paginate(
                    Bucket=self.bucket, Prefix=f"{folder}/" if folder else "", Delimiter="/"
                )
                for page in pages:
                    present.update(obj["Key"] for obj in page.get("Contents", ()))
        except botocore.exceptions.ClientError as exc:
            if _code(exc) in _DENIED_CODES:  # no s3:ListBucket: HEAD each key instead
                return frozenset()
            raise
        return frozenset(full_keys) - present

    def _upload(
        self, full_key: str, source: bytes | Path, content_type: str | None, sha256: str
    ) -> None:
        client = self._client()
        extra = {
            "ContentType": content_type or "application/octet-stream",
            "Metadata": {"sha256": sha256},
        }
        if isinstance(source, bytes | bytearray | memoryview):
            if len(source) < MULTIPART_THRESHOLD:  # one request, no transfer-manager threads
                client.put_object(Bucket=self.bucket, Key=full_key, Body=bytes(source), **extra)
            else:
                client.upload_fileobj(
                    io.BytesIO(source),
                    self.bucket,
                    full_key,
                    ExtraArgs=extra,
                    Config=self._transfer,
                )
            return
        path = Path(source)
        try:
            size = path.stat().st_size
            if size < MULTIPART_THRESHOLD:
                with open(path, "rb") as body:
                    client.put_object(Bucket=self.bucket, Key=full_key, Body=body, **extra)
            else:
                client.upload_file(
                    str(path), self.bucket, full_key, ExtraArgs=extra, Config=self._transfer
                )
        except OSError as exc:
            if isinstance(exc, botocore.exceptions.BotoCoreError):  # some are OSErrors too
                raise
            if isinstance(exc, FileNotFoundError):
                raise NotFound(f"the file to upload, {path}, no longer exists") from exc
            raise ConfigurationError(
                f"cannot read {path} to upload it: {exc.strerror or exc}; check its permissions"
            ) from exc

    def _missing_bucket(self, bucket: str) -> ConfigurationError:
        return ConfigurationError(
            f"the bucket {bucket!r} does not exist at {self._where()}; create it with "
            "'warehouse init', or point WAREHOUSE_S3_URL at an existing bucket"
        )

    def _where(self) -> str:
        return self.endpoint_url or f"AWS S3 ({self.region or 'default region'})"

    def _credentials_source(self) -> str:
        if self._access_key_id is not None:
            return "check WAREHOUSE_S3_ACCESS_KEY_ID and WAREHOUSE_S3_SECRET_ACCESS_KEY"
        return (
            "no WAREHOUSE_S3_ACCESS_KEY_ID/WAREHOUSE_S3_SECRET_ACCESS_KEY are set, so they came "
            "from the AWS credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "AWS_PROFILE, ~/.aws/credentials, an instance role); check those or set the "
            "WAREHOUSE_S3_* pair"
        )

    @contextlib.contextmanager
    def _map_errors(self, action: str, uri: str, *, bucket: str | None = None) -> Iterator[None]:
        """The one border where boto3/botocore errors become warehouse errors."""
        try:
            yield
        except WarehouseError:
            raise
        except S3UploadFailedError as exc:  # boto3 wraps the ClientError it caught
            cause = exc.__cause__ or exc.__context__
            raise self._translate(cause or exc, action, uri, bucket) from exc
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise self._translate(exc, action, uri, bucket) from exc

    def _translate(
        self, exc: BaseException, action: str, uri: str, bucket: str | None
    ) -> WarehouseError:
        where = self._where()
        bucket = bucket or self.bucket
        errors = botocore.exceptions
        if isinstance(exc, errors.ConnectionError | errors.HTTPClientError):
            return ObjectStoreUnavailable(
                f"cannot reach S3 at {where} to {action} {uri} ({type(exc).__name__}); "
                "outputs are kept in the outbox; run 'warehouse sync' once S3 is back"
            )
        if isinstance(exc, errors.NoCredentialsError | errors.PartialCredentialsError):
            return ConfigurationError(
                "no usable S3 credentials: set WAREHOUSE_S3_ACCESS_KEY_ID and "
                "WAREHOUSE_S3_SECRET_ACCESS_KEY, or configure the AWS credential chain "
                "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance role)"
            )
        if isinstance(exc, errors.ParamValidationError):
            return ConfigurationError(
                f"S3 rejected the request to {action} {uri}: {exc}; check WAREHOUSE_S3_URL"
            )
        if isinstance(exc, errors.ClientError):
            code = _code(exc)
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _CREDENTIAL_CODES:
                return ConfigurationError(
                    f"S3 at {where} rejected the credentials ({code}) when trying to {action} "
                    f"{uri}; {self._credentials_source()}"
                )
            if code in _DENIED_CODES:
                return ConfigurationError(
                    f"S3 at {where} denied access ({code}) when trying to {action} {uri}: the "
                    "credentials are wrong or lack permission on the bucket; "
                    f"{self._credentials_source()}"
                )
            if code == "NoSuchBucket":
                return self._missing_bucket(bucket)
            if code in _MISSING_KEY_CODES:
                return NotFound(f"no object at {uri}")
            if code in (
                "InvalidBucketName",
                "PermanentRedirect",
                "AuthorizationQueryParametersError",
            ):
                return ConfigurationError(
                    f"S3 at {where} refused {uri} ({code}: {_message(exc)}); check "
                    "WAREHOUSE_S3_URL, WAREHOUSE_S3_REGION and WAREHOUSE_S3_ENDPOINT"
                )
            return ObjectStoreUnavailable(
                f"S3 at {where} failed to {action} {uri} ({code}, HTTP {status}: "
                f"{_message(exc)}); outputs are kept in the outbox; run 'warehouse sync' later"
            )
        return ObjectStoreUnavailable(
            f"S3 at {where} failed to {action} {uri} ({type(exc).__name__}); outputs are kept "
            "in the outbox; run 'warehouse sync' later"
        )


def parse_s3_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of ``s3://bucket/prefix``; ``ConfigurationError`` for anything else."""
    parsed = urlparse(url)
    prefix = parsed.path.strip("/")
    if (
        parsed.scheme != "s3"
        or not parsed.netloc
        or parsed.query
        or parsed.fragment
        or "" in prefix.split("/")[: -1 if prefix else 0]
        or any(part in (".", "..") for part in prefix.split("/"))
    ):
        raise ConfigurationError(
            f"WAREHOUSE_S3_URL must look like s3://bucket or s3://bucket/prefix, not {url!r}"
        )
    return parsed.netloc, prefix


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _message(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", "")) or "no message"


def _run_all(
    pool: ThreadPoolExecutor,
    work: Callable[[PutItem], str],
    batch: list[PutItem],
    report: Callable[[int], None],
) -> list[str]:
    """Results of ``work`` over ``batch`` in order; the first failure cancels the rest."""
    futures: list[Future[str]] = [pool.submit(work, item) for item in batch]
    for done, future in enumerate(as_completed(futures), start=1):
        error = future.exception()
        if error is not None:
            for other in futures:
                other.cancel()
            raise error
        report(done)
    return [future.result() for future in futures]
