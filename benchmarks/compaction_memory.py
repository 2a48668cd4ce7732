"""Peak memory and time of one small-file compaction onto a bucket's large earlier output.

A streaming table's bucket holds one earlier compaction output (``--big-rows`` rows of
repetitive data, a few MB of Parquet that decode to ~15x that) and ``--small`` tiny
appends after it; every input is below ``target-file-size * compaction.small-file-ratio``,
so one compaction rewrites all of them (Paimon's rule, and delta-rs ``optimize.compact``
bin-packs the same files). Each compaction runs in a fresh process; the figure is its
peak RSS (``VmHWM``, reset after the table is opened) minus the RSS before it started.

Usage: .venv/bin/python benchmarks/compaction_memory.py [--big-rows 1000000] [--small 500]
       [--repeat 3]

Sides: snaplake as the maintenance daemon runs it (``prepare_process``: no polars,
glibc malloc for Arrow), snaplake as a library (polars reader), and delta-rs
``optimize.compact()`` on the same rows in the same files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import pyarrow as pa
from _common import median, reset_peak, status_mib

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("payload", pa.string()),
    ]
)
OPTIONS = {"target-file-size": "8 mb", "compaction.min.file-num": "5"}


def rows(start: int, count: int) -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table(
        {
            "id": ids,
            "month": pa.array([1] * count, pa.int32()),
            "payload": pa.array([f"row-{i}" for i in range(start, start + count)]),
        },
        schema=SCHEMA,
    )


def build(root: Path, big_rows: int, small: int) -> None:
    """Create the snaplake table and the Delta table with the same files' worth of rows."""
    from deltalake import write_deltalake

    import snaplake

    table = snaplake.FileSystemCatalog(str(root / "wh")).create_table(
        "db.t", schema=SCHEMA, options=OPTIONS
    )
    commit = table.new_commit(commit_user="bench")
    batches = [rows(0, big_rows)] + [rows(big_rows + i * 100, 100) for i in range(small)]
    for data in batches:
        write = table.new_write(commit_user="bench")
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
    for data in batches:
        write_deltalake(str(root / "delta"), data, mode="append")


def child(side: str, root: Path) -> None:
    """Open the table, reset the peak, compact once; print JSON with the figures."""
    if side == "daemon":
        from snaplake.daemon.memory import limit_malloc_arenas, prepare_process

        prepare_process()
        limit_malloc_arenas()
    if side == "delta":
        from deltalake import DeltaTable

        dt = DeltaTable(str(root / "delta"))

        def run() -> int:
            return int(dt.optimize.compact()["numFilesRemoved"])
    else:
        import snaplake

        if side == "library":
            import polars  # noqa: F401  (its import, ~50 MiB, is not the compaction's)

        table = snaplake.FileSystemCatalog(str(root / "wh")).get_table("db.t")
        table.new_scan().plan()  # metadata decoded before the measurement, as for delta-rs

        def run() -> int:
            return table.compact().files_before

    before = reset_peak()
    t0 = time.perf_counter()
    files = run()
    seconds = time.perf_counter() - t0
    peak = status_mib()["VmHWM"]
    print(json.dumps({"files": files, "seconds": seconds, "peak_mib": peak - before}))


def measure(side: str, prepared: Path, work: Path) -> dict[str, float]:
    copy = work / f"{side}-{time.monotonic_ns()}"
    shutil.copytree(prepared, copy)
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", side, str(copy)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--big-rows", type=int, default=1_000_000)
    p.add_argument("--small", type=int, default=500)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--child", nargs=2, metavar=("SIDE", "ROOT"))
    args = p.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return 0
    work = Path(tempfile.mkdtemp(prefix="snaplake-compaction-memory-"))
    try:
        prepared = work / "prepared"
        t0 = time.perf_counter()
        build(prepared, args.big_rows, args.small)
        print(f"built: 1 file of {args.big_rows:,} rows + {args.small} files of 100 rows, "
              f"both formats, in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        sides = ("daemon", "library", "delta")
        results: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
        for i in range(args.repeat):
            for side in sides[i % 3 :] + sides[: i % 3]:  # rotate the order
                results[side].append(measure(side, prepared, work))
        names = {"daemon": "snaplake (daemon process)", "library": "snaplake (library)",
                 "delta": "delta-rs optimize.compact"}  # fmt: skip
        for side in sides:
            r = results[side]
            print(f"  {names[side]:27s}: {int(r[0]['files']):4d} files, "
                  f"peak +{median([x['peak_mib'] for x in r]):6.1f} MiB, "
                  f"{median([x['seconds'] for x in r]) * 1000:7.0f} ms "
                  f"(medians of {len(r)})")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
