"""A streaming driver run as a subprocess by the crash tests.

Reads Parquet files from ``--source`` with a file stream (``maxFilesPerTrigger``)
and writes them through :class:`snaplake.spark.SnaplakeSink`. Every batch's
:class:`SinkBatchResult` is appended to ``--results`` as one JSON line.
``--kill-after-batch N`` SIGKILLs this driver right after batch N was
committed and before Spark records the batch in the checkpoint's commit log:
the worst moment for exactly-once.

``--merge-schema`` makes the sink evolve the table; ``--new-column-from-batch N``
adds a ``reason`` column to every batch from N on (a pipeline upgraded mid-stream);
``--kill-after-alter N`` SIGKILLs the driver right after batch N's ``alter_table``
landed, before any of its files is written or committed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.spark.conftest import ROWS_SPARK_DDL, new_session


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--trigger", default="availableNow")
    parser.add_argument("--max-files-per-trigger", type=int, default=1)
    parser.add_argument("--kill-after-batch", type=int, default=None)
    parser.add_argument("--merge-schema", action="store_true")
    parser.add_argument("--new-column-from-batch", type=int, default=None)
    parser.add_argument("--kill-after-alter", type=int, default=None)
    args = parser.parse_args()

    from snaplake.spark import SinkBatchResult, SnaplakeSink

    spark = new_session("local[2]")

    def record(result: SinkBatchResult) -> None:
        line = {
            "batch_id": result.batch_id,
            "commit_user": result.commit_user,
            "outcome": result.outcome.value,
            "snapshot_id": result.commit.snapshot_id if result.commit else None,
            "records": result.commit.records_added if result.commit else 0,
        }
        with open(args.results, "a") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if args.kill_after_batch is not None and result.batch_id == args.kill_after_batch:
            os.kill(os.getpid(), signal.SIGKILL)

    sink = SnaplakeSink(
        args.table, warehouse=args.warehouse, on_batch=record, merge_schema=args.merge_schema
    )
    current = {"batch": -1}
    if args.kill_after_alter is not None:
        from snaplake.write import schema_merge

        namespace = vars(schema_merge)  # the sink's alter goes through this name
        real = namespace["commit_schema_changes"]

        def commit_then_die(*a: Any, **kw: Any) -> Any:
            schema = real(*a, **kw)
            if current["batch"] == args.kill_after_alter:
                os.kill(os.getpid(), signal.SIGKILL)
            return schema

        namespace["commit_schema_changes"] = commit_then_die

    def process(df: Any, batch_id: int) -> None:
        current["batch"] = batch_id
        if args.new_column_from_batch is not None and batch_id >= args.new_column_from_batch:
            from pyspark.sql import functions as F  # noqa: N812 - Spark's idiom

            df = df.withColumn("reason", F.concat(F.lit("r"), F.col("id").cast("string")))
        sink(df, batch_id)

    stream = (
        spark.readStream.schema(ROWS_SPARK_DDL)
        .option("maxFilesPerTrigger", args.max_files_per_trigger)
        .parquet(args.source)
        .writeStream.foreachBatch(process)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.trigger == "availableNow":
        stream = stream.trigger(availableNow=True)
    elif args.trigger == "once":
        stream = stream.trigger(once=True)
    else:
        stream = stream.trigger(processingTime=args.trigger)
    query = stream.start()
    if args.trigger.startswith(("availableNow", "once")):
        query.awaitTermination()
    else:
        query.processAllAvailable()
        query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
