"""The storage boundary: the FileIO contract and the choice of backend by URI.

Every byte snaplake reads or writes goes through a :class:`FileIO`. Paths are
full strings: an absolute local path (``/data/wh/db.db/t/snapshot/snapshot-1``),
``memory://...`` or ``s3://bucket/key``. Backends translate their own failures
into builtins (``FileNotFoundError``, ``PermissionError``) or
:mod:`snaplake.errors` types once, here at the boundary; nothing above
``snaplake.store`` catches a backend exception type.

Source: the FileIO seam of Paimon (``org.apache.paimon.fs.FileIO``) and
pyiceberg's ``FileIO``, with the commit primitive changed to a create-only
write (never exists-then-rename, pypaimon #9714).
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["SCRATCH_PREFIX", "FileIO", "FileStatus", "resolve_file_io", "split_scheme"]

SCRATCH_PREFIX = ".snaplake-probe-"
"""Name prefix of short-lived scratch files a backend may write next to its targets.

S3FileIO checks once per bucket and process that the server honours conditional
writes, usually by re-sending its first manifest with ``If-None-Match``; when
that cannot decide (the first create-only write is a snapshot or a large
file), it writes and deletes one ``<dir>/.snaplake-probe-<uuid>``, which a
crash in between leaves behind. Readers ignore
such files; orphan clean deletes them once they are older than its cutoff.
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileStatus:
    """One file found by :meth:`FileIO.list_files`.

    Attributes:
        path: Full path of the file, in the same form the FileIO was given.
        size_bytes: Length of the file in bytes.
        modification_time_ms: Last modification, epoch milliseconds (UTC).
    """

    path: str
    size_bytes: int
    modification_time_ms: int


