"""Orphan clean, tags and rollback on a real dynamic-bucket table keep its HASH index.

tests/unit/compaction/test_index_maintenance.py checks the same rules on
hand-made HASH files; here the index is the one the dynamic-bucket writer
maintains, several buckets per partition, and after each operation a new
writer's upserts must land in each key's bucket.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.dynamic_maintenance_helpers import (
    age_all,
    assert_index_exactly_referenced,
    dynamic_table,
    index_on_disk,
    model,
    referenced_index,
)
from tests.pk_helpers import make_rows, sorted_rows, to_table

import snaplake

_BATCHES = [make_rows((i * 13) % 50, 20, seed=i) for i in range(5)]


def _written(tmp_path: Path, **options: str) -> snaplake.Table:
    table = dynamic_table(str(tmp_path), **options)
    for batch in _BATCHES:
        table.write(to_table(batch))
    return table


def _check(table: snaplake.Table, *written: list[dict[str, Any]]) -> None:
    assert sorted_rows(table.to_arrow()) == model(*written)
    assert assert_one_bucket_per_key(table) > 3


def test_orphan_clean_keeps_every_live_hash_file_and_index_manifest(tmp_path: Path) -> None:
    table = _written(tmp_path, **{"snapshot.num-retained.min": "10"})
    crashed = table.new_write(commit_user="crashed")
    crashed.write_arrow(to_table(make_rows(100, 10, seed=7)))
    crashed.prepare_commit()  # uncommitted data and HASH files
    referenced = referenced_index(table)
    assert index_on_disk(table)[1] > referenced[1]
    age_all(table, 3 * 86400)
    result = table.remove_orphan_files(dry_run=False, older_than=timedelta(hours=1))
    assert result.orphan_files
    assert index_on_disk(table) == referenced
    _check(table, *_BATCHES)
    table.write(to_table(make_rows(100, 10, seed=8)))
    _check(table, *_BATCHES, make_rows(100, 10, seed=8))


def test_tag_keeps_its_index_through_expiry_and_rollback_restores_it(tmp_path: Path) -> None:
    table = _written(tmp_path)
    table.create_tag("t2", snapshot_id=2)
    tagged = table.to_arrow(tag="t2")
    table.expire_snapshots()
    assert min(s.id for s in table.snapshots()) > 2
    assert_index_exactly_referenced(table)  # the tag's HASH files and index manifest kept
    assert table.rollback_to("t2").restored_from_tag
    assert table.to_arrow() == tagged
    _check(table, *_BATCHES[:2])
    manifests, files = referenced_index(table)
    on_disk = index_on_disk(table)  # later snapshots' files are orphans now (as data files)
    assert manifests <= on_disk[0] and files <= on_disk[1]
    # the next writer restores the tag's index: keys written after it get buckets again
    table.write(to_table(_BATCHES[3]))
    _check(table, *_BATCHES[:2], _BATCHES[3])


def test_rollback_to_a_snapshot_drops_later_index_files_from_the_live_index(
    tmp_path: Path,
) -> None:
    table = _written(tmp_path, **{"snapshot.num-retained.min": "10"})
    table.rollback_to(3)
    _check(table, *_BATCHES[:3])
    age_all(table, 3 * 86400)
    table.remove_orphan_files(dry_run=False, older_than=timedelta(hours=1))
    assert_index_exactly_referenced(table)  # snapshots 4-5's HASH files were orphans
    table.write(to_table(_BATCHES[4]))
    _check(table, *_BATCHES[:3], _BATCHES[4])
