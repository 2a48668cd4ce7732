"""The demo's Spark Structured Streaming driver (started, killed and restarted by flights_demo.py).

Reads the Parquet files landing in ``--landing`` with Spark's file source and
writes every micro-batch through :class:`snaplake.spark.SnaplakeSink` into the
table. Each batch's outcome goes to ``--results`` as one JSON line (the
orchestrator's progress bar and summary read it).

Control files in ``--control``:

- ``kill-after-commit``: after the next committed batch, SIGKILL this driver's
  whole process group (driver, JVM, Python workers) before Spark records the
  batch in the checkpoint: the worst moment for exactly-once.
- ``stop``: process everything that has landed, then stop cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _session(master: str) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("snaplake-flights-demo")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", default="demo.flights")
    parser.add_argument("--landing", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--control", required=True)
    parser.add_argument("--option", action="append", default=[], help="catalog option k=v")
    parser.add_argument("--max-files-per-trigger", type=int, default=8)
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    options = dict(kv.split("=", 1) for kv in args.option)
    control = Path(args.control)

    from demo.flights_data import spark_schema_ddl
    from snaplake.spark import SinkBatchResult, SnaplakeSink

    spark = _session(args.master)

    def record(result: SinkBatchResult) -> None:
        commit = result.commit
        line = {
            "pid": os.getpid(),
            "batch_id": result.batch_id,
            "commit_user": result.commit_user,
            "outcome": result.outcome.value,
            "snapshot_id": commit.snapshot_id if commit else None,
            "rows": commit.records_added if commit else 0,
            "files": commit.files_added if commit else 0,
            "attempts": commit.attempts if commit else 0,
            "commit_s": commit.duration_s if commit else None,
            "write_s": result.write_s,
            "total_s": result.total_s,
            "time": time.time(),
        }
        with open(args.results, "a") as f:
            f.write(json.dumps(line) + "\n")
        kill = control / "kill-after-commit"
        if result.commit is not None and kill.exists():
            kill.unlink()
            os.killpg(os.getpgid(0), signal.SIGKILL)

    sink = SnaplakeSink(args.table, warehouse=args.warehouse, options=options, on_batch=record)
    query = (
        spark.readStream.schema(spark_schema_ddl())
        .option("maxFilesPerTrigger", args.max_files_per_trigger)
        .parquet(args.landing)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=args.trigger)
        .queryName("flights_to_snaplake")
        .start()
    )
    (control / f"started-{os.getpid()}").touch()
    while not (control / "stop").exists():
        # raises if the query failed; pyspark annotates `timeout: int` but takes float seconds
        query.awaitTermination(0.2)  # type: ignore[arg-type]
    query.processAllAvailable()
    query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
