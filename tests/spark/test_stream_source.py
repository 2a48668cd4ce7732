"""``readStream.format("snaplake")``: a changelog mirror survives SIGKILL of either driver.

A CDC stream upserts into a primary-key table with ``changelog-producer =
input`` (:class:`SnaplakeSink`); a second query reads that table's changes
with ``readStream.format("snaplake")`` and mirrors them into another
primary-key table (:class:`SnaplakeSink` with ``row_kind_column="_row_kind"``).
Each driver is SIGKILLed once right after a commit, before Spark's commit
log records the batch, and restarted from its checkpoint; the mirror then
equals the source, which equals a model of the CDC events. The drivers are
subprocesses (``tests/spark/mirror_job.py``); under Spark Connect the
queries run in a Connect server, which is what gets killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table
from tests.spark.conftest import ROWS_SCHEMA, spark_env, start_connect_server, write_parquet_files

from snaplake.errors import SnapshotNotFoundError
from snaplake.spark.source import SnaplakeSourceOptions
from snaplake.spark.stream_source import SnaplakeStreamReader
from snaplake.table import Table

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

JOB = Path(__file__).with_name("mirror_job.py")
CDC_SCHEMA = ROWS_SCHEMA.append(pa.field("op", pa.string())).append(pa.field("seq", pa.int64()))
# (op, ids) per CDC file; every id at most once per file.
EVENTS = [
    [("+I", range(20))],
    [("+U", range(10)), ("-D", range(10, 15))],
    [("+I", range(20, 30)), ("+U", range(15, 20))],
    [("-D", range(5)), ("+U", range(20, 25))],
]


def _write_events(directory: Path) -> dict[int, dict[str, Any]]:
    """Write one Parquet file per EVENTS entry (mtimes in order); return the model's rows."""
    model: dict[int, dict[str, Any]] = {}
    tables = []
    for n, changes in enumerate(EVENTS):
        rows = []
        for op, ids in changes:
            for i in ids:
                row = {"id": i, "month": 1 + i % 3, "value": float(n * 100 + i)}
                rows.append({**row, "op": op, "seq": n * 1000 + i})
                if op == "-D":
                    model.pop(i, None)
                else:
                    model[i] = row
        tables.append(pa.Table.from_pylist(rows, schema=CDC_SCHEMA))
    write_parquet_files(directory, tables)
    for n, path in enumerate(sorted(directory.glob("part-*.parquet"))):
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # Spark orders files by mtime
    return model


def _tables(warehouse: Path) -> tuple[Table, Table]:
    options = {"bucket": "2", "changelog-producer": "input"}
    source = create_table(
        warehouse, "db.source", schema=ROWS_SCHEMA, primary_keys=["id"], options=options
    )
    mirror = create_table(warehouse, "db.mirror", schema=ROWS_SCHEMA, primary_keys=["id"])
    return source, mirror


def _rows(table: Table) -> list[dict[str, Any]]:
    return sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])


def _run(
    tmp_path: Path, role: str, *extra: str, server: Any = None
) -> subprocess.CompletedProcess[str]:
    """Run one driver to its end; with a Connect ``server``, also end once the server died.

    A Connect client whose server was SIGKILLed keeps retrying its RPCs, so
    the client (a process of this test) is killed once the server has exited.
    """
    cmd = [
        sys.executable, str(JOB), "--role", role,
        "--warehouse", str(tmp_path / "wh"),
        "--source-dir", str(tmp_path / "cdc"),
        "--checkpoint", str(tmp_path / f"ckpt-{role}"),
        "--results", str(tmp_path / f"{role}.jsonl"),
        *extra,
    ]  # fmt: skip
    env = {**os.environ, **spark_env()}
    if server is None:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    log = tmp_path / f"{role}-client.log"
    with log.open("ab") as out:
        client = subprocess.Popen(cmd, env=env, stdout=out, stderr=out)
        while client.poll() is None:
            if server.process.poll() is not None:
                client.kill()
            try:
                client.wait(timeout=1)
            except subprocess.TimeoutExpired:
                continue
    return subprocess.CompletedProcess(cmd, client.returncode, "", log.read_text()[-3000:])


