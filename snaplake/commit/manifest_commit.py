"""ManifestMergeCommit: publish a snapshot whose base manifest list is given, delta empty.

Manifest merge (``snaplake.compaction.manifest_merge``) rewrites the manifests
of the latest snapshot and must publish them as the next snapshot's base
list, with an empty delta list, as a COMPACT commit. This subclass reuses
FileStoreCommit's attempt writer and its single publish path (``_publish``),
so the carried-forward transaction map, the snaplake marker properties, the
``LATEST`` hint and the commit listeners behave exactly as for any commit.

Source: Paimon ``FileStoreCommitImpl.tryCommitOnce`` (a commit whose base
list is the merged manifests of the latest snapshot).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.result import CommitOutcome, CommitResult
from snaplake.errors import CommitStateUnknownError, SchemaMismatchError
from snaplake.store.format.manifest_list import ManifestFileMeta, encode_manifest_list
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot

__all__ = ["ManifestMergeCommit"]

logger = logging.getLogger(__name__)


class ManifestMergeCommit(FileStoreCommit):
    """A FileStoreCommit that can publish a replacement base manifest list.

    Takes the same constructor arguments as :class:`FileStoreCommit`.
    """

    _pending_base: bytes | None = None

    def _base_list_bytes(self, latest: Snapshot | None, schema: TableSchema) -> bytes:
        if self._pending_base is not None:
            return self._pending_base
        return super()._base_list_bytes(latest, schema)

    def try_commit_base_manifests(
        self,
        base_metas: Sequence[ManifestFileMeta],
        *,
        latest: Snapshot,
        kind: CommitKind = CommitKind.COMPACT,
        properties: Mapping[str, str] | None = None,
    ) -> CommitResult | None:
        """Publish ``snapshot-<latest+1>`` with base list ``base_metas`` and an empty delta.

        One attempt only: the caller re-plans on the new latest snapshot when
        the race is lost, because the base list depends on it.

        Args:
            base_metas: The complete manifest list of the new snapshot; its
                live files must equal ``latest``'s.
            latest: The snapshot the list was planned on.
            kind: Snapshot kind (COMPACT for maintenance).
            properties: Extra snapshot properties (``snaplake.*`` reserved).

        Returns:
            The result, or ``None`` when another commit took ``latest + 1``.

        Raises:
            CommitStateUnknownError: the publish failed without telling whether
                it landed; nothing was cleaned up.
            StorageError: writing a manifest list failed.

        Storage:
            Writes two manifest lists and ``snapshot/snapshot-<latest+1>``;
            a lost race deletes both lists again.
        """
        start = self._clock()
        schema = self.schema_manager.latest()
        if schema is None:
            raise SchemaMismatchError(f"table {self.table_name} has no schema")
        compression = schema.core_options.manifest_compression
        attempt_names: list[str] = []
        self._pending_base = encode_manifest_list(list(base_metas), compression=compression)
        try:
            published, data, snapshot = self._write_attempt(
                latest=latest, schema=schema, delta_metas=[], adds=[], deletes=[],
                identifier=BATCH_COMMIT_IDENTIFIER, kind=kind, properties=properties or {},
                attempts=1, start=start, attempt_names=attempt_names,
            )  # fmt: skip
            landed = self._publish(snapshot, data, self._policy(schema))
        except CommitStateUnknownError:
            self._notify(kind, CommitOutcome.UNKNOWN, 1, start, None)
            raise
        except BaseException:
            self._delete_quietly(attempt_names)
            raise
        finally:
            self._pending_base = None
        if not landed:
            self._delete_quietly(attempt_names)
            return None
        self._published = published
        self._write_latest_hint(snapshot.id)
        result = CommitResult(
            snapshot_id=snapshot.id, kind=kind, attempts=1, duration_s=self._clock() - start,
            files_added=0, files_deleted=0, records_added=0,
        )  # fmt: skip
        self._notify(kind, CommitOutcome.SUCCESS, 1, start, result)
        logger.info(
            "published %s snapshot %d of %s with %d base manifest(s)",
            kind.value, snapshot.id, self.table_name, len(base_metas),
        )  # fmt: skip
        return result
