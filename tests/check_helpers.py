"""Corrupt a table's manifests on purpose: rewrite one data file's entry with lying facts.

Used by the tests of ``snaplake check`` (library, CLI, daemon job, pypaimon
tables). The manifest is rewritten in place (same name, its codec kept as
zstd), the way a buggy writer would have written it; the process-wide
decoded-manifest cache is cleared so the next read sees storage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from snaplake.store.format.binary_row import decode_binary_row, encode_binary_row
from snaplake.store.format.data_file import DataFileMeta, SimpleStats
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.store.format.manifest import (
    FileKind,
    encode_manifest_file,
    read_manifest_file,
)
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.types import DataType
from snaplake.table import Table


def live_files(table: Table) -> list[tuple[DataFileMeta, str]]:
    """``(meta, path)`` of every live data file of the latest snapshot, in plan order."""
    return [(f, p) for s in table.new_scan().plan() for f, p in zip(s.files, s.paths, strict=True)]


def rewrite_entry(table: Table, file_name: str, **changes: Any) -> None:
    """Replace fields of ``file_name``'s ADD entries in every manifest of the latest snapshot."""
    snap = table.latest_snapshot()
    assert snap is not None
    touched = 0
    for list_name in (snap.base_manifest_list, snap.delta_manifest_list):
        for meta in read_manifest_list(table.file_io, table.paths.manifest_path(list_name)):
            path = table.paths.manifest_path(meta.file_name)
            entries = read_manifest_file(table.file_io, path, use_cache=False)
            if not any(e.file.file_name == file_name and e.kind is FileKind.ADD for e in entries):
                continue
            new = [
                dataclasses.replace(e, file=dataclasses.replace(e.file, **changes))
                if e.file.file_name == file_name and e.kind is FileKind.ADD
                else e
                for e in entries
            ]
            table.file_io.write_bytes(path, encode_manifest_file(new), overwrite=True)
            touched += 1
    assert touched, f"no ADD entry of {file_name} in the latest snapshot"
    metadata_cache.clear()


def with_bound(
    stats: SimpleStats, types: Sequence[DataType], index: int, *, which: str, value: Any
) -> SimpleStats:
    """``stats`` with column ``index``'s ``which`` ("min" or "max") bound set to ``value``."""
    row = stats.min_values if which == "min" else stats.max_values
    values = list(decode_binary_row(row, types))
    values[index] = value
    new = encode_binary_row(values, types)
    if which == "min":
        return dataclasses.replace(stats, min_values=new)
    return dataclasses.replace(stats, max_values=new)


def with_null_count(stats: SimpleStats, index: int, count: int) -> SimpleStats:
    """``stats`` with column ``index``'s null count set to ``count``."""
    assert stats.null_counts is not None
    counts = list(stats.null_counts)
    counts[index] = count
    return dataclasses.replace(stats, null_counts=tuple(counts))
