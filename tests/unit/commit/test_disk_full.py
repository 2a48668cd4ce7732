"""A full disk gives ``StorageError`` naming the file and leaves no files behind (issue 18, 9b).

Two disks: a real tmpfs of 2 MiB (needs root to mount; skipped otherwise) and a
local disk whose writes fail with ``ENOSPC`` at the lowest write call snaplake's
writers reach: pyarrow's output stream (data files, through a pyarrow
``PyFileSystem``) and the ``O_EXCL`` write of new metadata files.
"""

from __future__ import annotations

import errno
import os
import random
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from tests.helpers import create_table

from snaplake.errors import StorageError
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32(), nullable=False),
        pa.field("payload", pa.binary()),
    ]
)
ROW_BYTES = 1000


def _rows(start: int, count: int, *, months: int = 3) -> pa.Table:
    """Rows with incompressible payloads: ``count * ROW_BYTES`` bytes on disk whatever the codec."""
    rng = random.Random(start)
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "month": pa.array([1 + i % months for i in ids], pa.int32()),
            "payload": pa.array([rng.randbytes(ROW_BYTES) for _ in ids], pa.binary()),
        },
        schema=SCHEMA,
    )


@dataclass
class _Budget:
    """Bytes the injected disk still takes; ``only`` limits which paths it counts."""

    free: int | None = None  # None: unlimited
    only: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, path: str, size: int) -> None:
        if self.free is None or (self.only is not None and self.only not in path):
            return
        with self.lock:
            if size > self.free:
                self.free = 0
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.free -= size


class _FullStream:
    """A file object whose writes fail with ENOSPC once the budget is used up."""

    def __init__(self, path: str, budget: _Budget) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._path = path
        self._budget = budget

    def write(self, data: bytes) -> int:
        self._budget.take(self._path, len(data))
        return self._file.write(data)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def tell(self) -> int:
        return self._file.tell()

    def writable(self) -> bool:
        return True


class _Handler(pafs.FileSystemHandler):  # type: ignore[misc]  # untyped in pyarrow-stubs
    """pyarrow's local filesystem with output streams that run out of space."""

    def __init__(self, budget: _Budget) -> None:
        self.fs = pafs.LocalFileSystem()
        self.budget = budget

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Handler) and other.budget is self.budget

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self):
        return "full-disk"

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise NotImplementedError

    def delete_file(self, path):
        self.fs.delete_file(path)

    def move(self, src, dest):
        self.fs.move(src, dest)

    def copy_file(self, src, dest):
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path):
        return self.fs.open_input_stream(path)

    def open_input_file(self, path):
        return self.fs.open_input_file(path)

    def open_output_stream(self, path, metadata):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return pa.PythonFile(_FullStream(path, self.budget), mode="w")

    def open_append_stream(self, path, metadata):
        raise NotImplementedError


class _FullDiskFileIO(LocalFileIO):
    """LocalFileIO whose data-file streams and new metadata files fail with ENOSPC."""

    def __init__(self, budget: _Budget) -> None:
        super().__init__(fsync=False)
        self.budget = budget

    def arrow_filesystem(self):
        return pafs.PyFileSystem(_Handler(self.budget)), ""

    def _write_exclusive(self, path: str, data: bytes, *, sync: bool = True) -> None:
        self.budget.take(path, len(data))
        super()._write_exclusive(path, data, sync=sync)

    def _write_tmp(self, path: str, data: bytes) -> tuple[str, int, list[str]]:
        self.budget.take(path, len(data))
        return super()._write_tmp(path, data)


class Disk:
    """A warehouse on a disk the test can fill; ``kind`` is ``tmpfs`` or ``injected``."""

    def __init__(self, kind: str, mount: Path) -> None:
        self.kind = kind
        self.mount = mount
        self.warehouse = str(mount / "wh")
        self.budget = _Budget()
        self._filler = mount / "filler"

    def table(self, table: Table) -> Table:
        """``table`` opened with this disk's FileIO."""
        if self.kind == "tmpfs":
            return table
        return Table(file_io=_FullDiskFileIO(self.budget), root=table.root, identifier="db.t")

    def fill(self, *, leave: int, only: str | None = None) -> None:
        """Leave about ``leave`` bytes free (``only``: the injected disk fails just those paths)."""
        if self.kind == "injected":
            self.budget.free, self.budget.only = leave, only
            return
        st = os.statvfs(self.mount)
        with open(self._filler, "wb") as f:
            f.write(b"\xff" * max(0, st.f_bavail * st.f_frsize - leave))

    def free(self) -> None:
        """Make room again."""
        self.budget.free = None
        self._filler.unlink(missing_ok=True)


