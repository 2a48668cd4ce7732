"""The Spark edge on a Spark Connect session: batch write/read, the sink, commit users, failures.

One Connect server per module (its own JVM on 127.0.0.1, started and stopped
by pid here) and one Connect client session in this process; the sink and
the executors' tasks are pickled to the server and run in its Python workers.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import create_table
from tests.spark.conftest import (
    ROWS_SCHEMA,
    ROWS_SPARK_DDL,
    BatchRecorder,
    data_files_on_disk,
    live_data_files,
    numbered_rows,
    start_connect_server,
    write_parquet_files,
)
from tests.spark.faults import FailingDataFileIO

import snaplake
from snaplake.errors import SchemaMismatchError
from snaplake.spark import SnaplakeSink, read, write
from snaplake.spark._common import is_connect
from snaplake.spark.write import write_messages
from snaplake.table import Table
from snaplake.write.batch_write import commit_or_abort

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

pytest.importorskip("grpc", reason="Spark Connect needs pyspark's connect extras")

WIDE = pa.schema(
    [
        ("id", pa.int64()),
        ("month", pa.int64()),
        ("carrier", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("distance", pa.float64()),
    ]
)
_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect session on a local server; the process leaves Connect mode afterwards."""
    saved = {name: os.environ.get(name) for name in _CONNECT_ENV}
    server = start_connect_server(tmp_path_factory.mktemp("connect-server"))
    try:
        from pyspark.sql import SparkSession

        session = SparkSession.builder.remote(server.url).getOrCreate()
        assert is_connect(session), type(session)
        yield session
        for query in session.streams.active:
            query.stop()
        session.stop()
    finally:
        server.stop()
        for name, value in saved.items():  # later modules start classic sessions
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _wide_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    base = dt.datetime(2013, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": ids,
            "month": [1 + i % 4 for i in ids],
            "carrier": [None if i % 7 == 0 else f"c{i % 5}" for i in ids],
            "ts": [base + dt.timedelta(minutes=i) for i in ids],
            "distance": [float(i % 997) for i in ids],
        },
        schema=WIDE,
    )


def _names(paths: list[str]) -> set[str]:
    return {p.rsplit("/", 1)[-1] for p in paths}


