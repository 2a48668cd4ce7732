from __future__ import annotations

from tests.helpers import sorted_ids
from tests.unit.compaction.conftest import append

from snaplake.compaction.inline import run_inline_maintenance
from snaplake.store.format.snapshot import CommitKind


def test_disabled_by_default(make_table):
    table = make_table()
    for i in range(5):
        append(table, i, 1)
    result = run_inline_maintenance(table)
    assert not result.enabled
    assert result.merge is None
    assert table.latest_snapshot().id == 5


def test_runs_due_merge_and_expiry(make_table):
    table = make_table({"snaplake.maintenance.inline": "true"})
    for i in range(5):
        append(table, i * 10, 10)
        result = run_inline_maintenance(table)
        assert result.enabled
        assert result.error is None
    kinds = [s.commit_kind for s in table.snapshots()]
    assert CommitKind.COMPACT in kinds
    assert len(table.snapshots()) <= 3
    assert sorted_ids(table.to_arrow()) == list(range(50))


def test_failure_is_reported_not_raised(make_table):
    import os

    table = make_table({"snaplake.maintenance.inline": "true"})
    for i in range(4):
        append(table, i, 1)
    from snaplake.store.format.decoded_cache import metadata_cache

    os.remove(table.paths.manifest_path(table.latest_snapshot().base_manifest_list))
    metadata_cache.clear()
    result = run_inline_maintenance(table)
    assert result.enabled
    assert result.error is not None
    assert "CorruptMetadataError" in result.error
