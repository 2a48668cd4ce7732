"""Fixtures for the maintenance unit tests: small local tables with fast retention options."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

import pytest
from tests.helpers import create_table, rows, write_and_commit

from snaplake.catalog import FileSystemCatalog
from snaplake.compaction.append_rewrite import CompactTask
from snaplake.compaction.job import CompactionJob, CompactionPlan
from snaplake.compaction.maintenance import maintenance_committer
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.table import Table

FAST = {
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "1000",
    "snapshot.time-retained": "0 ms",
    "manifest.merge-min-count": "3",
    "target-file-size": "1 mb",
    "compaction.min.file-num": "3",
}


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test sees storage, not another test's decoded manifests."""
    metadata_cache.clear()
    yield
    metadata_cache.clear()


@pytest.fixture
def make_table(catalog: FileSystemCatalog) -> Callable[..., Table]:
    """Make tables ``db.t0``, ``db.t1``, ...: FAST ``options``, by month if ``partitioned``."""
    counter = itertools.count()

    def make(options: Mapping[str, str] | None = None, *, partitioned: bool = True) -> Table:
        return create_table(
            catalog, f"db.t{next(counter)}", partition_keys=["month"] if partitioned else (),
            options={**FAST, **(options or {})},
        )  # fmt: skip

    return make


def append(table: Table, start: int, count: int, *, user: str = "w") -> int:
    """Append rows ``start..start+count-1`` in one commit; return the snapshot id."""
    result = write_and_commit(table, rows(start, count), commit_user=user)
    assert result.snapshot_id is not None
    return result.snapshot_id


def small_files(make_table: Callable[..., Table], files: int) -> Table:
    """An unpartitioned table (``make_table`` fixture) of ``files`` appends of 10 rows each.

    Rows ``0..10*files-1``, one data file (and snapshot) per append.
    """
    table = make_table(partitioned=False)
    for i in range(files):
        append(table, i * 10, 10)
    return table


def compaction_job(table: Table, **kwargs: object) -> CompactionJob:
    """The table's compaction job with the maintenance committer (``FileStore.new_compaction``)."""
    return table.file_store().new_compaction(commit=maintenance_committer(table), **kwargs)  # type: ignore[arg-type]


def runs(plan: CompactionPlan) -> list[CompactTask]:
    """The runs of an append table's plan, unit by unit."""
    return [t for u in plan.units for t in u.tasks]  # type: ignore[attr-defined]