def _sorted_rows(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def _rows_table(tmp_path: Path, file_io: Any = None) -> Table:
    created = create_table(tmp_path / "wh", schema=ROWS_SCHEMA, partition_keys=["month"])
    if file_io is None:
        return created
    return Table(file_io=file_io, root=created.root, identifier=created.identifier)


def _assert_exact(table: Table, expected_ids: list[int]) -> None:
    back = table.to_arrow()
    assert back.num_rows == len(expected_ids)
    assert pc.count_distinct(back["id"]).as_py() == len(expected_ids)
    assert sorted(back["id"].to_pylist()) == sorted(expected_ids)


def test_batch_write_and_read(connect: Any, tmp_path: Path) -> None:
    """write (append, static/dynamic/full overwrite) and read (filter, columns) equal to_arrow()."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table("db.wide", schema=WIDE, partition_keys=["month"])
    first = write(connect.createDataFrame(_wide_rows(0, 400)).repartition(2), table)
    assert first.records_added == 400
    write(
        connect.createDataFrame(_wide_rows(1_000, 400)), "db.wide", warehouse=str(tmp_path / "wh")
    )
    assert _sorted_rows(table.to_arrow()) == _sorted_rows(
        pa.concat_tables([_wide_rows(0, 400), _wide_rows(1_000, 400)])
    )

    full = read(connect, table)
    assert _sorted_rows(full.toArrow()) == _sorted_rows(table.to_arrow())
    assert _names(full.inputFiles()) == live_data_files(table)
    month2 = read(connect, table, filter=[("month", "=", 2), ("id", "<", 1_000)])
    assert _sorted_rows(month2.toArrow()) == _sorted_rows(
        table.to_arrow(filter=[("month", "=", 2), ("id", "<", 1_000)])
    )
    # Pruned by partition and by id statistics: month 2 of the first commit only.
    first_commit = {f.file_name for s in table.new_scan(snapshot_id=1).plan() for f in s.files}
    assert _names(month2.inputFiles()) == {
        n
        for n in first_commit
        if n in _names(read(connect, table, filter={"month": 2}).inputFiles())
    }
    assert 0 < len(month2.inputFiles()) < len(full.inputFiles())
    picked = read(connect, table, snapshot_id=1, columns=["distance", "id"], filter={"month": 3})
    assert picked.columns == ["distance", "id"]
    assert _sorted_rows(picked.toArrow()) == _sorted_rows(
        table.to_arrow(snapshot_id=1, columns=["distance", "id"], filter={"month": 3})
    )

    extra = connect.createDataFrame(_wide_rows(5_000, 40))
    write(extra.where("month = 1"), table, mode="overwrite", overwrite_partitions={"month": 1})
    assert table.to_arrow(filter={"month": 1}).num_rows == 10
    write(extra.where("month = 2"), table, mode="overwrite", overwrite_partitions="dynamic")
    assert table.to_arrow(filter={"month": 2}).num_rows == 10
    assert table.to_arrow(filter={"month": 3}).num_rows == 200
    write(extra, table, mode="overwrite")
    assert _sorted_rows(read(connect, table).toArrow()) == _sorted_rows(_wide_rows(5_000, 40))


def test_stream_through_sink_is_exactly_once(connect: Any, tmp_path: Path) -> None:
    """An availableNow file stream commits one snapshot per batch; a replayed batch is a no-op."""
    table = _rows_table(tmp_path)
    recorder = BatchRecorder(tmp_path / "batches.jsonl")
    sink = SnaplakeSink(table, commit_user="connect-stream", on_batch=recorder)
    sources = [numbered_rows(i * 500, 500) for i in range(3)]
    write_parquet_files(tmp_path / "src", sources)
    expected = [i for s in sources for i in s["id"].to_pylist()]

    def run() -> None:
        query = (
            connect.readStream.schema(ROWS_SPARK_DDL)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(tmp_path / "src"))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None

    run()
    first = recorder.results()
    assert [(r["batch_id"], r["outcome"]) for r in first] == [
        (0, "committed"),
        (1, "committed"),
        (2, "committed"),
    ]
    assert {r["commit_user"] for r in first} == {"connect-stream"}
    _assert_exact(table, expected)
    assert [s.commit_identifier for s in table.snapshots()] == [0, 1, 2]

    # A crash after batch 2's commit, before the checkpoint recorded it: the rerun replays it.
    (tmp_path / "ckpt" / "commits" / "2").unlink()
    (tmp_path / "ckpt" / "commits" / ".2.crc").unlink(missing_ok=True)
    run()
    replay = recorder.results()[len(first) :]
    assert [(r["batch_id"], r["outcome"]) for r in replay] == [(2, "skipped")]
    assert len(table.snapshots()) == 3
    _assert_exact(table, expected)

    # The sink called in this (client) process with a Connect DataFrame: the same no-op.
    batch = connect.createDataFrame(sources[2])
    sink(batch, 2)
    assert recorder.results()[-1]["outcome"] == "skipped"
    # Racing the check (committed meanwhile): the commit is a duplicate, its files are deleted.
    messages, schema = write_messages(batch, table, commit_user="connect-stream")
    assert messages
    committer = table.new_commit(commit_user="connect-stream")
    result = commit_or_abort(committer, schema, messages, commit_identifier=2)
    assert result.was_duplicate
    assert len(table.snapshots()) == 3
    _assert_exact(table, expected)
    assert data_files_on_disk(Path(table.root)) == live_data_files(table)


def test_commit_user_is_required_under_connect(
    connect: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without commit_user: refused at construction, per batch, and in a query; nothing written."""
    table = _rows_table(tmp_path)
    with pytest.raises(ValueError, match="explicit commit_user under Spark Connect"):
        SnaplakeSink(table)

    # A sink built before the process entered Connect mode fails on its first batch instead.
    with monkeypatch.context() as m:
        m.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
        sink = SnaplakeSink(table)
    df = connect.createDataFrame(numbered_rows(0, 50))
    with pytest.raises(ValueError, match="explicit commit_user under Spark Connect"):
        sink(df, 0)
    write_parquet_files(tmp_path / "src", [numbered_rows(0, 50)])
    query = (
        connect.readStream.schema(ROWS_SPARK_DDL)
        .parquet(str(tmp_path / "src"))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="explicit commit_user under Spark Connect"):
        query.awaitTermination()
    assert table.latest_snapshot() is None
    assert data_files_on_disk(Path(table.root)) == set()


def test_failed_jobs_delete_their_files(connect: Any, tmp_path: Path) -> None:
    """A job failing in one task deletes the other task's files; bad values fail the schema."""
    fio = FailingDataFileIO(
        partition=1,
        attempts=None,
        after_files=1,
        marker_dir=str(tmp_path / "faults"),
        slow_partition=1,  # partition 0 has finished its files when partition 1 fails
        delay_s=0.5,
    )
    table = _rows_table(tmp_path, fio)
    df = connect.createDataFrame(numbered_rows(0, 600)).repartition(2)
    with pytest.raises(Exception, match="injected failure"):
        write(df, table)
    assert [p.name for p in (tmp_path / "faults").iterdir()] == ["p1-a0-1"]
    assert table.latest_snapshot() is None
    assert data_files_on_disk(Path(table.root)) == set()

    strict = snaplake.FileSystemCatalog(str(tmp_path / "wh")).create_table(
        "db.strict",
        schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("month", pa.int64())]),
        partition_keys=["month"],
    )
    rows = connect.createDataFrame(
        [(None if i == 13 else i, 1 + i % 3) for i in range(40)], "id long, month long"
    ).repartition(2)
    lenient = SnaplakeSink(strict, commit_user="u", check_nullability=False)
    with pytest.raises(SchemaMismatchError, match="NOT NULL in the table"):
        lenient(rows, 0)
    assert strict.latest_snapshot() is None
    assert data_files_on_disk(Path(strict.root)) == set()


@pytest.mark.s3
def test_sink_and_read_on_s3(connect: Any, tmp_path: Path) -> None:
    """On s3:// the server's executors write and read through the FileIO (mapInArrow read)."""
    from tests.s3_servers import start_moto

    server = start_moto()
    try:
        endpoint = server.endpoint
        warehouse = f"s3://{endpoint.new_bucket()}/wh"
        options = endpoint.options()
        catalog = snaplake.FileSystemCatalog(warehouse, options=options)
        catalog.create_table("db.t", schema=ROWS_SCHEMA, partition_keys=["month"])
        sink = SnaplakeSink("db.t", warehouse=warehouse, options=options, commit_user="s3")
        df = connect.createDataFrame(numbered_rows(0, 600)).repartition(2)
        sink(df, 0)
        sink(df, 0)  # replay: no-op
        table = catalog.get_table("db.t")
        assert len(table.snapshots()) == 1
        back = read(connect, "db.t", warehouse=warehouse, options=options, filter={"month": 2})
        assert _sorted_rows(back.toArrow()) == _sorted_rows(table.to_arrow(filter={"month": 2}))
        picked = read(connect, table, columns=["value", "id"])
        assert picked.columns == ["value", "id"]
        assert _sorted_rows(picked.toArrow()) == _sorted_rows(
            table.to_arrow(columns=["value", "id"])
        )
    finally:
        server.stop()
