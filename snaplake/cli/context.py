"""Per-invocation state of the ``snaplake`` command: warehouse, catalog, output.

The group callback builds one :class:`CliContext`; commands receive it with
:data:`pass_cli`. The catalog is opened on first use, so ``snaplake daemon``
and ``--help`` never need a warehouse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import click
import pyarrow as pa

from snaplake.catalog import FileSystemCatalog, parse_identifier
from snaplake.cli.output import Column, Output, TextOutput
from snaplake.table import Table

TEXT_ROW_CAP = 100
"""Rows a command shows as text without ``--limit``."""

__all__ = ["CliContext", "TableIdentifier", "WarehouseNotFoundError", "pass_cli"]

EXIT_NOT_FOUND = 4  # snaplake.cli.EXIT_NOT_FOUND (that module imports this one)


class WarehouseNotFoundError(click.ClickException):
    """The ``--warehouse`` path does not exist (exit code 4, like a missing table).

    A read command on a mistyped path would otherwise report an empty
    warehouse; ``create-table`` is the one command that creates it.
    """

    exit_code = EXIT_NOT_FOUND

    def __init__(self, warehouse: str) -> None:
        super().__init__(
            f"warehouse {warehouse} does not exist; check --warehouse "
            "(snaplake create-table DB.TABLE --from-parquet FILE creates one)"
        )
        self.warehouse = warehouse

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``error: <message>`` on stderr, like the group's other errors."""
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@dataclass(kw_only=True)
class CliContext:
    """What every command needs: where the tables live and how to show results.

    Attributes:
        warehouse: ``--warehouse`` / ``SNAPLAKE_WAREHOUSE`` (``None`` = not given).
        catalog_options: ``--option`` pairs (may hold secrets: never printed).
        output: Text or JSON rendering.
        debug: ``--log-level debug``: errors also print their traceback.
        log_level: The level given on the command line or in the environment,
            ``None`` when neither was set.
        table_identifier: The table the command opened last (for hints).
    """

    warehouse: str | None
    catalog_options: Mapping[str, str]
    output: Output
    debug: bool = False
    log_level: str | None = None
    table_identifier: str | None = None
    _catalog: FileSystemCatalog | None = field(default=None, repr=False)
    _warehouse_checked: bool = field(default=False, repr=False)

    @property
    def output_is_text(self) -> bool:
        """True for ``--output text`` (people), False for JSON (scripts)."""
        return isinstance(self.output, TextOutput)

    def row_cap(self, limit: int | None) -> int | None:
        """Rows to read for showing: ``limit``, else one more than :data:`TEXT_ROW_CAP` for text."""
        if limit is not None:
            return limit
        return TEXT_ROW_CAP + 1 if self.output_is_text else None

    def show_rows(self, data: pa.Table, *, limit: int | None, empty: str, more: str) -> None:
        """Print Arrow rows, at most :data:`TEXT_ROW_CAP` as text without ``limit``.

        Args:
            data: The rows, read with :meth:`row_cap`.
            limit: The user's ``--limit`` (``None``: none).
            empty: What text output says when there are no rows.
            more: How to get every row, for the note under a capped text table.
        """
        note = None
        if limit is None and self.output_is_text and data.num_rows > TEXT_ROW_CAP:
            data = data.slice(0, TEXT_ROW_CAP)
            note = f"(first {TEXT_ROW_CAP} rows; {more})"
        numeric = {
            f.name
            for f in data.schema
            if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
        }
        self.output.rows(
            data.to_pylist(),
            columns=[Column(key=n, header=n, numeric=n in numeric) for n in data.column_names],
            empty=empty,
            note=note,
        )

    def catalog(self, *, create: bool = False) -> FileSystemCatalog:
        """Open (once) the catalog of the warehouse.

        Args:
            create: The command may create the warehouse (``create-table``);
                every other command needs it to exist.

        Raises:
            click.UsageError: no warehouse was given (exit code 2).
            WarehouseNotFoundError: the warehouse does not exist and ``create``
                is false (exit code 4).
        """
        if self._catalog is None:
            if not self.warehouse:
                raise click.UsageError(
                    "no warehouse: pass --warehouse PATH|s3://bucket/prefix "
                    "or set SNAPLAKE_WAREHOUSE"
                )
            try:
                self._catalog = FileSystemCatalog(self.warehouse, options=self.catalog_options)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--warehouse") from None
        if not create and not self._warehouse_checked:
            if not self._catalog.file_io.exists(self._catalog.warehouse):
                raise WarehouseNotFoundError(self._catalog.warehouse)
            self._warehouse_checked = True
        return self._catalog

    def table(self, identifier: str) -> Table:
        """Open table ``db.table`` (remembered for the hints of error messages).

        Raises:
            WarehouseNotFoundError: the warehouse does not exist (exit code 4).
            TableNotFoundError: no such table (exit code 4).
        """
        self.table_identifier = identifier
        return self.catalog().get_table(identifier)


pass_cli = click.make_pass_decorator(CliContext)
"""Decorator passing the :class:`CliContext` as a command's first argument."""


class TableIdentifier(click.ParamType[str]):
    """A ``database.table`` argument, checked before anything is opened."""

    name = "DB.TABLE"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """Return ``value`` if it is a valid ``database.table`` identifier."""
        try:
            parse_identifier(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return value
