"""Deleting a tag deletes the files only it held (Paimon's ``deleteTag`` neighbour rule).

Oracles: orphan clean on a copy of the warehouse where only the tag file was
deleted lists the unreferenced metadata and index files, which the deletion
must take too (orphan clean keeps every data file a retained manifest names,
even a dead one, so for data files it is only a lower bound); afterwards
orphan clean finds nothing, no deleted file is live in a retained snapshot
or tag, and every retained snapshot and remaining tag reads its rows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.helpers import create_table, sorted_ids
from tests.unit.compaction.conftest import FAST, append

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import CorruptMetadataError, TagNotFoundError
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.store.tags import TagManager
from snaplake.table import Table


def _table(
    warehouse: Path, options: dict[str, str] | None = None, *, primary_keys: Sequence[str] = ()
) -> Table:
    catalog = FileSystemCatalog(str(warehouse))
    options = {**FAST, **(options or {})}
    return create_table(catalog, "db.t", options=options, primary_keys=primary_keys)


def _orphans_after_tag_file_delete(warehouse: Path, name: str) -> set[str]:
    """What orphan clean finds on a copy without ``tag-<name>`` (paths in ``warehouse``)."""
    copy = warehouse.parent / f"{warehouse.name}-copy"
    shutil.copytree(warehouse, copy)
    table = FileSystemCatalog(str(copy)).get_table("db.t")
    TagManager(table.file_io, table.paths).delete_tag(name)
    metadata_cache.clear()
    found = table.remove_orphan_files(older_than=datetime.now(UTC), dry_run=True).orphan_files
    shutil.rmtree(copy)
    return {p.replace(str(copy), str(warehouse), 1) for p in found}


def _live_paths(table: Table) -> set[str]:
    """Paths of the data files live in a retained snapshot or a tag."""
    metadata_cache.clear()
    scans = [table.new_scan(snapshot_id=s.id) for s in table.snapshots()]
    scans += [table.new_scan(tag=t.name) for t in table.list_tags()]
    return {p for scan in scans for split in scan.plan() for p in split.paths}


def _check_deletion(table: Table, deleted: set[str], orphaned: set[str]) -> None:
    """Nothing live was deleted, everything orphaned was, and nothing is left over."""
    live = _live_paths(table)
    assert not deleted & live
    assert all(os.path.exists(p) for p in live)
    assert not any(os.path.exists(p) for p in deleted)
    assert orphaned <= deleted
    assert table.remove_orphan_files(older_than=datetime.now(UTC)).orphan_files == ()


def _history(table: Table) -> dict[str, list[int]]:
    """Rows of every retained snapshot and tag, read now."""
    metadata_cache.clear()
    out = {f"s{s.id}": sorted_ids(table.to_arrow(snapshot_id=s.id)) for s in table.snapshots()}
    out.update({f"t:{t.name}": sorted_ids(table.to_arrow(tag=t.name)) for t in table.list_tags()})
    return out


def _overwrite_rounds(table: Table, rounds: int, *, tag_every: int = 1) -> None:
    """Each round replaces the table's rows (so older snapshots' files die) and tags it."""
    for r in range(rounds):
        append(table, r * 100, 10)
        table.write(table.to_arrow().slice(0, 5), overwrite={})
        if r % tag_every == 0:
            table.create_tag(f"r{r}")


def test_a_tag_of_an_expired_snapshot_takes_exactly_its_own_files(tmp_path: Path) -> None:
    table = _table(tmp_path / "wh")
    _overwrite_rounds(table, 4)
    table.expire_snapshots()
    assert [s.id for s in table.snapshots()] == [7, 8]  # r1 tags snapshot 4, r0 2, r2 6
    before = _history(table)
    own = _live_paths_of_tag(table, "r1") - _live_paths_of_tag(table, "r0")
    own -= _live_paths_of_tag(table, "r2") | _live_paths(table) - _live_paths_of_tag(table, "r1")
    assert own  # the rows its overwrite wrote, replaced by the next overwrite
    orphaned = _orphans_after_tag_file_delete(tmp_path / "wh", "r1")

    result = table.delete_tag("r1")

    deleted = {*result.data_files, *result.index_files, *result.manifest_files}
    assert result.snapshot_id == 4
    assert set(result.data_files) == own
    _check_deletion(table, deleted, orphaned)
    del before["t:r1"]
    assert _history(table) == before


def _live_paths_of_tag(table: Table, name: str) -> set[str]:
    metadata_cache.clear()
    return {p for split in table.new_scan(tag=name).plan() for p in split.paths}


def test_a_tag_of_a_retained_snapshot_or_sharing_one_deletes_only_its_file(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path / "wh")
    _overwrite_rounds(table, 3)
    table.create_tag("twin", snapshot_id=table.list_tags()[0].snapshot_id)
    latest = table.list_tags()[-1]
    assert table.snapshot_manager.snapshot_exists(latest.snapshot_id)
    assert table.delete_tag(latest.name).files_deleted == 0  # its snapshot is retained
    table.expire_snapshots()
    before = _history(table)
    result = table.delete_tag("r0")  # "twin" pins the same expired snapshot
    assert result.files_deleted == 0
    del before["t:r0"]
    assert _history(table) == before
    assert table.delete_tag("twin").files_deleted > 0  # now the last holder


def test_neighbouring_tags_keep_their_files(tmp_path: Path) -> None:
    table = _table(tmp_path / "wh")
    for r in range(5):  # appends only: every tag shares the older files
        append(table, r * 10, 10)
        table.create_tag(f"a{r}")
    table.compact(full=True)
    append(table, 100, 10)
    table.expire_snapshots()
    before = _history(table)
    orphaned = _orphans_after_tag_file_delete(tmp_path / "wh", "a2")
    result = table.delete_tag("a2")
    assert not result.data_files  # a1 and a3 hold every data file of a2
    _check_deletion(table, {*result.manifest_files, *result.index_files}, orphaned)
    del before["t:a2"]
    assert _history(table) == before


def test_index_files_only_the_tag_held_go_with_it(tmp_path: Path) -> None:
    table = _table(
        tmp_path / "wh", primary_keys=["id", "month"], options={"bucket": "-1"}
    )  # dynamic buckets: a HASH index file per bucket
    _overwrite_rounds(table, 4)
    table.expire_snapshots()
    before = _history(table)
    orphaned = _orphans_after_tag_file_delete(tmp_path / "wh", "r1")
    result = table.delete_tag("r1")
    assert result.index_files and result.data_files
    _check_deletion(
        table, {*result.data_files, *result.index_files, *result.manifest_files}, orphaned
    )
    del before["t:r1"]
    assert _history(table) == before


def test_missing_metadata_deletes_nothing_not_even_the_tag(tmp_path: Path) -> None:
    table = _table(tmp_path / "wh")
    _overwrite_rounds(table, 4)
    table.expire_snapshots()
    neighbour = TagManager(table.file_io, table.paths).get("r0")
    os.unlink(table.paths.manifest_path(neighbour.base_manifest_list))
    metadata_cache.clear()
    files = sorted(str(p) for p in (tmp_path / "wh").rglob("*") if p.is_file())
    with pytest.raises(CorruptMetadataError):
        table.delete_tag("r1")
    assert sorted(str(p) for p in (tmp_path / "wh").rglob("*") if p.is_file()) == files
    with pytest.raises(TagNotFoundError):
        table.delete_tag("nope")


def test_a_table_with_branches_keeps_the_files(tmp_path: Path) -> None:
    table = _table(tmp_path / "wh")
    _overwrite_rounds(table, 4)
    table.expire_snapshots()
    branch = Path(table.paths.root) / "branch" / "branch-dev"
    branch.mkdir(parents=True)  # as Paimon's createBranch leaves it (its snapshots may use ours)
    result = table.delete_tag("r1")
    assert result.files_deleted == 0
    assert "r1" not in {t.name for t in table.list_tags()}


def test_expire_tags_deletes_the_files_of_expired_tags(tmp_path: Path) -> None:
    table = _table(
        tmp_path / "wh", {"tag.num-retained-max": "1", "tag.automatic-creation": "batch"}
    )
    _overwrite_rounds(table, 3)
    table.expire_snapshots()
    old = TagManager(table.file_io, table.paths).get("r0")
    data_dir_files = {str(p) for p in (tmp_path / "wh").rglob("data-*")}
    assert table.expire_tags() == ["r0", "r1"]  # batch mode: the oldest tags beyond the count
    assert table.snapshot_manager.try_snapshot(old.id) is None
    assert {str(p) for p in (tmp_path / "wh").rglob("data-*")} < data_dir_files
    assert sorted_ids(table.to_arrow(tag="r2")) == sorted_ids(table.to_arrow())
