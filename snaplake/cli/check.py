"""The ``check`` command: verify a table's data files against their manifest entries.

Exit codes: 0 every file agrees; 5 (:data:`EXIT_CHECK_FAILED`) at least one
file contradicts its entry (each mismatch is printed); 4 no such table or
snapshot; 1 unexpected error (a manifest unreadable, storage failed).
"""

from __future__ import annotations

from typing import Any

import click

from snaplake.cli.context import CliContext, TableIdentifier, pass_cli
from snaplake.cli.output import Column
from snaplake.compaction.check import CheckResult, FileMismatch

__all__ = ["EXIT_CHECK_FAILED", "check"]

EXIT_CHECK_FAILED = 5
"""Exit code of ``snaplake check`` when a data file contradicts its manifest entry."""

_COLUMNS = (
    Column(key="file", header="file"),
    Column(key="field", header="field"),
    Column(key="column", header="column"),
    Column(key="recorded", header="recorded"),
    Column(key="actual", header="actual"),
    Column(key="message", header="problem"),
)


def _row(m: FileMismatch) -> dict[str, Any]:
    return {"file": m.path, "field": m.field, "column": m.column,
            "recorded": m.recorded, "actual": m.actual, "message": m.message}  # fmt: skip


def _summary(table: str, result: CheckResult) -> dict[str, Any]:
    return {
        "table": table,
        "snapshot_id": result.snapshot_id,
        "ok": result.ok,
        "files_checked": result.files_checked,
        "rows_checked": result.rows_checked,
        "bytes_checked": result.bytes_checked,
        "bad_files": len(result.bad_files),
        "duration_s": round(result.duration_s, 3),
    }


@click.command("check")
@click.argument("table", type=TableIdentifier())
@click.option(
    "--snapshot", "snapshot_id", type=click.IntRange(min=1), default=None,
    help="Check this snapshot's files (default: the latest).",
)  # fmt: skip
@pass_cli
def check(cli: CliContext, *, table: str, snapshot_id: int | None) -> None:
    """Verify every live data file of TABLE against its manifest entry.

    Reads each file and compares its size, row count, value stats (min, max,
    null counts) and, on primary-key tables, key stats, key range, sequence
    numbers and delete count with what the manifest records. Readers trust
    those: a recorded maximum below a file's values hides its rows from
    filtered reads. Nothing is changed.

    Exit codes: 0 every file agrees; 5 a file contradicts its entry (each
    mismatch is listed: file, field, column, recorded, actual); 4 no such
    table or snapshot; 1 unexpected error.
    """
    target = cli.table(table)
    with cli.output.status(f"checking the data files of {table}"):
        result = target.check(snapshot_id=snapshot_id)
    summary = _summary(table, result)
    rows = [_row(m) for m in result.mismatches]
    if not cli.output_is_text:
        cli.output.record({**summary, "mismatches": rows})
    elif result.ok:
        cli.output.record(summary, title="every data file agrees with its manifest entry")
    else:
        cli.output.rows(
            rows,
            columns=_COLUMNS,
            title=f"{len(result.bad_files)} of {result.files_checked} data file(s) of snapshot "
            f"{result.snapshot_id} contradict their manifest entries",
        )
    if not result.ok:
        raise click.exceptions.Exit(EXIT_CHECK_FAILED)
