"""LSM compaction of one bucket holding 20 sorted runs: throughput and peak memory.

One bucket (an unpartitioned table, ``bucket = 1``) gets a base load of
``--rows`` rows and then ``--runs - 1`` commits each updating ``--fraction``
of them, so it holds ``--runs`` sorted runs. A full compaction then merges
them into files rolled at ``--target-file-size``. It runs in a fresh process
as the daemon runs it (``prepare_process``); the figures are rows read per
second and the peak RSS (``VmHWM``, reset after the table is opened) minus the
RSS before it, against the decoded (Arrow) size of one output file. Target:
peak RSS <= 2x one output file's decoded size.

Usage: .venv/bin/python benchmarks/pk_compaction.py [--rows 2000000] [--runs 20]
       [--fraction 0.1] [--target-file-size "64 mb"]
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
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _common import reset_peak, status_mib

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("count", pa.int64()),
        pa.field("note", pa.string()),
    ]
)


def _rows(ids: np.ndarray, version: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"customer-{i % 100_000}" for i in ids.tolist()]),
            "amount": pa.array(ids * 0.25 + version),
            "count": pa.array(ids % 97 + version, pa.int64()),
            "note": pa.array([f"v{version}-{i}" for i in ids.tolist()]),
        },
        schema=SCHEMA,
    )


def build(root: Path, rows: int, runs: int, fraction: float, target: str) -> None:
    import snaplake

    table = snaplake.FileSystemCatalog(str(root)).create_table(
        "db.t", schema=SCHEMA, primary_keys=["id"],
        options={"bucket": "1", "target-file-size": target,
                 "num-sorted-run.compaction-trigger": "1000"},
    )  # fmt: skip
    write = table.new_write(commit_user="bench")
    commit = table.new_commit(commit_user="bench")
    rng = np.random.default_rng(7)
    for version in range(runs):
        ids = (
            np.arange(rows)
            if version == 0
            else np.sort(rng.choice(rows, int(rows * fraction), replace=False))
        )
        for start in range(0, len(ids), 500_000):
            write.write_arrow(_rows(ids[start : start + 500_000], version))
        commit.commit(write.prepare_commit(), commit_identifier=version)


def child(root: Path) -> None:
    """Open the table, reset the peak, run one full compaction; print JSON figures."""
    import snaplake
    from snaplake.daemon.memory import limit_malloc_arenas, prepare_process

    prepare_process()
    limit_malloc_arenas()
    table = snaplake.FileSystemCatalog(str(root)).get_table("db.t")
    splits = table.new_scan().plan()
    rows_in = sum(f.row_count for s in splits for f in s.files)
    runs = len(splits[0].files)
    before = reset_peak()
    t0 = time.perf_counter()
    result = table.compact(full=True)
    seconds = time.perf_counter() - t0
    peak = status_mib()["VmHWM"] - before
    outputs = list(result.output_files)
    decoded = max(pq.read_table(p).nbytes for p in outputs) / (1 << 20)
    print(json.dumps({
        "runs": runs, "rows_in": rows_in, "seconds": seconds, "peak_mib": peak,
        "outputs": len(outputs), "output_decoded_mib": decoded,
        "rows_out": result.rows_rewritten,
    }))  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--fraction", type=float, default=0.1)
    p.add_argument("--target-file-size", default="64 mb")
    p.add_argument("--child", metavar="ROOT")
    args = p.parse_args()
    if args.child:
        child(Path(args.child))
        return 0
    work = Path(tempfile.mkdtemp(prefix="pk-compact-"))
    try:
        t0 = time.perf_counter()
        build(work, args.rows, args.runs, args.fraction, args.target_file_size)
        print(f"built {args.runs} runs ({args.rows:,} keys) in {time.perf_counter() - t0:.1f} s")
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(work)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        r = json.loads(out.strip().splitlines()[-1])
        ratio = r["peak_mib"] / r["output_decoded_mib"]
        print(
            f"{r['runs']} runs, {r['rows_in']:,} rows in -> {r['rows_out']:,} rows in "
            f"{r['outputs']} file(s): {r['seconds']:.2f} s, {r['rows_in'] / r['seconds']:,.0f} "
            f"rows/s; peak RSS +{r['peak_mib']:.0f} MiB vs one output file decoded "
            f"{r['output_decoded_mib']:.0f} MiB (ratio {ratio:.2f}, target <= 2)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
