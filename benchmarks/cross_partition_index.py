"""Memory of a cross-partition writer's key map, per million keys (issue 20 item 3).

Writes a cross-partition table of ``--keys`` BIGINT keys over 8 partitions,
then, in a fresh process per measurement, bootstraps a writer's map
(``CrossPartitionIndex.index()``) and upserts one batch of 10,000 rows that
move keys. Prints the map's arrays (held bytes), the bootstrap time and the
process's peak RSS growth over bootstrap and over the batch. Run:

    python benchmarks/cross_partition_index.py --keys 1000000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from _common import ROOT

import snaplake

_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.int32()),
     pa.field("v", pa.int64())]
)  # fmt: skip

_MEASURE = """
import sys, time
import numpy as np, pyarrow as pa
import snaplake

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1e3
    return 0.0

table = snaplake.FileSystemCatalog(sys.argv[1]).get_table("db.t")
index = table.file_store().new_bucket_index("bench")
base = peak_mb()
start = time.perf_counter()
keys = index.index()
took = time.perf_counter() - start
after_bootstrap = peak_mb()
held = keys.keys.nbytes + keys.parts.nbytes + keys.buckets.nbytes + keys.stamps.nbytes
n = len(keys)
ids = np.random.default_rng(0).integers(0, n, 10_000)
batch = pa.table({"id": ids, "p": (ids % 7 + 1).astype(np.int32), "v": ids}, schema=%r)
index.rewrite_rows(batch, pa.array(np.zeros(len(ids), np.int8)))
print(f"keys {n:,}: map held {held / 1e6:.1f} MB ({held / n * 1e6 / 1e6:.1f} MB per million "
      f"keys); bootstrap {took:.2f} s, peak RSS +{after_bootstrap - base:.0f} MB; one "
      f"10,000-row batch peak RSS +{peak_mb() - after_bootstrap:.0f} MB")
"""


def main() -> None:
    """Build the table, then measure in a fresh process."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cross-bench-"))
    table = snaplake.FileSystemCatalog(str(root)).create_table(
        "db.t", schema=_SCHEMA, partition_keys=["p"], primary_keys=["id"]
    )
    ids = np.arange(args.keys, dtype=np.int64)
    start = time.perf_counter()
    table.write(pa.table({"id": ids, "p": (ids % 8).astype(np.int32), "v": ids}, schema=_SCHEMA))
    print(f"wrote {args.keys:,} keys in {time.perf_counter() - start:.1f} s")
    code = _MEASURE.replace(
        "%r",
        "pa.schema([pa.field('id', pa.int64(), nullable=False), "
        "pa.field('p', pa.int32()), pa.field('v', pa.int64())])",
    )
    subprocess.run([sys.executable, "-c", code, str(root)], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip


if __name__ == "__main__":
    main()
