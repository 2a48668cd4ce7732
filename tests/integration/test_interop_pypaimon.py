"""Both directions with pypaimon 2.1.0 (the format oracle), on real files.

pypaimon runs in its own virtualenv (.venv-paimon, pyarrow < 20) through tests/oracle.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import SCHEMA, rows
from tests.oracle import PaimonOracle, pred, requires_paimon

import snaplake

pytestmark = [pytest.mark.integration, requires_paimon]


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def _commit(table, data, *, user="s", ident=None, overwrite=None):
    w = table.new_write(commit_user=user)
    w.write_arrow(data)
    return table.new_commit(commit_user=user).commit(
        w.prepare_commit(), commit_identifier=ident, overwrite=overwrite
    )


def _assert_same_rows(ours: pa.Table, theirs: pa.Table) -> None:
    theirs = theirs.select(ours.column_names).cast(ours.schema)
    assert _sorted(theirs).equals(_sorted(ours)), "pypaimon read different rows"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A snaplake warehouse with a partitioned and a bucketed table, several commits each."""
    wh = tmp_path_factory.mktemp("wh")
    catalog = snaplake.FileSystemCatalog(str(wh))
    part = catalog.create_table("db.part", schema=SCHEMA, partition_keys=["month"])
    for i in range(4):
        _commit(part, rows(i * 250, 250), ident=i)
    replacement = rows(5000, 60).filter(pc.equal(rows(5000, 60).column("month"), 2))
    _commit(part, replacement, overwrite={"month": 2})
    bucketed = catalog.create_table(
        "db.bucketed", schema=SCHEMA, partition_keys=["month"],
        options={"bucket": "4", "bucket-key": "carrier"},
    )  # fmt: skip
    for i in range(3):
        _commit(bucketed, rows(i * 100, 100), ident=i)
    return wh, catalog


def test_pypaimon_reads_snaplake_partitioned_table(written):
    wh, catalog = written
    table = catalog.get_table("db.part")
    _assert_same_rows(table.to_arrow(), PaimonOracle(wh).read("db.part"))
    snaps = PaimonOracle(wh).snapshots("db.part")
    assert [s["id"] for s in snaps] == [1, 2, 3, 4, 5]
    assert snaps[-1]["commitKind"] == "OVERWRITE"
    assert snaps[-1]["totalRecordCount"] == table.to_arrow().num_rows


def test_pypaimon_reads_snaplake_bucketed_table(written):
    wh, catalog = written
    _assert_same_rows(
        catalog.get_table("db.bucketed").to_arrow(), PaimonOracle(wh).read("db.bucketed")
    )


def test_pypaimon_partition_filter_uses_our_partition_bytes(written):
    wh, catalog = written
    got = PaimonOracle(wh).read_detailed("db.part", filter=pred.equal("month", 3))
    ours = catalog.get_table("db.part").to_arrow(partition_filter={"month": 3})
    _assert_same_rows(ours, got.table)
    assert got.num_files == len(
        catalog.get_table("db.part").new_scan(partition_filter={"month": 3}).plan()[0].files
    )


def test_pypaimon_value_filters_use_our_stats(written):
    wh, catalog = written
    table = catalog.get_table("db.part")
    all_files = sum(len(s.files) for s in table.new_scan().plan())
    oracle = PaimonOracle(wh)
    for flt, ours_filter in [
        (pred.greater_or_equal("id", 750), ("id", ">=", 750)),
        (pred.less_than("id", 100), ("id", "<", 100)),
        (pred.equal("carrier", "B6 long carrier name"), ("carrier", "=", "B6 long carrier name")),
        (pred.is_in("id", [1, 251, 5001]), ("id", "in", [1, 251, 5001])),
    ]:
        got = oracle.read_detailed("db.part", filter=flt)
        _assert_same_rows(table.to_arrow(filter=ours_filter), got.table)
    pruned = oracle.read_detailed("db.part", filter=pred.greater_or_equal("id", 750))
    assert pruned.num_files < all_files, "pypaimon could not prune with snaplake's stats"
    # the same pruning from snaplake's own planner
    ours = sum(len(s.files) for s in table.new_scan(filter=("id", ">=", 750)).plan())
    assert ours == pruned.num_files


def test_rows_land_in_the_same_bucket_as_pypaimon(tmp_path):
    data = rows(0, 400)
    oracle = PaimonOracle(tmp_path / "paimon")
    options = {"bucket": "4", "bucket-key": "carrier"}
    oracle.create_table("db.b", SCHEMA, partition_keys=["month"], options=options)
    oracle.write("db.b", data)
    theirs = snaplake.FileSystemCatalog(str(tmp_path / "paimon")).get_table("db.b")
    ours = snaplake.FileSystemCatalog(str(tmp_path / "snap")).create_table(
        "db.b", schema=SCHEMA, partition_keys=["month"], options=options
    )
    _commit(ours, data)

    def placement(table):
        out = {}
        for split in table.new_scan().plan():
            ids = snaplake.store.read.split_read.read_splits(
                table.file_io, [split], schema=table.arrow_schema
            )
            for i in ids.column("id").to_pylist():
                out[i] = (split.partition_values, split.bucket)
        return out

    assert placement(ours) == placement(theirs)


def test_snaplake_reads_and_appends_to_a_pypaimon_table(tmp_path):
    oracle = PaimonOracle(tmp_path)
    oracle.create_table("db.p", SCHEMA, partition_keys=["month"], options={"bucket": "-1"})
    oracle.write("db.p", rows(0, 300), commits=3)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.p")
    _assert_same_rows(table.to_arrow(), rows(0, 300))
    assert [s.id for s in table.snapshots()] == [1, 2, 3]
    result = _commit(table, rows(300, 120), user="snap", ident=1)
    assert result.snapshot_id == 4
    _assert_same_rows(rows(0, 420), oracle.read("db.p"))
    # pypaimon appends again on top of snaplake's snapshot; snaplake still dedups its replay
    oracle.write("db.p", rows(1000, 30))
    assert _commit(table, rows(300, 120), user="snap", ident=1).was_duplicate
    _assert_same_rows(table.to_arrow(), oracle.read("db.p"))
    assert table.to_arrow().num_rows == 450
    # the pypaimon-written snapshots round-trip through our Snapshot codec
    for s in table.snapshots():
        assert snaplake.Snapshot.from_bytes(s.to_bytes(), path="x") == s


@pytest.mark.parametrize("key", ["day", "carrier", "ts"])
def test_pypaimon_finds_files_under_our_partition_spelling(tmp_path, key):
    """Readers compute data paths from partition values: both must spell them alike."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(f"db.by_{key}", schema=SCHEMA, partition_keys=[key])
    _commit(table, rows(0, 40))
    _assert_same_rows(table.to_arrow(), PaimonOracle(tmp_path).read(f"db.by_{key}"))
