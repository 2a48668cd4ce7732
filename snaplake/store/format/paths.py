"""PathFactory: the only place that spells table file and directory names.

Layout (DESIGN.md §2)::

    <warehouse>/<db>.db/<table>/
      schema/schema-<N>
      snapshot/snapshot-<N>, snapshot/LATEST, snapshot/EARLIEST
      manifest/manifest-<uuid>-<n>, manifest/manifest-list-<uuid>-<n>,
      manifest/index-manifest-<uuid>-<n>
      index/index-<uuid>-<n>
      tag/tag-<name>, consumer/consumer-<id>
      <k1=v1>/<k2=v2>/bucket-<b>/data-<uuid>-<n>.parquet

Paths are joined with ``/`` for every backend (local absolute paths,
``memory://`` and ``s3://`` URIs).

Source: Paimon ``FileStorePathFactory``, ``SnapshotManager``, ``SchemaManager``,
``TagManager``, ``ConsumerManager``.
"""

from __future__ import annotations

import itertools
import re
import threading
import uuid
from collections.abc import Callable, Iterable

from snaplake.store.io.file_io import FileIO, FileStatus

__all__ = [
    "DATABASE_SUFFIX",
    "POSTPONE_BUCKET",
    "PathFactory",
    "TableFileManager",
    "count_file_types",
    "database_path",
    "file_type",
    "list_ids",
    "list_prefixed",
    "table_path",
]

DATABASE_SUFFIX = ".db"
POSTPONE_BUCKET = -2
"""Bucket (and ``bucket`` option) of postpone-bucket tables' pending files (Paimon
``BucketMode.POSTPONE_BUCKET``), stored under ``bucket-postpone``."""
_SNAPSHOT_RE = re.compile(r"snapshot-(\d+)")  # used with fullmatch: no "snapshot-1\n"
_SCHEMA_RE = re.compile(r"schema-(\d+)")


def file_type(path: str) -> str:
    """Classify a table file by its name (a bounded metrics label value).

    Returns:
        ``manifest_list``, ``manifest`` (index manifests included), ``snapshot``,
        ``data`` (a ``data-*`` name or a file under a ``bucket-<b>`` directory) or
        ``other`` (index files among them).
    """
    name = path.rsplit("/", 1)[-1]
    if name.startswith("manifest-list-"):
        return "manifest_list"
    if name.startswith(("manifest-", "index-manifest-")):
        return "manifest"
    if name.startswith("snapshot-"):
        return "snapshot"
    if name.startswith("data-") or "/bucket-" in path:
        return "data"
    return "other"


def count_file_types(paths: Iterable[str]) -> dict[str, int]:
    """Count ``paths`` by :func:`file_type` (types with no file are absent)."""
    counts: dict[str, int] = {}
    for path in paths:
        kind = file_type(str(path))
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def database_path(warehouse: str, database: str) -> str:
    """Return ``<warehouse>/<database>.db``."""
    return f"{warehouse}/{database}{DATABASE_SUFFIX}"


def table_path(warehouse: str, database: str, table: str) -> str:
    """Return ``<warehouse>/<database>.db/<table>``."""
    return f"{database_path(warehouse, database)}/{table}"


