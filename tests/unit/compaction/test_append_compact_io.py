"""How append compaction reads and writes: the polars and pyarrow readers agree, the
streamed (sliced) write keeps rows, order and stats, and failures leave no outputs."""

from __future__ import annotations

import datetime as dt
import math
import os
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.helpers import create_table, sorted_ids, write_and_commit
from tests.unit.compaction.conftest import FAST, append, compaction_job, runs, small_files

import snaplake
from snaplake.compaction import append_rewrite
from snaplake.store.format.data_file import DataFileMeta, FileSource
from snaplake.store.format.stats import compute_value_stats
from snaplake.write.table_write import new_data_file_meta

WIDE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("b", pa.bool_()),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("bin", pa.binary()),
        pa.field("d", pa.date32()),
        pa.field("ts_ms", pa.timestamp("ms")),
        pa.field("ts_tz", pa.timestamp("us", tz="UTC")),
        pa.field("dec", pa.decimal128(20, 4)),
    ]
)
NESTED = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("t", pa.time32("ms")),
        pa.field("ts_s", pa.timestamp("s")),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("pt", pa.struct([("x", pa.int32()), ("y", pa.string())])),
    ]
)


def _wide_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    f64 = [math.nan if i % 7 == 0 else -0.0 if i % 7 == 1 else i / 3 for i in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "b": [None if i % 5 == 0 else i % 2 == 0 for i in ids],
            "i8": pa.array([i % 100 - 50 for i in ids], pa.int8()),
            "i16": pa.array([i * 3 % 30000 for i in ids], pa.int16()),
            "i32": pa.array([None if i % 4 == 0 else i * 1000 for i in ids], pa.int32()),
            "f32": pa.array([i / 7 for i in ids], pa.float32()),
            "f64": pa.array(f64, pa.float64()),
            "s": [None if i % 6 == 0 else "ünïcode-" * (i % 3) + str(i) for i in ids],
            "bin": pa.array([bytes([i % 256, 0, 255]) for i in ids], pa.binary()),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in ids]),
            "ts_ms": pa.array([i * 1_000 for i in ids], pa.timestamp("ms")),
            "ts_tz": pa.array([i * 1_000_003 for i in ids], pa.timestamp("us", tz="UTC")),
            "dec": pa.array([Decimal(i) / 8 for i in ids], pa.decimal128(20, 4)),
        },
        schema=WIDE,
    )


def _nested_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "t": pa.array([i * 1000 % 86_400_000 for i in ids], pa.time32("ms")),
            "ts_s": pa.array(ids, pa.timestamp("s")),
            "tags": [[str(i), "x"] if i % 3 else None for i in ids],
            "attrs": pa.array([[("k", i)] for i in ids], pa.map_(pa.string(), pa.int64())),
            "pt": [{"x": i, "y": str(i)} for i in ids],
        },
        schema=NESTED,
    )


def _values(table: pa.Table) -> list[list[object]]:
    """Column values with NaN and the sign of zero comparable (``Table.equals`` is NaN-blind)."""

    def norm(v: object) -> object:
        if isinstance(v, float):
            return ("nan",) if math.isnan(v) else (v, math.copysign(1.0, v))
        return v

    return [[norm(v) for v in col.to_pylist()] for col in table.columns]


def _same(a: pa.Table, b: pa.Table) -> bool:
    return a.schema == b.schema and _values(a) == _values(b)


def _table(root: str, schema: pa.Schema, **options: str) -> snaplake.Table:
    return create_table(
        root, f"db.t{uuid.uuid4().hex[:8]}", schema=schema, options={**FAST, **options}
    )


@pytest.mark.parametrize(
    ("schema", "make_rows"), [(WIDE, _wide_rows), (NESTED, _nested_rows)], ids=["flat", "nested"]
)
def test_polars_and_pyarrow_reads_agree(tmp_path, monkeypatch, schema, make_rows):
    table = _table(str(tmp_path / "wh"), schema)
    for i in range(4):
        write_and_commit(table, make_rows(i * 25, 25))
    before = table.to_arrow()
    job = compaction_job(table)
    (task,) = runs(job.plan_units())
    rewriter = append_rewrite.AppendRewriter(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager
    )
    arrow_schema = table.arrow_schema
    slow = rewriter._read_many_pyarrow(task.paths, arrow_schema)
    polars_reads = append_rewrite._polars_round_trips(arrow_schema)
    assert polars_reads == (schema is WIDE)
    if polars_reads:  # the fast path must not have fallen back silently

        def no_fallback(*_args):
            raise AssertionError("fell back to pyarrow")

        monkeypatch.setattr(rewriter, "_read_many_pyarrow", no_fallback)
    fast = rewriter._read_many(task.paths, arrow_schema)
    assert _same(fast, slow)
    monkeypatch.undo()
    result = job.execute()
    assert result.files_before == 4
    assert result.files_after == 1
    assert _same(table.to_arrow(), before)


def test_memory_file_io_reads_through_bytes():
    table = _table(f"memory://{uuid.uuid4().hex}", WIDE)
    for i in range(3):
        write_and_commit(table, _wide_rows(i * 10, 10))
    before = table.to_arrow()
    result = table.compact()
    assert result.files_after == 1
    assert _same(table.to_arrow(), before)


