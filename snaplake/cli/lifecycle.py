"""Tag and consumer lifecycle commands of the ``snaplake`` CLI.

Commands: ``tags`` (list; ``--auto`` first creates the automatic tags the
table's ``tag.automatic-creation`` asks for), ``expire-tags``, ``consumers``
(list; ``--expire`` first deletes the consumers idle longer than
``consumer.expiration-time``). Each is driven by the table's own options; a
table that sets none of them is left as it is.
"""

from __future__ import annotations

from typing import Any

import click

from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.output import Column, format_time_ms
from snaplake.store.tags import TagInfo

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
@pass_cli
def consumers(cli: CliContext, *, table: str, expire: bool) -> None:
    """List the consumers of TABLE (``nextSnapshot``); ``--expire`` deletes idle ones first.

    Exit codes: 0 ok; 4 no such table.
    """
    target = cli.table(table)
    expired = target.expire_consumers() if expire else []
    rows = [{"consumer": c, "next_snapshot": n} for c, n in target.consumers().items()]
    columns = [
        Column(key="consumer", header="consumer"),
        Column(key="next_snapshot", header="next snapshot", numeric=True),
    ]
    title = f"expired {len(expired)} consumer(s): {', '.join(expired)}" if expire else None
    cli.output.rows(rows, columns=columns, title=title, empty="(no consumers)")


COMMANDS: tuple[click.Command, ...] = (tags, expire_tags, consumers)
