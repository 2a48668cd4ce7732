"""Options of S3FileIO: the ``s3.*`` keys, their defaults and parsing, and S3 path helpers.

The option table is in :mod:`snaplake.store.io.s3.file_io`'s docstring. Nothing
here talks to a server or imports boto3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from snaplake.errors import InvalidOptionError

__all__ = [
    "ALIASES",
    "DEFAULTS",
    "DEFAULT_MAX_ATTEMPTS",
    "MIB",
    "SECRET_KEYS",
    "S3Settings",
    "dir_prefix",
    "parse_bool",
    "parse_int",
    "split_s3_path",
]

MIB = 1024 * 1024

DEFAULTS: dict[str, str] = {
    "s3.endpoint": "",
    "s3.region": "",
    "s3.access-key-id": "",
    "s3.secret-access-key": "",
    "s3.session-token": "",
    "s3.path-style-access": "",
    "s3.max-attempts": "",
    "s3.connect-timeout-ms": "10000",
    "s3.read-timeout-ms": "60000",
    "s3.max-pool-connections": "32",
    "s3.multipart.part-size-bytes": str(8 * MIB),
    "s3.conflict.max-retries": "10",
    "s3.allow-unsafe-create": "false",
}
ALIASES = {
    "s3.access-key": "s3.access-key-id",
    "s3.secret-key": "s3.secret-access-key",
    "s3.path.style.access": "s3.path-style-access",
}
SECRET_KEYS = frozenset({"s3.secret-access-key", "s3.session-token"})
DEFAULT_MAX_ATTEMPTS = 5  # botocore standard-mode attempts, first try included


def parse_bool(key: str, value: str) -> bool:
    """Parse ``true``/``false`` (also ``1``/``0``, ``yes``/``no``) of option ``key``.

    Raises:
        InvalidOptionError: anything else.
    """
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise InvalidOptionError(
        f"option {key} must be true or false, got {value!r}", key=key, value=value
    )


def parse_int(key: str, value: str, *, minimum: int) -> int:
    """Parse an integer ``>= minimum`` of option ``key``.

    Raises:
        InvalidOptionError: not an integer, or below ``minimum``.
    """
    try:
        parsed = int(value.strip())
    except ValueError:
        parsed = minimum - 1
    if parsed < minimum:
        raise InvalidOptionError(
            f"option {key} must be an integer >= {minimum}, got {value!r}", key=key, value=value
        )
    return parsed


@dataclass(frozen=True, slots=True, kw_only=True)
class S3Settings:
    """Parsed ``s3.*`` options; empty strings mean "not set, ask the AWS chain".

    ``secret_access_key`` and ``session_token`` are left out of ``repr`` (a
    settings object in a log line or a traceback never shows them).
    """

    endpoint: str
    region: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(repr=False)
    path_style: bool | None
    max_attempts: int | None
    connect_timeout_s: float
    read_timeout_s: float
    max_pool_connections: int
    part_size_bytes: int
    conflict_max_retries: int
    allow_unsafe_create: bool

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> S3Settings:
        """Parse canonical ``s3.*`` keys (aliases already resolved) over :data:`DEFAULTS`.

        Raises:
            InvalidOptionError: a malformed endpoint or number, or only one
                of the access key id and secret key.
        """
        opts = dict(DEFAULTS)
        opts.update(raw)
        endpoint = opts["s3.endpoint"].strip().rstrip("/")
        if endpoint and "://" not in endpoint:
            endpoint = "https://" + endpoint
        if endpoint and urlsplit(endpoint).scheme not in ("http", "https"):
            raise InvalidOptionError(
                f"option s3.endpoint must be an http:// or https:// URL, got {endpoint!r}",
                key="s3.endpoint",
                value=endpoint,
            )
        if bool(opts["s3.access-key-id"]) != bool(opts["s3.secret-access-key"]):
            raise InvalidOptionError(
                "options s3.access-key-id and s3.secret-access-key must be set together",
                key="s3.access-key-id" if not opts["s3.access-key-id"] else "s3.secret-access-key",
            )
        path_style = opts["s3.path-style-access"]
        max_attempts = opts["s3.max-attempts"]
        return cls(
            endpoint=endpoint,
            region=opts["s3.region"].strip(),
            access_key_id=opts["s3.access-key-id"],
            secret_access_key=opts["s3.secret-access-key"],
            session_token=opts["s3.session-token"],
            path_style=parse_bool("s3.path-style-access", path_style) if path_style else None,
            max_attempts=(
                parse_int("s3.max-attempts", max_attempts, minimum=1) if max_attempts else None
            ),
            connect_timeout_s=parse_int(
                "s3.connect-timeout-ms", opts["s3.connect-timeout-ms"], minimum=1
            )
            / 1000,
            read_timeout_s=parse_int("s3.read-timeout-ms", opts["s3.read-timeout-ms"], minimum=1)
            / 1000,
            max_pool_connections=parse_int(
                "s3.max-pool-connections", opts["s3.max-pool-connections"], minimum=1
            ),
            part_size_bytes=parse_int(
                "s3.multipart.part-size-bytes",
                opts["s3.multipart.part-size-bytes"],
                minimum=5 * MIB,
            ),
            conflict_max_retries=parse_int(
                "s3.conflict.max-retries", opts["s3.conflict.max-retries"], minimum=0
            ),
            allow_unsafe_create=parse_bool(
                "s3.allow-unsafe-create", opts["s3.allow-unsafe-create"]
            ),
        )


def split_s3_path(path: str) -> tuple[str, str]:
    """Split ``s3://bucket/key`` (or ``s3a://``) into ``(bucket, key)``."""
    scheme, sep, rest = path.partition("://")
    if not sep or scheme.lower() not in ("s3", "s3a"):
        raise ValueError(f"not an S3 path: {path!r}; expected s3://bucket/key")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"S3 path {path!r} has no bucket")
    return bucket, key


def dir_prefix(key: str) -> str:
    """Return the listing prefix of directory ``key`` (``""`` for the bucket root)."""
    key = key.strip("/")
    return key + "/" if key else ""
