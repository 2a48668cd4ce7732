"""Tag and consumer lifecycle commands of the ``snaplake`` CLI.

Commands: ``tags`` (list; ``--auto`` first creates the automatic tags the
table's ``tag.automatic-creation`` asks for), ``expire-tags``, ``consumers``
(list with each consumer's lag; ``--expire`` first deletes the consumers idle
longer than ``consumer.expiration-time``, ``--reset ID --to N`` and
``--delete ID`` change one consumer, refused while a subscription holds it).
The tag commands are driven by the table's own options; a table that sets
none of them is left as it is.
"""

from __future__ import annotations

import time
from typing import Any

import click

from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.output import Column, format_time_ms
from snaplake.store.consumers import consumer_lags
from snaplake.store.tags import TagInfo
from snaplake.subscription import delete_consumer, reset_consumer

__all__ = ["COMMANDS", "consumers", "expire_tags", "tags"]

_TAG_COLUMNS = [
    Column(key="name", header="tag"),
    Column(key="snapshot_id", header="snapshot", numeric=True),
    Column(key="time", header="snapshot time (UTC)"),
    Column(key="created", header="tag created (local)"),
    Column(key="retained", header="retained"),
    Column(key="new", header="new"),
]


def _row(info: TagInfo, *, new: bool) -> dict[str, Any]:
    return {
        "name": info.name,
        "snapshot_id": info.snapshot_id,
        "time": format_time_ms(info.time_millis),
        "created": info.create_time.isoformat(sep=" ") if info.create_time else None,
        "retained": str(info.time_retained) if info.time_retained is not None else None,
        "new": "yes" if new else "",
    }


@click.command("tags")
@click.argument("table", type=TableIdentifier())
@click.option(
    "--auto",
    is_flag=True,
    help="First create the tags tag.automatic-creation asks for (Paimon's names).",
)
@pass_cli
def tags(cli: CliContext, *, table: str, auto: bool) -> None:
    """List the tags of TABLE with their retention; ``--auto`` creates the automatic ones first.

    Exit codes: 0 ok; 1 contradicting tag.* options; 4 no such table.
    """
    target = cli.table(table)
    created = {t.name for t in target.create_tag_automatically()} if auto else set()
    rows = [_row(t, new=t.name in created) for t in target.list_tags()]
    title = f"created {len(created)} tag(s)" if auto else None
    cli.output.rows(rows, columns=_TAG_COLUMNS, title=title, empty="(no tags)")


@click.command("expire-tags")
@click.argument("table", type=TableIdentifier())
@pass_cli
def expire_tags(cli: CliContext, *, table: str) -> None:
    """Delete the tags of TABLE past their retention and automatic tags beyond the count.

    ``tagTimeRetained`` (``tag.default-time-retained`` when created) and
    ``tag.num-retained-max``; only tag files are deleted, files only they
    kept become orphans for ``remove-orphan-files``.

    Exit codes: 0 ok; 1 contradicting tag.* options; 4 no such table.
    """
    expired = cli.table(table).expire_tags()
    cli.output.record(
        {"table": table, "expired_tags": expired}, title=f"expired {len(expired)} tag(s)"
    )


@click.command("consumers")
@click.argument("table", type=TableIdentifier())
@click.option(
    "--expire", is_flag=True, help="First delete consumers idle past consumer.expiration-time."
)
@click.option("--reset", "reset_id", metavar="ID", help="Set consumer ID's next snapshot (--to).")
@click.option("--to", "to_snapshot", type=click.IntRange(min=1), metavar="N",
              help="With --reset: the snapshot ID reads next.")  # fmt: skip
@click.option("--delete", "delete_id", metavar="ID", help="Delete consumer ID.")
@pass_cli
def consumers(
    cli: CliContext,
    *,
    table: str,
    expire: bool,
    reset_id: str | None,
    to_snapshot: int | None,
    delete_id: str | None,
) -> None:
    """List the consumers of TABLE: next snapshot and lag (snapshots, seconds behind).

    ``--expire`` first deletes consumers idle past ``consumer.expiration-time``;
    ``--reset ID --to N`` makes consumer ID read snapshot N next (a retained
    one, or the latest + 1); ``--delete ID`` deletes it. Reset and delete are
    refused while a subscription holds the consumer id.

    Exit codes: 0 ok; 2 bad arguments or consumer id; 3 the consumer is in
    use by a subscription; 4 no such table, or N is not retained.
    """
    if (reset_id is None) != (to_snapshot is None):
        raise click.UsageError("--reset ID and --to N go together")
    if reset_id is not None and delete_id is not None:
        raise click.UsageError("give --reset or --delete, not both")
    target = cli.table(table)
    titles = []
    if expire:
        expired = target.expire_consumers()
        titles.append(f"expired {len(expired)} consumer(s): {', '.join(expired)}")
    if reset_id is not None and to_snapshot is not None:
        reset_consumer(target, reset_id, next_snapshot=to_snapshot)
        titles.append(f"consumer {reset_id} reads snapshot {to_snapshot} next")
    if delete_id is not None:
        delete_consumer(target, delete_id)
        titles.append(f"deleted consumer {delete_id}")
    lags = consumer_lags(
        target.consumers(), target.snapshot_manager, now_ms=time.time_ns() // 1_000_000
    )
    rows = [
        {"consumer": c, "next_snapshot": lag.next_snapshot, "lag_snapshots": lag.snapshots,
         "lag_seconds": round(lag.seconds, 3)}
        for c, lag in lags.items()
    ]  # fmt: skip
    columns = [
        Column(key="consumer", header="consumer"),
        Column(key="next_snapshot", header="next snapshot", numeric=True),
        Column(key="lag_snapshots", header="lag (snapshots)", numeric=True),
        Column(key="lag_seconds", header="lag (s)", numeric=True),
    ]
    title = "; ".join(titles) or None
    cli.output.rows(rows, columns=columns, title=title, empty="(no consumers)")


COMMANDS: tuple[click.Command, ...] = (tags, expire_tags, consumers)
