"""The daemon on postpone-bucket tables: pending files count as compaction due."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from tests.daemon.procs import daemon_config, free_port, start_daemon, wait_for
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, engine_model, make_rows, sorted_rows
from tests.pk_helpers import to_table as pk_table

from snaplake.daemon.jobs import compact_job
from snaplake.options import CoreOptions


def _postpone_table(where: str | Path) -> tuple[Any, TableModel]:
    table = create_table(
        where, schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "-2", "num-sorted-run.compaction-trigger": "3"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    for i in range(2):
        rows = make_rows(i * 10, 30, seed=i)
        write_and_commit(table, pk_table(rows), commit_user="writer", commit_identifier=i + 1)
        model.apply(rows)
    return table, model


def test_compact_job_assigns_pending_files() -> None:
    table, model = _postpone_table("memory://postpone-job")
    opts = CoreOptions(table.options)
    assert table.to_arrow().num_rows == 0
    due = compact_job(table, options=opts)
    assert due.acted and due.files_compacted > 0
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert not compact_job(table, options=opts).acted


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_daemon_compacts_a_postpone_table(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    table, model = _postpone_table(warehouse)
    port = free_port()
    daemon = start_daemon(
        daemon_config(warehouse, daemon_id="pp", port=port, intervals={"compact": "1 s"}),
        tmp_path, "daemon", port,
    )  # fmt: skip
    try:
        wait_for(
            lambda: table.to_arrow().num_rows > 0,
            timeout=240, what="the daemon's compaction of the pending files",
        )  # fmt: skip
    finally:
        exit_code, _ = daemon.stop(signal.SIGTERM)
    assert exit_code == 0, daemon.text()
    assert sorted_rows(table.to_arrow()) == model.rows()
    latest = table.latest_snapshot()
    assert latest.commit_kind.value == "COMPACT" and latest.commit_user == "snaplake-maintenance"