def test_without_polars_falls_back_to_pyarrow(make_table, monkeypatch):
    monkeypatch.setattr(append_rewrite, "_polars", lambda: None)
    table = small_files(make_table, 4)
    result = table.compact()
    assert result.files_after == 1
    assert table.to_arrow().column("id").to_pylist() == list(range(40))


def test_streamed_write_keeps_order_rows_and_stats(make_table, monkeypatch):
    monkeypatch.setattr(append_rewrite, "_SLICE_BYTES", 1)  # every input is a slice
    monkeypatch.setattr(append_rewrite, "_ROW_GROUP_BYTES", 1)  # every piece a row group
    table = make_table()  # partitioned by month: paths contain "month=<m>"
    for i in range(5):
        append(table, i * 10, 10)
    before = {
        s.partition_values: table.to_arrow(filter=[("month", "=", s.partition_values[0])])
        for s in table.new_scan().plan()
    }
    result = table.compact()
    assert result.buckets_compacted == 3
    assert result.files_after == 3
    for path in result.output_files:
        meta = pq.read_metadata(path)
        assert meta.num_row_groups == 5  # one per input piece
    for (month,), rows in before.items():
        got = table.to_arrow(filter=[("month", "=", month)])
        assert got.equals(rows)  # same rows, same order, no extra columns
    # the value stats of the streamed files still prune correctly
    got = table.to_arrow(filter=[("month", "=", 2), ("id", ">=", 35)])
    assert sorted_ids(got) == [i for i in range(35, 50) if 1 + i % 3 == 2]


def test_vanished_input_raises_and_leaves_no_output(make_table, monkeypatch):
    monkeypatch.setattr(append_rewrite, "_SLICE_BYTES", 1)
    table = small_files(make_table, 5)
    job = compaction_job(table)
    (task,) = runs(job.plan_units())
    os.remove(task.paths[3])
    before = {s.path for s in table.file_io.list_files(table.root)}
    latest = table.snapshot_manager.latest_snapshot_id()
    with pytest.raises(FileNotFoundError):
        job.execute()
    assert {s.path for s in table.file_io.list_files(table.root)} == before
    assert table.snapshot_manager.latest_snapshot_id() == latest


@pytest.mark.parametrize("polars", [True, False])
def test_batched_rewrite_of_a_large_input_has_the_stats_of_the_whole_file(
    tmp_path, monkeypatch, polars
):
    """A bucket's earlier output is re-read in batches; stats equal a one-shot computation."""
    if not polars:
        monkeypatch.setattr(append_rewrite, "_polars", lambda: None)
    table = _table(str(tmp_path / "wh"), WIDE)
    for i in range(4):
        write_and_commit(table, _wide_rows(i * 50, 50))
    table.compact()  # one output of 200 rows
    for i in range(4, 7):
        write_and_commit(table, _wide_rows(i * 50, 50))
    before = table.to_arrow()
    # The 200-row output is now "large": read 7 rows at a time; small inputs one by one.
    (big,) = [f for f in table.new_scan().plan()[0].files if f.row_count == 200]
    monkeypatch.setattr(append_rewrite, "_SLICE_BYTES", big.file_size_bytes - 1)
    monkeypatch.setattr(append_rewrite, "_BATCH_ROWS", 7)
    monkeypatch.setattr(append_rewrite, "_ROW_GROUP_BYTES", 2_000)
    result = table.compact()
    assert result.files_before == 4
    assert result.files_after == 1
    assert _same(table.to_arrow(), before)
    (path,) = result.output_files
    assert pq.read_metadata(path).num_row_groups > 3
    (meta,) = table.new_scan().plan()[0].files
    whole = compute_value_stats(pq.read_table(path), table.schema().value_types)
    assert meta.value_stats.min_values == whole.min_values
    assert meta.value_stats.max_values == whole.max_values
    assert meta.value_stats.null_counts == whole.null_counts


def test_slices_bound_rows_and_bytes():
    """Small inputs are grouped within both bounds; a file over either bound is read alone."""

    def meta(rows: int, size: int) -> DataFileMeta:
        return new_data_file_meta(
            file_name="f", size_bytes=size, row_count=rows,
            stats=compute_value_stats(pa.table({}), []), schema_id=0,
            min_sequence_number=0, max_sequence_number=max(rows - 1, 0),
            file_source=FileSource.APPEND,
        )  # fmt: skip

    batch, limit = append_rewrite._BATCH_ROWS, append_rewrite._SLICE_BYTES
    files = [
        meta(50, 1_000),
        meta(50, 1_000),
        meta(batch + 1, 10_000),  # many rows, few bytes (repetitive data): alone
        meta(batch, 1_000),
        meta(batch, 1_000),
        meta(1, 1_000),  # third file would pass 2 * _BATCH_ROWS: new slice
        meta(10, limit + 1),  # many bytes: alone
        meta(10, limit // 2),
        meta(10, limit // 2 + 1),  # bytes would pass _SLICE_BYTES: new slice
    ]
    paths = [f"p{i}" for i in range(len(files))]
    assert append_rewrite._slices(paths, files) == [
        (["p0", "p1"], False),
        (["p2"], True),
        (["p3", "p4"], False),
        (["p5"], False),
        (["p6"], True),
        (["p7"], False),
        (["p8"], False),
    ]
