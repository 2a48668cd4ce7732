"""Checks of dynamic-bucket tables: each key in one bucket, its hash in that bucket's HASH file."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from snaplake.store.format.bucket import hash_binary_rows
from snaplake.store.format.hash_index import read_hash_index
from snaplake.store.format.index_file import HASH_INDEX
from snaplake.store.read.index_scan import read_index_entries


def bucket_keys(table: Any) -> dict[tuple[bytes, int], pa.Table]:
    """``{(partition, bucket): the trimmed-key columns of every live row version}`` (latest)."""
    schema = table.schema()
    names = [f"_KEY_{k}" for k in schema.trimmed_primary_keys]
    out: dict[tuple[bytes, int], pa.Table] = {}
    for split in table.new_scan().plan():
        parts = []
        for path in split.paths:
            with table.file_io.open_input(path) as f:
                keys = pq.read_table(f, columns=names)
            keys = keys.rename_columns(list(schema.trimmed_primary_keys))
            parts.append(keys.cast(pa.schema([f.with_nullable(True) for f in keys.schema])))
        out[(split.partition, split.bucket)] = pa.concat_tables(parts)
    return out


def hash_files(table: Any) -> dict[tuple[bytes, int], np.ndarray]:
    """``{(partition, bucket): hashes}`` of the latest snapshot's HASH index files."""
    entries = read_index_entries(table, table.latest_snapshot(), index_type=HASH_INDEX)
    out = {}
    for e in entries:
        assert (e.partition, e.bucket) not in out, "two HASH files for one bucket"
        out[(e.partition, e.bucket)] = read_hash_index(table.file_io, table.paths, e.index_file)
    return out


def assert_one_bucket_per_key(table: Any) -> int:
    """Assert each key of a dynamic table lives in one bucket whose HASH file holds its hash.

    Also: no hash is in two HASH files of a partition, and each file's hashes
    are distinct. Returns the number of buckets holding data.
    """
    schema = table.schema()
    key_names = list(schema.trimmed_primary_keys)
    files = hash_files(table)
    seen: dict[tuple[bytes, int], tuple[bytes, int]] = {}
    for (partition, bucket), hashes in files.items():
        assert len(np.unique(hashes)) == len(hashes), "a HASH file repeats a hash"
        for h in hashes.tolist():
            other = seen.setdefault((partition, h), (partition, bucket))
            assert other == (partition, bucket), f"hash {h} in buckets {other[1]} and {bucket}"
    owner: dict[tuple[bytes, tuple[Any, ...]], int] = {}
    layout = bucket_keys(table)
    for (partition, bucket), keys in layout.items():
        hashes = hash_binary_rows(keys, key_names, list(schema.key_types))
        stored = files.get((partition, bucket))
        assert stored is not None, f"bucket {bucket} has data files but no HASH file"
        missing = np.setdiff1d(hashes, stored)
        assert len(missing) == 0, f"bucket {bucket}: {len(missing)} key hashes not in its file"
        for row in keys.to_pylist():
            key = (partition, tuple(row[k] for k in key_names))
            assert owner.setdefault(key, bucket) == bucket, f"key {key} in two buckets"
    return len(layout)
