"""Logging set-up of the two edges that configure logging: the ``snaplake`` CLI and the daemon.

The library never configures logging (DESIGN.md §3.9). ``snaplake --log-level``
and the daemon's ``log_level`` / ``--log-level`` both go through
:func:`configure_logging`, which keeps one promise whatever the level: **no
credential reaches a log line**. At DEBUG, botocore logs every request's
canonical form and headers (``Authorization: AWS4-HMAC-SHA256
Credential=<access key id>/...``, ``x-amz-security-token: <session token>``),
and urllib3 and s3transfer log request details too. Their loggers
(:data:`CREDENTIAL_LOGGERS`) therefore stay at INFO or above, and the handler
drops any record below INFO from them should something lower their level
later.

Imports nothing but the standard library.
"""

from __future__ import annotations

import logging
import sys
import time

__all__ = ["CREDENTIAL_LOGGERS", "configure_logging"]

#: Loggers (and their children) that log request headers or signing input below INFO.
CREDENTIAL_LOGGERS: tuple[str, ...] = ("botocore", "boto3", "s3transfer", "urllib3")


def _from_credential_logger(name: str) -> bool:
    return any(name == n or name.startswith(n + ".") for n in CREDENTIAL_LOGGERS)


class _NoCredentialLoggerDebug(logging.Filter):
    """Drop records below INFO from :data:`CREDENTIAL_LOGGERS` (they may hold credentials)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO or not _from_credential_logger(record.name)


def configure_logging(
    level: str, *, fmt: str, datefmt: str | None = None, utc: bool = False
) -> None:
    """Send log records at ``level`` and above to stderr, never below INFO from the AWS SDK.

    Replaces the root logger's handlers with one stderr handler (a second
    call, e.g. the CLI's ``daemon`` command after the CLI's own set-up,
    leaves one handler).

    Args:
        level: ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR`` or ``CRITICAL`` (any case).
        fmt: ``logging.Formatter`` format string.
        datefmt: ``logging.Formatter`` date format (``None``: its default).
        utc: Timestamps in UTC instead of local time.

    Raises:
        ValueError: ``level`` is not a logging level name.
    """
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter(fmt, datefmt=datefmt)
    if utc:
        formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler.addFilter(_NoCredentialLoggerDebug())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in CREDENTIAL_LOGGERS:  # also skips formatting their DEBUG records
        logging.getLogger(name).setLevel(max(logging.INFO, root.level))
