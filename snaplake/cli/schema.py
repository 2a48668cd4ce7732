"""Schema commands: alter-table (one new schema per call) and schemas (the history).

``snaplake alter-table db.t --add-column "delay_reason string" --rename-column
dest=destination --drop-column air_time --set-option k=v`` applies every
change of one call as one new ``schema-<N+1>`` (all or nothing).
"""

from __future__ import annotations

from typing import Any

import click

from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.output import Column, format_time_ms
from snaplake.cli.parsing import parse_key_values
from snaplake.errors import UnsupportedTypeError
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.schema_change import SchemaChange
from snaplake.store.format.types import parse_field

__all__ = ["COMMANDS", "alter_table", "parse_add_column", "schemas"]


def _split_name(text: str, *, what: str) -> tuple[str, str]:
    parts = text.strip().split(None, 1)
    if len(parts) != 2:
        raise click.BadParameter(f"{text!r}: expected 'NAME TYPE'", param_hint=what)
    return parts[0], parts[1]


def _type_error(exc: UnsupportedTypeError, *, what: str) -> click.BadParameter:
    return click.BadParameter(
        f"{exc}; write a Paimon type such as INT, BIGINT, DOUBLE, STRING, BYTES, DATE, "
        "TIMESTAMP(6) or DECIMAL(10, 2)",
        param_hint=what,
    )


def parse_add_column(text: str) -> SchemaChange:
    """Parse ``"NAME TYPE [FIRST | AFTER COLUMN]"`` (TYPE in Paimon's SQL spelling).

    Raises:
        click.BadParameter: not of that shape, or TYPE is not a Paimon type
            (exit code 2).
    """
    name, rest = _split_name(text, what="--add-column")
    words = rest.split()
    upper = [w.upper() for w in words]
    try:
        if upper[-1:] == ["FIRST"]:
            return SchemaChange.add_column(name, " ".join(words[:-1]), first=True)
        if len(words) >= 3 and upper[-2] == "AFTER":
            return SchemaChange.add_column(name, " ".join(words[:-2]), after=words[-1])
        return SchemaChange.add_column(name, rest)
    except UnsupportedTypeError as exc:
        raise _type_error(exc, what="--add-column") from None


def _parse_update_type(text: str) -> SchemaChange:
    """Parse ``"NAME TYPE"`` of ``--update-column-type``.

    Raises:
        click.BadParameter: not of that shape, or TYPE is not a Paimon type.
    """
    name, type_text = _split_name(text, what="--update-column-type")
    try:
        return SchemaChange.update_column_type(name, type_text)
    except UnsupportedTypeError as exc:
        raise _type_error(exc, what="--update-column-type") from None


def _pairs(values: tuple[str, ...], *, what: str) -> list[tuple[str, str]]:
    return list(parse_key_values(values, what=what).items())


def schema_record(identifier: str, schema: TableSchema) -> dict[str, Any]:
    """One schema as a record: id, columns (``<id>:<name> <TYPE>``), keys, options, comment."""
    return {
        "table": identifier,
        "schema_id": schema.id,
        "columns": [
            f"{f.id}:{f.name} {f.type.sql()}" + (f" -- {f.description}" if f.description else "")
            for f in (parse_field(x) for x in schema.fields)
        ],
        "highest_field_id": schema.highest_field_id,
        "partition_keys": list(schema.partition_keys),
        "primary_keys": list(schema.primary_keys),
        "options": dict(schema.options),
        "comment": schema.comment,
        "time": format_time_ms(schema.time_millis),
    }


@click.command("alter-table")
@click.argument("table", type=TableIdentifier())
@click.option(
    "--add-column",
    "add",
    multiple=True,
    metavar="'NAME TYPE [FIRST|AFTER COL]'",
    help="Add a nullable column, e.g. 'delay_reason string' (Paimon type names).",
)
@click.option(
    "--rename-column",
    "rename",
    multiple=True,
    metavar="OLD=NEW",
    help="Rename a column (it keeps its field id).",
)
@click.option(
    "--update-column-type",
    "retype",
    multiple=True,
    metavar="'NAME TYPE'",
    help="Widen a column's type, e.g. 'flight bigint'.",
)
@click.option("--nullable", multiple=True, metavar="NAME", help="Make a column nullable.")
@click.option("--not-null", multiple=True, metavar="NAME", help="Make a column NOT NULL.")
@click.option(
    "--column-comment", multiple=True, metavar="NAME=TEXT", help="Set a column's comment."
)
@click.option("--drop-column", "drop", multiple=True, metavar="NAME", help="Drop a column.")
@click.option("--set-option", multiple=True, metavar="KEY=VALUE", help="Set a table option.")
@click.option("--remove-option", multiple=True, metavar="KEY", help="Remove a table option.")
@click.option("--comment", default=None, help="Set the table comment.")
@pass_cli
def alter_table(
    cli: CliContext,
    *,
    table: str,
    add: tuple[str, ...],
    rename: tuple[str, ...],
    retype: tuple[str, ...],
    nullable: tuple[str, ...],
    not_null: tuple[str, ...],
    column_comment: tuple[str, ...],
    drop: tuple[str, ...],
    set_option: tuple[str, ...],
    remove_option: tuple[str, ...],
    comment: str | None,
) -> None:  # fmt: skip
    """Change the schema of TABLE (db.table): one new schema with every change given.

    Changes apply in this order: add, rename, update type, nullability,
    column comments, drop, options, table comment. Each option may repeat.
    Data files written before are read in the new schema by field id.

    Exit codes: 0 altered; 1 a rule refuses a change (partition/primary
    key, type widening, NOT NULL, last value column, immutable option) and
    nothing was written; 2 bad arguments; 3 a concurrent alter won and these
    changes clash with it; 4 no such table.
    """
    changes: list[SchemaChange] = [parse_add_column(text) for text in add]
    changes += [SchemaChange.rename_column(o, n) for o, n in _pairs(rename, what="--rename-column")]
    changes += [_parse_update_type(text) for text in retype]
    changes += [SchemaChange.update_column_nullability(n, nullable=True) for n in nullable]
    changes += [SchemaChange.update_column_nullability(n, nullable=False) for n in not_null]
    changes += [
        SchemaChange.update_column_comment(n, c)
        for n, c in _pairs(column_comment, what="--column-comment")
    ]
    changes += [SchemaChange.drop_column(n) for n in drop]
    changes += [SchemaChange.set_option(k, v) for k, v in _pairs(set_option, what="--set-option")]
    changes += [SchemaChange.remove_option(k) for k in remove_option]
    if comment is not None:
        changes.append(SchemaChange.update_comment(comment))
    if not changes:
        raise click.UsageError("give at least one change (see --help)")
    new = cli.catalog().alter_table(table, changes)
    assert new is not None
    cli.output.record(schema_record(table, new), title=f"altered {table}: schema {new.id}")


@click.command()
@click.argument("table", type=TableIdentifier())
@pass_cli
def schemas(cli: CliContext, *, table: str) -> None:
    """List every schema of TABLE, oldest first (id, time, columns with field ids).

    Exit codes: 0 ok; 4 no such table.
    """
    target = cli.table(table)
    rows = [schema_record(table, s) for s in target.schemas().values()]
    for row in rows:
        row["columns"] = ", ".join(row["columns"])
    cli.output.rows(
        rows,
        columns=[
            Column(key="schema_id", header="id", numeric=True),
            Column(key="time", header="time (UTC)"),
            Column(key="columns", header="columns"),
        ],
        empty="(no schema)",
    )


COMMANDS = (alter_table, schemas)
