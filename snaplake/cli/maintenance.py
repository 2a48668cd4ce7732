"""Maintenance and daemon commands of the ``snaplake`` CLI.

Commands: merge-manifests, expire-snapshots, remove-orphan-files, compact,
tag create|delete|list, rollback, daemon, expire-partitions.

Destructive commands (``expire-snapshots``, ``remove-orphan-files``,
``rollback``) print their plan and change nothing unless ``--execute`` is given.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from pathlib import Path
from typing import Any

import click

from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.output import Column, format_time_ms
from snaplake.cli.parsing import parse_age, parse_partition_spec
from snaplake.errors import SnapshotNotFoundError, TagNotFoundError
from snaplake.table import Table

__all__ = [
    "COMMANDS",
    "compact",
    "daemon",
    "expire_partitions",
    "expire_snapshots",
    "merge_manifests",
    "remove_orphan_files",
    "rollback",
    "tag",
]


def _as_record(result: Any, **extra: Any) -> dict[str, Any]:
    """A result dataclass as a flat dict (tuples as lists), plus ``extra`` keys first."""
    fields = dataclasses.asdict(result)
    return {**extra, **{k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}}


def _rounded(record: dict[str, Any]) -> dict[str, Any]:
    if isinstance(record.get("duration_s"), float):
        record["duration_s"] = round(record["duration_s"], 3)
    return record


@click.command("merge-manifests")
@click.argument("table", type=TableIdentifier())
@click.option("--full", is_flag=True, help="Force a full compaction (drop ADD/DELETE pairs).")
@pass_cli
def merge_manifests(cli: CliContext, *, table: str, full: bool) -> None:
    """Merge the small manifests of TABLE if due, as a COMPACT snapshot.

    Exit codes: 0 merged or nothing due; 3 writers kept winning the commit
    race (run again later); 4 no such table.
    """
    target = cli.table(table)
    with cli.output.status(f"merging manifests of {table}"):
        result = target.merge_manifests(full=full)
    record = _rounded(_as_record(result, table=table, merged=result.snapshot_id is not None))
    cli.output.record(record, title=None if record["merged"] else "nothing to merge")


@click.command("expire-snapshots")
@click.argument("table", type=TableIdentifier())
@click.option("--execute", is_flag=True, help="Delete; without it only the plan is shown.")
@pass_cli
def expire_snapshots(cli: CliContext, *, table: str, execute: bool) -> None:
    """Expire snapshots of TABLE beyond its retention options, and their files.

    Retention comes from the table options (``snapshot.num-retained.min``,
    ``snapshot.num-retained.max``, ``snapshot.time-retained``); tags and
    consumers pin snapshots. Without ``--execute`` nothing is deleted.

    Exit codes: 0 ok; 1 metadata unreadable (nothing deleted); 4 no such table.
    """
    target = cli.table(table)
    with cli.output.status(f"{'expiring' if execute else 'planning expiry of'} {table}"):
        result = target.expire_snapshots(dry_run=not execute)
    record = _rounded(_as_record(result, table=table))
    if not execute:
        title = "plan (dry run; pass --execute to delete)"
    else:
        title = f"expired {len(result.expired_snapshot_ids)} snapshot(s)"
    cli.output.record(record, title=title)


@click.command("remove-orphan-files")
@click.argument("table", type=TableIdentifier())
@click.option(
    "--older-than",
    default="1d",
    show_default=True,
    help="Only files older than this age (e.g. 1d, 12h, 30min); protects writes in flight.",
)
@click.option("--execute", is_flag=True, help="Delete; without it only the plan is shown.")
@pass_cli
def remove_orphan_files(cli: CliContext, *, table: str, older_than: str, execute: bool) -> None:
    """Find files under TABLE that no snapshot, tag or consumer references.

    Without ``--execute`` nothing is deleted.

    Exit codes: 0 ok; 1 metadata unreadable; 2 bad --older-than; 4 no such table.
    """
    age = parse_age(older_than)
    target = cli.table(table)
    with cli.output.status(f"scanning {table} for orphan files"):
        result = target.remove_orphan_files(older_than=age, dry_run=not execute)
    record = _rounded(_as_record(result, table=table))
    record["cutoff"] = result.cutoff.astimezone(dt.UTC).isoformat(timespec="seconds")
    record["files_deleted"] = result.files_deleted
    title = (
        "plan (dry run; pass --execute to delete)"
        if not execute
        else f"deleted {result.files_deleted} orphan file(s)"
    )
    cli.output.record(record, title=title)


@click.command()
@click.argument("table", type=TableIdentifier())
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    metavar="KEY=VALUE",
    help="Compact only the partitions matching KEY=VALUE (repeat for more keys).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Full compaction: primary-key tables compact every bucket into one top-level sorted "
    "run; append tables rewrite every file after a bucket's leading large ones.",
)
@pass_cli
def compact(cli: CliContext, *, table: str, partitions: tuple[str, ...], full: bool) -> None:
    """Compact TABLE's data files (a COMPACT snapshot).

    Append tables: rewrite runs of small files into target-size files
    (--full: every file after a bucket's leading large ones). Primary-key
    tables: one round of LSM compaction (universal picking; --full:
    everything into the top level, deletes dropped).

    Exit codes: 0 compacted or nothing due; 2 bad --partition; 3 a concurrent
    commit removed an input (nothing lost; run again); 4 no such table.
    """
    target = cli.table(table)
    spec = parse_partition_spec(
        partitions, schema=target.arrow_schema, partition_keys=target.partition_keys
    )
    with cli.output.status(f"compacting {table}"):
        result = target.compact(full=full, partition_filter=spec or None)
    record = _rounded(_as_record(result, table=table, compacted=result.snapshot_id is not None))
    cli.output.record(record, title=None if record["compacted"] else "nothing to compact")


@click.group()
def tag() -> None:
    """Create, delete and list tags (named snapshots, kept through expiry)."""


_TAG_COLUMNS = [
    Column(key="name", header="tag"),
    Column(key="snapshot_id", header="snapshot", numeric=True),
    Column(key="time", header="snapshot time (UTC)"),
    Column(key="kind", header="kind"),
    Column(key="records", header="records", numeric=True),
]


def _tag_row(info: Any) -> dict[str, Any]:
    return {
        "name": info.name,
        "snapshot_id": info.snapshot_id,
        "time": format_time_ms(info.time_millis),
        "kind": info.commit_kind,
        "records": info.record_count,
    }


@tag.command("create")
@click.argument("table", type=TableIdentifier())
@click.argument("name")
@click.option("--snapshot", "snapshot_id", type=int, default=None, help="Default: the latest.")
@pass_cli
def tag_create(cli: CliContext, *, table: str, name: str, snapshot_id: int | None) -> None:
    """Tag a snapshot of TABLE as NAME.

    Exit codes: 0 created; 1 the tag exists; 2 the name is invalid; 4 no
    such table or snapshot.
    """
    info = cli.table(table).create_tag(name, snapshot_id=snapshot_id)
    cli.output.record(_tag_row(info), title=f"created tag {name}")


@tag.command("delete")
@click.argument("table", type=TableIdentifier())
@click.argument("name")
@pass_cli
def tag_delete(cli: CliContext, *, table: str, name: str) -> None:
    """Delete tag NAME of TABLE and the files only it held (once its snapshot expired).

    Exit codes: 0 deleted; 4 no such table or tag.
    """
    result = cli.table(table).delete_tag(name)
    cli.output.record({
        "table": table, "deleted_tag": name, "snapshot_id": result.snapshot_id,
        "data_files_deleted": len(result.data_files),
        "index_files_deleted": len(result.index_files),
        "metadata_files_deleted": len(result.manifest_files),
    })  # fmt: skip


@tag.command("list")
@click.argument("table", type=TableIdentifier())
@pass_cli
def tag_list(cli: CliContext, *, table: str) -> None:
    """List the tags of TABLE, by snapshot id.

    Exit codes: 0 ok; 4 no such table.
    """
    tags = cli.table(table).list_tags()
    cli.output.rows([_tag_row(t) for t in tags], columns=_TAG_COLUMNS, empty="(no tags)")


def _rollback_plan(target: Table, to: str) -> dict[str, Any]:
    """What ``rollback_to`` would remove; raises like it for an unknown id or tag."""
    tags = target.list_tags()
    if to.isdigit():  # tag names are never all digits
        snapshot_id = target.snapshot(int(to)).id
        restore = False
    else:
        match = [t for t in tags if t.name == to]
        if not match:
            raise TagNotFoundError(
                f"table {target.identifier} has no tag {to!r}; see 'snaplake tag list'"
            )
        snapshot_id = match[0].snapshot_id
        try:
            target.snapshot(snapshot_id)
            restore = False
        except SnapshotNotFoundError:
            restore = True
    retained = [s.id for s in target.snapshots()]
    return {
        "target": to,
        "snapshot_id": snapshot_id,
        "snapshots_deleted": sorted((i for i in retained if i > snapshot_id), reverse=True),
        "tags_deleted": sorted(t.name for t in tags if t.snapshot_id > snapshot_id),
        "restored_from_tag": restore,
    }


@click.command()
@click.argument("table", type=TableIdentifier())
@click.option(
    "--to", "to", required=True, metavar="N|TAG", help="Snapshot id or tag name to go back to."
)
@click.option("--execute", is_flag=True, help="Roll back; without it only the plan is shown.")
@pass_cli
def rollback(cli: CliContext, *, table: str, to: str, execute: bool) -> None:
    """Make snapshot N (or tag TAG) the latest version of TABLE again.

    Deletes every newer snapshot and the tags on them. Stop writers first.
    Without ``--execute`` nothing is changed.

    Exit codes: 0 ok; 4 no such table, snapshot or tag.
    """
    target = cli.table(table)
    plan = _rollback_plan(target, to)
    if not execute:
        cli.output.record(
            {"table": table, "dry_run": True, **plan},
            title="plan (dry run; pass --execute to roll back)",
        )
        return
    result = target.rollback_to(int(to) if to.isdigit() else to)
    record = _rounded(_as_record(result, table=table, dry_run=False, target=to))
    cli.output.record(record, title=f"rolled back to snapshot {result.snapshot_id}")


@click.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML configuration of the tables to maintain.",
)
@click.option("--check-config", is_flag=True, help="Validate, print the settings and exit.")
@pass_cli
def daemon(cli: CliContext, *, config_path: Path, check_config: bool) -> None:
    """Run the maintenance daemon until SIGTERM/SIGINT (needs the ``daemon`` extra).

    Exit codes: 0 clean shutdown or a valid --check-config; 1 unexpected
    error; 2 invalid configuration.
    """
    try:
        from snaplake.daemon import run  # apscheduler is imported only here
    except ImportError as exc:
        raise click.ClickException(
            f"the daemon needs the 'daemon' extra: pip install 'snaplake[daemon]' ({exc})"
        ) from None
    sys.stdout.flush()
    code = run(str(config_path), check_only=check_config, log_level=cli.log_level)
    raise click.exceptions.Exit(code)


@click.command("expire-partitions")
@click.argument("table", type=TableIdentifier())
@click.option("--dry-run", is_flag=True, help="Only show the partitions that would be dropped.")
@pass_cli
def expire_partitions(cli: CliContext, *, table: str, dry_run: bool) -> None:
    """Drop the partitions of TABLE older than its ``partition.expiration-time``.

    The partition's time comes from its values (``partition.expiration-strategy
    = values-time``, read with ``partition.timestamp-formatter`` / ``-pattern``)
    or its newest file (``update-time``); at most ``partition.expiration-max-num``
    partitions go per run, as OVERWRITE snapshots. A table without
    ``partition.expiration-time`` is left alone.

    Exit codes: 0 ok (also when nothing expired); 3 concurrent writers kept
    changing the expired partitions (nothing lost; run again); 4 no such table.
    """
    target = cli.table(table)
    with cli.output.status(f"{'planning' if dry_run else 'expiring'} partitions of {table}"):
        result = target.expire_partitions(dry_run=dry_run)
    record = _rounded(_as_record(result, table=table))
    record["partitions"] = [dict(p.spec) for p in result.partitions]
    for key in ("expire_before",):
        value = record.get(key)
        record[key] = value.isoformat(sep=" ") if value is not None else None
    record["files_deleted"] = result.files_deleted
    record["rows_deleted"] = result.rows_deleted
    if result.strategy is None:
        title = "partitions never expire here (no partition.expiration-time or no partition keys)"
    elif dry_run:
        title = f"plan (dry run): {result.partitions_expired} partition(s) would be dropped"
    else:
        title = f"dropped {result.partitions_expired} partition(s)"
    cli.output.record(record, title=title)


COMMANDS: tuple[click.Command, ...] = (
    merge_manifests,
    expire_snapshots,
    remove_orphan_files,
    compact,
    tag,
    rollback,
    daemon,
    expire_partitions,
)
"""Registered on the ``snaplake`` group by :mod:`snaplake.cli`."""
