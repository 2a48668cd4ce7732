"""Table.write: write, prepare and commit in one call; a failure leaves no data file (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, create_table, rows, sorted_ids

import snaplake
from snaplake.errors import SchemaMismatchError, StorageError
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table

_PK_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("month", pa.int32()), ("v", pa.string())]
)


def _append_table(tmp_path: Path, **options: str) -> Table:
    return create_table(tmp_path / "wh", partition_keys=["month"], options=options)


def _data_files(table: Table) -> set[str]:
    """Names of every data file under the table directory."""
    return {p.name for p in Path(table.root).rglob("bucket-*/*") if p.is_file()}


def _live_files(table: Table) -> set[str]:
    return {f.file_name for split in table.new_scan().plan() for f in split.files}


def test_append_in_one_call_commits_one_snapshot_with_a_fresh_user_each_time(tmp_path):
    table = _append_table(tmp_path)
    first = table.write(rows(0, 100))
    second = table.write(pa.RecordBatchReader.from_batches(SCHEMA, rows(100, 50).to_batches()))
    assert (first.snapshot_id, second.snapshot_id) == (1, 2)
    assert first.records_added == 100 and second.records_added == 50
    assert sorted_ids(table.to_arrow()) == list(range(150))
    users = [s.commit_user for s in table.snapshots()]
    assert users[0] != users[1] and all(u.startswith("write-") for u in users)
    assert _data_files(table) == _live_files(table)


def test_a_list_of_batches_with_row_kinds_spanning_them(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table(
        "db.pk", schema=_PK_SCHEMA, primary_keys=["id"], options={"bucket": "2"}
    )
    base = pa.table({"id": [1, 2, 3, 4], "month": [1, 1, 2, 2], "v": ["a", "b", "c", "d"]},
                    schema=_PK_SCHEMA)  # fmt: skip
    table.write(base)
    change = pa.table({"id": [2, 3, 5], "month": [1, 2, 3], "v": ["b", "C", "e"]},
                      schema=_PK_SCHEMA)  # fmt: skip
    result = table.write(
        [change.slice(0, 2), change.slice(2).to_batches()[0]], row_kinds=["-D", "+U", "+I"]
    )
    assert result.snapshot_id == 2
    got = table.to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "month": 1, "v": "a"},
        {"id": 3, "month": 2, "v": "C"},
        {"id": 4, "month": 2, "v": "d"},
        {"id": 5, "month": 3, "v": "e"},
    ]


def test_row_kinds_of_another_length_leave_no_file(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table(
        "db.pk", schema=_PK_SCHEMA, primary_keys=["id"],
        options={"bucket": "1", "write-buffer-size": "1 b"},  # every batch is flushed at once
    )  # fmt: skip
    data = pa.table({"id": [1, 2, 3], "month": [1, 1, 1], "v": ["a", "b", "c"]}, schema=_PK_SCHEMA)
    with pytest.raises(SchemaMismatchError, match="4 row kinds for 3 rows"):
        table.write(data.to_batches(max_chunksize=1), row_kinds=["+I"] * 4)
    with pytest.raises(SchemaMismatchError, match="2 row kinds for more rows"):
        table.write(data.to_batches(max_chunksize=1), row_kinds=["+I"] * 2)
    assert _data_files(table) == set()
    assert table.latest_snapshot() is None


def test_overwrite_replaces_one_partition(tmp_path):
    table = _append_table(tmp_path)
    table.write(rows(0, 90))  # months 1, 2, 3
    fresh = rows(1000, 30, months=1).set_column(1, "month", pa.array([2] * 30, pa.int32()))
    result = table.write(fresh, overwrite={"month": 2})
    assert result.kind.value == "OVERWRITE"
    after = table.to_arrow()
    by_month = {m: sorted(after.filter(pa.compute.equal(after["month"], m))["id"].to_pylist())
                for m in (1, 2, 3)}  # fmt: skip
    assert by_month[2] == list(range(1000, 1030))
    assert by_month[1] == [i for i in range(90) if i % 3 == 0]
    assert by_month[3] == [i for i in range(90) if i % 3 == 2]


def test_a_schema_mismatch_in_the_second_batch_leaves_no_data_file(tmp_path):
    table = _append_table(tmp_path, **{"target-file-size": "1 kb"})  # the first batch rolls
    bad = rows(100, 10).drop_columns(["price"])
    with pytest.raises(SchemaMismatchError, match="price"):
        table.write([rows(0, 100), bad])
    assert _data_files(table) == set()
    assert table.latest_snapshot() is None


def test_a_commit_that_fails_deletes_the_written_files(tmp_path):
    table = _append_table(tmp_path)
    table.write(rows(0, 30))
    before = _data_files(table)
    with pytest.raises(SchemaMismatchError):  # rows of months 1..3 outside the static spec
        table.write(rows(100, 30), overwrite={"month": 1})
    assert _data_files(table) == before == _live_files(table)
    assert len(table.snapshots()) == 1


class _FailingFileIO(LocalFileIO):
    """LocalFileIO whose second data file write fails (after the first was created)."""

    buffered_write_max_bytes = 1 << 30

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.data_files = 0

    def write_output(self, path: str, data: bytes) -> None:
        self.data_files += 1
        if self.data_files == 2:
            raise StorageError("injected failure", path=path, operation="write")
        super().write_output(path, data)


def test_a_storage_failure_mid_write_leaves_no_data_file(tmp_path):
    created = _append_table(tmp_path, **{"target-file-size": "1 kb"})
    file_io = _FailingFileIO()
    table = Table(file_io=file_io, root=created.root, identifier="db.t")
    with pytest.raises(StorageError, match="injected failure"):
        table.write(rows(0, 300))
    assert file_io.data_files >= 2  # one file was written before the failure
    assert _data_files(table) == set()
    assert table.latest_snapshot() is None


def test_a_replayed_user_and_identifier_commits_once(tmp_path):
    table = _append_table(tmp_path)
    first = table.write(rows(0, 40), commit_user="loader", commit_identifier=7)
    replay = table.write(rows(0, 40), commit_user="loader", commit_identifier=7)
    assert not first.was_duplicate
    assert replay.was_duplicate and replay.snapshot_id == first.snapshot_id
    assert sorted_ids(table.to_arrow()) == list(range(40))
    assert _data_files(table) == _live_files(table)  # the replay's files are gone
    nxt = table.write(rows(40, 10), commit_user="loader", commit_identifier=8)
    assert nxt.snapshot_id == 2 and table.to_arrow().num_rows == 50


def test_bad_arguments_are_refused_before_any_file(tmp_path):
    table = _append_table(tmp_path)
    with pytest.raises(ValueError, match="commit_user"):
        table.write(rows(0, 5), commit_identifier=1)
    with pytest.raises(TypeError, match="RecordBatchReader"):
        table.write({"id": [1]})
    with pytest.raises(SchemaMismatchError, match=r"only \+I"):
        table.write(rows(0, 5), row_kinds=["-D"] * 5)
    assert _data_files(table) == set()


class _CountsSchemaListings(LocalFileIO):
    """Counts the listings of ``schema/`` (each is one LIST request on an object store)."""

    def __init__(self) -> None:
        super().__init__()
        self.schema_listings = 0

    def list_files(self, prefix: str):
        if prefix.rstrip("/").endswith("/schema"):
            self.schema_listings += 1
        return super().list_files(prefix)


def test_write_reads_the_latest_schema_once(tmp_path):
    """The writer and the committer of one Table.write come from one read of ``schema/``."""
    created = _append_table(tmp_path)
    counting = _CountsSchemaListings()
    table = Table(file_io=counting, root=created.root, identifier=created.identifier)
    counting.schema_listings = 0
    table.write(rows(0, 10))
    assert counting.schema_listings == 1
    assert sorted_ids(table.to_arrow()) == list(range(10))
