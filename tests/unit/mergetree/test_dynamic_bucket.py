"""Dynamic-bucket primary-key tables (``bucket = -1``, Paimon's default): snaplake writes them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key, bucket_keys, hash_files
from tests.helpers import write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, engine_model, make_rows, sorted_rows
from tests.pk_helpers import to_table as pk_table

import snaplake
from snaplake.errors import InvalidOptionError, SchemaMismatchError

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _dynamic(tmp_path: Path, **options: str) -> snaplake.Table:
    return snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={k.replace("_", "-").replace("dynamic-bucket-", "dynamic-bucket."): v
                 for k, v in options.items()},
    )  # fmt: skip


def _entries_total_buckets(table: snaplake.Table) -> set[int]:
    return {s.total_buckets for s in table.new_scan().plan()}


def test_a_primary_key_table_without_bucket_is_dynamic_as_in_paimon(tmp_path: Path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    pk = catalog.create_table("db.pk", schema=_SCHEMA, primary_keys=["id"])
    assert pk.options["bucket"] == "-1"
    assert pk.bucket_mode == "dynamic"
    assert catalog.create_table("db.a", schema=_SCHEMA).bucket_mode == "unaware"
    fixed = catalog.create_table(
        "db.f", schema=_SCHEMA, primary_keys=["id"], options={"bucket": "3"}
    )
    assert fixed.bucket_mode == "fixed"
    schema = pk.schema()
    postpone = dataclasses.replace(schema, options={**schema.options, "bucket": "-2"})
    assert pk.file_store(postpone).bucket_mode == "postpone"
    cross = dataclasses.replace(
        catalog.create_table(
            "db.c", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS
        ).schema(),
        primary_keys=("id",),
    )
    assert pk.file_store(cross).bucket_mode == "cross-partition"


def test_upserts_and_deletes_spread_over_buckets_of_target_size(tmp_path: Path) -> None:
    table = _dynamic(tmp_path, dynamic_bucket_target_row_num="7")
    model = TableModel(engine_model("deduplicate"))
    history = [
        (make_rows(0, 60), None),
        (make_rows(30, 60, seed=1), ["+U"] * 60),
        (make_rows(0, 30, seed=2)[::3], ["-D"] * 10),
        (make_rows(100, 25, seed=3), None),
    ]
    for ident, (rows, kinds) in enumerate(history):  # a new writer each time: restores
        write_and_commit(table, pk_table(rows), row_kinds=kinds, commit_identifier=ident)
        model.apply(rows, kinds)
        assert sorted_rows(table.to_arrow()) == model.rows()
        assert_one_bucket_per_key(table)
    files = hash_files(table)
    per_partition: dict[bytes, list[int]] = {}
    for (partition, _bucket), hashes in files.items():
        per_partition.setdefault(partition, []).append(len(hashes))
    for counts in per_partition.values():  # filled in order: all full but the last
        assert len(counts) > 1 and sorted(counts)[1:] == [7] * (len(counts) - 1)
    assert _entries_total_buckets(table) == {-1}
    table.compact(full=True)
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert _entries_total_buckets(table) == {-1}
    assert_one_bucket_per_key(table)


def test_max_buckets_caps_each_partition(tmp_path: Path) -> None:
    table = _dynamic(tmp_path, dynamic_bucket_target_row_num="3", dynamic_bucket_max_buckets="2")
    rows = [r | {"month": 1} for r in make_rows(0, 40)]
    write_and_commit(table, pk_table(rows[:20]))
    write_and_commit(table, pk_table(rows), row_kinds=["+U"] * 40)
    assert {b for _, b in bucket_keys(table)} == {0, 1}
    assert sum(len(h) for h in hash_files(table).values()) == 40
    assert_one_bucket_per_key(table)
    assert sorted_rows(table.to_arrow()) == sorted_rows(pk_table(rows))


def test_known_keys_write_no_new_hash_file(tmp_path: Path) -> None:
    table = _dynamic(tmp_path)
    write_and_commit(table, pk_table(make_rows(0, 20)))
    before = table.latest_snapshot()
    write_and_commit(table, pk_table(make_rows(0, 20, seed=5)), row_kinds=["+U"] * 20)
    after = table.latest_snapshot()
    assert before is not None and after is not None and after.id == before.id + 1
    assert after.index_manifest == before.index_manifest
    assert len(list(Path(table.root, "index").iterdir())) == len(hash_files(table))


def test_one_writer_across_prepare_commits_keeps_every_hash(tmp_path: Path) -> None:
    table = _dynamic(tmp_path, dynamic_bucket_target_row_num="5")
    write = table.new_write(commit_user="u")
    commit = table.new_commit(commit_user="u")
    for start in (0, 8, 16):
        write.write_arrow(pk_table([r | {"month": 2} for r in make_rows(start, 8)]))
        commit.commit(write.prepare_commit(), commit_identifier=start)
    assert sum(len(h) for h in hash_files(table).values()) == 24
    assert assert_one_bucket_per_key(table) == 5


def test_abort_deletes_the_hash_files(tmp_path: Path) -> None:
    table = _dynamic(tmp_path)
    write = table.new_write(commit_user="u")
    write.write_arrow(pk_table(make_rows(0, 10)))
    messages = write.prepare_commit()
    assert any(m.data_increment.new_index_files for m in messages)
    assert list(Path(table.root, "index").iterdir())
    write.abort(messages)
    assert list(Path(table.root, "index").iterdir()) == []
    assert not list(Path(table.root).rglob("*.parquet"))


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"dynamic-bucket.max-buckets": "0"}, "dynamic-bucket.max-buckets"),
        ({"dynamic-bucket.target-row-num": "-3"}, "dynamic-bucket.target-row-num"),
        ({"dynamic-bucket.initial-buckets": "x"}, "dynamic-bucket.initial-buckets"),
    ],
)
def test_bad_dynamic_bucket_options_are_refused_before_anything_is_written(
    tmp_path: Path, options: dict[str, str], key: str
) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    with pytest.raises(InvalidOptionError) as info:
        catalog.create_table("db.t", schema=_SCHEMA, primary_keys=["id"], options=options)
    assert info.value.key == key
    assert not list(tmp_path.rglob("*"))


def test_a_key_spanning_partitions_is_refused_with_fixed_buckets(tmp_path: Path) -> None:
    """With ``bucket = -1`` it is a cross-partition table (issue 20 item 3)."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    with pytest.raises(SchemaMismatchError, match="every partition key"):
        catalog.create_table(
            "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=["id"],
            options={"bucket": "2"},
        )  # fmt: skip
    cross = catalog.create_table(
        "db.c", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=["id"]
    )
    assert cross.bucket_mode == "cross-partition"


