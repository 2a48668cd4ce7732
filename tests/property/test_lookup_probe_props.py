"""LookupLevels' key probe equals a full read of every lookup file.

Random sorted runs (levels 1..3, each rolled into several real Parquet files by
the compaction's file writer), random deletion vectors and random ascending
probe chunks: each chunk's result equals the reference that reads every file
whole (all columns), drops the rows its vector marks and keeps, per key, the
record of the lowest level. Checked with the key cache off, cold, warmed by
an earlier lookup and warmed by ``remember_files`` (as a compaction's outputs).
"""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import snaplake
from snaplake.mergetree.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind, key_column
from snaplake.mergetree.lookup import (
    LOOKUP_FILE,
    LOOKUP_LEVEL,
    LOOKUP_POSITION,
    LOOKUP_ROW,
    LookupKeyCache,
    LookupLevels,
    remember_files,
)
from snaplake.mergetree.read import BucketFiles, read_context
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.deletion_vector import DeletionVector
from snaplake.write.kv_file_writer import KeyValueFileWriter

_SCHEMA = pa.schema(
    [
        pa.field("a", pa.int32(), nullable=False),
        pa.field("b", pa.string(), nullable=False),
        pa.field("v", pa.int64()),
        pa.field("s", pa.string()),
    ]
)
_KEYS = [key_column("a"), key_column("b")]
Key = tuple[int, str]

_keys = st.tuples(st.integers(-3, 12), st.sampled_from(["", "a", "a:b", "b", "1:x", "zz"]))


@st.composite
def _case(draw: st.DrawFn) -> dict[str, Any]:
    levels = {
        lv: sorted(draw(st.sets(_keys, max_size=40)))
        for lv in draw(st.sets(st.integers(1, 3), min_size=1, max_size=3))
    }
    probe = sorted(draw(st.sets(_keys, min_size=1, max_size=30)))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(probe) - 1)), max_size=4)))
    chunks = [probe[i:j] for i, j in zip([0, *cuts], [*cuts, len(probe)], strict=True)]
    return {
        "levels": levels,
        "chunks": [c for c in chunks if c],
        "deleted": draw(st.lists(st.integers(0, 60), max_size=12)),
        "retract": draw(st.lists(st.integers(0, 60), max_size=5)),
        "values": draw(st.booleans()),
        "cache": draw(st.sampled_from(["off", "cold", "warm", "remembered"])),
    }


def _rows(keys: list[Key], level: int, retract: set[int]) -> pa.Table:
    n = len(keys)
    kinds = [RowKind.DELETE if i in retract else RowKind.INSERT for i in range(n)]
    return pa.table(
        {
            _KEYS[0]: pa.array([k[0] for k in keys], pa.int32()),
            _KEYS[1]: pa.array([k[1] for k in keys], pa.string()),
            SEQUENCE_NUMBER: pa.array(np.arange(n, dtype=np.int64) + 100 * (4 - level)),
            VALUE_KIND: pa.array(kinds, pa.int8()),
            "a": pa.array([k[0] for k in keys], pa.int32()),
            "b": pa.array([k[1] for k in keys], pa.string()),
            "v": pa.array([level * 1000 + i for i in range(n)], pa.int64()),
            "s": pa.array([None if i % 3 == 0 else f"L{level}:{k}" for i, k in enumerate(keys)]),
        }
    )


def _reference(
    files: list[tuple[DataFileMeta, str]], vectors: dict[str, DeletionVector], chunk: list[Key]
) -> list[dict[str, Any]]:
    """Per key of ``chunk`` (in order), its live record of the lowest level (full reads)."""
    best: dict[Key, dict[str, Any]] = {}
    for meta, path in files:
        vector = vectors.get(meta.file_name)
        for pos, row in enumerate(pq.read_table(path).to_pylist()):
            if vector is not None and vector.is_deleted(pos):
                continue
            key = (row[_KEYS[0]], row[_KEYS[1]])
            old = best.get(key)
            if old is None or meta.level < old[LOOKUP_LEVEL]:
                best[key] = {**row, LOOKUP_FILE: meta.file_name, LOOKUP_POSITION: pos,
                             LOOKUP_LEVEL: meta.level}  # fmt: skip
    out = []
    for i, key in enumerate(chunk):
        if key in best:
            out.append({LOOKUP_ROW: i, **best[key]})
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case())
def test_probe_equals_full_read(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = snaplake.FileSystemCatalog(tmp).create_table(
            "db.t", schema=_SCHEMA, primary_keys=["a", "b"], options={"bucket": "1"}
        )
        schema = table.schema()
        ctx = read_context(table.file_io, schema)
        cache = None if case["cache"] == "off" else LookupKeyCache()
        files: list[tuple[DataFileMeta, str]] = []
        for level, keys in case["levels"].items():
            if not keys:
                continue
            rows = _rows(keys, level, set(case["retract"]))
            writer = KeyValueFileWriter(
                file_io=table.file_io, paths=table.paths, schema=schema, partition_path="",
                bucket=0, level=level, file_source=FileSource.COMPACT, target_file_size=1500,
            )  # fmt: skip
            writer.write(rows)
            written = [(w.meta, w.path) for w in writer.close()]
            files += written
            if cache is not None and case["cache"] == "remembered":
                remember_files(ctx, written, rows, cache=cache)
        vectors: dict[str, DeletionVector] = {}
        deleted = case["deleted"]
        for i, (meta, _) in enumerate(files):
            marks = [p for p in deleted[i::3] if p < meta.row_count]
            if marks:
                vectors[meta.file_name] = DeletionVector.from_positions(marks)
        bucket = BucketFiles([f for f, _ in files], [p for _, p in files], vectors)
        values = ["v", "s"] if case["values"] else []
        runs = 2 if case["cache"] == "warm" else 1
        for _ in range(runs):  # "warm": the second pass reads every key from the cache
            lookup = LookupLevels(ctx, bucket, value_columns=values, batch_rows=5, cache=cache)
            for chunk in case["chunks"]:
                keys = pa.table(
                    {_KEYS[0]: pa.array([k[0] for k in chunk], pa.int32()),
                     _KEYS[1]: pa.array([k[1] for k in chunk], pa.string())}
                )  # fmt: skip
                found = lookup.lookup(keys)
                want = _reference(files, vectors, chunk)
                names = found.column_names
                assert found.to_pylist() == [{n: r[n] for n in names} for r in want]
                if want and not values:  # values read afterwards equal the full read
                    got = lookup.values(found, ["v", "s"]).to_pylist()
                    assert got == [{"v": r["v"], "s": r["s"]} for r in want]
