"""Create-only writes of S3FileIO: the ``If-None-Match: *`` probe and the conditional PUT.

This module owns the commit primitive on S3. :func:`put_create_only` sends
``PutObject`` with ``If-None-Match: *``: HTTP 412 is a lost race, HTTP 409
``ConditionalRequestConflict`` is retried with backoff, and an uncertain
outcome (a timeout or 5xx after the request was sent, including the case
where botocore's own retry then meets our first attempt's object) is resolved
by reading the object back and comparing its content. Nothing here ever checks
existence before writing.

Because a server that ignores ``If-None-Match`` would silently break
atomicity, :func:`ensure_conditional_writes` probes each bucket once per
FileIO before its first create-only write (a scratch key written twice must
fail the second time) and refuses with :class:`UnsafeStorageError` unless the
option ``s3.allow-unsafe-create`` is true. When that first write is a fresh,
uniquely named file (a manifest or manifest list, :func:`create_new`), the
file itself replaces the scratch key: it is created, then created again with
the same bytes, which must fail with 412. That costs one request instead of
the scratch probe's three, in every new process that commits.

Both functions work on an :class:`~snaplake.store.io.s3.file_io.S3FileIO`: its
boto3 client, its error translation (so failures surface as the same typed
errors as every other S3 call), its settings and its per-bucket probe state.
botocore is imported inside functions only, like the rest of the S3 modules.

Source: AWS S3 user guide, "Add preconditions to S3 operations with
conditional requests" (``If-None-Match: *`` on ``PutObject``; 412 and 409
``ConditionalRequestConflict``); DESIGN.md §5d/§5f.
"""

from __future__ import annotations

import logging
import posixpath
import random
import time
import uuid
from typing import TYPE_CHECKING

from snaplake.errors import FileAlreadyExistsError, StorageError, UnsafeStorageError
from snaplake.store.io.file_io import SCRATCH_PREFIX
from snaplake.store.io.s3.errors import UNSUPPORTED_CODES, status_code
from snaplake.store.io.s3.options import split_s3_path

if TYPE_CHECKING:
    from snaplake.store.io.s3.file_io import S3FileIO

__all__ = ["create_new", "ensure_conditional_writes", "put_create_only"]

logger = logging.getLogger(__name__)

_CONFLICT_CODES = ("ConditionalRequestConflict", "OperationAborted")
RECREATE_PROBE_MAX_BYTES = 256 * 1024
"""Largest fresh file :func:`create_new` sends twice to verify a bucket (else: scratch probe)."""