def test_overwrite_keeps_every_key_in_one_bucket(tmp_path: Path) -> None:
    """The overwrite drops the partition's HASH files; its writer starts from an empty index."""
    table = _dynamic(tmp_path, dynamic_bucket_target_row_num="4")
    rows = [r | {"month": 1} for r in make_rows(0, 20)]
    write_and_commit(table, pk_table(rows))
    again = [r | {"month": 1} for r in make_rows(10, 6, seed=1)]  # known keys, other buckets
    table.write(pk_table(again), overwrite={"month": 1})  # the writer restores no index
    assert sorted_rows(table.to_arrow()) == sorted_rows(pk_table(again))
    assert_one_bucket_per_key(table)
    more = [r | {"month": 1} for r in make_rows(0, 30, seed=2)]
    write_and_commit(table, pk_table(more), row_kinds=["+U"] * 30)
    assert sorted_rows(table.to_arrow()) == sorted_rows(pk_table(more))
    assert_one_bucket_per_key(table)


def test_an_overwrite_by_a_writer_that_restored_the_index_keeps_its_buckets_hash_files(
    tmp_path: Path,
) -> None:
    """Two-phase overwrite with an ordinary writer: buckets it fills keep their HASH files.

    The writer knows every key it writes, so it writes no new HASH file; the
    commit keeps those buckets' old files rather than leave keys uncovered.
    """
    table = _dynamic(tmp_path, dynamic_bucket_target_row_num="4")
    write_and_commit(table, pk_table([r | {"month": 1} for r in make_rows(0, 20)]))
    again = [r | {"month": 1} for r in make_rows(10, 6, seed=1)]  # known keys only
    write = table.new_write(commit_user="w")  # not ignore_previous_files()
    write.write_arrow(pk_table(again))
    messages = write.prepare_commit()
    assert not any(m.data_increment.new_index_files for m in messages)
    table.new_commit(commit_user="w").commit(messages, overwrite={"month": 1})
    assert sorted_rows(table.to_arrow()) == sorted_rows(pk_table(again))
    assert_one_bucket_per_key(table)
    more = [r | {"month": 1} for r in make_rows(0, 30, seed=2)]
    write_and_commit(table, pk_table(more), row_kinds=["+U"] * 30)
    assert sorted_rows(table.to_arrow()) == sorted_rows(pk_table(more))
    assert_one_bucket_per_key(table)


