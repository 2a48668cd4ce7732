"""snaplake reads Java Paimon 0.9's deletion-vector primary-key tables exactly as Java does.

``tests/oracle/java/JavaDeletionVectorWriter.java`` writes fixed-bucket tables with
``deletion-vectors.enabled = true`` (deduplicate with deletes, partial-update,
aggregation): each batch commit is an APPEND snapshot of level-0 files and a COMPACT
snapshot whose lookup compaction wrote the vectors; the last commit compacts fully.
Every snapshot is read by snaplake and Java (the oracle). pypaimon 2.1.0 cannot plan
any table Java 0.9 wrote (its manifest reader needs ``_VALUE_STATS_COLS``, a field added
after 0.9: ``KeyError``), so its agreement on deletion-vector primary-key tables is
checked on tables snaplake built (tests/unit/store/test_dv_read.py).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import assert_java_rows
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon, run_java

import snaplake

pytestmark = [pytest.mark.integration, requires_java_paimon]

COMMITS = 4

TABLES = {
    "dedup": ("true", ()),
    "partial": ("true", ("merge-engine=partial-update", "ignore-delete=true")),
    "agg": ("true", ("merge-engine=aggregation", "fields.n.aggregate-function=sum",
                     "ignore-delete=true")),
}  # fmt: skip


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dv")
    for name, (deletes, options) in TABLES.items():
        run_java("JavaDeletionVectorWriter", str(root / "wh"), name, str(COMMITS), deletes,
                 *options, tmp_dir=root)  # fmt: skip
    return root / "wh"


def _table(wh: Path, name: str) -> snaplake.Table:
    return snaplake.FileSystemCatalog(str(wh)).get_table(f"db.{name}")


@pytest.mark.parametrize("name", list(TABLES))
def test_every_snapshot_reads_as_java_reads_it(warehouse: Path, name: str) -> None:
    table = _table(warehouse, name)
    snapshots = table.snapshots()
    assert len(snapshots) == 2 * COMMITS
    java = JavaPaimon().read_many([(table.root, s.id) for s in snapshots])
    vectors = 0
    for snap, read in zip(snapshots, java, strict=True):
        ours = table.to_arrow(snapshot_id=snap.id)
        assert_java_rows(read.rows, ours, context=f"{name} snapshot {snap.id}")
        splits = table.new_scan(snapshot_id=snap.id).plan()
        assert all(f.level > 0 for s in splits for f in s.files)  # level 0 skipped
        assert all(s.raw_convertible for s in splits)
        vectors += sum(len(s.deletion_files) for s in splits)
        batches = list(table.to_batches(snapshot_id=snap.id))
        got = pa.Table.from_batches(batches, schema=ours.schema)
        assert got.sort_by([("dt", "ascending"), ("id", "ascending")]) == ours.sort_by(
            [("dt", "ascending"), ("id", "ascending")]
        )
    assert vectors > 0, "Java's compactions wrote no deletion vectors"


@pytest.mark.parametrize("name", list(TABLES))
def test_projection_and_filters(warehouse: Path, name: str) -> None:
    table = _table(warehouse, name)
    for snap in table.snapshots()[1::2]:  # the COMPACT snapshots
        full = table.to_arrow(snapshot_id=snap.id)
        got = table.to_arrow(
            snapshot_id=snap.id, columns=["n", "id"], filter=[("dt", "=", "a"), ("id", "<", 20)]
        )
        mask = pc.and_(pc.equal(full["dt"], "a"), pc.less(full["id"], 20))
        want = full.filter(mask).select(["n", "id"])
        assert got.sort_by("id") == want.sort_by("id")
        values = table.to_arrow(snapshot_id=snap.id, filter=("v", "is not null"))
        assert values.num_rows == pc.sum(pc.is_valid(full["v"])).as_py() or 0


def test_merge_on_read_reads_level0_as_the_next_compaction_publishes_it(
    warehouse: Path, tmp_path: Path
) -> None:
    """With ``deletion-vectors.merge-on-read`` an APPEND snapshot reads its level-0 rows
    merged over the vectors: the rows the COMPACT snapshot after it holds."""
    root = tmp_path / "db.db" / "dedup"
    shutil.copytree(_table(warehouse, "dedup").root, root)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.dedup")
    schema = table.schema()
    table.schema_manager.create(
        dataclasses.replace(
            schema, id=schema.id + 1,
            options={**schema.options, "deletion-vectors.merge-on-read": "true"},
        )
    )  # fmt: skip
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.dedup")
    java = JavaPaimon().read_many([(table.root, s.id) for s in table.snapshots()[1::2]])
    for append, compact in zip(table.snapshots()[::2], java, strict=True):
        splits = table.new_scan(snapshot_id=append.id).plan()
        assert any(f.level == 0 for s in splits for f in s.files)
        assert_java_rows(compact.rows, table.to_arrow(snapshot_id=append.id))
