"""Why a file of the snapshot being read is missing: expired, being expired, or damage.

A read plans a snapshot's files and then opens them; expiry may delete them in
between (it deletes data files, then manifests, then the snapshot files). A
``FileNotFoundError`` while planning or reading is therefore turned into the
error that says what happened:

- ``SnapshotNotFoundError``: ``snapshot-<id>`` is gone (expired, or rolled
  back) or holds another snapshot now; or it still exists but the missing file
  is one the latest snapshot no longer uses, which is what an expiry of the
  snapshot leaves while it runs (it deletes the snapshot file last). Reading
  a retained snapshot works; a tag or consumer keeps one from expiring.
- ``TagNotFoundError``: a read through a tag whose tag file was deleted meanwhile.
- ``CorruptMetadataError`` naming the file: the snapshot (or tag) still exists
  and the file is one the latest snapshot uses too, so no expiry deleted it:
  it was deleted outside snaplake's maintenance.

Source: Paimon ``FileUtils.checkExists`` (its message names both causes, too
fast an expiry and damage, without telling them apart); the order of Paimon
``ExpireSnapshotsImpl``'s deletions, which makes "the latest snapshot no longer
uses the file" the test for an expiry in progress.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from snaplake.errors import (
    CorruptMetadataError,
    SnaplakeError,
    SnapshotNotFoundError,
    TagNotFoundError,
)
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["MissingFileCheck", "missing_path"]

T = TypeVar("T")

_QUOTED_PATH = re.compile(r"'((?:/|s3a?://|memory://)[^']+)'")
_BARE_PATH = re.compile(r"^(?:/|s3a?://|memory://)\S+$")


def missing_path(exc: FileNotFoundError) -> str | None:
    """Return the path ``exc`` names: its ``filename``, else one quoted in its message.

    pyarrow's errors carry the path only in the message (``Failed to open
    local file '/wh/...'``, or the bare path for a dataset of missing files).
    """
    if isinstance(exc.filename, str) and exc.filename:
        return exc.filename
    text = str(exc)
    match = _QUOTED_PATH.search(text)
    if match is not None:
        return match.group(1)
    if _BARE_PATH.match(text.strip()):
        return text.strip()
    return None


def _same(a: Snapshot, b: Snapshot) -> bool:
    return (a.time_millis, a.commit_user, a.commit_identifier) == (
        b.time_millis,
        b.commit_user,
        b.commit_identifier,
    )


def _base_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class MissingFileCheck:
    """Turns a ``FileNotFoundError`` while reading one snapshot into the error that explains it.

    Attributes:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema_manager: Reads schemas (to plan the latest snapshot).
        snapshot: The snapshot being read (``None``: an empty table, nothing to check).
        tag: The tag the snapshot was read through, if any.

    Usage::

        check = MissingFileCheck(file_io=..., paths=..., schema_manager=..., snapshot=snap)
        with check.reading():
            rows = read_splits(file_io, scan.plan(), schema=...)
    """

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot: Snapshot | None
    tag: str | None = None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Run the block; a ``FileNotFoundError`` in it becomes :meth:`error_for`'s error.

        Raises:
            SnapshotNotFoundError: the snapshot expired (or is being expired)
                or was rolled back while the block read it.
            TagNotFoundError: the tag was deleted while the block read it.
            CorruptMetadataError: a file the snapshot and the latest snapshot
                use is missing (``.path`` names it).
        """
        try:
            yield
        except FileNotFoundError as exc:
            if self.snapshot is None:
                raise
            raise self.error_for(exc) from exc

    def batches(self, source: Iterator[T]) -> Iterator[T]:
        """Yield from ``source`` inside :meth:`reading` (for lazily read batches)."""
        with self.reading():
            yield from source

    def error_for(self, exc: FileNotFoundError) -> SnaplakeError:
        """Return the typed error for ``exc``, raised while reading :attr:`snapshot`.

        Storage:
            Reads ``snapshot-<id>`` (or probes ``tag/tag-<name>``); when the
            snapshot is still there, plans the latest snapshot (its manifest
            lists and manifests) to see whether it uses the missing file.
        """
        snap = self.snapshot
        assert snap is not None
        path = missing_path(exc)
        what = path if path is not None else f"a file ({exc})"
        manager = SnapshotManager(self.file_io, self.paths)
        if self.tag is not None:
            if not self.file_io.file_exists(self.paths.tag_path(self.tag)):
                return TagNotFoundError(
                    f"tag {self.tag!r} was deleted while it was being read ({what} is gone); "
                    "list the tags and read another one"
                )
            source = f"tag {self.tag!r} (snapshot {snap.id})"
        else:
            current = manager.try_snapshot(snap.id)
            if current is None or not _same(current, snap):
                return SnapshotNotFoundError(
                    f"snapshot {snap.id} expired while it was being read ({what} was deleted "
                    f"with it); {self._retained(manager)}. Read a retained snapshot, or keep "
                    "this one with a tag, a consumer or a longer snapshot.time-retained",
                    snapshot_id=snap.id,
                )
            source = f"snapshot {snap.id}"
            if path is not None and not self._used_by_latest(path, manager):
                return SnapshotNotFoundError(
                    f"snapshot {snap.id} is being expired: {path} was deleted while "
                    f"snapshot-{snap.id} still exists, and the latest snapshot no longer uses "
                    "the file, so an expiry is removing this snapshot (or one stopped "
                    f"half-way); {self._retained(manager)}. Read a newer snapshot, or keep this "
                    "one with a tag, a consumer or a longer snapshot.time-retained",
                    snapshot_id=snap.id,
                )
        return CorruptMetadataError(
            f"{what} is missing, but {source} references it"
            + ("" if self.tag is not None else " and so does the latest snapshot")
            + ", so no expiry deleted it: the file was deleted outside snaplake's maintenance "
            "(by hand, by a storage lifecycle rule). Restore the file, or roll the table back "
            "to a snapshot that does not use it",
            path=path if path is not None else self.paths.snapshot_path(snap.id),
        )

    @staticmethod
    def _retained(manager: SnapshotManager) -> str:
        earliest, latest = manager.earliest_snapshot_id(), manager.latest_snapshot_id()
        if latest is None:
            return "the table has no snapshots now"
        return f"retained snapshots are {earliest}..{latest}"

    def _used_by_latest(self, path: str, manager: SnapshotManager) -> bool:
        """Tell whether the latest snapshot uses the file named like ``path``.

        A latest snapshot that cannot be planned counts as using it (the
        table is damaged either way).
        """
        name = _base_name(path)
        try:
            latest = manager.latest_snapshot()
            if latest is None:
                return False
            if self.snapshot is not None and latest.id == self.snapshot.id:
                return True  # the latest snapshot is never expired
            if name in (latest.base_manifest_list, latest.delta_manifest_list):
                return True
            scan = FileStoreScan(
                file_io=self.file_io,
                paths=self.paths,
                schema_manager=self.schema_manager,
                snapshot=latest,
            )
            metas = scan.manifest_metas()
            if any(m.file_name == name for m in metas):
                return True
            return any(_base_name(p) == name for split in scan.plan() for p in split.paths)
        except (FileNotFoundError, CorruptMetadataError):
            return True
