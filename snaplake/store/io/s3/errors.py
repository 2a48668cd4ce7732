"""Error translation of S3FileIO: botocore and pyarrow failures -> typed snaplake errors.

One table of S3 error codes decides what a failure means (missing key,
missing bucket, refused or expired credentials, access denied, unreachable
endpoint) for both clients snaplake uses: boto3 (metadata, commits) and
pyarrow's S3 filesystem (Parquet data files). pyarrow reports S3 errors as
``OSError`` messages naming the AWS error (``AWS Error ACCESS_DENIED during
HeadObject operation``); :func:`boto_error_from_arrow` turns those into the
botocore exception the same request would have raised through boto3, so the
messages users see do not depend on which client hit the problem.

With :mod:`~snaplake.store.io.s3.file_io`, :mod:`~snaplake.store.io.s3.client`,
:mod:`~snaplake.store.io.s3.streams` and :mod:`~snaplake.store.io.s3.conditional`,
the only modules importing botocore (the import contract in
``pyproject.toml`` names them); other S3 helpers get botocore's exception
classes from :func:`boto_exception_types`.

Source: AWS S3 API reference, "Error responses" (error codes); Arrow C++
``arrow/filesystem/s3_internal.h`` (``ErrorToStatus`` message format).
"""

from __future__ import annotations

import errno
import re
from typing import cast

from snaplake.errors import StorageAccessError, StorageError
from snaplake.store.io.s3.options import split_s3_path

__all__ = [
    "DENIED_CODES",
    "UNSUPPORTED_CODES",
    "arrow_error_path",
    "boto_error_from_arrow",
    "boto_exception_types",
    "status_code",
    "translate_boto_error",
]

# Sensitive fields some servers echo in error bodies (AWS: SignatureDoesNotMatch).
ECHOED_FIELDS = ("CanonicalRequest", "CanonicalRequestBytes", "StringToSign", "StringToSignBytes")
CREDENTIAL_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "AuthorizationHeaderMalformed"}
)
EXPIRED_CODES = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired", "RequestExpired"}
)
DENIED_CODES = frozenset({"AccessDenied", "AllAccessDisabled", "AccountProblem", "403"})
MISSING_KEY_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
UNSUPPORTED_CODES = frozenset({"NotImplemented", "501"})

# "AWS Error NO_SUCH_BUCKET during CreateMultipartUpload operation: ..." (Arrow's format).
_ARROW_AWS_ERROR = re.compile(r"AWS Error ([A-Z_]+) during (\w+) operation")
_ARROW_KEY = re.compile(r"key '([^']*)' in bucket '([^']*)'")
_ARROW_MISSING = re.compile(r"Path does not exist '([^'/]+)/([^']*)'")
_ARROW_STATUS = {"ACCESS_DENIED": 403, "NO_SUCH_BUCKET": 404, "NO_SUCH_KEY": 404}