def test_two_writers_adding_a_key_race_and_the_later_commit_is_refused(tmp_path: Path) -> None:
    """Issue 20 item 2: the later commit replaces a HASH file the earlier one changed."""
    from snaplake.errors import HashIndexConflictError

    table = _dynamic(tmp_path, dynamic_bucket_target_row_num="5")
    write_and_commit(table, pk_table([r | {"month": 1} for r in make_rows(0, 3)]))
    writers = [table.new_write(commit_user=u) for u in ("a", "b")]
    rows = [r | {"month": 1} for r in make_rows(10, 4)]  # the same new keys in both
    for w in writers:
        w.write_arrow(pk_table(rows))
    prepared = [w.prepare_commit() for w in writers]  # both restored the same index
    table.new_commit(commit_user="a").commit(prepared[0])
    with pytest.raises(HashIndexConflictError, match="HASH index") as info:
        table.new_commit(commit_user="b").commit(prepared[1])
    assert info.value.conflicting_snapshot_ids == (2,) and info.value.retryable
    writers[1].abort(prepared[1])
    assert table.latest_snapshot().id == 2  # type: ignore[union-attr]
    assert_one_bucket_per_key(table)
    # a writer restoring the new index adds the keys where they are: no conflict
    write_and_commit(table, pk_table(rows), commit_user="b")
    assert assert_one_bucket_per_key(table) == 2
    assert sorted_rows(table.to_arrow()) == sorted_rows(
        pk_table([r | {"month": 1} for r in make_rows(0, 3)] + rows)
    )


def test_concurrent_writers_of_known_keys_do_not_conflict(tmp_path: Path) -> None:
    table = _dynamic(tmp_path, dynamic_bucket_target_row_num="5")
    write_and_commit(table, pk_table(make_rows(0, 30)))
    writers = [table.new_write(commit_user=u) for u in ("a", "b")]
    for seed, w in enumerate(writers):
        w.write_arrow(pk_table(make_rows(0, 30, seed=seed + 1)), row_kinds=["+U"] * 30)
    prepared = [w.prepare_commit() for w in writers]
    assert not any(m.data_increment.new_index_files for p in prepared for m in p)
    for user, messages in zip(("a", "b"), prepared, strict=True):
        table.new_commit(commit_user=user).commit(messages)
    assert sorted_rows(table.to_arrow()) == sorted_rows(pk_table(make_rows(0, 30, seed=2)))
    assert_one_bucket_per_key(table)


def test_initial_buckets_cannot_change_by_alter_and_unknown_modes_are_refused(
    tmp_path: Path,
) -> None:
    from snaplake import SchemaChange
    from snaplake.errors import SchemaChangeError, UnsupportedTableError

    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t", schema=_SCHEMA, primary_keys=["id"],
        options={"dynamic-bucket.initial-buckets": "2"},
    )  # fmt: skip
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=_SCHEMA))
    schema_files = sorted(Path(table.root, "schema").iterdir())
    with pytest.raises(SchemaChangeError, match="initial-buckets") as info:
        catalog.alter_table(
            "db.t", [SchemaChange.set_option("dynamic-bucket.initial-buckets", "4")]
        )
    assert info.value.rule == "immutable-option"
    assert sorted(Path(table.root, "schema").iterdir()) == schema_files
    for bad in ("-3", "0"):
        with pytest.raises((UnsupportedTableError, SchemaMismatchError, InvalidOptionError)):
            catalog.create_table(
                f"db.b{bad[-1]}", schema=_SCHEMA, primary_keys=["id"], options={"bucket": bad}
            )
    assert sorted(p.name for p in Path(tmp_path, "db.db").iterdir()) == ["t"]
