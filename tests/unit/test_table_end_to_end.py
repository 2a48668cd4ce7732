"""Write -> commit -> snapshot -> read through the public API, on local disk."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, rows, sorted_ids, write_and_commit

import snaplake
from snaplake.errors import SnapshotNotFoundError


def test_catalog_databases_and_tables(catalog):
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_database("db", ignore_if_exists=True)
    assert catalog.list_databases() == ["db"]
    catalog.create_table("db.a", schema=SCHEMA, partition_keys=["month"])
    catalog.create_table("db.b", schema=SCHEMA)
    assert catalog.list_tables("db") == ["a", "b"]
    with pytest.raises(snaplake.errors.TableAlreadyExistsError):
        catalog.create_table("db.a", schema=SCHEMA)
    catalog.drop_table("db.a")
    assert catalog.list_tables("db") == ["b"]
    with pytest.raises(snaplake.TableNotFoundError):
        catalog.get_table("db.a")


def test_append_read_time_travel_and_history(catalog):
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"])
    assert table.latest_snapshot() is None
    assert table.to_arrow().num_rows == 0
    r1 = write_and_commit(table, rows(0, 100), commit_user="u", commit_identifier=1)
    r2 = write_and_commit(table, rows(100, 50), commit_user="u", commit_identifier=2)
    assert (r1.snapshot_id, r2.snapshot_id) == (1, 2)
    assert not r1.was_duplicate and r1.attempts == 1 and r1.records_added == 100
    assert sorted_ids(table.to_arrow()) == list(range(150))
    assert sorted_ids(table.to_arrow(snapshot_id=1)) == list(range(100))
    snaps = table.snapshots()
    assert [s.id for s in snaps] == [1, 2]
    assert snaps[1].total_record_count == 150 and snaps[1].delta_record_count == 50
    assert snaps[1].commit_identifier == 2 and snaps[1].commit_user == "u"
    at = dt.datetime.fromtimestamp(snaps[0].time_millis / 1000, tz=dt.UTC)
    assert sorted_ids(table.to_arrow(as_of=at)) == list(range(100))
    with pytest.raises(SnapshotNotFoundError):
        table.to_arrow(snapshot_id=7)
    with pytest.raises(SnapshotNotFoundError):
        table.to_arrow(as_of=at - dt.timedelta(days=1))
    got = table.to_arrow()
    assert got.schema.equals(SCHEMA)
    assert table.to_pandas().shape == (150, len(SCHEMA))


def test_partition_layout_and_pruning(catalog):
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"])
    write_and_commit(table, rows(0, 90), commit_user="u")
    root = table.root
    assert sorted(d for d in os.listdir(root) if d.startswith("month=")) == [
        "month=1",
        "month=2",
        "month=3",
    ]
    assert os.listdir(os.path.join(root, "month=1")) == ["bucket-0"]
    splits = table.new_scan(partition_filter={"month": 2}).plan()
    assert len(splits) == 1 and splits[0].partition_values == (2,)
    got = table.to_arrow(partition_filter={"month": 2})
    assert set(got.column("month").to_pylist()) == {2}
    assert got.num_rows == 30


def test_value_stats_pruning_and_exact_filters(catalog):
    table = catalog.create_table("db.t", schema=SCHEMA)
    for i in range(4):  # four files with disjoint id ranges
        write_and_commit(table, rows(i * 100, 100), commit_user="u")
    assert len(table.new_scan().plan()[0].files) == 4
    pruned = table.new_scan(filter=("id", ">=", 250)).plan()
    assert len(pruned[0].files) == 2
    assert sorted_ids(table.to_arrow(filter=("id", ">=", 250))) == list(range(250, 400))
    assert table.to_arrow(filter=[("id", "<", 10), ("carrier", "=", "AA")]).num_rows == 3
    assert table.to_arrow(filter=("id", "in", [5, 205, 999])).num_rows == 2
    assert table.to_arrow(filter=("carrier", "is null")).num_rows == 0
    cols = table.to_arrow(columns=["carrier", "id"], filter=("id", "=", 3))
    assert cols.column_names == ["carrier", "id"] and cols.num_rows == 1


def test_fixed_buckets(catalog):
    table = catalog.create_table(
        "db.t", schema=SCHEMA, partition_keys=["month"],
        options={"bucket": "4", "bucket-key": "carrier"},
    )  # fmt: skip
    write_and_commit(table, rows(0, 400), commit_user="u")
    splits = table.new_scan().plan()
    assert {s.bucket for s in splits} <= {0, 1, 2, 3}
    for s in splits:  # every carrier lives in exactly one bucket
        assert s.total_buckets == 4
    by_carrier: dict[str, set[int]] = {}
    for s in splits:
        data = snaplake.store.read.split_read.read_splits(
            table.file_io, [s], schema=table.arrow_schema
        )
        for c in set(data.column("carrier").to_pylist()):
            by_carrier.setdefault(c, set()).add(s.bucket)
    assert all(len(b) == 1 for b in by_carrier.values())
    assert sorted_ids(table.to_arrow()) == list(range(400))


def test_overwrite_static_and_dynamic(catalog):
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"])
    write_and_commit(table, rows(0, 90), commit_user="u")
    new = rows(1000, 30).filter(pa.compute.equal(rows(1000, 30).column("month"), 1))
    write = table.new_write(commit_user="o")
    write.write_arrow(new)
    result = table.new_commit(commit_user="o").commit(
        write.prepare_commit(), overwrite={"month": 1}
    )
    assert result.kind == snaplake.CommitKind.OVERWRITE
    got = table.to_arrow()
    assert set(
        got.filter(pa.compute.equal(got.column("month"), 1)).column("id").to_pylist()
    ) == set(new.column("id").to_pylist())
    assert got.filter(pa.compute.equal(got.column("month"), 2)).num_rows == 30
    # dynamic: only the partitions present in the data are replaced
    m2 = rows(2000, 30).filter(pa.compute.equal(rows(2000, 30).column("month"), 2))
    write.write_arrow(m2)
    table.new_commit(commit_user="o").commit(write.prepare_commit(), overwrite=True)
    got = table.to_arrow()
    months = got.group_by("month").aggregate([("id", "count")]).to_pydict()
    assert dict(zip(months["month"], months["id_count"], strict=True)) == {1: 10, 2: 10, 3: 30}
    # overwrite with files outside the static spec is refused before publishing
    write.write_arrow(rows(3000, 3))
    with pytest.raises(snaplake.SchemaMismatchError):
        table.new_commit(commit_user="o").commit(write.prepare_commit(), overwrite={"month": 1})
    assert table.to_arrow().num_rows == 50


def test_target_file_size_rolls_files(catalog):
    table = catalog.create_table("db.t", schema=SCHEMA, options={"target-file-size": "64 kb"})
    write_and_commit(table, rows(0, 20_000), commit_user="u")
    files = table.new_scan().plan()[0].files
    assert len(files) > 3
    assert sum(f.row_count for f in files) == 20_000
    assert sorted_ids(table.to_arrow()) == list(range(20_000))


def test_empty_commit_writes_nothing(catalog):
    table = catalog.create_table("db.t", schema=SCHEMA)
    result = table.new_commit(commit_user="u").commit([], commit_identifier=1)
    assert result.snapshot_id is None and table.latest_snapshot() is None


def test_abort_deletes_uncommitted_files(catalog):
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"])
    write = table.new_write(commit_user="u")
    write.write_arrow(rows(0, 30))
    messages = write.prepare_commit()
    files = [p for s in _paths(table, messages) for p in s]
    assert files and all(os.path.exists(p) for p in files)
    write.abort(messages)
    assert not any(os.path.exists(p) for p in files)
    assert table.latest_snapshot() is None


def _paths(table, messages):
    from snaplake.store.format.binary_row import decode_binary_row
    from snaplake.store.format.partition import partition_path

    schema = table.schema()
    for m in messages:
        values = decode_binary_row(m.partition, schema.partition_types)
        part = partition_path(schema.partition_keys, values, schema.partition_types)
        yield [table.paths.data_file_path(part, m.bucket, f.file_name) for f in m.added_files()]


def test_commit_message_bytes_and_pickle_round_trip(catalog):
    import pickle

    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"])
    write = table.new_write(commit_user="u")
    write.write_arrow(rows(0, 30))
    messages = write.prepare_commit()
    for m in messages:
        assert snaplake.CommitMessage.from_bytes(m.to_bytes()) == m
        assert pickle.loads(pickle.dumps(m)) == m
    shipped = [snaplake.CommitMessage.from_bytes(m.to_bytes()) for m in messages]
    table.new_commit(commit_user="u").commit(shipped, commit_identifier=1)
    assert table.to_arrow().num_rows == 30


def test_inline_maintenance_option_merges_and_expires_after_commits(catalog):
    table = catalog.create_table(
        "db.t", schema=SCHEMA,
        options={
            "snaplake.maintenance.inline": "true", "manifest.merge-min-count": "3",
            "snapshot.num-retained.min": "2", "snapshot.num-retained.max": "4",
            "snapshot.time-retained": "1 ms",
        },
    )  # fmt: skip
    committer = table.new_commit(commit_user="u")
    write = table.new_write(commit_user="u")
    for i in range(12):
        write.write_arrow(rows(i * 10, 10))
        committer.commit(write.prepare_commit(), commit_identifier=i)
    snaps = table.snapshots()
    assert len(snaps) <= 4
    assert any(s.commit_kind == snaplake.CommitKind.COMPACT for s in snaps)
    assert len(table.new_scan()._scan.manifest_metas()) < 12
    assert sorted_ids(table.to_arrow()) == list(range(120))


def _keys(*ids):
    return pa.array([i.to_bytes(4, "big") for i in ids], pa.binary(4))


def test_binary_n_columns_as_bucket_keys_and_primary_keys(catalog):
    """Issue 18 item 11: ``fixed_size_binary(n)`` tables hash, prune, merge and compact."""
    schema = pa.schema([pa.field("k", pa.binary(4), nullable=False), ("v", pa.int64())])
    bucketed = catalog.create_table(
        "db.bucketed", schema=schema, options={"bucket": "3", "bucket-key": "k"}
    )
    write_and_commit(
        bucketed,
        pa.table({"k": _keys(*range(30)), "v": list(range(30))}, schema=schema),
        commit_user="u",
    )
    assert sorted(bucketed.to_arrow().column("v").to_pylist()) == list(range(30))
    hit = bucketed.to_arrow(filter=("k", "=", (7).to_bytes(4, "big")))
    assert hit.to_pylist() == [{"k": (7).to_bytes(4, "big"), "v": 7}]
    keyed = catalog.create_table("db.keyed", schema=schema, primary_keys=["k"],
                                 options={"bucket": "2"})  # fmt: skip
    for round_ in range(3):
        data = pa.table({"k": _keys(*range(10)), "v": [round_] * 10}, schema=schema)
        write_and_commit(keyed, data, commit_user="u", commit_identifier=round_)
    assert keyed.to_arrow().column("v").to_pylist() == [2] * 10
    keyed.compact(full=True)
    merged = keyed.to_arrow().sort_by("k")
    assert merged.schema == schema
    assert merged.column("k").equals(pa.chunked_array([_keys(*range(10))]))
