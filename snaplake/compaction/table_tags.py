"""TableTags: the tag and consumer methods of :class:`snaplake.table.Table`.

A mixin: ``Table`` inherits these, so the facade keeps one vocabulary
(``create_tag``, ``list_tags``, ``create_tag_automatically``, ``expire_tags``,
``expire_consumers``) while the facade module stays small.

Source: Paimon ``FileStoreTable.createTag`` / ``deleteTag``, ``TagAutoManager``,
``ConsumerManager.expire``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from snaplake.compaction.tag_deletion import TagDeletion, TagDeletionResult
from snaplake.compaction.tag_lifecycle import TagLifecycle, epoch_ms_of, expire_consumers
from snaplake.errors import SnapshotNotFoundError
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager
from snaplake.store.io.file_io import FileIO
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.tags import TagInfo, TagManager

__all__ = ["TableTags"]


class TableTags:
    """Tags (manual and automatic) and consumer expiry of one table (a mixin of ``Table``)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot_manager: SnapshotManager
    identifier: str

    def create_tag(
        self, name: str, *, snapshot_id: int | None = None, time_retained: timedelta | None = None
    ) -> TagInfo:
        """Tag snapshot ``snapshot_id`` (default: the latest) as ``name``.

        ``time_retained`` is written into the tag (``tagTimeRetained``, with
        ``tagCreateTime`` now); :meth:`expire_tags` deletes it once that passed.

        Raises:
            SnapshotNotFoundError: the snapshot is not retained (or the table is empty).
            FileAlreadyExistsError: the tag exists.
            ValueError: invalid name.

        Storage:
            Creates ``tag/tag-<name>`` (create-only).
        """
        sm = self.snapshot_manager
        snap = sm.latest_snapshot() if snapshot_id is None else sm.snapshot(snapshot_id)
        if snap is None:
            raise SnapshotNotFoundError(
                f"table {self.identifier} has no snapshot to tag", snapshot_id=None
            )
        tags = TagManager(self.file_io, self.paths)
        return tags.create_tag(name, snapshot=snap, time_retained=time_retained)

    def delete_tag(self, name: str) -> TagDeletionResult:
        """Delete tag ``name`` and the files only it held (Paimon's ``deleteTag``).

        Files are deleted only when the tagged snapshot has expired and no other
        tag names it; the neighbouring tags and the earliest snapshot decide
        which files nothing else holds (see :mod:`snaplake.compaction.tag_deletion`).

        Raises:
            TagNotFoundError: no such tag.
            CorruptMetadataError: metadata of the tag or its neighbours is
                missing (nothing deleted).

        Storage:
            Deletes ``tag/tag-<name>``, then the data, index and metadata files
            only the tag held (listed in the result).
        """
        return TagDeletion(self).delete(name)

    def list_tags(self) -> list[TagInfo]:
        """Return every tag, ordered by snapshot id then name."""
        return TagManager(self.file_io, self.paths).list_tags()

    def create_tag_automatically(self, now: datetime | None = None) -> list[TagInfo]:
        """Create the tags ``tag.automatic-creation`` asks for (Paimon's names); return them.

        ``now`` (aware; default the wall clock) becomes ``tagCreateTime``.
        Raises ``InvalidOptionError`` for contradicting ``tag.*`` options,
        ``ValueError`` for a naive ``now``. Storage and rules: see
        :meth:`snaplake.compaction.tag_lifecycle.TagLifecycle.create_tags`.
        """
        ms = epoch_ms_of(now)
        return TagLifecycle(self, now_ms=lambda: ms).create_tags()

    def expire_tags(self, now: datetime | None = None) -> list[str]:
        """Delete tags past ``tagTimeRetained`` and auto tags beyond ``tag.num-retained-max``.

        Returns the deleted names; see
        :meth:`snaplake.compaction.tag_lifecycle.TagLifecycle.expire_tags`.
        """
        ms = epoch_ms_of(now)
        return TagLifecycle(self, now_ms=lambda: ms).expire_tags()

    def expire_consumers(self, now: datetime | None = None) -> list[str]:
        """Delete consumers idle longer than ``consumer.expiration-time``; return their ids.

        See :func:`snaplake.compaction.tag_lifecycle.expire_consumers`.
        """
        return expire_consumers(self, now_ms=epoch_ms_of(now))