def put_create_only(
    file_io: S3FileIO,
    path: str,
    *,
    bucket: str,
    key: str,
    data: bytes,
    operation: str = "write_if_absent",
) -> None:
    """Create ``s3://bucket/key`` with ``data`` unless an object is there (no probe).

    Commit points run :func:`ensure_conditional_writes` for ``bucket`` first;
    data files (``S3FileIO.write_output``) need not, since their names are
    unique and the condition only guards against a reused name.

    412 means another writer won, unless the request was retried (by us or
    by botocore) after an uncertain outcome and the object holds ``data``:
    then the first attempt was ours. 409 ``ConditionalRequestConflict`` /
    ``OperationAborted`` is retried with exponential backoff (50 ms doubling,
    capped at 2 s, 20 % jitter). 501 (the header is not implemented) fails
    at once. A timeout, connection loss, 408, 429 or another 5xx is resolved
    by reading the object back: our bytes mean success, other bytes mean the
    race was lost, nothing means the PUT is sent again (safe, since it can
    only create).

    Args:
        file_io: The FileIO whose client, settings and error translation are used.
        path: ``s3://bucket/key``, named in errors and logs.
        bucket: Bucket of ``path``.
        key: Key of ``path``.
        data: The complete content.
        operation: Named in raised errors (``"write"`` for data files).

    Raises:
        FileAlreadyExistsError: the object exists with other content (race
            lost); retrying cannot help.
        StorageAccessError: credentials refused, expired or not allowed.
        StorageError: missing bucket, unreachable endpoint, 409 beyond
            ``s3.conflict.max-retries``, or an outcome that stayed unknown
            (the write may still land: read ``path`` back before retrying).

    Storage:
        One conditional ``PutObject`` per attempt; one ``GetObject`` of
        ``path`` after each uncertain outcome.

    Source:
        AWS S3 conditional writes (``If-None-Match: *``, 412, 409 retry).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    client = file_io._s3()
    max_retries = file_io._settings.conflict_max_retries
    uncertain = False
    attempt = 0
    while True:
        attempt += 1
        try:
            response = client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except (ClientError, BotoCoreError) as exc:
            status, code = status_code(exc)
            retried = isinstance(exc, ClientError) and (
                exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) > 0
            )
            if status == 412:
                if (uncertain or retried) and _read_or_none(file_io, path) == data:
                    logger.info("create of %s confirmed by read-back after a retry", path)
                    return
                raise FileAlreadyExistsError(
                    f"{path} already exists (a concurrent writer created it first)",
                    path=path,
                    operation=operation,
                ) from exc
            if status == 409 and code in _CONFLICT_CODES:
                if attempt > max_retries:
                    raise StorageError(
                        f"create of {path} kept meeting concurrent conditional writes "
                        f"(409 {code}) after {attempt} attempts; retry later",
                        path=path,
                        operation=operation,
                    ) from exc
                _backoff(attempt)
                continue
            definite = status < 500 and status not in (408, 429)
            if isinstance(exc, ClientError) and (definite or status == 501):
                file_io._raise(exc, path=path, operation=operation)
            # Timeout, dropped connection or 5xx: the PUT may have landed.
            uncertain = True
            logger.warning(
                "create of %s ended uncertainly (%s, attempt %d); reading it back",
                path,
                code or type(exc).__name__,
                attempt,
            )
            current = _read_back(file_io, path, cause=exc, operation=operation)
            if current == data:
                logger.info("create of %s confirmed by read-back", path)
                return
            if current is not None:
                raise FileAlreadyExistsError(
                    f"{path} already exists with other content (a concurrent writer won)",
                    path=path,
                    operation=operation,
                ) from exc
            if attempt > max_retries:
                raise StorageError(
                    f"create of {path} failed {attempt} times without a definite outcome "
                    f"({code or type(exc).__name__}); it is absent now but a delayed "
                    "request may still land: read it back before retrying",
                    path=path,
                    operation=operation,
                ) from exc
            _backoff(attempt)
            continue
        logger.debug("created %s (etag %s)", path, response.get("ETag"))
        return


def _read_or_none(file_io: S3FileIO, path: str) -> bytes | None:
    try:
        return file_io.read_bytes(path)
    except FileNotFoundError:
        return None


def _read_back(
    file_io: S3FileIO, path: str, *, cause: BaseException, operation: str
) -> bytes | None:
    try:
        return _read_or_none(file_io, path)
    except StorageError as exc:
        raise type(exc)(
            f"create of {path} has an unknown outcome ({type(cause).__name__}) and reading "
            f"it back failed: {exc}",
            path=path,
            operation=operation,
        ) from exc


def _backoff(attempt: int) -> None:
    delay_s = min(0.05 * 2 ** (attempt - 1), 2.0)
    time.sleep(delay_s * (1 + 0.2 * random.random()))


def ensure_conditional_writes(file_io: S3FileIO, path: str, *, bucket: str, key: str) -> None:
    """Check, once per bucket and FileIO, that the server honours ``If-None-Match: *``.

    A scratch object ``<dir of key>/.snaplake-probe-<uuid>`` is created twice
    with ``If-None-Match: *``; the second create must fail with 412. The
    verdict is remembered in ``file_io`` (and survives pickling), so later
    calls for the same bucket cost nothing. With ``s3.allow-unsafe-create``
    the probe is skipped and a warning is logged once.

    Args:
        file_io: The FileIO whose client, settings and probe state are used.
        path: The create-only write the caller is about to make; errors name it.
        bucket: Bucket of ``path``.
        key: Key of ``path``; the scratch object goes next to it.

    Raises:
        UnsafeStorageError: the server ignores ``If-None-Match``, or rejects
            it as not implemented, and ``s3.allow-unsafe-create`` is not
            true. Nothing was written at ``path``; retrying cannot help.
        StorageAccessError: credentials refused, expired or not allowed.
        StorageError: missing bucket, unreachable endpoint or another failure.

    Storage:
        On the first call per bucket: two conditional ``PutObject`` of the
        scratch key and one ``DeleteObject`` (a crash in between leaves the
        scratch object for orphan clean). Nothing afterwards.
    """
    if bucket in file_io._verified_buckets:
        return
    if file_io._settings.allow_unsafe_create:
        if not file_io._warned_unsafe:
            file_io._warned_unsafe = True
            logger.warning(
                "s3.allow-unsafe-create is true: conditional writes are not verified; "
                "concurrent commits may overwrite each other"
            )
        return
    with file_io._lock:
        if bucket in file_io._verified_buckets:
            return
        parent = posixpath.dirname(key)
        probe_key = (parent + "/" if parent else "") + SCRATCH_PREFIX + uuid.uuid4().hex
        unsafe_reason = _probe(file_io, path, bucket=bucket, probe_key=probe_key)
        if unsafe_reason:
            raise _unsafe(file_io, path, unsafe_reason)
        file_io._verified_buckets.add(bucket)
        logger.debug("bucket %s honours If-None-Match", bucket)


def _unsafe(file_io: S3FileIO, path: str, reason: str) -> UnsafeStorageError:
    """The error refusing a create-only write of ``path`` because the server ``reason``."""
    return UnsafeStorageError(
        f"refusing create-only write of {path}: the S3 server at "
        f"{file_io._endpoint_for_messages()} {reason}, so concurrent commits "
        "could overwrite each other. Use a server with conditional writes (AWS S3, "
        "SeaweedFS, recent MinIO) or, if only one writer ever commits, set "
        "s3.allow-unsafe-create=true",
        path=path,
        operation="write_if_absent",
    )


def create_new(file_io: S3FileIO, path: str, data: bytes) -> None:
    """Create the fresh, uniquely named object ``path``, verifying its bucket on the way.

    In a bucket already verified (or with ``s3.allow-unsafe-create``, or
    for content over :data:`RECREATE_PROBE_MAX_BYTES`) this is exactly
    ``file_io.write_if_absent``. Otherwise the object is created with
    ``file_io.write_output`` (a conditional ``PutObject`` without the probe)
    and then put again, same bytes, with ``If-None-Match: *``: a 412 proves
    that the server honours the header, the same evidence as the scratch
    probe's second write, and the bucket counts as verified. Sending the
    same bytes twice is harmless even on a server that ignores the header.
    Any other answer (the second write succeeded, 501, an error) is settled
    by the scratch probe of :func:`ensure_conditional_writes`; if that
    refuses or fails, the object is deleted again before raising, so
    nothing is left, as when the probe ran first.

    Args:
        file_io: The FileIO whose client, settings and probe state are used;
            its ``write_output`` / ``write_if_absent`` create the object.
        path: ``s3://bucket/key`` of a manifest or manifest list.
        data: The complete content.

    Raises:
        FileAlreadyExistsError: ``path`` exists (a reused name: a bug).
        UnsafeStorageError: the server ignores ``If-None-Match``, or rejects
            it as not implemented, and ``s3.allow-unsafe-create`` is not true.
        StorageAccessError: credentials refused, expired or not allowed.
        StorageError: missing bucket, unreachable endpoint or another failure.

    Storage:
        In a verified bucket one conditional ``PutObject``. The first time
        per bucket two (the second answered 412), or, when that does not
        settle it, also the scratch probe (two ``PutObject``, one
        ``DeleteObject``) and a ``DeleteObject`` of ``path`` if it refuses.

    Source:
        AWS S3 conditional writes (``If-None-Match: *`` answered with 412
        when the key exists); DESIGN.md §5d.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split_s3_path(path)
    if (
        bucket in file_io._verified_buckets
        or file_io._settings.allow_unsafe_create
        or len(data) > RECREATE_PROBE_MAX_BYTES
    ):
        file_io.write_if_absent(path, data)
        return
    try:
        file_io.write_output(path, data)
    except StorageError as exc:
        status, code = status_code(exc.__cause__) if exc.__cause__ else (0, "")
        if status == 501 or code in UNSUPPORTED_CODES:
            raise _unsafe(
                file_io, path, f"does not implement If-None-Match ({code or status})"
            ) from exc
        raise
    try:
        file_io._s3().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except (ClientError, BotoCoreError) as exc:
        if status_code(exc)[0] == 412:
            file_io._verified_buckets.add(bucket)
            logger.debug("bucket %s honours If-None-Match (412 re-creating %s)", bucket, path)
            return
    # Not settled (the server took the second create, or failed): probe a scratch key.
    try:
        ensure_conditional_writes(file_io, path, bucket=bucket, key=key)
    except BaseException:
        _delete_quietly(file_io, bucket=bucket, key=key)
        raise


