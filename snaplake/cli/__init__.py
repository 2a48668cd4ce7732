"""The ``snaplake`` command: inspect, write, read and maintain Paimon tables.

Global options come before the command::

    snaplake --warehouse /data/wh [--option s3.endpoint=...] [--output text|json]
             [--log-level warning] COMMAND ...

Exit codes (every command):

- 0: success;
- 1: unexpected error (one line on stderr; the traceback with ``--log-level debug``);
- 2: usage error (bad option, argument, name or filter; no warehouse);
- 3: commit conflict or commit retries exhausted (``CommitConflictError``,
  ``CommitRetriesExhaustedError``): nothing was committed;
- 4: table, database, snapshot or tag not found;
- 5: ``check`` found a data file that contradicts its manifest entry.

The library never configures logging; this module does, from ``--log-level``
or ``SNAPLAKE_LOG_LEVEL``.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import click

from snaplake.cli.context import CliContext
from snaplake.cli.hints import cli_message
from snaplake.cli.output import JsonOutput, TextOutput
from snaplake.cli.parsing import parse_key_values
from snaplake.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    ConsumerBusyError,
    DatabaseNotFoundError,
    InvalidNameError,
    SchemaConflictError,
    SnaplakeError,
    SnapshotNotFoundError,
    TableNotFoundError,
    TagNotFoundError,
)
from snaplake.logging_setup import configure_logging

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_ERROR",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "cli",
    "exit_code_for",
    "main",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONFLICT = 3
EXIT_NOT_FOUND = 4

_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def exit_code_for(exc: BaseException) -> int:
    """Map an exception raised by a command to the process exit code."""
    if isinstance(exc, InvalidNameError):  # a table, tag or consumer name given as an argument
        return EXIT_USAGE
    if isinstance(
        exc,
        CommitConflictError | CommitRetriesExhaustedError | SchemaConflictError | ConsumerBusyError,
    ):
        return EXIT_CONFLICT
    if isinstance(
        exc, TableNotFoundError | SnapshotNotFoundError | DatabaseNotFoundError | TagNotFoundError
    ):
        return EXIT_NOT_FOUND
    return EXIT_ERROR


def _error_line(exc: BaseException, *, table: str | None = None) -> str:
    message = cli_message(exc, table=table) or " ".join(str(exc).split())
    if isinstance(exc, SnaplakeError) and message:
        return f"error: {message}"
    name = type(exc).__name__
    return f"error: {name}: {message}" if message else f"error: {name}"


class _SnaplakeGroup(click.Group):
    """A click group that turns library errors into one stderr line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            raise  # stdout closed (``| head``): click exits 1 quietly
        except Exception as exc:  # noqa: BLE001 - CLI boundary: one line + exit code
            state = ctx.find_object(CliContext)
            if state is not None and state.debug:
                traceback.print_exception(exc, file=sys.stderr)
            table = state.table_identifier if state is not None else None
            click.echo(_error_line(exc, table=table), err=True)
            raise click.exceptions.Exit(exit_code_for(exc)) from None


def _configure_logging(level: str) -> None:
    configure_logging(level, fmt=_LOG_FORMAT)  # shared with the daemon: never logs credentials


@click.group(cls=_SnaplakeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--warehouse",
    envvar="SNAPLAKE_WAREHOUSE",
    default=None,
    metavar="PATH|URI",
    help="Warehouse root: a local path, file://, s3://bucket/prefix or memory:// "
    "[env SNAPLAKE_WAREHOUSE].",
)
@click.option(
    "--option",
    "catalog_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Catalog option, e.g. s3.endpoint=http://localhost:9000 (repeatable; never printed).",
)
@click.option(
    "--output",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json prints one JSON document on stdout.",
)
@click.option(
    "--log-level",
    envvar="SNAPLAKE_LOG_LEVEL",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default=None,
    help="Log to stderr at this level (default warning); debug also prints tracebacks "
    "[env SNAPLAKE_LOG_LEVEL].",
)
@click.version_option(package_name="snaplake", prog_name="snaplake")
@click.pass_context
def cli(
    ctx: click.Context,
    *,
    warehouse: str | None,
    catalog_options: tuple[str, ...],
    output_format: str,
    log_level: str | None,
) -> None:
    """Inspect, write, read and maintain Apache Paimon tables.

    Tables are named DB.TABLE inside the warehouse. Exit codes: 0 ok,
    1 unexpected error or a refused change, 2 usage error, 3 commit or
    schema conflict or retries exhausted, 4 table/database/snapshot/tag not
    found, 5 check found a data file contradicting its manifest entry.
    """
    level = (log_level or "warning").lower()
    _configure_logging(level)
    ctx.obj = CliContext(
        warehouse=warehouse,
        catalog_options=parse_key_values(catalog_options, what="--option"),
        output=(
            JsonOutput() if output_format == "json" else TextOutput(interactive=sys.stdout.isatty())
        ),
        debug=level == "debug",
        log_level=log_level.lower() if log_level else None,
    )


def _register() -> None:
    from snaplake.cli import changes, check, delete, lifecycle, maintenance, schema, tables

    for command in (
        tables.databases,
        tables.tables,
        tables.create_table,
        tables.write,
        tables.read,
        delete.delete,
        tables.snapshots,
        tables.files,
        *schema.COMMANDS,
        *maintenance.COMMANDS,
        check.check,
        *lifecycle.COMMANDS,
        *changes.COMMANDS,
    ):
        cli.add_command(command)


_register()


def main() -> None:
    """Run the ``snaplake`` console script (the ``[project.scripts]`` entry point)."""
    cli(prog_name="snaplake")
