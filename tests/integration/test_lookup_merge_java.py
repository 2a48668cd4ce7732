"""snaplake reads Java Paimon 0.9's ``changelog-producer = lookup`` tables (no deletion
vectors) of the partial-update and aggregation engines exactly as Java does.

Such tables need lookup, so Paimon merges them with ``LookupMergeFunction``: per key
only the newest higher-level record (the one of the lowest level > 0) and the level-0
records count, since each lookup compaction merged the older versions into the record
it wrote. ``tests/oracle/java/JavaDeletionVectorWriter.java`` (run here with
``deletion-vectors.enabled = false``) writes 8 batch commits; each ``prepareCommit``
compacts level 0 up with lookup, and the size-ratio picking leaves keys in two levels
above 0 (checked below), where a plain merge would count the older record twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import assert_java_rows
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon, run_java

import snaplake

pytestmark = [pytest.mark.integration, requires_java_paimon]

COMMITS = 8
LOOKUP = ("deletion-vectors.enabled=false", "changelog-producer=lookup")

TABLES = {
    "agg": (*LOOKUP, "merge-engine=aggregation", "fields.n.aggregate-function=sum"),
    "partial": (*LOOKUP, "merge-engine=partial-update"),
}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lookup-merge")
    for name, options in TABLES.items():
        run_java("JavaDeletionVectorWriter", str(root / "wh"), name, str(COMMITS), "false",
                 *options, tmp_dir=root)  # fmt: skip
    return root / "wh"


@pytest.mark.parametrize("name", list(TABLES))
def test_every_snapshot_reads_as_java_reads_it(warehouse: Path, name: str) -> None:
    table = snaplake.FileSystemCatalog(str(warehouse)).get_table(f"db.{name}")
    snapshots = table.snapshots()
    java = JavaPaimon().read_many([(table.root, s.id) for s in snapshots])
    stacked = 0
    for snap, read in zip(snapshots, java, strict=True):
        splits = table.new_scan(snapshot_id=snap.id).plan()
        for split in splits:
            stacked += len({f.level for f in split.files if f.level > 0}) > 1
        assert_java_rows(read.rows, table.to_arrow(snapshot_id=snap.id), context=f"{snap.id}")
    assert stacked, "Java's compactions never left a bucket with two levels above 0"
