"""Tables other engines wrote in ways snaplake mishandled: fixed buckets without a bucket key,
BINARY partition keys, and partitions pypaimon encodes differently from Java."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.compaction.expire import ExpireSnapshots
from snaplake.compaction.maintenance import count_files
from snaplake.errors import UnsupportedTableError
from snaplake.options import CoreOptions
from snaplake.store.read.split_read import read_splits

pytestmark = [pytest.mark.integration, requires_paimon]


def _placement(table) -> dict[int, tuple[tuple[object, ...], int]]:
    out = {}
    for split in table.new_scan().plan():
        ids = read_splits(table.file_io, [split], schema=table.arrow_schema).column("id")
        for i in ids.to_pylist():
            out[i] = (split.partition_values, split.bucket)
    return out


def test_fixed_buckets_without_bucket_key_land_where_pypaimon_puts_them(tmp_path):
    oracle = PaimonOracle(tmp_path)
    oracle.create_table("db.b", SCHEMA, partition_keys=["month"], options={"bucket": "4"})
    oracle.write("db.b", rows(0, 90))
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.b")
    theirs = _placement(table)
    write_and_commit(
        table, rows(90, 90), commit_user="s"
    )  # used to die with a numpy broadcast error
    ours = _placement(table)
    # every row hashes the empty row (pypaimon, and Java's bucket function): one bucket
    assert {b for _, b in theirs.values()} == {b for _, b in ours.values()} == {3}
    assert oracle.read("db.b").sort_by("id").equals(rows(0, 180))


_TS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us")),  # TIMESTAMP(6): not compact
        pa.field("v", pa.string()),
    ]
)


def _null_ts_rows(start: int, count: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + count), pa.int64()),
            "ts": pa.nulls(count, pa.timestamp("us")),
            "v": [f"v{i}" for i in range(start, start + count)],
        },
        schema=_TS_SCHEMA,
    )


@pytest.fixture
def mixed(tmp_path):
    """A table whose NULL TIMESTAMP(6) partition holds files of pypaimon and of snaplake:
    the same partition under two BinaryRow encodings (pypaimon reserves no variable part)."""
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(
        "db.m", _TS_SCHEMA, partition_keys=["ts"], options={"compaction.min.file-num": "4"}
    )
    oracle.write("db.m", _null_ts_rows(0, 6), commits=3)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.m")
    for i in range(3):
        write_and_commit(table, _null_ts_rows(100 + 2 * i, 2), commit_user="s")
    encodings = {s.partition for s in table.new_scan().plan()}
    assert len(encodings) == 2, "expected pypaimon's and Java's encoding of the NULL partition"
    return oracle, table


def test_dynamic_overwrite_replaces_both_writers_files(mixed):
    oracle, table = mixed
    write_and_commit(table, _null_ts_rows(500, 2), commit_user="s", overwrite=True)
    assert sorted(table.to_arrow().column("id").to_pylist()) == [500, 501]
    assert sorted(oracle.read("db.m").column("id").to_pylist()) == [500, 501]


def test_compaction_groups_both_writers_files_and_expiry_cleans_them(mixed):
    oracle, table = mixed
    opts = table.schema().core_options
    counts = count_files(
        table, table.latest_snapshot(), options=opts,
        target_file_size_bytes=table.file_store().target_file_size(opts),
    )  # fmt: skip
    assert counts.small_files == 6 and counts.buckets_due == 1  # the daemon's view agrees
    result = table.compact()
    assert result.files_before == 6 and result.files_after == 1 and result.buckets_compacted == 1
    expected = list(range(6)) + list(range(100, 106))
    assert sorted(table.to_arrow().column("id").to_pylist()) == expected
    # pypaimon matches DELETEs to ADDs byte for byte: each input was removed under its own bytes
    assert sorted(oracle.read("db.m").column("id").to_pylist()) == expected
    assert len(oracle.plan_files("db.m")) == 1
    # expiry treats the two encodings as one partition and deletes every replaced input
    # data file: pypaimon's as well as snaplake's
    expired = ExpireSnapshots(
        table,
        options=CoreOptions(
            {**table.options, "snapshot.num-retained.min": "1", "snapshot.time-retained": "0 s"}
        ),
    ).execute()
    assert len(expired.data_files) == 6
    assert sorted(oracle.read("db.m").column("id").to_pylist()) == expected


_BIN_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("b", pa.binary()), ("m", pa.int32())]
)
_BIN_ROWS = pa.table(
    {
        "id": pa.array(range(6), pa.int64()),
        "b": [b"\x01\x02", b"ab", None, b"ab", b"", b"\xff/="],
        "m": pa.array([1, 2, 1, 1, 2, 1], pa.int32()),
    },
    schema=_BIN_SCHEMA,
)


@pytest.mark.parametrize("java_names", [False, True])
def test_binary_partition_keys_written_elsewhere_are_read(tmp_path, java_names):
    oracle = PaimonOracle(tmp_path)
    root = oracle.create_table("db.bin", _BIN_SCHEMA, partition_keys=["b", "m"])
    oracle.write("db.bin", _BIN_ROWS, commits=2)
    if java_names:  # Java names them by identity: byte[].toString() = "[B@<hash>"
        for n, d in enumerate(sorted(p for p in root.glob("b=*") if "DEFAULT" not in p.name)):
            d.rename(d.with_name(f"b=%5BB@{0x1B6D3586 + n:x}"))
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.bin")
    assert table.to_arrow().sort_by("id").equals(_BIN_ROWS)
    ab = table.to_arrow(partition_filter={"b": b"ab"}).sort_by("id")
    assert ab.column("id").to_pylist() == [1, 3]
    assert table.to_arrow(filter=("m", "=", 2)).sort_by("id").column("id").to_pylist() == [1, 4]
    with pytest.raises(UnsupportedTableError, match="BINARY"):
        table.new_write(commit_user="u")
