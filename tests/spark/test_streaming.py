"""Exactly-once streaming through SnaplakeSink: crashes, replays, triggers, concurrent queries."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import create_table
from tests.spark.conftest import (
    ROWS_SCHEMA,
    ROWS_SPARK_DDL,
    clean_orphans,
    data_files_on_disk,
    live_data_files,
    numbered_rows,
    spark_env,
    write_parquet_files,
)

import snaplake
from snaplake.spark import BatchOutcome, SinkBatchResult, SnaplakeSink

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

JOB = Path(__file__).with_name("stream_job.py")
ROWS_PER_FILE = 500


def _make_table(warehouse: Path) -> snaplake.Table:
    return create_table(warehouse, "db.events", schema=ROWS_SCHEMA, partition_keys=["month"])


def _source(directory: Path, files: int, *, start: int = 0) -> pa.Table:
    tables = [numbered_rows(start + i * ROWS_PER_FILE, ROWS_PER_FILE) for i in range(files)]
    write_parquet_files(directory, tables)
    return pa.concat_tables(tables)


def _assert_exact(table: snaplake.Table, expected_ids: pa.Array) -> None:
    back = table.to_arrow()
    assert back.num_rows == len(expected_ids)
    assert pc.count_distinct(back["id"]).as_py() == len(expected_ids)
    assert sorted(back["id"].to_pylist()) == sorted(expected_ids.to_pylist())


def _run_job(tmp_path: Path, *extra: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**__import__("os").environ, **spark_env()}
    cmd = [
        sys.executable, str(JOB),
        "--warehouse", str(tmp_path / "wh"),
        "--table", "db.events",
        "--source", str(tmp_path / "src"),
        "--checkpoint", str(tmp_path / "ckpt"),
        "--results", str(tmp_path / "results.jsonl"),
        *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _results(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_driver_killed_after_commit_replays_as_noop(tmp_path: Path) -> None:
    """SIGKILL after batch 2's commit, before the checkpoint's commit log: batch 2 is a no-op."""
    table = _make_table(tmp_path / "wh")
    source = _source(tmp_path / "src", 5)

    first = _run_job(tmp_path, "--trigger", "200 milliseconds", "--kill-after-batch", "2")
    assert first.returncode == -9, first.stderr[-3000:]
    assert (tmp_path / "ckpt" / "offsets" / "2").exists()
    assert not (tmp_path / "ckpt" / "commits" / "2").exists()
    before = _results(tmp_path)
    assert [r["batch_id"] for r in before] == [0, 1, 2]
    assert all(r["outcome"] == "committed" for r in before)
    user = before[0]["commit_user"]
    assert user.startswith("spark-")
    assert table.new_commit(commit_user=user).txn_map(table.latest_snapshot())[user] == 2
    # Three whole source files landed (Spark orders files by modification time, so which
    # three is not fixed when their times tie), each row once.
    ids = table.to_arrow()["id"].to_pylist()
    assert len(ids) == len(set(ids)) == 3 * ROWS_PER_FILE
    files = {i // ROWS_PER_FILE for i in ids}
    assert len(files) == 3
    assert set(ids) == {f * ROWS_PER_FILE + k for f in files for k in range(ROWS_PER_FILE)}

    second = _run_job(tmp_path, "--trigger", "availableNow")
    assert second.returncode == 0, second.stderr[-3000:]
    after = _results(tmp_path)[len(before) :]
    assert after[0] == {**after[0], "batch_id": 2, "outcome": "skipped", "commit_user": user}
    assert [r["batch_id"] for r in after] == [2, 3, 4]
    assert [r["outcome"] for r in after[1:]] == ["committed", "committed"]

    _assert_exact(table, source["id"].combine_chunks())
    appends = [s for s in table.snapshots() if s.commit_user == user]
    assert [s.commit_identifier for s in appends] == [0, 1, 2, 3, 4]
    clean_orphans(table)
    assert data_files_on_disk(Path(table.root)) == live_data_files(table)


@pytest.mark.parametrize("trigger", ["once", "processingTime", "availableNow"])
def test_triggers_and_restart(spark: Any, tmp_path: Path, trigger: str) -> None:
    """Each trigger commits one snapshot per non-empty batch; a restart reads new files only."""
    table = _make_table(tmp_path / "wh")
    results: list[SinkBatchResult] = []
    sink = SnaplakeSink(table, on_batch=results.append)
    src = tmp_path / "src"
    all_ids = _source(src, 2)["id"]

    def run() -> None:
        writer = (
            spark.readStream.schema(ROWS_SPARK_DDL)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(src))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
        )
        if trigger == "once":
            writer = writer.trigger(once=True)
        elif trigger == "availableNow":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime="100 milliseconds")
        query = writer.start()
        if trigger == "processingTime":
            query.processAllAvailable()
            query.stop()
        else:
            query.awaitTermination()

    run()
    more = numbered_rows(10_000, 300)
    write_parquet_files(src, [more], prefix="zz")
    run()
    committed = [r for r in results if r.outcome == BatchOutcome.COMMITTED]
    if trigger == "once":
        assert len(committed) == 2  # once ignores maxFilesPerTrigger: one batch per run
    else:
        assert len(committed) == 3
    assert len({r.commit_user for r in results}) == 1
    _assert_exact(table, pa.concat_arrays([all_ids.combine_chunks(), more["id"].combine_chunks()]))
    assert len(table.snapshots()) == len(committed)


def test_replayed_batch_is_skipped_before_reading(spark: Any, tmp_path: Path) -> None:
    """A committed (user, batch_id) returns without touching df; an empty batch commits nothing."""
    table = _make_table(tmp_path / "wh")
    sink = SnaplakeSink(table, commit_user="replayer")
    df = spark.createDataFrame(numbered_rows(0, 100).to_pylist(), ROWS_SPARK_DDL)
    sink(df, 7)
    assert len(table.snapshots()) == 1

    class Untouchable:
        """A stand-in DataFrame that fails if anything but its session is used."""

        sparkSession = df.sparkSession  # noqa: N815 - Spark's attribute name

        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the sink touched df.{name} of a replayed batch")

    sink(Untouchable(), 7)  # type: ignore[arg-type]
    sink(Untouchable(), 3)  # type: ignore[arg-type]
    assert len(table.snapshots()) == 1

    empty = spark.createDataFrame([], ROWS_SPARK_DDL)
    sink(empty, 8)
    assert len(table.snapshots()) == 1
    _assert_exact(table, numbered_rows(0, 100)["id"].combine_chunks())


def test_two_concurrent_queries_are_each_exactly_once(spark: Any, tmp_path: Path) -> None:
    """Two queries (two checkpoints, two users) into one table; both then replay a batch."""
    table = _make_table(tmp_path / "wh")
    sink = SnaplakeSink(table)  # one sink object, two queries: users come from the query ids
    sources = []
    for q in range(2):
        sources.append(_source(tmp_path / f"src{q}", 4, start=q * 1_000_000)["id"])

    def start(q: int) -> Any:
        return (
            spark.readStream.schema(ROWS_SPARK_DDL)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(tmp_path / f"src{q}"))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / f"ckpt{q}"))
            .trigger(availableNow=True)
            .start()
        )

    queries = [start(0), start(1)]
    for query in queries:
        query.awaitTermination()
    expected = pa.concat_arrays([s.combine_chunks() for s in sources])
    _assert_exact(table, expected)
    txn = table.new_commit(commit_user="x").txn_map(table.latest_snapshot())
    users = {f"spark-{q.id}" for q in queries}
    assert users <= set(txn)
    assert all(txn[u] == 3 for u in users)

    # Simulate a crash after the last commit and before the checkpoint recorded it.
    for q in range(2):
        (tmp_path / f"ckpt{q}" / "commits" / "3").unlink()
        (tmp_path / f"ckpt{q}" / "commits" / ".3.crc").unlink(missing_ok=True)
    errors: list[BaseException] = []

    def rerun(q: int) -> None:
        try:
            start(q).awaitTermination()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=rerun, args=(q,)) for q in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    _assert_exact(table, expected)
    assert len(table.snapshots()) == 8
    assert data_files_on_disk(Path(table.root)) == live_data_files(table)
