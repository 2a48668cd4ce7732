"""Table commands: databases, tables, create-table, write, read, snapshots, files.

Each command parses its arguments, makes one or two library calls and
renders the result; exit codes come from the group (see :mod:`snaplake.cli`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.parquet as pq

from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.hints import with_tag_hint
from snaplake.cli.history import snapshot_rows
from snaplake.cli.inputs import InputFileError, input_batches, is_csv, read_parquet_schema
from snaplake.cli.output import Column, format_size
from snaplake.cli.parsing import parse_columns, parse_filters, parse_key_values
from snaplake.cli.schema import schema_record
from snaplake.errors import SchemaMismatchError, SnapshotNotFoundError, UnsupportedTypeError
from snaplake.store.format.data_file import FileSource
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.tags import TagManager
from snaplake.table import Table

__all__ = [
    "create_table",
    "databases",
    "files",
    "read",
    "snapshots",
    "tables",
    "write",
]

logger = logging.getLogger(__name__)


@click.command()
@pass_cli
def databases(cli: CliContext) -> None:
    """List the databases of the warehouse.

    Exit codes: 0 ok; 1 the warehouse cannot be read; 2 no warehouse given;
    4 the warehouse does not exist.
    """
    names = cli.catalog().list_databases()
    cli.output.rows(
        [{"database": n} for n in names],
        columns=[Column(key="database", header="database")],
        empty="(no databases)",
    )


@click.command()
@click.argument("database")
@pass_cli
def tables(cli: CliContext, database: str) -> None:
    """List the tables of DATABASE.

    Exit codes: 0 ok; 4 no such warehouse or database.
    """
    names = cli.catalog().list_tables(database)
    cli.output.rows(
        [{"table": f"{database}.{n}", "name": n} for n in names],
        columns=[Column(key="table", header="table")],
        empty=f"(no tables in {database})",
    )


@click.command("create-table")
@click.argument("table", type=TableIdentifier())
@click.option(
    "--from-parquet",
    "parquet_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Take the columns (names, types, nullability) from this Parquet file's schema.",
)
@click.option("--partition-keys", default=None, help="Partition columns in path order: a,b.")
@click.option(
    "--primary-keys",
    default=None,
    help="Primary-key columns a,b (a primary-key table; without --option bucket=N it has "
    "dynamic buckets, as in Paimon).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Paimon table option, e.g. bucket=4 or snapshot.num-retained.min=5 (repeatable).",
)
@pass_cli
def create_table(
    cli: CliContext,
    *,
    table: str,
    parquet_file: Path,
    partition_keys: str | None,
    primary_keys: str | None,
    options: tuple[str, ...],
) -> None:
    """Create TABLE (db.table) with the schema of a Parquet file.

    An append table, or with --primary-keys a primary-key table (writes upsert).

    The database is created if absent. No data is written; use ``write``.

    Exit codes: 0 created; 1 the table exists, a type cannot be stored or an
    option is invalid; 2 bad arguments (a file that is not Parquet).
    """
    schema = read_parquet_schema(parquet_file, option="--from-parquet")
    keys = [k.strip() for k in (partition_keys or "").split(",") if k.strip()]
    pks = [k.strip() for k in (primary_keys or "").split(",") if k.strip()]
    cli.table_identifier = table
    created = cli.catalog(create=True).create_table(
        table,
        schema=schema,
        partition_keys=keys,
        primary_keys=pks,
        options=parse_key_values(options, what="--option"),
    )
    cli.output.record(
        {**schema_record(created.identifier, created.schema()), "location": created.root},
        title=f"created {table}",
    )


@click.command()
@click.argument("table", type=TableIdentifier())
@click.argument(
    "files",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@click.option(
    "--format",
    "file_format",
    type=click.Choice(["auto", "parquet", "csv"]),
    default="auto",
    show_default=True,
    help="Input format; auto = CSV for .csv/.csv.gz/.tsv names, else Parquet.",
)
@click.option(
    "--commit-user",
    default="snaplake-cli",
    show_default=True,
    help="Commit user recorded in the snapshot.",
)
@pass_cli
def write(
    cli: CliContext, *, table: str, files: tuple[Path, ...], file_format: str, commit_user: str
) -> None:
    """Write the rows of FILES (Parquet or CSV) into TABLE in one commit.

    An append table gets the rows appended; a primary-key table upserts
    them (a row replaces the row with the same key, or merges into it by
    the table's merge-engine).

    CSV files are read with the table's column types. Columns are matched by
    name; a missing, extra or incompatible column aborts before the commit
    and the data files already written are deleted.

    Input files without rows (a header-only CSV) commit nothing: the command
    says "nothing to commit" and exits 0.

    Exit codes: 0 committed (or nothing to commit); 1 schema mismatch or
    unreadable file (the error names the file; for a CSV value also its
    column and row); 3 commit conflict or retries exhausted (nothing
    committed); 4 no such table or warehouse.
    """
    start = time.monotonic()
    target = cli.table(table)
    schema = target.arrow_schema
    reading: list[Path] = []  # the file whose rows are being written, until all are
    rows = 0

    def batches() -> Iterator[pa.Table | pa.RecordBatch]:
        nonlocal rows
        for path in files:
            reading[:] = [path]
            for batch in input_batches(path, csv=is_csv(path, file_format), schema=schema):
                yield batch
                rows += batch.num_rows
            progress.advance(description=f"wrote {path.name}")
        reading.clear()

    with cli.output.progress(total=len(files), description="writing") as progress:
        try:
            result = target.write(batches(), commit_user=commit_user)
        except (SchemaMismatchError, UnsupportedTypeError) as exc:
            if not reading:
                raise
            raise InputFileError(reading[0], str(exc)) from exc
    if result.files_added == 0:
        cli.output.record(
            {"table": table, "snapshot_id": None, "rows": 0, "input_files": len(files)},
            title="nothing to commit: the input files hold no rows",
        )
        return
    cli.output.record(
        {
            "table": table,
            "snapshot_id": result.snapshot_id,
            "rows": rows,
            "files": result.files_added,
            "input_files": len(files),
            "attempts": result.attempts,
            "commit_duration_s": round(result.duration_s, 3),
            "duration_s": round(time.monotonic() - start, 3),
        },
        title=None,
    )


_TAG_HELP = "Read the snapshot tagged NAME (readable after the snapshot expired)."


def _time_travel(
    source: Table, *, snapshot_id: int | None, tag: str | None, command: str
) -> Snapshot | None:
    """Return the snapshot ``--snapshot`` or ``--tag`` selects (``None``: neither given).

    Raises:
        click.UsageError: both were given (exit code 2).
        SnapshotNotFoundError: the snapshot was never written or expired;
            when a tag still holds it, the message names the command that
            reads the tag.
        TagNotFoundError: no such tag.
    """
    if snapshot_id is not None and tag is not None:
        raise click.UsageError("give --snapshot or --tag, not both")
    if tag is not None:
        return TagManager(source.file_io, source.paths).get(tag)
    if snapshot_id is None:
        return None
    try:
        return source.snapshot(snapshot_id)
    except SnapshotNotFoundError as exc:
        holders = [t.name for t in source.list_tags() if t.snapshot_id == snapshot_id]
        if not holders:
            raise
        raise with_tag_hint(exc, tag=holders[0], command=command, table=source.identifier) from exc


@click.command()
@click.argument("table", type=TableIdentifier())
@click.option("--snapshot", "snapshot_id", type=int, default=None, help="Read this snapshot id.")
@click.option("--tag", default=None, metavar="NAME", help=_TAG_HELP)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Read at most N rows.")
@click.option("--columns", default=None, help="Columns to read: a,b (default all).")
@click.option(
    "--filter",
    "filters",
    multiple=True,
    help="Row filter, e.g. \"amount > 5 and city = 'Berlin'\" (repeatable; ANDed).",
)
@click.option(
    "--to-parquet",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the rows to this Parquet file instead of printing them.",
)
@pass_cli
def read(
    cli: CliContext,
    *,
    table: str,
    snapshot_id: int | None,
    tag: str | None,
    limit: int | None,
    columns: str | None,
    filters: tuple[str, ...],
    to_parquet: Path | None,
) -> None:
    """Read rows of TABLE (the latest snapshot unless --snapshot or --tag).

    Text output shows a table of at most 100 rows unless --limit is given;
    JSON output is an array of records (all rows).

    Exit codes: 0 ok; 2 bad column or filter (an unbalanced quote too), or
    both --snapshot and --tag; 4 no such warehouse, table, snapshot or tag.
    """
    source = cli.table(table)
    snap = _time_travel(source, snapshot_id=snapshot_id, tag=tag, command="read")
    schema = (  # time travel reads in the schema the snapshot was committed with
        source.schema_manager.schema(snap.schema_id).arrow_schema
        if snap is not None
        else source.arrow_schema
    )
    cap = limit if to_parquet is not None else cli.row_cap(limit)
    data = source.to_arrow(
        snapshot_id=snapshot_id,
        tag=tag,
        columns=parse_columns(columns, schema=schema),
        filter=parse_filters(filters, schema=schema) or None,
        limit=cap,
    )
    if to_parquet is not None:
        pq.write_table(data, to_parquet)
        cli.output.record({"table": table, "rows": data.num_rows, "path": str(to_parquet)})
        return
    cli.show_rows(
        data, limit=limit, empty="(no rows)", more="pass --limit N or --output json for more"
    )


_HISTORY_COLUMNS = [
    Column(key="id", header="id", numeric=True),
    Column(key="time", header="time (UTC)"),
    Column(key="kind", header="kind"),
    Column(key="user", header="user"),
    Column(key="identifier", header="identifier", numeric=True),
    Column(key="records_added", header="+records", numeric=True),
    Column(key="total_records", header="records", numeric=True),
    Column(key="files_added", header="+files", numeric=True),
    Column(key="files_deleted", header="-files", numeric=True),
]


@click.command()
@click.argument("table", type=TableIdentifier())
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Only the newest N snapshots."
)
@pass_cli
def snapshots(cli: CliContext, *, table: str, limit: int | None) -> None:
    """Show the retained snapshot history of TABLE, oldest first.

    Per snapshot: id, commit time (UTC), kind, commit user, identifier
    (empty for batch commits), records added and total, and the data files
    its delta added and deleted.

    Exit codes: 0 ok; 4 no such table.
    """
    source = cli.table(table)
    history = source.snapshots()
    if limit is not None:
        history = history[-limit:]
    cli.output.rows(
        snapshot_rows(source, history), columns=_HISTORY_COLUMNS, empty="(no snapshots)"
    )


_FILE_COLUMNS = [
    Column(key="partition", header="partition"),
    Column(key="bucket", header="bucket", numeric=True),
    Column(key="file", header="file"),
    Column(key="rows", header="rows", numeric=True),
    Column(key="size_bytes", header="size", numeric=True, fmt=format_size),
    Column(key="level", header="level", numeric=True),
    Column(key="source", header="source"),
]


@click.command()
@click.argument("table", type=TableIdentifier())
@click.option("--snapshot", "snapshot_id", type=int, default=None, help="List this snapshot.")
@click.option("--tag", default=None, metavar="NAME", help="List the snapshot tagged NAME.")
@pass_cli
def files(cli: CliContext, *, table: str, snapshot_id: int | None, tag: str | None) -> None:
    """List the live data files of TABLE (the latest snapshot unless --snapshot or --tag).

    Exit codes: 0 ok; 2 both --snapshot and --tag; 4 no such table,
    snapshot or tag.
    """
    source = cli.table(table)
    _time_travel(source, snapshot_id=snapshot_id, tag=tag, command="files")
    keys = source.partition_keys
    rows = []
    for split in source.new_scan(snapshot_id=snapshot_id, tag=tag).plan():
        partition = "/".join(f"{k}={v}" for k, v in zip(keys, split.partition_values, strict=True))
        for meta, path in zip(split.files, split.paths, strict=True):
            source_kind = (
                FileSource(meta.file_source).name if meta.file_source is not None else None
            )
            rows.append(
                {
                    "partition": partition or None,
                    "bucket": split.bucket,
                    "file": meta.file_name,
                    "rows": meta.row_count,
                    "size_bytes": meta.file_size_bytes,
                    "level": meta.level,
                    "source": source_kind,
                    "path": path,
                }
            )
    cli.output.rows(rows, columns=_FILE_COLUMNS, empty="(no data files)")