class FileIO(abc.ABC):
    """Read, write, create-if-absent, list and delete files of one store.

    Implementations hold configuration only and are picklable, because Spark
    ships them to executors; clients are created lazily per process.

    Attributes:
        read_parallelism: How many small metadata files are worth reading at
            once (1 for local disk, where decoding dominates; more for object
            stores, where round trips do).
        buffered_write_max_bytes: Largest new file, in bytes, that is cheaper
            to build in memory and create with one :meth:`write_output` than
            to stream through :meth:`arrow_filesystem` or :meth:`open_output`.
            Writers of files of unknown final size (Parquet data files) buffer
            when an upper estimate of the size (Arrow's in-memory ``nbytes``)
            is at most this; a larger file stays correct, only costlier in
            memory. ``0`` (the default) means always stream. S3 sets its
            multipart part size: below it pyarrow's stream costs three
            requests (create, part, complete) where :meth:`write_output`
            costs one.
    """

    read_parallelism: int = 1
    buffered_write_max_bytes: int = 0

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """Return the whole content of ``path``.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            StorageError: the backend failed.
        """

    @abc.abstractmethod
    def write_bytes(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Write ``data`` to ``path`` so that readers see all of it or nothing.

        Args:
            path: Target path; parent directories are created as needed.
            data: The full content.
            overwrite: Replace an existing file. Only hint files (``LATEST``,
                ``EARLIEST``) and leases are ever overwritten.

        Raises:
            FileAlreadyExistsError: ``overwrite`` is false and ``path`` exists.
            StorageError: the backend failed.
        """

    @abc.abstractmethod
    def write_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` only if nothing is there: the commit primitive.

        Exactly one of several concurrent callers succeeds; the file is
        complete and durable when this returns.

        Raises:
            FileAlreadyExistsError: ``path`` already exists (the race was lost).
            StorageError: the backend failed; the write may or may not have
                landed, so the caller resolves the outcome by reading ``path``
                back and comparing its content.
        """

    def write_hint(self, path: str, data: bytes) -> None:
        """Overwrite an advisory hint file (``LATEST``) as cheaply as the store allows.

        Readers treat a hint as a guess they verify (a missing, unreadable or
        wrong one only costs them a probe or a listing), so a backend may
        give up the all-or-nothing guarantee of :meth:`write_bytes` here. The
        default is ``write_bytes(path, data, overwrite=True)``.

        Raises:
            StorageError: the backend failed.
        """
        self.write_bytes(path, data, overwrite=True)

    def publish(
        self,
        path: str,
        data: bytes,
        *,
        files: Collection[str] = (),
        directories: Collection[str] = (),
    ) -> None:
        """Make ``files`` and ``directories`` durable, then :meth:`write_if_absent` ``path``.

        The publish of a commit point: ``files`` are the files it references
        that were written for it (data files, manifests, manifest lists),
        ``directories`` those whose entries make them reachable. When this
        returns, they and ``path`` survive a crash. The default only calls
        :meth:`write_if_absent`: on object stores a completed write is durable.

        Raises:
            FileAlreadyExistsError: ``path`` already exists (the race was lost).
            FileNotFoundError: one of ``files`` does not exist; nothing was published.
            OSError: making the files durable failed, and nothing was published;
                or a step after the commit point failed (removing the temp
                name, syncing ``path``'s directory) and ``path`` is published.
                Callers tell the two apart by reading ``path`` back.
            StorageError: as :meth:`write_if_absent`.
        """
        self._publish(path, data, files, directories)

    def _publish(
        self, path: str, data: bytes, files: Collection[str], directories: Collection[str]
    ) -> None:
        """Backend part of :meth:`publish`; the default only calls :meth:`write_if_absent`."""
        del files, directories
        self.write_if_absent(path, data)

    def sync_in_background(self, paths: Collection[str]) -> None:
        """Start making the new files ``paths`` (and their directories) durable, without waiting.

        A hint for files a later :meth:`publish` names in ``files``: that
        publish still makes them durable (and raises if it cannot), but finds
        the work done or under way, so the storage's sync latency overlaps
        whatever the writer does meanwhile. Errors here are ignored (a file
        deleted meanwhile is fine). The default does nothing: on object
        stores a completed write is durable.
        """
        del paths

    def write_new(self, path: str, data: bytes) -> None:
        """Create a file under a fresh, unique name (manifests, manifest lists).

        Nothing reads such a file before a commit point referencing it is
        published with :meth:`write_if_absent`, which makes it durable; backends
        may therefore skip per-file durability work. The default is
        :meth:`write_if_absent`.

        Raises:
            FileAlreadyExistsError: ``path`` exists (a reused name: a bug).
            StorageError: the backend failed.
        """
        self.write_if_absent(path, data)

    @abc.abstractmethod
    def open_input(self, path: str) -> IO[bytes]:
        """Open ``path`` for random-access reading (seekable, pyarrow-compatible).

        Raises:
            FileNotFoundError: ``path`` does not exist.
        """

    @abc.abstractmethod
    def open_output(self, path: str) -> IO[bytes]:
        """Open a new file at ``path`` for streaming writes; visible once closed.

        Used for data files, whose names are unique, so no create-if-absent is
        needed.
        """

    def write_output(self, path: str, data: bytes) -> None:
        """Create a new file at ``path`` from its complete content, like :meth:`open_output`.

        The guarantees of :meth:`open_output` in one call: ``path`` is a
        fresh, unique name (a data file), nothing is visible until the whole
        content is, and no commit-grade create-if-absent is required (on S3
        no conditional-write probe). Used for data files up to
        :attr:`buffered_write_max_bytes`. The default writes ``data`` through
        :meth:`open_output`.

        Raises:
            FileAlreadyExistsError: ``path`` exists (a reused name: a bug).
            StorageError: the backend failed; nothing or all of ``data`` is
                at ``path``.
        """
        with self.open_output(path) as out:
            out.write(data)

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Tell whether ``path`` names an existing file or directory."""

    def file_exists(self, path: str) -> bool:
        """Tell whether ``path`` names an existing file; directories do not count.

        The commit path's "is ``snapshot-(N+1)`` there?" probe. Object stores
        answer it with one request, where :meth:`exists` may need a listing
        to recognise a directory. The default is :meth:`exists`.
        """
        return self.exists(path)

    @abc.abstractmethod
    def file_status(self, path: str) -> FileStatus:
        """Return size and modification time of ``path``.

        Raises:
            FileNotFoundError: ``path`` does not exist.
        """

    @abc.abstractmethod
    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """Delete one file.

        Raises:
            FileNotFoundError: ``path`` is absent and ``missing_ok`` is false.
        """

    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete many files (missing ones are ignored); backends may batch the calls."""
        for path in paths:
            self.delete(path, missing_ok=True)

    @abc.abstractmethod
    def delete_dir(self, path: str) -> None:
        """Delete a directory and everything below it (``drop_table``)."""

    @abc.abstractmethod
    def list_files(self, prefix: str) -> Iterator[FileStatus]:
        """Yield every file below directory ``prefix``, recursively, in no set order."""

    @abc.abstractmethod
    def list_dirs(self, path: str) -> list[str]:
        """Return the names (not paths) of the immediate sub-directories of ``path``."""

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str] | None:
        """Return a pyarrow filesystem for bulk Parquet I/O and the path prefix to strip.

        The second element is removed from the front of a snaplake path to get
        the pyarrow path (``"s3://"`` for S3, ``""`` for local paths). ``None``
        (the default) means: use :meth:`open_input` / :meth:`open_output`.
        """
        return None

    def translate_error(self, exc: OSError, *, path: str, operation: str) -> BaseException:
        """Map an ``OSError`` raised by :meth:`arrow_filesystem`'s filesystem to a typed error.

        Code that calls pyarrow's filesystem directly (bulk Parquet reads and
        writes) raises the result ``from exc``, so a missing bucket, refused
        credentials or an unreachable endpoint read the same as on the
        FileIO's own methods. The default returns ``exc`` unchanged.

        Args:
            exc: What pyarrow raised.
            path: The snaplake path (or the first of several) being accessed.
            operation: What was being done (``"read"``, ``"write"``).

        Returns:
            The exception to raise: a builtin (``FileNotFoundError``), a
            :mod:`snaplake.errors` type, or ``exc`` itself.
        """
        del path, operation
        return exc


