"""Command-line entry of the daemon: argument parsing, logging set-up, exit codes.

Exit codes: 0 clean shutdown (or a valid config with ``--check-config``);
1 unexpected error; 2 invalid configuration or usage.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from snaplake.daemon.config import load_config
from snaplake.daemon.config_describe import describe_config
from snaplake.daemon.memory import prepare_process
from snaplake.errors import InvalidOptionError
from snaplake.logging_setup import configure_logging as shared_configure_logging

__all__ = ["configure_logging", "main", "run"]

logger = logging.getLogger(__name__)

_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s [%(threadName)s] %(message)s"


def configure_logging(level: str) -> None:
    """Send log records at ``level`` and above to stderr, with UTC timestamps.

    Credentials never reach the log: the AWS SDK's loggers stay at INFO or
    above (:func:`snaplake.logging_setup.configure_logging`, shared with the CLI).

    Args:
        level: ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR`` or ``CRITICAL``.
    """
    shared_configure_logging(level, fmt=_FORMAT, datefmt="%Y-%m-%dT%H:%M:%S", utc=True)
    # apscheduler's per-run INFO lines would drown the daemon's own.
    logging.getLogger("apscheduler").setLevel(max(logging.WARNING, logging.getLogger().level))


def run(config_path: str, *, check_only: bool = False, log_level: str | None = None) -> int:
    """Validate the configuration and run the daemon until SIGTERM/SIGINT.

    This is what the ``snaplake daemon`` CLI command calls::

        from snaplake.daemon import run

        sys.exit(run(config, check_only=check_config, log_level=level))

    Args:
        config_path: Path of the TOML file.
        check_only: Validate, print the effective settings to stdout, then
            every configured table found now with the options it is maintained
            with, and the configured names that match nothing; and return.
        log_level: Overrides the file's ``log_level``.

    Running changes the process: Arrow's default memory pool becomes the
    system allocator and pandas (and polars, unless ``daemon.polars``) can
    no longer be imported (see :func:`snaplake.daemon.memory.prepare_process`).

    Returns:
        The exit code: 0 after a clean shutdown or a valid check, 2 for an
        invalid configuration (the key and the reason go to stderr).
    """
    try:
        config = load_config(config_path)
    except FileNotFoundError:
        sys.stderr.write(f"snaplake daemon: no configuration file at {config_path}\n")
        return 2
    except InvalidOptionError as exc:
        sys.stderr.write(f"snaplake daemon: invalid configuration: {exc}\n")
        return 2
    if check_only:
        from snaplake.daemon.discovery import describe_tables  # pyarrow only when asked

        sys.stdout.write(describe_config(config))
        sys.stdout.write(describe_tables(config))
        return 0
    configure_logging((log_level or config.log_level).upper())
    # Before pyarrow is loaded (the scheduler imports it): allocator and lean imports.
    prepare_process(polars=config.daemon.polars, pandas=config.daemon.compact_engine == "spark")
    from snaplake.daemon.scheduler import MaintenanceDaemon  # apscheduler only when running

    try:
        daemon = MaintenanceDaemon(config)
        return daemon.run()
    except OSError as exc:
        logger.critical("snaplake daemon could not start: %s", exc)
        return 1


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (without the program name) and call :func:`run`.

    Options: ``--config PATH`` (default ``$SNAPLAKE_DAEMON_CONFIG`` or
    ``snaplake.toml``), ``--check-config``, ``--log-level LEVEL`` (default
    ``$SNAPLAKE_LOG_LEVEL`` or the file's ``log_level``).

    Returns:
        The process exit code.
    """
    parser = argparse.ArgumentParser(
        prog="snaplake daemon",
        description="Maintain Paimon tables (manifest merge, compaction, expiry, orphan clean) "
        "and serve Prometheus metrics.",
    )
    parser.add_argument(
        "--config",
        default=os.environ.get("SNAPLAKE_DAEMON_CONFIG", "snaplake.toml"),
        help="TOML configuration file (default: $SNAPLAKE_DAEMON_CONFIG or snaplake.toml)",
    )
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="validate the file, print the effective settings and exit",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("SNAPLAKE_LOG_LEVEL"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        type=str.upper,
        help="override the file's log_level",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    return run(args.config, check_only=args.check_config, log_level=args.log_level)