@pytest.fixture(params=["tmpfs", "injected"])
def disk(request, tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if request.param == "injected":
        yield Disk("injected", mount)
        return
    tool = shutil.which("mount")
    if tool is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the injected disk covers the same path")
    done = subprocess.run(
        [tool, "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield Disk("tmpfs", mount)
    finally:
        # pyarrow closes the files it read from its I/O threads, maybe not yet: detach lazily.
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def _create(disk: Disk, *, primary_key: bool, options: dict[str, str] | None = None) -> Table:
    """The module's table (a primary-key one with one bucket), opened with ``disk``'s FileIO."""
    table = create_table(
        disk.warehouse, schema=SCHEMA, partition_keys=["month"],
        primary_keys=["id", "month"] if primary_key else (),
        options={"bucket": "1"} if primary_key else options,
    )  # fmt: skip
    return disk.table(table)


def _data_files(table: Table) -> list[str]:
    return sorted(s.path for s in table.file_io.list_files(table.root) if "/bucket-" in s.path)


def _deleted_count(error: BaseException) -> int:
    """How many files the writer's note says it deleted."""
    notes = [n for n in getattr(error, "__notes__", ()) if "the writer deleted the" in n]
    assert len(notes) == 1, getattr(error, "__notes__", None)
    match = re.search(r"deleted the (\d+) data file", notes[0])
    assert match is not None
    return int(match.group(1))


def _assert_names_a_data_file(error: StorageError, table: Table) -> None:
    assert error.path.startswith(table.root + "/")
    assert "/bucket-" in error.path
    assert error.path in str(error)
    assert "disk is full" in str(error)


@pytest.mark.parametrize("primary_key", [False, True], ids=["append", "primary-key"])
def test_prepare_commit_on_a_full_disk_deletes_the_files_it_wrote(disk, primary_key):
    table = _create(disk, primary_key=primary_key)
    writer = table.new_write(commit_user="u")
    writer.write_arrow(_rows(0, 450))  # 150 KB per month: written by prepare_commit
    # Months 1 and 2 fit, month 3 does not (the tmpfs: whichever runs out first).
    disk.fill(leave=0 if disk.kind == "injected" else 250_000, only="month=3")
    with pytest.raises(StorageError) as info:
        writer.prepare_commit()
    _assert_names_a_data_file(info.value, table)
    if disk.kind == "injected":
        assert "month=3/" in info.value.path
        assert _deleted_count(info.value) == 2  # months 1 and 2 were written
    assert _data_files(table) == []
    with pytest.raises(ValueError, match="failed writing its data files"):
        writer.write_arrow(_rows(0, 3))
    with pytest.raises(ValueError, match="failed writing its data files"):
        writer.prepare_commit()
    writer.abort()  # still allowed: nothing left to delete

    disk.free()
    again = table.new_write(commit_user="u")
    again.write_arrow(_rows(0, 450))
    table.new_commit(commit_user="u").commit(again.prepare_commit(), commit_identifier=1)
    assert table.to_arrow().num_rows == 450


def test_files_rolled_before_a_failed_write_are_deleted(disk):
    # 64 KB files: write_arrow rolls them one after another until the disk is full.
    table = _create(disk, primary_key=False, options={"target-file-size": "64 kb"})
    writer = table.new_write(commit_user="u")
    disk.fill(leave=200_000)
    with pytest.raises(StorageError) as info:
        writer.write_arrow(_rows(0, 600, months=1))
    _assert_names_a_data_file(info.value, table)
    assert _deleted_count(info.value) >= 2  # 64 KB files rolled before the disk filled up
    assert _data_files(table) == []
    with pytest.raises(ValueError, match="write those rows again"):
        writer.prepare_commit()


def test_manifest_write_on_a_full_disk_names_the_manifest(disk):
    table = _create(disk, primary_key=False)
    writer = table.new_write(commit_user="u")
    writer.write_arrow(_rows(0, 30))
    messages = writer.prepare_commit()
    disk.fill(leave=0)
    with pytest.raises(StorageError) as info:
        table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert info.value.path.startswith(table.paths.manifest_dir + "/")
    assert info.value.path in str(info.value)
    assert "disk is full" in str(info.value)
    assert table.latest_snapshot() is None
    assert not list(table.file_io.list_files(table.paths.manifest_dir))
    disk.free()
    table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert table.to_arrow().num_rows == 30


def test_overwrite_on_a_full_disk_names_the_file_and_keeps_the_old_content(disk):
    table = _create(disk, primary_key=False)
    table.set_consumer("job-a", next_snapshot=1)
    disk.fill(leave=0)
    with pytest.raises(StorageError) as info:
        table.set_consumer("job-a", next_snapshot=2)
    assert info.value.path == table.paths.consumer_path("job-a")
    assert "disk is full" in str(info.value)
    disk.free()
    assert table.consumers() == {"job-a": 1}