def split_scheme(uri: str) -> tuple[str, str]:
    """Split ``uri`` into ``(scheme, rest)``; a plain path has scheme ``"file"``.

    ``file:///a/b`` and ``/a/b`` both give ``("file", "/a/b")``.
    """
    if "://" not in uri:
        return "file", uri
    scheme, rest = uri.split("://", 1)
    scheme = scheme.lower()
    if scheme == "file":
        return "file", rest if rest.startswith("/") else "/" + rest
    return scheme, rest


def resolve_file_io(uri: str, options: Mapping[str, str] | None = None) -> tuple[FileIO, str]:
    """Choose the FileIO for ``uri`` and return it with the normalised root path.

    Args:
        uri: ``/path``, ``file:///path``, ``memory://name`` or ``s3://bucket/prefix``.
        options: Catalog options (``s3.*`` keys configure S3).

    Returns:
        ``(file_io, root)`` where ``root`` is the path form used with that FileIO
        (absolute local path, ``memory://...`` or ``s3://bucket/prefix``),
        without a trailing slash.

    Raises:
        ValueError: the scheme is not supported.
    """
    import os

    scheme, rest = split_scheme(uri)
    opts = dict(options or {})
    if scheme == "file":
        from snaplake.store.io.local_file_io import LocalFileIO

        return LocalFileIO(), os.path.abspath(rest).rstrip("/") or "/"
    if scheme == "memory":
        from snaplake.store.io.memory_file_io import InMemoryFileIO

        return InMemoryFileIO.shared(rest.split("/", 1)[0]), "memory://" + rest.rstrip("/")
    if scheme in ("s3", "s3a"):
        from snaplake.store.io.s3.file_io import S3FileIO

        return S3FileIO(opts), "s3://" + rest.rstrip("/")
    raise ValueError(
        f"unsupported warehouse scheme {scheme!r} in {uri!r}; use a local path, file://, "
        "memory:// or s3://"
    )