def translate_boto_error(
    exc: BaseException, *, path: str, operation: str, endpoint: str, credential_source: str
) -> BaseException:
    """Map a botocore exception to the builtin or snaplake error to raise ``from exc``.

    Echoed signing material (``StringToSign``, ``CanonicalRequest``) is
    removed from the error response first, so it never reaches a message or log.

    Args:
        exc: What botocore raised.
        path: The ``s3://bucket/key`` being accessed.
        operation: What was being done (``"read"``, ``"write_if_absent"``...).
        endpoint: The server, for messages.
        credential_source: Where the credentials came from, for messages.

    Returns:
        ``FileNotFoundError`` for a missing key; ``StorageAccessError`` for
        refused, expired or missing credentials and denied access;
        ``StorageError`` otherwise (missing bucket, unreachable endpoint, 5xx).
    """
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    bucket, key = split_s3_path(path)
    where = f"bucket {bucket!r}, key {key!r}"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        for field in ECHOED_FIELDS:
            error.pop(field, None)
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if code == "NoSuchBucket":
            return StorageError(
                f"{operation} {path}: bucket {bucket!r} does not exist at "
                f"{endpoint}; check the warehouse URI, s3.endpoint and "
                "s3.region, or create the bucket",
                path=path,
                operation=operation,
            )
        if code in MISSING_KEY_CODES:
            return FileNotFoundError(errno.ENOENT, f"no S3 object at {path}", path)
        if code in EXPIRED_CODES:
            return StorageAccessError(
                f"{operation} {path} ({where}) refused: the credentials from "
                f"{credential_source} have expired ({code}); refresh the session "
                "token (s3.session-token, AWS_SESSION_TOKEN) or the profile's login",
                path=path,
                operation=operation,
            )
        if code in CREDENTIAL_CODES:
            return StorageAccessError(
                f"{operation} {path} ({where}) refused: the server at "
                f"{endpoint} rejected the credentials from "
                f"{credential_source} ({code}); check the access key id and secret "
                "key (s3.access-key-id/s3.secret-access-key or AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY), s3.region and the machine clock",
                path=path,
                operation=operation,
            )
        if code in DENIED_CODES or status == 403:
            return StorageAccessError(
                f"{operation} {path} ({where}) refused: access denied ({code or status}) "
                f"for the credentials from {credential_source}; check that they are "
                "valid (s3.access-key-id/s3.secret-access-key or AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY) and that their IAM policy and the bucket policy "
                f"allow {operation} on this bucket and key (S3 also answers 403 for a "
                "missing key when s3:ListBucket is not granted)",
                path=path,
                operation=operation,
            )
        message = str(error.get("Message", "")) or "no message"
        return StorageError(
            f"{operation} {path} ({where}) failed: HTTP {status} {code}: {message}",
            path=path,
            operation=operation,
        )
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return StorageAccessError(
            f"{operation} {path}: no usable AWS credentials ({type(exc).__name__}); set "
            "s3.access-key-id and s3.secret-access-key, AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials",
            path=path,
            operation=operation,
        )
    if isinstance(exc, ConnectionError):
        return StorageError(
            f"{operation} {path}: cannot reach the S3 endpoint "
            f"{endpoint} ({type(exc).__name__}); check s3.endpoint "
            "(or AWS_ENDPOINT_URL), that the server is running, and the network",
            path=path,
            operation=operation,
        )
    return StorageError(
        f"{operation} {path} ({where}) failed: {type(exc).__name__}: {exc}",
        path=path,
        operation=operation,
    )


def boto_exception_types() -> tuple[type[Exception], type[Exception]]:
    """Return botocore's ``(ClientError, BotoCoreError)``, what any boto3 call may raise.

    For the S3 helper modules that catch them without importing botocore
    themselves (:mod:`~snaplake.store.io.s3.namespace`); botocore is imported on call.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    return ClientError, BotoCoreError


def status_code(exc: BaseException) -> tuple[int, str]:
    """Return ``(HTTP status, S3 error code)`` of a botocore ``ClientError``, else ``(0, "")``."""
    from botocore.exceptions import ClientError

    if not isinstance(exc, ClientError):
        return 0, ""
    meta = exc.response.get("ResponseMetadata", {})
    return int(meta.get("HTTPStatusCode", 0)), str(exc.response.get("Error", {}).get("Code", ""))


def boto_error_from_arrow(exc: OSError, *, endpoint: str) -> BaseException | None:
    """Rebuild the botocore exception behind a pyarrow S3 ``OSError``, if it names one.

    Args:
        exc: What ``pyarrow.fs.S3FileSystem`` (or a reader over it) raised.
        endpoint: The server's URL (for a connection error).

    Returns:
        A ``ClientError`` carrying the S3 error code (``ACCESS_DENIED`` ->
        ``AccessDenied`` with status 403), an ``EndpointConnectionError`` for
        ``NETWORK_CONNECTION``, or ``None`` when the message names no AWS
        error (pyarrow's own ``FileNotFoundError`` is handled by the caller).
    """
    from botocore.exceptions import ClientError, EndpointConnectionError

    match = _ARROW_AWS_ERROR.search(str(exc))
    if match is None:
        return None
    name, operation = match.groups()
    if name == "NETWORK_CONNECTION":
        return cast("BaseException", EndpointConnectionError(endpoint_url=endpoint))
    code = "".join(part.capitalize() for part in name.split("_"))
    message = str(exc).split(" operation: ", 1)[-1]
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": _ARROW_STATUS.get(name, 0)},
    }
    return cast("BaseException", ClientError(response, operation))


def arrow_error_path(exc: OSError) -> str | None:
    """Return the ``s3://bucket/key`` a pyarrow S3 error message names, if it names one."""
    text = str(exc)
    match = _ARROW_KEY.search(text)
    if match is not None:
        return f"s3://{match.group(2)}/{match.group(1)}"
    match = _ARROW_MISSING.search(text)
    if match is not None:
        return f"s3://{match.group(1)}/{match.group(2)}"
    return None
