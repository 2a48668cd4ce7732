"""Reusable Hypothesis strategies for snaplake's metadata value types.

BinaryRow payloads are opaque bytes at the manifest layer, so the strategies
draw arbitrary bytes for them (plus the 12-byte empty row).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from snaplake.store.format.data_file import (
    EMPTY_BINARY_ROW,
    EMPTY_STATS,
    DataFileMeta,
    FileSource,
    SimpleStats,
)
from snaplake.store.format.manifest import FileKind, ManifestEntry
from snaplake.store.format.manifest_list import ManifestFileMeta

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
NON_NEG64 = st.integers(min_value=0, max_value=2**63 - 1)
NAMES = st.text(min_size=1, max_size=40)
ROW_BYTES = st.one_of(st.just(EMPTY_BINARY_ROW), st.binary(max_size=64))


def optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


simple_stats = st.one_of(
    st.just(EMPTY_STATS),
    st.builds(
        SimpleStats,
        min_values=ROW_BYTES,
        max_values=ROW_BYTES,
        null_counts=optional(st.tuples() | st.lists(optional(INT64), max_size=6).map(tuple)),
    ),
)

data_file_metas = st.builds(
    DataFileMeta,
    file_name=NAMES,
    file_size_bytes=NON_NEG64,
    row_count=NON_NEG64,
    min_key=ROW_BYTES,
    max_key=ROW_BYTES,
    key_stats=simple_stats,
    value_stats=simple_stats,
    min_sequence_number=INT64,
    max_sequence_number=INT64,
    schema_id=INT64,
    level=INT32,
    extra_files=st.lists(NAMES, max_size=3).map(tuple),
    creation_time_ms=optional(INT64),
    delete_row_count=optional(INT64),
    embedded_index=optional(st.binary(max_size=32)),
    file_source=optional(st.sampled_from(FileSource)),
    value_stats_cols=optional(st.lists(NAMES, max_size=4).map(tuple)),
    external_path=optional(NAMES),
    first_row_id=optional(INT64),
    write_cols=optional(st.lists(NAMES, max_size=4).map(tuple)),
    write_cols_sequences=optional(st.lists(INT64, max_size=4).map(tuple)),
)

manifest_entries = st.builds(
    ManifestEntry,
    kind=st.sampled_from(FileKind),
    partition=ROW_BYTES,
    bucket=INT32,
    total_buckets=INT32,
    file=data_file_metas,
)

manifest_file_metas = st.builds(
    ManifestFileMeta,
    file_name=NAMES,
    file_size_bytes=INT64,
    num_added_files=NON_NEG64,
    num_deleted_files=NON_NEG64,
    partition_stats=simple_stats,
    schema_id=INT64,
    min_bucket=optional(INT32),
    max_bucket=optional(INT32),
    min_level=optional(INT32),
    max_level=optional(INT32),
    min_row_id=optional(INT64),
    max_row_id=optional(INT64),
    total_buckets=optional(INT32),
    extra_files=optional(st.lists(NAMES, max_size=3).map(tuple)),
)


def make_file(name: str, *, level: int = 0, row_count: int = 10, **kw: Any) -> DataFileMeta:
    """A plain append-table DataFileMeta for example-based tests."""
    fields: dict[str, Any] = {
        "file_name": name,
        "file_size_bytes": 1000,
        "row_count": row_count,
        "min_key": EMPTY_BINARY_ROW,
        "max_key": EMPTY_BINARY_ROW,
        "key_stats": EMPTY_STATS,
        "value_stats": EMPTY_STATS,
        "min_sequence_number": 0,
        "max_sequence_number": 0,
        "schema_id": 0,
        "level": level,
        "extra_files": (),
        "creation_time_ms": 1_700_000_000_000,
        "delete_row_count": 0,
        "file_source": FileSource.APPEND,
    }
    fields.update(kw)
    return DataFileMeta(**fields)


def make_entry(
    name: str,
    kind: FileKind = FileKind.ADD,
    *,
    partition: bytes = EMPTY_BINARY_ROW,
    bucket: int = 0,
    **kw: Any,
) -> ManifestEntry:
    """A ManifestEntry for ``name`` in ``partition``/``bucket``."""
    return ManifestEntry(
        kind=kind, partition=partition, bucket=bucket, total_buckets=-1, file=make_file(name, **kw)
    )