class PathFactory:
    """Names every file of one table.

    New file names carry a per-instance UUID and a counter, like Paimon's
    ``<prefix>-<uuid>-<n>``, so two writers never pick the same name.

    Args:
        table_root: Path of the table directory, without trailing slash.
    """

    def __init__(self, table_root: str) -> None:
        self.root = table_root.rstrip("/")
        self._uuid = str(uuid.uuid4())
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def _next(self) -> int:
        with self._lock:
            return next(self._counter)

    # schema -------------------------------------------------------------
    @property
    def schema_dir(self) -> str:
        """``<table>/schema``."""
        return f"{self.root}/schema"

    def schema_path(self, schema_id: int) -> str:
        """``<table>/schema/schema-<id>``."""
        return f"{self.schema_dir}/schema-{schema_id}"

    @staticmethod
    def parse_schema_id(name: str) -> int | None:
        """Return N for a file named ``schema-N``, else ``None``."""
        match = _SCHEMA_RE.fullmatch(name)
        return int(match.group(1)) if match else None

    # snapshots ----------------------------------------------------------
    @property
    def snapshot_dir(self) -> str:
        """``<table>/snapshot``."""
        return f"{self.root}/snapshot"

    def snapshot_path(self, snapshot_id: int) -> str:
        """``<table>/snapshot/snapshot-<id>``."""
        return f"{self.snapshot_dir}/snapshot-{snapshot_id}"

    @staticmethod
    def parse_snapshot_id(name: str) -> int | None:
        """Return N for a file named ``snapshot-N``, else ``None``."""
        match = _SNAPSHOT_RE.fullmatch(name)
        return int(match.group(1)) if match else None

    @property
    def latest_hint_path(self) -> str:
        """``<table>/snapshot/LATEST``."""
        return f"{self.snapshot_dir}/LATEST"

    @property
    def earliest_hint_path(self) -> str:
        """``<table>/snapshot/EARLIEST``."""
        return f"{self.snapshot_dir}/EARLIEST"

    # manifests ----------------------------------------------------------
    @property
    def manifest_dir(self) -> str:
        """``<table>/manifest``."""
        return f"{self.root}/manifest"

    def manifest_path(self, file_name: str) -> str:
        """Path of a manifest or manifest list named ``file_name``."""
        return f"{self.manifest_dir}/{file_name}"

    def new_manifest_file_name(self) -> str:
        """A fresh ``manifest-<uuid>-<n>`` name."""
        return f"manifest-{self._uuid}-{self._next()}"

    def new_manifest_list_name(self) -> str:
        """A fresh ``manifest-list-<uuid>-<n>`` name."""
        return f"manifest-list-{self._uuid}-{self._next()}"

    def index_manifest_path(self, name: str) -> str:
        """Path of the index manifest named ``name`` (in the manifest directory)."""
        return self.manifest_path(name)

    def new_index_manifest_name(self) -> str:
        """A fresh ``index-manifest-<uuid>-<n>`` name."""
        return f"index-manifest-{self._uuid}-{self._next()}"

    # index files --------------------------------------------------------
    @property
    def index_dir(self) -> str:
        """``<table>/index``: HASH and deletion-vector files (Paimon ``FileStorePathFactory``)."""
        return f"{self.root}/index"

    def index_file_path(self, file_name: str) -> str:
        """``<table>/index/<file_name>``."""
        return f"{self.index_dir}/{file_name}"

    def new_index_file_name(self) -> str:
        """A fresh ``index-<uuid>-<n>`` name."""
        return f"index-{self._uuid}-{self._next()}"

    # data ---------------------------------------------------------------
    def bucket_dir(self, partition_path: str, bucket: int) -> str:
        """``<table>/<partition path>/bucket-<b>`` (no partition part when unpartitioned).

        The postpone bucket (``-2``) is ``bucket-postpone``, as Paimon's
        ``FileStorePathFactory.bucketPath`` names it.
        """
        name = "postpone" if bucket == POSTPONE_BUCKET else bucket
        if partition_path:
            return f"{self.root}/{partition_path}/bucket-{name}"
        return f"{self.root}/bucket-{name}"

    def new_data_file_name(self, *, extension: str = "parquet", prefix: str = "data-") -> str:
        """A fresh ``<prefix><uuid>-<n>.<extension>`` name (``data-file.prefix``)."""
        return f"{prefix}{self._uuid}-{self._next()}.{extension}"

    def data_file_path(
        self, partition_path: str, bucket: int, file_name: str, *, external_path: str | None = None
    ) -> str:
        """Full path of a data file (its ``external_path`` wins when set)."""
        if external_path:
            return external_path
        return f"{self.bucket_dir(partition_path, bucket)}/{file_name}"

    # tags and consumers -------------------------------------------------
    @property
    def tag_dir(self) -> str:
        """``<table>/tag``."""
        return f"{self.root}/tag"

    def tag_path(self, name: str) -> str:
        """``<table>/tag/tag-<name>``."""
        return f"{self.tag_dir}/tag-{name}"

    @property
    def consumer_dir(self) -> str:
        """``<table>/consumer``."""
        return f"{self.root}/consumer"

    def consumer_path(self, consumer_id: str) -> str:
        """``<table>/consumer/consumer-<id>``."""
        return f"{self.consumer_dir}/consumer-{consumer_id}"

    # long-lived changelog (Paimon's decoupled changelog) ----------------
    @property
    def changelog_dir(self) -> str:
        """``<table>/changelog``: ``changelog-<id>`` and hints (Paimon ``ChangelogManager``)."""
        return f"{self.root}/changelog"

    def changelog_path(self, changelog_id: int) -> str:
        """``<table>/changelog/changelog-<id>``."""
        return f"{self.changelog_dir}/changelog-{changelog_id}"

    @staticmethod
    def parse_changelog_id(name: str) -> int | None:
        """The id of a ``changelog-<id>`` file name, ``None`` for other names (hints)."""
        head, sep, tail = name.partition("changelog-")
        return int(tail) if not head and sep and tail.isdigit() else None


def list_ids(file_io: FileIO, directory: str, parse_id: Callable[[str], int | None]) -> list[int]:
    """Return the ids that ``parse_id`` reads from the names of the files below ``directory``.

    Args:
        file_io: Storage of the table.
        directory: A table directory (``snapshot/``, ``schema/``, ``changelog/``).
        parse_id: Maps a file name to its id, ``None`` for other files (hints);
            e.g. :meth:`PathFactory.parse_snapshot_id`.

    Returns:
        The ids, ascending.

    Storage:
        One listing of ``directory`` (recursive, as :meth:`FileIO.list_files`).
    """
    ids = []
    for status in file_io.list_files(directory):
        file_id = parse_id(status.path.rsplit("/", 1)[-1])
        if file_id is not None:
            ids.append(file_id)
    return sorted(ids)


def list_prefixed(file_io: FileIO, directory: str, prefix: str) -> list[tuple[str, FileStatus]]:
    """Return ``(name after prefix, status)`` for the files below ``directory`` named ``prefix*``.

    Names starting with ``.`` (hidden, temporary files) are skipped.

    Args:
        file_io: Storage of the table.
        directory: A table directory (``tag/``, ``consumer/``).
        prefix: The file name prefix (``tag-``, ``consumer-``).

    Returns:
        The pairs in listing order (no set order).

    Storage:
        One listing of ``directory`` (recursive, as :meth:`FileIO.list_files`).
    """
    found = []
    for status in file_io.list_files(directory):
        base = status.path.rsplit("/", 1)[-1]
        if base.startswith(prefix) and not base.startswith("."):
            found.append((base[len(prefix) :], status))
    return found


class TableFileManager:
    """Base of the managers of one kind of table file (snapshots, schemas, tags, consumers).

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.

    Source: the ``(fileIO, tablePath)`` pair every Paimon ``*Manager`` holds.
    """

    def __init__(self, file_io: FileIO, paths: PathFactory) -> None:
        self.file_io = file_io
        self.paths = paths
