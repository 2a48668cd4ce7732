"""Helpers of the maintenance tests on dynamic-bucket tables: index files kept, none leaked."""

from __future__ import annotations

import os
import time
from typing import Any

from tests.pk_helpers import PK_KEYS, PK_SCHEMA

import snaplake
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.tags import TagManager

OPTIONS = {
    "dynamic-bucket.target-row-num": "4",
    "num-sorted-run.compaction-trigger": "3",
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "3",
    "snapshot.time-retained": "1 ms",
}


def dynamic_table(root: str, **options: str) -> snaplake.Table:
    """A dynamic-bucket table partitioned by month (several buckets per month fill)."""
    return snaplake.FileSystemCatalog(root).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={**OPTIONS, **options},
    )  # fmt: skip


def model(*batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The deduplicated rows of ``batches`` (later rows win), sorted by key."""
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    for batch in batches:
        rows.update({(r["month"], r["id"]): r for r in batch})
    return sorted(rows.values(), key=lambda r: (r["month"], r["id"]))


def referenced_index(table: snaplake.Table) -> tuple[set[str], set[str]]:
    """``(index manifests, index files)`` paths of every retained snapshot and every tag."""
    snaps = list(table.snapshots())
    snaps += [TagManager(table.file_io, table.paths).get(t.name) for t in table.list_tags()]
    manifests, files = set(), set()
    for snap in snaps:
        if snap.index_manifest:
            manifests.add(table.paths.index_manifest_path(snap.index_manifest))
        for e in read_index_entries(table, snap):
            files.add(table.paths.index_file_path(e.index_file.file_name))
    return manifests, files


def index_on_disk(table: snaplake.Table) -> tuple[set[str], set[str]]:
    """``(index manifests, index files)`` paths present under the table."""
    names = [s.path for s in table.file_io.list_files(table.root)]
    manifests = {p for p in names if os.path.basename(p).startswith("index-manifest-")}
    files = {p for p in names if "/index/" in p and os.path.basename(p).startswith("index-")}
    return manifests, files


def assert_index_exactly_referenced(table: snaplake.Table) -> None:
    """Every referenced index manifest and HASH file exists, and no other one does."""
    assert index_on_disk(table) == referenced_index(table)


def age_all(table: snaplake.Table, seconds: float) -> None:
    """Set every file's mtime ``seconds`` into the past (orphan clean's grace period)."""
    past = time.time() - seconds
    for f in table.file_io.list_files(table.root):
        os.utime(f.path, (past, past))
