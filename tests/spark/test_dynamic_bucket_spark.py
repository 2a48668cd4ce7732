"""Spark end to end on a dynamic-bucket table (a primary key, no ``bucket``).

A streaming query writes upserts through ``SnaplakeSink`` in ``foreachBatch``
(one file per batch, a restart with new files, a replayed batch skipped); then
``snaplake.spark.compact`` (full), ``snaplake.spark.write`` upserts and
``snaplake.spark.remove_orphan_files``. After each step the table equals the
model, every key is in one bucket whose HASH file holds its hash, and only
referenced HASH files and index manifests are left after the orphan clean.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.dynamic_maintenance_helpers import age_all, assert_index_exactly_referenced, model
from tests.helpers import create_table
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows

from snaplake.spark import BatchOutcome, SinkBatchResult, SnaplakeSink, compact, read, write
from snaplake.spark import remove_orphan_files as spark_remove_orphan_files

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

_DDL = "month INT, id BIGINT, name STRING, qty BIGINT, price DOUBLE, ok BOOLEAN"


def _source_file(src: Path, k: int, rows: list[dict[str, Any]]) -> None:
    """One source file per batch; mtimes in batch order (Spark takes the oldest first)."""
    src.mkdir(exist_ok=True)
    path = src / f"part-{k:03d}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PK_SCHEMA), path)
    stamp = 1_700_000_000 + k
    os.utime(path, (stamp, stamp))


def test_sink_compact_write_and_orphan_clean_on_a_dynamic_table(spark: Any, tmp_path: Path) -> None:
    table = create_table(
        tmp_path / "wh", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"dynamic-bucket.target-row-num": "8", "snapshot.num-retained.min": "1",
                 "snapshot.num-retained.max": "2", "snapshot.time-retained": "0 ms"},
    )  # fmt: skip
    assert table.bucket_mode == "dynamic"
    batches = [make_rows((k * 23) % 60, 40, seed=k) for k in range(4)]
    src = tmp_path / "src"
    results: list[SinkBatchResult] = []
    sink = SnaplakeSink(table, commit_user="stream", check_nullability=False,
                        on_batch=results.append)  # fmt: skip

    def run() -> None:
        query = (
            spark.readStream.schema(_DDL).option("maxFilesPerTrigger", 1).parquet(str(src))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()

    for k in range(2):
        _source_file(src, k, batches[k])
    run()
    for k in range(2, 4):
        _source_file(src, k, batches[k])
    run()  # a restart reads the new files only
    committed = [r for r in results if r.outcome == BatchOutcome.COMMITTED]
    assert len(committed) == 4
    assert sorted_rows(table.to_arrow()) == model(*batches)
    assert assert_one_bucket_per_key(table) > 3
    # a replayed batch id commits nothing (and does not touch the index)
    spark_df = spark.createDataFrame(pa.Table.from_pylist(batches[0], schema=PK_SCHEMA))
    sink(spark_df, committed[-1].batch_id)
    assert results[-1].outcome != BatchOutcome.COMMITTED
    assert sorted_rows(table.to_arrow()) == model(*batches)

    done = compact(spark, table, full=True)
    assert done.snapshot_id is not None
    assert sorted_rows(table.to_arrow()) == model(*batches)
    assert assert_one_bucket_per_key(table) > 3
    levels = {f.level for s in table.new_scan().plan() for f in s.files}
    assert levels == {max(levels)}

    more = make_rows(50, 40, seed=9)  # known and new keys
    write(spark.createDataFrame(pa.Table.from_pylist(more, schema=PK_SCHEMA)).repartition(3),
          table, check_nullability=False)  # fmt: skip
    assert sorted_rows(table.to_arrow()) == model(*batches, more)
    assert assert_one_bucket_per_key(table) > 3
    merged = read(spark, table).toArrow()
    assert sorted_rows(merged.cast(PK_SCHEMA)) == model(*batches, more)

    table.expire_snapshots()
    crashed = table.new_write(commit_user="crashed")  # died after writing HASH files
    crashed.write_arrow(pa.Table.from_pylist(make_rows(300, 12), schema=PK_SCHEMA))
    crashed.prepare_commit()
    age_all(table, 3 * 86400)
    cleaned = spark_remove_orphan_files(spark, table, older_than=timedelta(hours=1),
                                        dry_run=False)  # fmt: skip
    assert any("/index/" in p for p in cleaned.orphan_files)
    assert_index_exactly_referenced(table)
    assert sorted_rows(table.to_arrow()) == model(*batches, more)
    assert_one_bucket_per_key(table)
