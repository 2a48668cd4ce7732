"""Clients of S3FileIO: the boto3 S3 client and the pyarrow S3FileSystem, from S3Settings.

This module owns how the ``s3.*`` options (parsed into
:class:`~snaplake.store.io.s3.options.S3Settings`) become a configured boto3
client, and how the pyarrow filesystem is made to match it (endpoint,
region, credentials, timeouts, retry budget, addressing style). It builds
objects only; caching them per process, and pickling, are
:class:`~snaplake.store.io.s3.file_io.S3FileIO`'s job. boto3, botocore and
``pyarrow.fs`` are imported inside functions.

Source: boto3 ``Session.client`` with botocore ``Config`` (``standard``
retry mode); ``pyarrow.fs.S3FileSystem`` (Arrow C++ S3 client, AWS SDK
standard retries); pyiceberg's ``PyArrowFileIO`` (filesystem options).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from snaplake.errors import StorageAccessError
from snaplake.store.io.s3.options import DEFAULT_MAX_ATTEMPTS, S3Settings

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["S3Clients", "create_client", "frozen_credentials", "new_arrow_filesystem"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class S3Clients:
    """Hold what :func:`create_client` made: a boto3 session, its S3 client, the credentials origin.

    Attributes:
        session: The ``boto3.session.Session`` (it refreshes temporary credentials).
        client: The boto3 S3 client.
        credential_source: Human-readable origin of the credentials, for
            error messages (never the credentials themselves).
    """

    session: Any
    client: Any
    credential_source: str


def create_client(settings: S3Settings) -> S3Clients:
    """Create a boto3 session and S3 client configured from ``settings``.

    Credentials are the options' keys when set, else the AWS default chain
    (environment, ``~/.aws``, instance metadata). The retry budget is
    ``s3.max-attempts``, else ``AWS_MAX_ATTEMPTS`` / the profile's
    ``max_attempts``, else 5 attempts in botocore's ``standard`` mode; the
    region is ``s3.region``, else the session's (``AWS_REGION``, the
    profile's ``region``), else ``us-east-1``. Every chain setting is read
    through the botocore session (boto3's ``Session`` has no
    ``get_config_variable`` since 1.44), so ``AWS_PROFILE``,
    ``AWS_CONFIG_FILE`` and ``AWS_SHARED_CREDENTIALS_FILE`` apply.

    Args:
        settings: Parsed ``s3.*`` options.

    Returns:
        The session, the client and the credentials' origin.

    Storage:
        None; resolving credentials from the default chain may read files
        or query instance metadata.
    """
    import boto3
    import botocore.session
    from botocore.config import Config

    s = settings
    # boto3's Session stopped forwarding get_config_variable (1.44); the botocore session
    # it wraps is the public way to read the chain's settings (env, config file, profile).
    core = botocore.session.get_session()
    session = boto3.session.Session(botocore_session=core)
    credentials: dict[str, str] = {}
    if s.access_key_id:
        credentials["aws_access_key_id"] = s.access_key_id
        credentials["aws_secret_access_key"] = s.secret_access_key
        if s.session_token:
            credentials["aws_session_token"] = s.session_token
        source = "catalog options s3.access-key-id/s3.secret-access-key"
    else:
        found = session.get_credentials()
        method = getattr(found, "method", None) if found is not None else None
        source = (
            f"the AWS credential chain ({method})"
            if method
            else "the AWS credential chain (none found)"
        )
    max_attempts = s.max_attempts
    if max_attempts is None:
        configured = core.get_config_variable("max_attempts")
        max_attempts = int(configured) if configured is not None else DEFAULT_MAX_ATTEMPTS
    s3_config: dict[str, str] = {}
    if s.path_style is not None:
        s3_config["addressing_style"] = "path" if s.path_style else "virtual"
    config = Config(
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=s.connect_timeout_s,
        read_timeout=s.read_timeout_s,
        max_pool_connections=s.max_pool_connections,
        s3=s3_config or None,
        user_agent_extra="snaplake",
    )
    client = session.client(
        "s3",
        endpoint_url=s.endpoint or None,
        region_name=s.region or session.region_name or "us-east-1",
        config=config,
        **credentials,
    )
    logger.debug(
        "created S3 client: endpoint=%s region=%s max_attempts=%d credentials from %s",
        client.meta.endpoint_url,
        client.meta.region_name,
        max_attempts,
        source,
    )
    return S3Clients(session=session, client=client, credential_source=source)


def frozen_credentials(settings: S3Settings, session: Any) -> tuple[str, str, str]:
    """Return ``(access key id, secret key, token)`` as boto3 resolves them now.

    Args:
        settings: Parsed ``s3.*`` options; their keys win when set.
        session: The boto3 session of :func:`create_client` (refreshes
            temporary credentials), or ``None``.

    Returns:
        The three strings; the token is ``""`` for long-term keys.

    Raises:
        StorageAccessError: no credentials can be found.
    """
    s = settings
    if s.access_key_id:
        return s.access_key_id, s.secret_access_key, s.session_token
    found = session.get_credentials() if session is not None else None
    if found is None:
        raise StorageAccessError(
            "no AWS credentials found; set s3.access-key-id and s3.secret-access-key, "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials",
            path="s3://",
            operation="credentials",
        )
    frozen = found.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key, frozen.token or ""


def new_arrow_filesystem(
    settings: S3Settings, client: Any, credentials: tuple[str, str, str]
) -> pafs.S3FileSystem:
    """Create a ``pyarrow.fs.S3FileSystem`` that matches ``client``.

    Endpoint (as ``endpoint_override`` plus ``scheme``, unless it is AWS),
    region, timeouts, retry budget and addressing style are the client's.

    Args:
        settings: Parsed ``s3.*`` options.
        client: The boto3 client of :func:`create_client`.
        credentials: ``(access key id, secret key, token)`` from
            :func:`frozen_credentials`.

    Returns:
        A filesystem taking ``bucket/key`` paths.

    Raises:
        AttributeError: this pyarrow build has no S3 support.

    Storage:
        None; the filesystem connects lazily.
    """
    import pyarrow.fs as pafs

    s = settings
    kwargs: dict[str, Any] = {
        "region": client.meta.region_name,
        "connect_timeout": s.connect_timeout_s,
        "request_timeout": s.read_timeout_s,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(
            max_attempts=client.meta.config.retries["total_max_attempts"]
        ),
        "access_key": credentials[0],
        "secret_key": credentials[1],
    }
    if credentials[2]:
        kwargs["session_token"] = credentials[2]
    endpoint = urlsplit(str(client.meta.endpoint_url))
    if not (endpoint.hostname or "").endswith("amazonaws.com"):
        kwargs["endpoint_override"] = endpoint.netloc
        kwargs["scheme"] = endpoint.scheme
        kwargs["force_virtual_addressing"] = s.path_style is False
    return pafs.S3FileSystem(**kwargs)
