"""Both directions with pypaimon 2.1.0 (the format oracle), on real files.

pypaimon runs in its own virtualenv (.venv-paimon, pyarrow < 20) through tests/oracle.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.helpers import SCHEMA, assert_same_rows, create_table, rows, write_and_commit
from tests.oracle import PaimonOracle, pred, requires_paimon

import snaplake

pytestmark = [pytest.mark.integration, requires_paimon]


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A snaplake warehouse with a partitioned and a bucketed table, several commits each."""
    wh = tmp_path_factory.mktemp("wh")
    catalog = snaplake.FileSystemCatalog(str(wh))
    part = create_table(catalog, "db.part", partition_keys=["month"])
    for i in range(4):
        write_and_commit(part, rows(i * 250, 250), commit_user="s", commit_identifier=i)
    replacement = rows(5000, 60).filter(pc.equal(rows(5000, 60).column("month"), 2))
    write_and_commit(part, replacement, commit_user="s", overwrite={"month": 2})
    bucketed = create_table(
        catalog,
        "db.bucketed",
        partition_keys=["month"],
        bucket=4,
        options={"bucket-key": "carrier"},
    )
    for i in range(3):
        write_and_commit(bucketed, rows(i * 100, 100), commit_user="s", commit_identifier=i)
    return wh, catalog


def test_pypaimon_reads_snaplake_partitioned_table(written):
    wh, catalog = written
    table = catalog.get_table("db.part")
    assert_same_rows(table.to_arrow(), PaimonOracle(wh).read("db.part"))
    snaps = PaimonOracle(wh).snapshots("db.part")
    assert [s["id"] for s in snaps] == [1, 2, 3, 4, 5]
    assert snaps[-1]["commitKind"] == "OVERWRITE"
    assert snaps[-1]["totalRecordCount"] == table.to_arrow().num_rows


def test_pypaimon_reads_snaplake_bucketed_table(written):
    wh, catalog = written
    assert_same_rows(
        catalog.get_table("db.bucketed").to_arrow(), PaimonOracle(wh).read("db.bucketed")
    )


def test_pypaimon_partition_filter_uses_our_partition_bytes(written):
    wh, catalog = written
    got = PaimonOracle(wh).read_detailed("db.part", filter=pred.equal("month", 3))
    ours = catalog.get_table("db.part").to_arrow(partition_filter={"month": 3})
    assert_same_rows(ours, got.table)
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
        assert_same_rows(table.to_arrow(filter=ours_filter), got.table)
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
    write_and_commit(ours, data, commit_user="s")

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
    assert_same_rows(table.to_arrow(), rows(0, 300))
    assert [s.id for s in table.snapshots()] == [1, 2, 3]
    result = write_and_commit(table, rows(300, 120), commit_user="snap", commit_identifier=1)
    assert result.snapshot_id == 4
    assert_same_rows(rows(0, 420), oracle.read("db.p"))
    # pypaimon appends again on top of snaplake's snapshot; snaplake still dedups its replay
    oracle.write("db.p", rows(1000, 30))
    assert write_and_commit(
        table, rows(300, 120), commit_user="snap", commit_identifier=1
    ).was_duplicate
    assert_same_rows(table.to_arrow(), oracle.read("db.p"))
    assert table.to_arrow().num_rows == 450
    # the pypaimon-written snapshots round-trip through our Snapshot codec
    for s in table.snapshots():
        assert snaplake.Snapshot.from_bytes(s.to_bytes(), path="x") == s


@pytest.mark.parametrize("key", ["day", "carrier", "ts"])
def test_pypaimon_finds_files_under_our_partition_spelling(tmp_path, key):
    """Readers compute data paths from partition values: both must spell them alike."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(f"db.by_{key}", schema=SCHEMA, partition_keys=[key])
    write_and_commit(table, rows(0, 40), commit_user="s")
    assert_same_rows(table.to_arrow(), PaimonOracle(tmp_path).read(f"db.by_{key}"))


_BINARY = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("b", pa.binary(4)), ("v", pa.binary())]
)


def _binary_rows(start: int, count: int, *, b_type: pa.DataType | None = None) -> pa.Table:
    b_type = b_type or pa.binary(4)
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": ids,
            "b": pa.array([None if i % 7 == 0 else i.to_bytes(4, "big") for i in ids], b_type),
            "v": [bytes([i % 256]) * (i % 5) for i in ids],
        },
        schema=_BINARY.set(1, pa.field("b", b_type)),
    )


def test_binary_n_reads_and_appends_as_fixed_size_binary(tmp_path):
    """Issue 18 item 11: a pypaimon BINARY(4) column read as ``binary``, and an append of
    ``fixed_size_binary(4)`` data to it was refused."""
    oracle = PaimonOracle(tmp_path)
    oracle.create_table("db.bin", _BINARY, options={"metadata.stats-mode": "full"})
    oracle.write("db.bin", _binary_rows(0, 50), commits=2)
    schema_file = (tmp_path / "db.db" / "bin" / "schema" / "schema-0").read_text()
    assert '"BINARY(4)"' in schema_file  # pypaimon's own mapping of fixed_size_binary(4)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.bin")
    assert table.arrow_schema.field("b").type == pa.binary(4)
    assert _sorted(table.to_arrow()).equals(_binary_rows(0, 50))
    write_and_commit(
        table, _binary_rows(50, 30), commit_user="s", commit_identifier=1
    )  # fixed_size_binary(4), as the table reads
    write_and_commit(
        table, _binary_rows(80, 10, b_type=pa.binary()), commit_user="s", commit_identifier=2
    )  # 4-byte binary values
    with pytest.raises(snaplake.SchemaMismatchError, match="exactly n bytes"):
        write_and_commit(table, _binary_rows(90, 1, b_type=pa.binary()).set_column(
            1, "b", pa.array([b"abc"], pa.binary())), commit_user="s")  # fmt: skip
    assert _sorted(table.to_arrow()).equals(_binary_rows(0, 90))
    hit = table.to_arrow(filter=("b", "=", (33).to_bytes(4, "big")))  # pypaimon's stats too
    assert hit.column("id").to_pylist() == [33]
    assert_same_rows(_binary_rows(0, 90), oracle.read("db.bin"))


def test_a_table_created_from_fixed_size_binary_round_trips(tmp_path):
    """snaplake writes ``BINARY(4)`` for ``fixed_size_binary(4)`` (as pypaimon does); both
    read the rows back, snaplake as ``fixed_size_binary(4)``."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table("db.ours", schema=_BINARY, options={"bucket": "-1"})
    assert table.schema().fields[1]["type"] == "BINARY(4)"
    assert table.arrow_schema == _BINARY
    write_and_commit(table, _binary_rows(0, 40), commit_user="s")
    assert _sorted(table.to_arrow()).equals(_binary_rows(0, 40))
    oracle = PaimonOracle(tmp_path)
    assert_same_rows(_binary_rows(0, 40), oracle.read("db.ours"))
    oracle.write("db.ours", _binary_rows(40, 10))
    assert _sorted(table.to_arrow()).equals(_binary_rows(0, 50))
