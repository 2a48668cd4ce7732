"""TableWrite: rolling at target-file-size, the partition/bucket split, abort (in memory)."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.helpers import create_table, rows

import snaplake
from snaplake.commit.message import CommitMessage
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.bucket import bucket_ids
from snaplake.table import Table

_names = itertools.count()


def _table(**options: str) -> Table:
    return create_table(
        f"memory://table-write-{next(_names)}", partition_keys=["month"], options=options
    )


def _file_rows(table: Table, message: CommitMessage) -> list[pa.Table]:
    part = table.schema().partition_path_of(message.partition)
    out = []
    for f in message.added_files():
        path = table.paths.data_file_path(part, message.bucket, f.file_name)
        out.append(pq.read_table(table.file_io.open_input(path)))
    return out


def _exists(table: Table, messages: list[CommitMessage]) -> list[bool]:
    out = []
    for m in messages:
        part = table.schema().partition_path_of(m.partition)
        out += [table.file_io.exists(table.paths.data_file_path(part, m.bucket, f.file_name))
                for f in m.added_files()]  # fmt: skip
    return out


def test_files_roll_at_the_target_size_and_keep_row_order():
    table = _table(**{"target-file-size": "32 kb"})
    data = rows(0, 6000, months=1)
    write = table.new_write(commit_user="u")
    for start in range(0, 6000, 1000):  # several batches fill one bucket's buffer
        write.write_arrow(data.slice(start, 1000))
    [message] = write.prepare_commit()
    files = message.data_increment.new_files
    assert len(files) > 3
    per_row = data.nbytes / data.num_rows
    # every file but the last holds about target-file-size of Arrow data
    for f in files[:-1]:
        assert f.row_count * per_row <= 32 * 1024 * 1.01
        assert f.row_count * per_row >= 32 * 1024 * 0.5
    ids = [i for t in _file_rows(table, message) for i in t.column("id").to_pylist()]
    assert ids == list(range(6000))  # in write order, nothing lost
    for a, b in itertools.pairwise(files):  # sequence ranges follow the rows
        assert a.max_sequence_number < b.min_sequence_number
    assert all(f.max_sequence_number - f.min_sequence_number + 1 == f.row_count for f in files)


def test_rows_are_split_by_partition_and_bucket():
    table = _table(bucket="3", **{"bucket-key": "id"})
    data = rows(0, 600, months=4)
    write = table.new_write(commit_user="u")
    write.write_arrow(data)
    messages = write.prepare_commit()
    assert len(messages) == 4 * 3  # one message per (partition, bucket)
    seen: list[int] = []
    schema = table.schema()
    for m in messages:
        [month] = decode_binary_row(m.partition, schema.partition_types)
        assert m.total_buckets == 3
        for got in _file_rows(table, m):
            assert set(got.column("month").to_pylist()) == {month}
            want = bucket_ids(got, ["id"], [schema.field_type("id")], 3)
            assert np.all(want == m.bucket)
            seen += got.column("id").to_pylist()
    assert sorted(seen) == list(range(600))


def test_unpartitioned_unbucketed_rows_go_to_bucket_0():
    table = create_table(f"memory://table-write-{next(_names)}")
    write = table.new_write(commit_user="u")
    write.write_arrow(rows(0, 50))
    [message] = write.prepare_commit()
    assert (message.bucket, message.total_buckets) == (0, -1)
    assert sum(f.row_count for f in message.added_files()) == 50


def test_abort_deletes_prepared_and_rolled_files_and_drops_buffered_rows():
    table = _table(**{"target-file-size": "16 kb"})
    write = table.new_write(commit_user="u")
    write.write_arrow(rows(0, 300))
    prepared = write.prepare_commit()
    write.write_arrow(rows(1000, 4000, months=1))  # rolls files before any prepare_commit
    write.write_arrow(rows(9000, 5, months=1))  # and leaves rows in the buffer
    assert all(_exists(table, prepared))
    rolled = [p.path for p in table.file_io.list_files(table.root) if p.path.endswith(".parquet")]
    assert len(rolled) > len(_exists(table, prepared))
    write.abort(prepared)
    assert not any(p.path.endswith(".parquet") for p in table.file_io.list_files(table.root))
    assert write.prepare_commit() == []  # the buffered rows were dropped too
    write.abort(prepared)  # aborting again (files already gone) is fine
    write.write_arrow(rows(20_000, 3))  # the writer stays usable
    assert sum(f.row_count for m in write.prepare_commit() for f in m.added_files()) == 3


def test_prepare_commit_with_nothing_written_is_empty_and_the_writer_is_reusable():
    table = _table()
    write = table.new_write(commit_user="u")
    assert write.prepare_commit() == []
    write.write_arrow(rows(0, 0))
    assert write.prepare_commit() == []
    write.write_arrow(rows(0, 9))
    first = write.prepare_commit()
    write.write_arrow(rows(9, 9))
    second = write.prepare_commit()
    names = {f.file_name for m in first + second for f in m.added_files()}
    assert len(names) == len(first) + len(second)  # new files every round


def test_a_schema_mismatch_writes_nothing():
    table = _table()
    write = table.new_write(commit_user="u")
    with pytest.raises(snaplake.SchemaMismatchError):
        write.write_arrow(pa.table({"id": [1], "unknown": ["x"]}))
    assert not any(p.path.endswith(".parquet") for p in table.file_io.list_files(table.root))


def test_a_closed_writer_refuses_writes():
    write = _table().new_write(commit_user="u")
    write.close()
    with pytest.raises(ValueError, match="closed"):
        write.write_arrow(rows(0, 1))
