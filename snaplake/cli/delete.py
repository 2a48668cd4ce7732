"""``snaplake delete``: delete the rows of a table that a filter matches.

Source: Paimon Spark ``DELETE FROM`` (``DeleteFromPaimonTableCommand``).
"""

from __future__ import annotations

import click

from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.parsing import parse_filters

__all__ = ["delete"]


@click.command()
@click.argument("table", type=TableIdentifier())
@click.option(
    "--filter",
    "filters",
    multiple=True,
    required=True,
    help="Rows to delete, e.g. \"month = 1 and carrier = 'AA'\" (repeatable; ANDed).",
)
@click.option(
    "--dry-run", is_flag=True, help="Only count the rows that would go and name their files."
)
@pass_cli
def delete(cli: CliContext, *, table: str, filters: tuple[str, ...], dry_run: bool) -> None:
    """Delete the rows of TABLE that --filter matches (one snapshot).

    Append tables need deletion-vectors.enabled = true: the rows are marked in
    deletion vectors (an OVERWRITE snapshot); primary-key tables get -D rows for
    the matching keys. --dry-run reads the candidate files and writes nothing.

    Exit codes: 0 ok; 1 a table that cannot delete by filter (an append table
    without deletion vectors); 2 bad filter or column; 3 concurrent commits kept
    conflicting (nothing committed); 4 no such table.
    """
    target = cli.table(table)
    predicates = parse_filters(filters, schema=target.arrow_schema)
    if not predicates:
        raise click.BadParameter("give a non-empty --filter", param_hint="--filter")
    if dry_run:
        preview = target.file_store().preview_delete(predicates)
        cli.output.record(
            {"table": table, "rows": preview.rows, "files": list(preview.files),
             "snapshot_id": preview.snapshot_id, "dry_run": True},
            title="would delete",
        )  # fmt: skip
        return
    with cli.output.status(f"deleting from {table}"):
        result = target.delete(predicates)
    cli.output.record(
        {"table": table, "snapshot_id": result.snapshot_id, "kind": result.kind.value,
         "attempts": result.attempts},
        title="deleted",
    )  # fmt: skip
