"""A running daemon follows alter_table without a restart: new options, new columns.

One real daemon process maintains a table while the test alters it: a lower
``snapshot.num-retained.max`` is obeyed by the next expiry, ``compaction.min.file-num``
by the next compaction (whose inputs span two schemas and whose output is in the
newest), and ``snaplake_table_schema_id`` follows the schema.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow as pa
import pytest
from tests.daemon.procs import (
    daemon_config,
    free_port,
    sample_value,
    scrape,
    start_daemon,
    wait_for,
)
from tests.helpers import write_and_commit

import snaplake
from snaplake import SchemaChange

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("month", pa.int32()),
                    ("v", pa.int32())])  # fmt: skip


def _append(table: snaplake.Table, ident: int) -> None:
    names = table.arrow_schema.names
    data = {"id": [ident], "month": [1], "v": [ident], "reason": [f"r{ident}"]}
    write_and_commit(
        table,
        pa.table({n: data[n] for n in names}, schema=table.arrow_schema),
        commit_identifier=ident,
    )


def test_daemon_picks_up_option_changes_and_new_schemas(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(warehouse))
    table = catalog.create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"],
        options={"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "50",
                 "snapshot.time-retained": "1 h", "compaction.min.file-num": "100"},
    )  # fmt: skip
    for i in range(1, 6):
        _append(table, i)
    port = free_port()
    daemon = start_daemon(daemon_config(warehouse, daemon_id="d", port=port), tmp_path, "d", port)
    try:
        wait_for(lambda: sample_value(scrape(port), "snaplake_table_schema_id", table="db.t") == 0,
                 timeout=30, what="the first watch")  # fmt: skip
        catalog.alter_table("db.t", [SchemaChange.add_column("reason", pa.string())])
        for i in range(6, 11):
            _append(table, i)
        wait_for(lambda: sample_value(scrape(port), "snaplake_table_schema_id", table="db.t") == 1,
                 timeout=30, what="the schema id to follow the alter")  # fmt: skip
        assert len(table.snapshots()) == 10  # max 50: nothing expired yet, no compaction

        catalog.alter_table(
            "db.t",
            [SchemaChange.set_option("snapshot.num-retained.max", "3"),
             SchemaChange.set_option("compaction.min.file-num", "3")],
        )  # fmt: skip
        wait_for(lambda: sample_value(scrape(port), "snaplake_snapshots_retained_limit",
                                      table="db.t", bound="max") == 3,
                 timeout=30, what="the new retention limit")  # fmt: skip
        wait_for(lambda: len(table.snapshots()) <= 3, timeout=30, what="expiry to the new max")
        wait_for(lambda: len([f for s in table.new_scan().plan() for f in s.files]) < 10,
                 timeout=30, what="compaction with the new file count")  # fmt: skip
        files = [f for s in table.new_scan().plan() for f in s.files]
        assert max(f.schema_id for f in files) == 2  # outputs in the newest schema
        rows = sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])
        assert [r["id"] for r in rows] == list(range(1, 11))
        assert [r["reason"] for r in rows] == [None] * 5 + [f"r{i}" for i in range(6, 11)]
        assert sample_value(scrape(port), "snaplake_table_schema_id", table="db.t") == 2
    finally:
        daemon.stop(signal.SIGTERM)
