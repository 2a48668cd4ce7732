"""A streaming driver for the two-query mirror test, run as a subprocess.

``--role cdc``: a Parquet file stream of CDC events (``id, month, value, op,
seq``; one file per trigger) upserts into the source table through
:class:`SnaplakeSink` (``row_kind_column="op"``, ``order_by="seq"``).
``--role mirror``: ``readStream.format("snaplake")`` on the source table
(its changelog) upserts into the mirror table through :class:`SnaplakeSink`
(``row_kind_column="_row_kind"``, ``order_by="_snapshot_id"``).

Both run ``availableNow``. Each batch's result is appended to ``--results``;
``--kill-after-batch N`` SIGKILLs ``--kill-pid`` (default: this driver) right
after batch N committed, before Spark records it in the checkpoint's commit
log. ``--remote sc://...`` runs the query on a Spark Connect server (the
sink then runs in the server's Python process, where ``--kill-pid`` names
the server).
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

from tests.spark.conftest import new_session

CDC_SPARK_DDL = "id long, month long, value double, op string, seq long"


class Recorder:
    """Picklable ``on_batch``: append a JSON line, then maybe SIGKILL a process."""

    def __init__(self, path: str, kill_after: int | None, kill_pid: int | None) -> None:
        self.path = path
        self.kill_after = kill_after
        self.kill_pid = kill_pid

    def __call__(self, result: Any) -> None:
        line = {
            "batch_id": result.batch_id,
            "outcome": result.outcome.value,
            "snapshot_id": result.commit.snapshot_id if result.commit else None,
        }
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self.kill_after is not None and result.batch_id == self.kill_after:
            os.kill(self.kill_pid or os.getpid(), signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("cdc", "mirror"), required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--source-dir", default=None)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--kill-after-batch", type=int, default=None)
    parser.add_argument("--kill-pid", type=int, default=None)
    parser.add_argument("--remote", default=None)
    args = parser.parse_args()

    from snaplake.spark import SnaplakeSink, register_data_source

    if args.remote:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(args.remote).getOrCreate()
    else:
        spark = new_session("local[2]")
    recorder = Recorder(args.results, args.kill_after_batch, args.kill_pid)
    if args.role == "cdc":
        stream = (
            spark.readStream.schema(CDC_SPARK_DDL)
            .option("maxFilesPerTrigger", 1)
            .parquet(args.source_dir)
        )
        sink = SnaplakeSink(
            "db.source", warehouse=args.warehouse, commit_user="cdc", on_batch=recorder,
            check_nullability=False, row_kind_column="op", order_by="seq",
        )  # fmt: skip
    else:
        register_data_source(spark)
        stream = (
            spark.readStream.format("snaplake")
            .option("warehouse", args.warehouse)
            .load("db.source")
        )
        sink = SnaplakeSink(
            "db.mirror", warehouse=args.warehouse, commit_user="mirror", on_batch=recorder,
            check_nullability=False, row_kind_column="_row_kind", order_by="_snapshot_id",
        )  # fmt: skip
    query = (
        stream.writeStream.foreachBatch(sink)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