def _probe(file_io: S3FileIO, path: str, *, bucket: str, probe_key: str) -> str | None:
    """Create ``probe_key`` twice with ``If-None-Match: *``; return why that is unsafe.

    Errors are reported against ``path``, the write the caller asked for.
    The scratch object is deleted whenever the first write created it.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    client = file_io._s3()
    created = False
    try:
        for round_ in (1, 2):
            try:
                client.put_object(
                    Bucket=bucket, Key=probe_key, Body=b"probe-%d" % round_, IfNoneMatch="*"
                )
                created = True
            except ClientError as exc:
                status, code = status_code(exc)
                if round_ == 2 and status == 412:
                    return None
                if status == 501 or code in UNSUPPORTED_CODES:
                    return f"does not implement If-None-Match ({code or status})"
                file_io._raise(exc, path=path, operation="write_if_absent")
            except BotoCoreError as exc:
                file_io._raise(exc, path=path, operation="write_if_absent")
        return "ignores If-None-Match (a second create of a scratch key succeeded)"
    finally:
        if created:
            _delete_quietly(file_io, bucket=bucket, key=probe_key)


def _delete_quietly(file_io: S3FileIO, *, bucket: str, key: str) -> None:
    """Delete ``s3://bucket/key``, logging (not raising) a failure: orphan clean can finish it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        file_io._s3().delete_object(Bucket=bucket, Key=key)
    except (ClientError, BotoCoreError):
        logger.warning("could not delete s3://%s/%s", bucket, key, exc_info=True)
