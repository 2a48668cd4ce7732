"""LocalFileIO: POSIX files; create-if-absent by ``os.link`` of a durable temp file.

Durability model (DESIGN.md §5d): files with fresh unique names (data files,
manifests, manifest lists) are written without individual fsyncs; the
create-if-absent publish of a commit point (``snapshot-N``, ``schema-N``,
tags) first makes *everything* written so far durable with one filesystem
barrier (``syncfs(2)`` on the target's filesystem — one journal commit instead
of two fsyncs per file), then hard-links the fully written temp file to the
final name (``link`` fails with ``EEXIST`` when the name is taken, so exactly
one concurrent writer wins and readers never see a partial file) and fsyncs
the directory so the new name survives a crash. Overwritten hint files
(``LATEST``) are advisory and are not fsynced.

Source: Paimon ``LocalFileIO``; PostgreSQL's ``syncfs`` recovery sync method
for the one-barrier idea.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import IO

import pyarrow.fs as pafs

from snaplake.errors import FileAlreadyExistsError, StorageAccessError, StorageError
from snaplake.store.io.file_io import FileIO, FileStatus

__all__ = ["LocalFileIO"]


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        fn: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):  # not Linux: fall back to a global sync
        return None
    return fn


_SYNCFS = _load_syncfs()


def _tmp_name(path: str) -> str:
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.{uuid.uuid4().hex}.tmp")


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _barrier(directory: str) -> None:
    """Make every file written on ``directory``'s filesystem durable."""
    if _SYNCFS is None:
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _SYNCFS(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs failed: {os.strerror(err)}", directory)
    finally:
        os.close(fd)


class LocalFileIO(FileIO):
    """FileIO over the local filesystem; paths are absolute POSIX paths.

    Args:
        fsync: Make publishes durable (the barrier, the temp file and the
            directory fsync). Default true; false only for throwaway tables.
    """

    def __init__(self, *, fsync: bool = True) -> None:
        self._fsync = fsync

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalFileIO) and other._fsync == self._fsync

    def __hash__(self) -> int:
        return hash(("local", self._fsync))

    def read_bytes(self, path: str) -> bytes:
        """Return the content of ``path``; raises ``FileNotFoundError`` if absent."""
        with open(path, "rb") as f:
            return f.read()

    def _write_tmp(self, path: str, data: bytes) -> str:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = _tmp_name(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        return tmp

    def write_bytes(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Write ``data`` atomically (temp file + rename); see :meth:`FileIO.write_bytes`.

        An overwrite (hint files, leases) is atomic but not fsynced: such files
        are advisory. Without ``overwrite`` this is :meth:`write_new`.
        """
        if not overwrite:
            self.write_new(path, data)
            return
        tmp = self._write_tmp(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    def write_if_absent(self, path: str, data: bytes) -> None:
        """Publish ``data`` at ``path`` by hard link; see :meth:`FileIO.write_if_absent`.

        Storage: writes a temp file, runs the filesystem barrier (so every file
        written before — data files, manifests — is durable too), links it to
        ``path``, removes the temp name and fsyncs the directory.
        """
        tmp = self._write_tmp(path, data)
        try:
            if self._fsync:
                _barrier(os.path.dirname(path))
            os.link(tmp, path)
        except FileExistsError as exc:
            raise FileAlreadyExistsError(
                f"{path} already exists", path=path, operation="write_if_absent"
            ) from exc
        except PermissionError as exc:
            raise StorageAccessError(
                f"permission denied creating {path}; check the directory's owner and mode",
                path=path,
                operation="write_if_absent",
            ) from exc
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EXDEV, errno.ENOTSUP):
                # Filesystems without hard links: O_EXCL create is still create-only.
                self._write_exclusive(path, data, sync=True)
            else:
                raise StorageError(
                    f"creating {path} failed: {exc}", path=path, operation="write_if_absent"
                ) from exc
        finally:
            os.unlink(tmp)
        if self._fsync:
            _fsync_dir(os.path.dirname(path))

    def _write_exclusive(self, path: str, data: bytes, *, sync: bool = True) -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError as exc:
            raise FileAlreadyExistsError(
                f"{path} already exists", path=path, operation="write_new"
            ) from exc
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync and self._fsync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)

    def write_new(self, path: str, data: bytes) -> None:
        """Create a file under a fresh unique name; durable at the next publish.

        Written in place with ``O_EXCL`` (no temp file, no fsync): nothing
        reads it before a snapshot referencing it is published, and that
        publish's barrier makes it durable.

        Raises:
            FileAlreadyExistsError: ``path`` exists (a name was reused: a bug).
        """
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._write_exclusive(path, data, sync=False)

    def open_input(self, path: str) -> IO[bytes]:
        """Open ``path`` for reading; raises ``FileNotFoundError`` if absent."""
        return open(path, "rb")

    def open_output(self, path: str) -> IO[bytes]:
        """Create ``path`` (and its parents) for writing; fails if it exists."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "xb")

    def exists(self, path: str) -> bool:
        """Tell whether ``path`` exists."""
        return os.path.exists(path)

    def file_status(self, path: str) -> FileStatus:
        """Return size and mtime of ``path``; raises ``FileNotFoundError`` if absent."""
        st = os.stat(path)
        return FileStatus(
            path=path, size_bytes=st.st_size, modification_time_ms=st.st_mtime_ns // 1_000_000
        )

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """Delete ``path``; see :meth:`FileIO.delete`."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir(self, path: str) -> None:
        """Delete ``path`` recursively; a missing directory is fine."""
        if os.path.isdir(path):
            shutil.rmtree(path)

    def list_files(self, prefix: str) -> Iterator[FileStatus]:
        """Yield every file below ``prefix`` (recursive, via ``os.scandir``)."""
        stack = [prefix]
        while stack:
            directory = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except FileNotFoundError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # removed since the scan (e.g. a temp file)
                        continue
                    yield FileStatus(
                        path=entry.path,
                        size_bytes=st.st_size,
                        modification_time_ms=st.st_mtime_ns // 1_000_000,
                    )

    def list_dirs(self, path: str) -> list[str]:
        """Return the names of the sub-directories of ``path`` (empty if it is absent)."""
        try:
            return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """Return pyarrow's ``LocalFileSystem`` and an empty prefix."""
        return pafs.LocalFileSystem(), ""
