"""Spark on primary-key tables: batch upserts with row kinds, the sink, merged reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, TableModel, engine_model, make_rows, sorted_rows

import snaplake
from snaplake import SchemaChange
from snaplake.spark import SnaplakeSink, read, write

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]


def _df(spark: Any, rows: list[dict[str, Any]], kinds: list[str] | None = None) -> Any:
    table = pa.Table.from_pylist(rows, schema=PK_SCHEMA)
    if kinds is not None:
        table = table.append_column("op", pa.array(kinds))
    return spark.createDataFrame(table).repartition(3)


def _table(tmp_path: Path, engine: str = "deduplicate") -> Any:
    return create_table(
        tmp_path, schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "3", "merge-engine": engine,
                 **({"ignore-delete": "true"} if engine == "first-row" else {})},
    )  # fmt: skip


@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
def test_spark_write_upserts_by_bucket(spark: Any, tmp_path: Path, engine: str) -> None:
    table = _table(tmp_path, engine)
    model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
    first = make_rows(0, 90)
    write(_df(spark, first), table, check_nullability=False)
    model.apply(first)
    second = make_rows(45, 90, seed=4)
    kinds = ["-D" if r["id"] % 4 == 0 else "+U" for r in second]
    write(_df(spark, second, kinds), table, check_nullability=False, row_kind_column="op")
    model.apply(second, kinds)
    assert sorted_rows(table.to_arrow()) == model.rows()
    # one task per (partition, bucket): each commit added at most one run per bucket
    for split in table.new_scan().plan():
        assert len({f.min_sequence_number for f in split.files}) == len(split.files)
    merged = read(spark, table).toArrow()
    assert sorted_rows(merged.cast(PK_SCHEMA)) == model.rows()


def test_sink_on_primary_key_table_is_exactly_once(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path)
    model = TableModel(engine_model("deduplicate"))
    sink = SnaplakeSink(table, commit_user="cdc", check_nullability=False, row_kind_column="op")
    batches = [
        (make_rows(0, 60), None),
        (make_rows(30, 60, seed=2), "+U"),
        (make_rows(0, 30, seed=3)[::2], "-D"),
    ]
    for batch_id, (rows, kind) in enumerate(batches):
        kinds = [kind or "+I"] * len(rows)
        sink(_df(spark, rows, kinds), batch_id)
        sink(_df(spark, rows, kinds), batch_id)  # a replayed batch is a no-op
        model.apply(rows, kinds)
    assert len(table.snapshots()) == 3
    assert sorted_rows(table.to_arrow()) == model.rows()


def test_spark_reads_and_merge_schema_writes_an_evolved_primary_key_table(
    spark: Any, tmp_path: Path
) -> None:
    """Files of three schemas merged on the executors by field id; time travel in schema 0."""
    table = _table(tmp_path, "partial-update")
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    first = make_rows(0, 60)
    write(_df(spark, first), table, check_nullability=False)
    catalog.alter_table(
        "db.t", [SchemaChange.rename_column("name", "label"), SchemaChange.drop_column("ok")]
    )
    # merge_schema adds 'tag' (and widens nothing); a partial row keeps the older label
    wider = spark.createDataFrame(
        [(1 + i % 3, i, None, None, None, f"t{i}") for i in range(0, 60, 2)],
        "month int, id long, label string, qty long, price double, tag string",
    )
    write(wider, table, check_nullability=False, merge_schema=True)
    assert table.schema_id == 2
    want = table.to_arrow()
    rows = {r["id"]: r for r in want.to_pylist()}
    assert rows[2]["tag"] == "t2" and rows[2]["label"] == first[2]["name"]
    assert rows[1]["tag"] is None
    got = read(spark, table).toArrow()
    assert got.column_names == want.column_names
    key = ("month", "id")
    assert sorted_rows(got.cast(want.schema), key) == sorted_rows(want, key)
    old = read(spark, table, snapshot_id=1).toArrow()
    assert old.column_names == PK_SCHEMA.names
    assert sorted_rows(old.cast(PK_SCHEMA)) == sorted_rows(pa.Table.from_pylist(first, PK_SCHEMA))


def _write_upserts_and_deletes(spark: Any, table: Any) -> TableModel:
    """Two Spark writes: 90 rows, then 90 more overlapping half (every 4th id deleted)."""
    model = TableModel(engine_model("deduplicate"))
    first = make_rows(0, 90)
    write(_df(spark, first), table, check_nullability=False)
    model.apply(first)
    second = make_rows(45, 90, seed=4)
    kinds = ["-D" if r["id"] % 4 == 0 else "+U" for r in second]
    write(_df(spark, second, kinds), table, check_nullability=False, row_kind_column="op")
    model.apply(second, kinds)
    return model


def test_spark_writes_a_postpone_table(spark: Any, tmp_path: Path) -> None:
    """bucket = -2: each task writes pending files; rows are visible after compaction."""
    table = create_table(
        tmp_path, schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "-2"},
    )  # fmt: skip
    model = _write_upserts_and_deletes(spark, table)
    assert table.to_arrow().num_rows == 0
    assert {s.bucket for s in table.new_scan().plan()} == set()
    table.compact()
    assert sorted_rows(table.to_arrow()) == model.rows()
    merged = read(spark, table).toArrow()
    assert sorted_rows(merged.cast(PK_SCHEMA)) == model.rows()


def test_spark_writes_and_overwrites_a_dynamic_bucket_table(spark: Any, tmp_path: Path) -> None:
    from tests.dynamic_helpers import assert_one_bucket_per_key

    table = create_table(
        tmp_path, schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"dynamic-bucket.target-row-num": "10"},
    )  # fmt: skip
    assert table.bucket_mode == "dynamic"
    model = _write_upserts_and_deletes(spark, table)
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert assert_one_bucket_per_key(table) > 3
    again = [r for r in make_rows(0, 60, seed=5) if r["month"] == 1]
    write(_df(spark, again), table, check_nullability=False, mode="overwrite",
          overwrite_partitions={"month": 1})  # fmt: skip
    expected = [r for r in model.rows() if r["month"] != 1] + sorted_rows(
        pa.Table.from_pylist(again, schema=PK_SCHEMA)
    )
    assert sorted_rows(table.to_arrow()) == sorted(expected, key=lambda r: (r["month"], r["id"]))
    assert_one_bucket_per_key(table)


def test_sink_writes_a_batch_again_after_losing_a_hash_index_race(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer adds keys between the sink's write and its commit: the batch is redone."""
    from tests.dynamic_helpers import assert_one_bucket_per_key
    from tests.helpers import write_and_commit
    from tests.pk_helpers import to_table

    import snaplake.spark.sink as sink_module

    table = create_table(
        tmp_path, schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"dynamic-bucket.target-row-num": "10"},
    )  # fmt: skip
    other = make_rows(100, 30, seed=7)  # new keys in every month, committed mid-batch
    calls = []
    real = sink_module.write_messages  # type: ignore[attr-defined]

    def racing(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            write_and_commit(table, to_table(other), commit_user="other")
        return out

    monkeypatch.setattr(sink_module, "write_messages", racing)
    sink = SnaplakeSink(table, commit_user="cdc", check_nullability=False)
    ours = make_rows(95, 30)  # overlaps the other writer's keys 100..124
    sink(_df(spark, ours), 0)
    assert len(calls) == 2  # the first write lost the race and was written again
    model = TableModel(engine_model("deduplicate"))
    model.apply(other)
    model.apply(ours)
    assert sorted_rows(table.to_arrow()) == model.rows()
    assert_one_bucket_per_key(table)
