"""Write + read of the whole flights table: snaplake vs pypaimon vs plain pyarrow.parquet.

Usage: python benchmarks/write_read.py [--rounds 3]

One append of all 336,776 rows (one commit), then a full read with a fresh handle;
plain pyarrow writes/reads the same data as one Parquet file (same codec: zstd).
Target (issue 2): snaplake within 1.2x of plain pyarrow.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from _common import median
from demo.flights_data import load_flights
from tests.oracle import PaimonOracle

import snaplake


def ours(data, work: Path) -> tuple[float, float]:
    catalog = snaplake.FileSystemCatalog(str(work))
    table = catalog.create_table("db.t", schema=data.schema, partition_keys=["month"])
    t0 = time.perf_counter()
    write = table.new_write(commit_user="bench")
    write.write_arrow(data)
    table.new_commit(commit_user="bench").commit(write.prepare_commit())
    t1 = time.perf_counter()
    back = snaplake.FileSystemCatalog(str(work)).get_table("db.t").to_arrow()
    t2 = time.perf_counter()
    assert back.num_rows == data.num_rows
    return t1 - t0, t2 - t1


def plain(data, work: Path) -> tuple[float, float]:
    path = work / "flights.parquet"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pq.write_table(data, path, compression="zstd")
    t1 = time.perf_counter()
    back = pq.read_table(path)
    t2 = time.perf_counter()
    assert back.num_rows == data.num_rows
    return t1 - t0, t2 - t1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = load_flights()
    results: dict[str, list[tuple[float, float]]] = {"snaplake": [], "pypaimon": [], "pyarrow": []}
    for _ in range(args.rounds):
        work = Path(tempfile.mkdtemp(prefix="bench-wr-"))
        results["pyarrow"].append(plain(data, work / "plain"))
        results["snaplake"].append(ours(data, work / "snaplake"))
        oracle = PaimonOracle(work / "paimon", timeout_s=1800)
        oracle.create_table("db.t", data.schema, partition_keys=["month"])
        bench = oracle.bench_write_read("db.t", data)
        results["pypaimon"].append(
            (bench["write_s"] + bench["commit_s"], bench["plan_s"] + bench["read_s"])
        )
        shutil.rmtree(work)
    print(f"{data.num_rows:,} flights rows, one append then a full read (median of {args.rounds})")
    base_w = median([w for w, _ in results["pyarrow"]])
    base_r = median([r for _, r in results["pyarrow"]])
    for name, values in results.items():
        w, r = median([v[0] for v in values]), median([v[1] for v in values])
        print(
            f"  {name:9s} write {w * 1000:8.1f} ms ({w / base_w:4.2f}x)   "
            f"read {r * 1000:8.1f} ms ({r / base_r:4.2f}x)   "
            f"total {(w + r) / (base_w + base_r):4.2f}x of plain pyarrow"
        )


if __name__ == "__main__":
    main()