def _outcomes(tmp_path: Path, role: str) -> list[tuple[int, str]]:
    lines = (tmp_path / f"{role}.jsonl").read_text().splitlines()
    return [(r["batch_id"], r["outcome"]) for r in map(json.loads, lines)]


@pytest.mark.parametrize("connect", [False, True], ids=["classic", "connect"])
def test_mirror_equals_source_after_driver_kills(tmp_path: Path, connect: bool) -> None:
    source, mirror = _tables(tmp_path / "wh")
    model = _write_events(tmp_path / "cdc")
    servers: list[Any] = []

    def run(role: str, kill_after: int | None) -> subprocess.CompletedProcess[str]:
        extra: list[str] = []
        if connect:
            if not servers or servers[-1].process.poll() is not None:
                servers.append(start_connect_server(tmp_path / f"server-{len(servers)}"))
            extra += ["--remote", servers[-1].url, "--kill-pid", str(servers[-1].process.pid)]
        if kill_after is not None:
            extra += ["--kill-after-batch", str(kill_after)]
        return _run(tmp_path, role, *extra, server=servers[-1] if connect else None)

    try:
        killed = run("cdc", 1)  # the CDC driver dies after committing its batch 1
        assert killed.returncode != 0, killed.stderr[-3000:]
        if connect:
            assert servers[-1].process.wait(timeout=60) == -9
        else:
            assert killed.returncode == -9, killed.stderr[-3000:]
        assert _outcomes(tmp_path, "cdc") == [(0, "committed"), (1, "committed")]

        killed = run("mirror", 0)  # the mirror dies after committing snapshots 1..2
        assert killed.returncode != 0, killed.stderr[-3000:]
        assert _outcomes(tmp_path, "mirror") == [(0, "committed")]
        assert _rows(mirror) == _rows(source)

        for role in ("cdc", "mirror"):  # restarts from the checkpoints
            done = run(role, None)
            assert done.returncode == 0, done.stderr[-3000:]
    finally:
        for server in servers:
            server.stop()
    assert _outcomes(tmp_path, "cdc")[2:] == [(1, "skipped"), (2, "committed"), (3, "committed")]
    assert _outcomes(tmp_path, "mirror")[1:] == [(0, "skipped"), (1, "committed")]
    assert _rows(source) == sorted(model.values(), key=lambda r: r["id"])
    assert _rows(mirror) == _rows(source)


def test_offsets_are_snapshot_ids(tmp_path: Path) -> None:
    """The reader's offsets and plans, without Spark: start options, empty and bad ranges."""
    source, _ = _tables(tmp_path / "wh")
    options = {"path": "db.source", "warehouse": str(tmp_path / "wh")}

    def reader(**extra: str) -> SnaplakeStreamReader:
        parsed = SnaplakeSourceOptions.parse({**options, **extra}, streaming=True)
        return SnaplakeStreamReader(parsed, _spark_schema())

    assert reader().initialOffset() == {"snapshot": 0}  # empty table
    assert reader().latestOffset({"snapshot": 0}, None) == {"snapshot": 0}
    from tests.helpers import write_and_commit

    for n in range(3):
        write_and_commit(source, [{"id": n, "month": 1, "value": 1.0}])
    assert reader().initialOffset() == {"snapshot": 0}
    assert reader(startingSnapshot="latest").initialOffset() == {"snapshot": 3}
    assert reader(startingSnapshot="2").initialOffset() == {"snapshot": 1}
    assert reader().latestOffset({"snapshot": 1}, None) == {"snapshot": 3}
    assert reader().partitions({"snapshot": 3}, {"snapshot": 3}) == []
    parts = reader().partitions({"snapshot": 1}, {"snapshot": 3})
    rows = [r for p in parts for b in reader().read(p) for r in b.to_pylist()]
    assert sorted((r["id"], r["_row_kind"], r["_snapshot_id"]) for r in rows) == [
        (1, "+I", 2),
        (2, "+I", 3),
    ]
    with pytest.raises(SnapshotNotFoundError):  # a range past the latest snapshot
        reader().partitions({"snapshot": 3}, {"snapshot": 4})


def _spark_schema() -> Any:
    from snaplake.spark._common import spark_schema_of
    from snaplake.spark.source import with_change_columns

    return spark_schema_of(with_change_columns(ROWS_SCHEMA))
