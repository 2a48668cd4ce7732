"""Per-invocation state of the ``snaplake`` command: warehouse, catalog, output.

The group callback builds one :class:`CliContext`; commands receive it with
:data:`pass_cli`. The catalog is opened on first use, so ``snaplake daemon``
and ``--help`` never need a warehouse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import click

from snaplake.catalog import FileSystemCatalog, parse_identifier
from snaplake.cli.output import Output, TextOutput
from snaplake.table import Table

__all__ = ["CliContext", "TableIdentifier", "pass_cli"]


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
    """

    warehouse: str | None
    catalog_options: Mapping[str, str]
    output: Output
    debug: bool = False
    log_level: str | None = None
    _catalog: FileSystemCatalog | None = field(default=None, repr=False)

    @property
    def output_is_text(self) -> bool:
        """True for ``--output text`` (people), False for JSON (scripts)."""
        return isinstance(self.output, TextOutput)

    def catalog(self) -> FileSystemCatalog:
        """Open (once) the catalog of the warehouse.

        Raises:
            click.UsageError: no warehouse was given (exit code 2).
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
        return self._catalog

    def table(self, identifier: str) -> Table:
        """Open table ``db.table``.

        Raises:
            TableNotFoundError: no such table (exit code 4).
        """
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
