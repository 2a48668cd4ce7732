"""Parquet over S3: pyarrow's S3FileSystem vs S3FileIO's boto3 ranged-GET stream, on SeaweedFS.

Usage: python benchmarks/s3_io.py [--rounds 3] [--mb 50]

Starts ``weed mini`` on 127.0.0.1 (tests/s3_servers.py), writes one ~50 MB
Parquet file (uncompressible columns, 8 row groups), then times, per round:

- write: ``S3FileIO.open_output`` (multipart, 16 MiB parts) vs
  ``pq.write_table`` to the ``S3FileSystem`` from ``arrow_filesystem()``;
- full read and a 1-column projection: ``pq.read_table(path, filesystem=...)``
  (pyarrow's S3FileSystem) vs a Python file object over boto3 ranged GETs
  (``_S3RangeReader`` in a 1 MiB ``BufferedReader``) vs pyarrow's
  ``NativeFile`` (what ``S3FileIO.open_input`` returns after a typed HEAD)
  vs ``read_bytes`` + in-memory decode (one GET, whole file in memory).

Prints the median seconds and MB/s of each (MB/s of a projection counts the
column's share of the file). The faster reader (pyarrow's) is what
``S3FileIO.arrow_filesystem()`` and ``open_input()`` use.
"""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _common import median
from tests.s3_servers import start_seaweedfs

from snaplake.store.io.s3.file_io import _MIB, S3FileIO, _S3RangeReader


def make_table(target_mb: int) -> pa.Table:
    rows = target_mb * 1024 * 1024 // 32  # ~32 bytes per row once encoded
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "value": pa.array(rng.random(rows)),
            "key": pa.array(rng.integers(0, 2**62, rows, dtype=np.int64)),
            "flag": pa.array(rng.integers(0, 2**31, rows, dtype=np.int32)),
            "small": pa.array(rng.integers(0, 100, rows, dtype=np.int32)),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

    table = make_table(args.mb)
    row_group = max(1, table.num_rows // 8)
    server = start_seaweedfs()
    try:
        endpoint = server.endpoint
        bucket = endpoint.new_bucket("bench")
        fio = S3FileIO(endpoint.options())
        arrow = fio.arrow_filesystem()
        assert arrow is not None, "pyarrow here has no S3 filesystem"
        filesystem, prefix = arrow
        path = f"s3://{bucket}/t/bucket-0/data-0.parquet"
        arrow_path = path[len(prefix) :]
        counter = iter(range(1_000_000))

        def write_file_io() -> None:
            with fio.open_output(f"s3://{bucket}/w/fio-{next(counter)}.parquet") as out:
                pq.write_table(table, out, row_group_size=row_group)

        def write_arrow() -> None:
            name = f"{bucket}/w/arrow-{next(counter)}.parquet"
            pq.write_table(table, name, filesystem=filesystem, row_group_size=row_group)

        with fio.open_output(path) as out:
            pq.write_table(table, out, row_group_size=row_group)
        size_mb = fio.file_status(path).size_bytes / 1024 / 1024
        print(f"file: {size_mb:.1f} MB, {table.num_rows:,} rows, 8 row groups, SeaweedFS")

        def full_arrow() -> None:
            assert pq.read_table(arrow_path, filesystem=filesystem).num_rows == table.num_rows

        def proj_arrow() -> None:
            pq.read_table(arrow_path, filesystem=filesystem, columns=["value"])

        size_bytes = fio.file_status(path).size_bytes

        def boto_file() -> io.BufferedReader:
            return io.BufferedReader(_S3RangeReader(fio, path, size_bytes=size_bytes), _MIB)

        def full_boto() -> None:
            with boto_file() as f:
                assert pq.read_table(f).num_rows == table.num_rows

        def proj_boto() -> None:
            with boto_file() as f:
                pq.read_table(f, columns=["value"])

        def full_open_input() -> None:
            with fio.open_input(path) as f:
                assert pq.read_table(f).num_rows == table.num_rows

        def proj_open_input() -> None:
            with fio.open_input(path) as f:
                pq.read_table(f, columns=["value"])

        def full_native() -> None:
            with filesystem.open_input_file(arrow_path) as f:
                assert pq.read_table(f).num_rows == table.num_rows

        def proj_native() -> None:
            with filesystem.open_input_file(arrow_path) as f:
                pq.read_table(f, columns=["value"])

        def full_bytes() -> None:
            pq.read_table(pa.BufferReader(fio.read_bytes(path)))

        column_mb = size_mb / 5
        cases: list[tuple[str, Callable[[], object], float]] = [
            ("write  S3FileIO.open_output (multipart)", write_file_io, size_mb),
            ("write  pyarrow S3FileSystem", write_arrow, size_mb),
            ("full   pyarrow S3FileSystem", full_arrow, size_mb),
            ("full   boto3 ranged-GET file object", full_boto, size_mb),
            ("full   S3FileSystem.open_input_file (NativeFile)", full_native, size_mb),
            ("full   S3FileIO.open_input (HEAD + NativeFile)", full_open_input, size_mb),
            ("full   S3FileIO.read_bytes + BufferReader", full_bytes, size_mb),
            ("1 col  pyarrow S3FileSystem", proj_arrow, column_mb),
            ("1 col  boto3 ranged-GET file object", proj_boto, column_mb),
            ("1 col  S3FileSystem.open_input_file (NativeFile)", proj_native, column_mb),
            ("1 col  S3FileIO.open_input (HEAD + NativeFile)", proj_open_input, column_mb),
        ]
        for _, fn, _ in cases:
            fn()  # warm-up: connections, first-use costs
        # Interleave the cases round by round so that load from other processes
        # on a shared machine hits all of them alike.
        times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        for _ in range(args.rounds):
            for name, fn, _ in cases:
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        for name, _, mb in cases:
            seconds = median(times[name])
            print(f"{name:48s} {seconds * 1000:8.1f} ms  {mb / seconds:8.1f} MB/s")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
