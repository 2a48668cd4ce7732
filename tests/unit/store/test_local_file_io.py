"""LocalFileIO's publish barrier: exactly the commit's own files and directories are synced."""

from __future__ import annotations

import os
import re
import sys

import pyarrow as pa
import pytest

import snaplake
from snaplake.errors import StorageError
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.io import local_file_io

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/fd")

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("month", pa.int32())])


@pytest.fixture
def synced(monkeypatch):
    """Record the path of every fd that is fdatasync'ed or fsync'ed; refuse global syncs."""
    seen: dict[str, list[str]] = {"data": [], "full": []}

    def record(kind, real):
        def sync(fd):
            seen[kind].append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        return sync

    monkeypatch.setattr(local_file_io, "_fdatasync", record("data", local_file_io._fdatasync))
    monkeypatch.setattr(os, "fsync", record("full", os.fsync))

    def refuse():
        raise AssertionError("a global sync flushes every process's pages")

    monkeypatch.setattr(os, "sync", refuse)
    return seen


def test_a_commit_syncs_its_own_files_and_directories_only(tmp_path, synced):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["month"])
    neighbour = tmp_path / "wh" / "neighbour.bin"
    neighbour.write_bytes(b"x" * 4096)  # dirty pages of somebody else
    for ident in (1, 2):
        write = table.new_write(commit_user="u")
        write.write_arrow(pa.table({"id": [ident], "month": [7]}, schema=SCHEMA))
        messages = write.prepare_commit()
        synced["data"].clear()
        synced["full"].clear()
        result = table.new_commit(commit_user="u").commit(messages, commit_identifier=ident)
    snap = table.snapshot_manager.snapshot(result.snapshot_id or 0)
    root = table.root
    [data_file] = [f.file_name for m in messages for f in m.added_files()]
    delta_list = table.paths.manifest_path(snap.delta_manifest_list)
    [delta] = [m.file_name for m in read_manifest_list(table.file_io, delta_list)]
    files = set(synced["data"])
    temp = [p for p in files if re.fullmatch(rf"{root}/snapshot/\.snapshot-2\.\w+\.tmp", p)]
    assert files - set(temp) == {
        f"{root}/month=7/bucket-0/{data_file}",
        f"{root}/manifest/{delta}",
        f"{root}/manifest/{snap.base_manifest_list}",
        f"{root}/manifest/{snap.delta_manifest_list}",
    }
    assert len(temp) == 1
    assert sorted(synced["full"]) == sorted(
        [f"{root}/month=7/bucket-0", f"{root}/month=7", root, f"{root}/manifest",
         f"{root}/snapshot"]
    )  # fmt: skip
    assert str(neighbour) not in files


def test_directories_created_for_a_published_file_are_synced_in_their_parents(tmp_path, synced):
    io = local_file_io.LocalFileIO()
    target = tmp_path / "a" / "b" / "file"
    io.write_if_absent(str(target), b"content")
    assert target.read_bytes() == b"content"
    assert sorted(synced["full"]) == sorted([str(tmp_path / "a" / "b"), str(tmp_path / "a"),
                                             str(tmp_path)])  # fmt: skip
    assert len(synced["data"]) == 1  # the temp file, before the link


def test_a_missing_referenced_file_publishes_nothing(tmp_path):
    io = local_file_io.LocalFileIO()
    target = tmp_path / "snapshot-1"
    with pytest.raises(FileNotFoundError):
        io.publish(str(target), b"{}", files=[str(tmp_path / "gone.parquet")])
    assert not target.exists()
    assert os.listdir(tmp_path) == []  # no temp file left behind


def test_a_failed_sync_publishes_nothing(tmp_path, monkeypatch):
    import errno

    def broken(fd):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(local_file_io, "_fdatasync", broken)
    data_file = tmp_path / "data.parquet"
    data_file.write_bytes(b"rows")
    target = tmp_path / "snapshot-1"
    with pytest.raises(OSError, match="I/O error") as err:
        local_file_io.LocalFileIO().publish(str(target), b"{}", files=[str(data_file)])
    assert not isinstance(err.value, StorageError)  # certain: not an unknown outcome
    assert sorted(os.listdir(tmp_path)) == ["data.parquet"]


class _Inline:
    """An executor running each task at once (the background syncs, made deterministic)."""

    def submit(self, fn, *args, **kwargs):
        from concurrent.futures import Future

        future: Future[object] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - kept in the future, as the pool does
            future.set_exception(exc)
        return future


def test_background_sync_covers_new_files_and_their_directory_only(tmp_path, synced, monkeypatch):
    monkeypatch.setattr(local_file_io, "_sync_pool", _Inline)
    bucket = tmp_path / "bucket-0"
    bucket.mkdir()
    a, b = bucket / "a.parquet", bucket / "b.parquet"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    local_file_io.LocalFileIO(fsync=False).sync_in_background([str(a)])
    assert synced == {"data": [], "full": []}
    local_file_io.LocalFileIO().sync_in_background([str(a), str(b), str(bucket / "gone")])
    assert sorted(synced["data"]) == [str(a), str(b)]  # a deleted file is no error
    assert synced["full"] == [str(bucket)]


def test_a_primary_key_writer_starts_syncing_its_files_before_the_commit(
    tmp_path, synced, monkeypatch
):
    monkeypatch.setattr(local_file_io, "_sync_pool", _Inline)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int32())])
    table = snaplake.FileSystemCatalog(str(tmp_path / "wh")).create_table(
        "db.t", schema=schema, primary_keys=["id"], options={"bucket": "1"}
    )
    synced["data"].clear()  # the schema file's
    synced["full"].clear()
    write = table.new_write(commit_user="u")
    write.write_arrow(pa.table({"id": [1, 2], "v": [3, 4]}, schema=schema))
    messages = write.prepare_commit()
    [name] = [f.file_name for m in messages for f in m.added_files()]
    path = f"{table.root}/bucket-0/{name}"
    assert synced["data"] == [path]
    assert synced["full"] == [f"{table.root}/bucket-0"]
    table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert synced["data"].count(path) == 2  # the publish syncs it again (cheap once clean)
