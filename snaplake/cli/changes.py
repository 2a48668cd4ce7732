"""``snaplake changes``: the change rows of a snapshot range (``Table.changes``).

Exit codes come from the group (see :mod:`snaplake.cli`): 2 for a bad mode,
range, column or filter; 4 when the table is missing or the range reaches a
snapshot that was never written or has expired; 1 for ``--mode changelog``
on a table without a changelog producer.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.parquet as pq

from snaplake.change_plan import MODES
from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.parsing import parse_columns, parse_filters

__all__ = ["COMMANDS", "changes"]

"""Text output without ``--limit`` shows at most this many rows."""


@click.command()
@click.argument("table", type=TableIdentifier())
@click.option("--from", "start", type=int, required=True, help="First snapshot (included).")
@click.option(
    "--to", "end", type=int, default=None, help="Last snapshot (included; default latest)."
)
@click.option(
    "--mode", type=click.Choice(MODES), default="auto", show_default=True,
    help="auto (changelog if the table has a producer, else delta), delta, changelog or diff.",
)  # fmt: skip
@click.option("--columns", default=None, help="Columns to read: a,b (default all).")
@click.option(
    "--filter", "filters", multiple=True,
    help="Row filter, e.g. \"id > 5\" (repeatable; ANDed).",
)  # fmt: skip
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Print at most N rows.")
@click.option(
    "--format", "row_format", type=click.Choice(["table", "jsonl", "csv", "parquet"]),
    default=None,
    help="table (as --output), jsonl or csv streamed to stdout, or parquet (needs --to-file).",
)  # fmt: skip
@click.option(
    "--to-file", "to_file", type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None, help="With --format parquet: write the rows to this Parquet file.",
)  # fmt: skip
@pass_cli
def changes(
    cli: CliContext,
    *,
    table: str,
    start: int,
    end: int | None,
    mode: str,
    columns: str | None,
    filters: tuple[str, ...],
    limit: int | None,
    row_format: str | None,
    to_file: Path | None,
) -> None:
    """Print the changes of TABLE's snapshots FROM..TO (both included).

    Each row carries _row_kind (+I -U +U -D) and _snapshot_id. Paimon's
    incremental-between = 'a,b' is --from a+1 --to b.

    Exit codes: 0 ok; 1 --mode changelog on a table without a changelog
    producer; 2 bad mode, range, column or filter; 4 no such table, or the
    range reaches a snapshot never written or expired.
    """
    if (row_format == "parquet") != (to_file is not None):
        raise click.UsageError("--format parquet and --to-file go together")
    if end is not None and end < start:
        raise click.BadParameter(f"--to {end} is before --from {start}", param_hint="--to")
    source = cli.table(table)
    schema = source.arrow_schema
    reader = source.changes(
        start, end, mode=mode, columns=parse_columns(columns, schema=schema),
        filter=parse_filters(filters, schema=schema) or None,
    )  # fmt: skip
    batches = _limited(reader, limit)
    if row_format == "parquet":
        assert to_file is not None
        with pq.ParquetWriter(to_file, reader.schema) as writer:
            rows = 0
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        cli.output.record({"table": table, "rows": rows, "path": str(to_file)})
        return
    if row_format in ("jsonl", "csv"):
        out = csv.writer(sys.stdout) if row_format == "csv" else None
        if out is not None:
            out.writerow(reader.schema.names)
        for batch in batches:
            for row in batch.to_pylist():
                if out is not None:
                    out.writerow(row.values())
                else:
                    click.echo(json.dumps(row, default=str))
        return
    data = pa.Table.from_batches(list(_limited(reader, cli.row_cap(limit))), schema=reader.schema)
    cli.show_rows(
        data,
        limit=limit,
        empty="(no changes)",
        more="pass --limit N, --format jsonl or --output json",
    )


def _limited(reader: pa.RecordBatchReader, limit: int | None) -> Iterator[pa.RecordBatch]:
    """``reader``'s batches, cut after ``limit`` rows (``None``: all)."""
    left = limit
    for batch in reader:
        if left is None:
            yield batch
            continue
        if left <= 0:
            return
        yield batch.slice(0, left)
        left -= min(left, batch.num_rows)


COMMANDS = (changes,)
