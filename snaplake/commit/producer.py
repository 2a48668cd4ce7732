"""The commit kinds of CommitMessages: named producers over one SnapshotCommit.

Each producer is a :class:`~snaplake.commit.operation.CommitOperation`:
:class:`~snaplake.commit.snapshot_commit.SnapshotCommit` asks it, for each
snapshot it tries to publish on, what to publish. A producer writes its delta
manifest once, deduplicates by ``(commit_user, commit_identifier)``, checks
conflicts (deleted files live, then the table kind's rules) on every attempt,
and hands back :class:`~snaplake.commit.operation.CommitChanges`:

* :class:`AppendFiles` (``APPEND``): new files from writers (and the
  changelog files they produced);
* :class:`CompactFiles` (``COMPACT``): compact increments (``compact_before``
  DELETE, ``compact_after`` ADD) of a compaction;
* :class:`~snaplake.commit.overwrite.OverwriteFiles` (``OVERWRITE``): new
  files replacing the live files of some partitions or the whole table
  (without new files: a drop of those partitions);
* :class:`~snaplake.commit.manifest_rewrite.RewriteManifests` (``COMPACT``):
  a manifest merge, replacing the base list with the same live files.

:class:`~snaplake.commit.file_store_commit.FileStoreCommit` picks the producer
of a ``commit(...)`` call; none of them touches another's internals.

Source: Paimon ``FileStoreCommitImpl.commit`` / ``tryCommitOnce`` inputs,
``ManifestEntryChanges``; named as pyiceberg's ``_SnapshotProducer``,
``_FastAppendFiles``, ``_OverwriteFiles``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from snaplake.commit.conflict import (
    ConflictDetection,
    ConflictRule,
    check_self_consistent,
    check_total_buckets,
)
from snaplake.commit.duplicate import (
    data_file_paths,
    delete_unreferenced_files,
    find_holding_snapshot,
)
from snaplake.commit.dv_conflict import DeletionVectorRule
from snaplake.commit.index_conflict import check_hash_replacements
from snaplake.commit.key_conflict import check_key_races
from snaplake.commit.message import CommitMessage
from snaplake.commit.operation import CommitChanges, CommitStop
from snaplake.commit.result import CommitOutcome
from snaplake.commit.snapshot_commit import SnapshotCommit
from snaplake.errors import CommitFilesMissingError
from snaplake.store.format.index_file import (
    DELETION_VECTORS_INDEX,
    IndexManifestEntry,
    index_path,
)
from snaplake.store.format.manifest import FileKind, ManifestEntry
from snaplake.store.format.manifest_list import ManifestFileMeta
from snaplake.store.format.manifest_writer import write_manifest
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from snaplake.store.read.schema_evolution import check_files_readable
from snaplake.store.table_storage import TableStorage

__all__ = [
    "AppendFiles",
    "CommitContext",
    "CommitRequest",
    "CompactFiles",
    "SnapshotProducer",
    "message_entries",
    "message_index_entries",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitContext:
    """What the producers of one committer share: the table, the user, the publisher, the rules.

    Attributes:
        table: The table's storage, paths and managers (``identifier`` in logs).
        commit_user: Who commits.
        snapshot_commit: The publishing loop of ``commit_user``.
        conflict_rules: The table kind's checks beyond "deleted files are
            live" (:meth:`snaplake.filestore.FileStore.conflict_rules`).
    """

    table: TableStorage
    commit_user: str
    snapshot_commit: SnapshotCommit
    conflict_rules: tuple[ConflictRule, ...] = ()


def message_entries(messages: Sequence[CommitMessage]) -> list[ManifestEntry]:
    """The messages' manifest entries, in Paimon's order.

    Per message: ADD new files, DELETE deleted files, then DELETE
    ``compact_before`` and ADD ``compact_after``. A compaction that upgrades a
    file (DELETE at its old level, ADD at the new one) thus lists the DELETE
    first, which Paimon's expiry relies on: it walks a delta in order and an
    ADD cancels a pending DELETE of the same path, so the reverse order would
    have Java's expiry delete a live file
    (``FileDeletionBase.planDeletedInDeltaManifest``).

    Source: Paimon ``ManifestEntryChanges.collect``.
    """
    out: list[ManifestEntry] = []
    for m in messages:
        di, ci = m.data_increment, m.compact_increment
        for kind, files in (
            (FileKind.ADD, di.new_files),
            (FileKind.DELETE, di.deleted_files),
            (FileKind.DELETE, ci.compact_before),
            (FileKind.ADD, ci.compact_after),
        ):
            out.extend(
                ManifestEntry(
                    kind=kind,
                    partition=m.partition,
                    bucket=m.bucket,
                    total_buckets=m.total_buckets,
                    file=f,
                )
                for f in files
            )
    return out


def message_index_entries(
    messages: Sequence[CommitMessage],
) -> tuple[list[IndexManifestEntry], list[IndexManifestEntry]]:
    """The messages' index ADD/DELETE entries: (the writes', the compactions').

    ``DataIncrement.new_index_files``/``deleted_index_files`` go to the first list
    (Paimon's APPEND snapshot), the ``CompactIncrement`` ones to the second (its
    COMPACT snapshot); snaplake publishes both in one snapshot, applying them in
    that order. Per message: DELETEs, then ADDs.

    Source: Paimon ``ManifestEntryChanges.collect``.
    """
    data: list[IndexManifestEntry] = []
    compact: list[IndexManifestEntry] = []
    for m in messages:
        for out, inc in ((data, m.data_increment), (compact, m.compact_increment)):
            out.extend(
                IndexManifestEntry(FileKind.DELETE, m.partition, m.bucket, f)
                for f in inc.deleted_index_files
            )
            out.extend(
                IndexManifestEntry(FileKind.ADD, m.partition, m.bucket, f)
                for f in inc.new_index_files
            )
    return data, compact


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitRequest:
    """One ``commit(...)`` call, resolved: its messages and the new snapshot's fields.

    Attributes:
        schema: The schema the new snapshot records.
        messages: Non-empty messages (one per partition and bucket).
        identifier: The commit identifier (``BATCH_COMMIT_IDENTIFIER`` for a
            one-off commit, never a duplicate).
        properties: Extra snapshot properties.
        kind: The snapshot's commit kind (``None``: the producer's).
        checked: The identifier was checked by the APPEND snapshot this
            COMPACT one follows (a writer's level-0 compaction): no
            second duplicate check.
        verify_files: The call retries messages whose earlier commit ended in
            ``CommitStateUnknownError``: every attempt first checks that the
            data files they add still exist (orphan clean may have deleted
            them once its grace passed).
    """

    schema: TableSchema
    messages: tuple[CommitMessage, ...]
    identifier: int = BATCH_COMMIT_IDENTIFIER
    properties: Mapping[str, str] = field(default_factory=dict)
    kind: CommitKind | None = None
    checked: bool = False
    verify_files: bool = False


class SnapshotProducer:
    """CommitMessages of one ``commit(...)`` call, planned against each snapshot tried.

    Args:
        context: The committer's table, user, publisher and conflict rules.
        request: The messages and the new snapshot's schema, identifier,
            properties and (optionally) kind.

    Implements :class:`~snaplake.commit.operation.CommitOperation`. A
    subclass names a commit kind and may replace live files
    (:meth:`replaced_entries`).

    Storage: writes the delta manifest (and a changelog manifest when the
    messages carry changelog files) at the first attempt; :meth:`abandon`
    deletes them.

    Source: Paimon ``FileStoreCommitImpl.commit``; pyiceberg ``_SnapshotProducer``.
    """

    default_kind: ClassVar[CommitKind] = CommitKind.APPEND
    keeps_changelog: ClassVar[bool] = True
    """False: the messages' changelog files are deleted, not committed (an overwrite)."""
    publishes_when_empty: ClassVar[bool] = False
    """True: a call without files still publishes (an overwrite deletes what it replaces)."""

    def publishes_empty(self) -> bool:
        """Whether a call without files, changelog or index files still publishes a snapshot."""
        return self.publishes_when_empty

    def __init__(self, context: CommitContext, request: CommitRequest) -> None:
        self.context = context
        self.schema = request.schema
        self.messages = list(request.messages)
        self.identifier = request.identifier
        self.checked = request.checked
        self.verify_files = request.verify_files
        self.properties = request.properties
        self.kind = request.kind or self.default_kind
        self._delta: ManifestFileMeta | None = None
        self._changelog: ManifestFileMeta | None = None
        self._changelog_entries: list[ManifestEntry] = []
        self._entries: list[ManifestEntry] | None = None
        self._index_entries = message_index_entries(self.messages)
        self._conflicts: ConflictDetection | None = None
        self._dv_rule = DeletionVectorRule(
            context.table, by_file_name=context.snapshot_commit.index_by_file_name
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.context.table.identifier!r}, kind={self.kind.value})"

    def replaced_entries(
        self, latest: Snapshot | None, adds: Sequence[ManifestEntry]
    ) -> list[ManifestEntry]:
        """DELETE entries for live files of ``latest`` this commit replaces (none by default).

        Args:
            latest: The snapshot the attempt publishes on.
            adds: The commit's ADD entries.
        """
        return []

    def replaced_index_entries(
        self, latest: Snapshot | None, adds: Sequence[ManifestEntry]
    ) -> list[IndexManifestEntry]:
        """DELETE entries for index files of ``latest`` this commit replaces (none by default).

        Args:
            latest: The snapshot the attempt publishes on.
            adds: The commit's ADD entries.
        """
        return []

    def attempt(self, latest: Snapshot | None) -> CommitChanges | CommitStop:
        """Return the changes to publish on ``latest``, or stop (duplicate, nothing to commit).

        Raises:
            CommitConflictError: a deleted file is not live in ``latest``, the
                bucket count changed, the messages list a file twice, a
                conflict rule refused the delta, or (``HashIndexConflictError``)
                a HASH index file the commit replaces changed since its writer
                restored it (:func:`~snaplake.commit.index_conflict.check_hash_replacements`),
                or (``DeletionVectorConflictError``) the commit's deletion
                vectors no longer fit ``latest``
                (:class:`~snaplake.commit.dv_conflict.DeletionVectorRule`),
                or (``CrossPartitionConflictError``) another writer wrote a key
                of this cross-partition commit since its writer's key map
                (:func:`~snaplake.commit.key_conflict.check_key_races`),
                or (``CommitFilesMissingError``, :attr:`verify_files` only) a
                data file the messages add no longer exists.
            SchemaMismatchError: files were written under a schema that can no
                longer be read (or see :meth:`replaced_entries`).

        Storage: a duplicate deletes the data and index files its messages ADD
        that nothing references; an attempt may write manifests of its own
        (:attr:`CommitChanges.attempt_manifests`). The index changes
        (:attr:`CommitChanges.index_changes`: the writes' index files, with an
        overwrite's DELETEs of the replaced partitions' entries, then the
        compactions') are combined with ``latest``'s index manifest by the publish.
        """
        ctx = self.context
        duplicate = self.duplicate_of(latest)
        if duplicate is not None and latest is not None:
            delete_unreferenced_files(
                ctx.table, schema=self.schema, messages=self.messages, latest=latest
            )
            return duplicate
        if self.verify_files:
            self._check_files_exist()
        entries = self._prepare()
        if entries is None:
            return CommitStop(
                snapshot_id=latest.id if latest else None, outcome=CommitOutcome.SUCCESS
            )
        adds = [e for e in entries if e.kind == FileKind.ADD]
        deletes = [e for e in entries if e.kind == FileKind.DELETE]
        index_adds, index_compacts = self._index_entries
        index_changes = (
            (*self.replaced_index_entries(latest, adds), *index_adds),
            tuple(index_compacts),
        )
        if self._conflicts is None:
            self._conflicts = ConflictDetection(
                ctx.table, rules=(*ctx.conflict_rules, self._dv_rule)
            )
        self._dv_rule.changes = index_changes
        self._conflicts.check(entries, latest)
        delta = [self._delta] if self._delta is not None else []
        attempt_manifests: list[str] = []
        extra_deletes = self.replaced_entries(latest, adds)
        if extra_deletes:
            meta = write_manifest(
                ctx.table.file_io, ctx.table.paths, extra_deletes, schema=self.schema
            )
            attempt_manifests.append(meta.file_name)
            delta.append(meta)
        all_deletes = deletes + extra_deletes
        changelog = self._changelog_entries
        kept = [
            (m.partition, m.bucket, f.file_name)
            for m in self.messages
            for f in m.data_increment.kept_index_files
        ]
        check_hash_replacements(ctx.table, latest, index_changes[0], kept)
        check_key_races(
            ctx.table, latest, messages=self.messages, commit_user=ctx.commit_user,
            schema=self.schema,
        )  # fmt: skip
        new_index_files = [
            index_path(ctx.table.paths, f) for m in self.messages for f in m.added_index_files()
        ]
        return CommitChanges(
            schema=self.schema,
            delta=tuple(delta),
            changelog=(self._changelog,) if self._changelog is not None else (),
            changelog_record_count=sum(e.file.row_count for e in changelog) if changelog else None,
            identifier=self.identifier,
            properties=self.properties,
            files_added=len(adds),
            files_deleted=len(all_deletes),
            delta_record_count=sum(e.file.row_count for e in adds)
            - sum(e.file.row_count for e in all_deletes),
            new_files=(
                *data_file_paths(ctx.table.paths, self.schema, [*adds, *changelog]),
                *(ctx.table.paths.manifest_path(m.file_name) for m in delta),
                *(ctx.table.paths.manifest_path(m.file_name) for m in [self._changelog] if m),
                *new_index_files,
            ),
            attempt_manifests=tuple(attempt_manifests),
            index_changes=tuple(g for g in index_changes if g),
        )

    def duplicate_of(self, latest: Snapshot | None) -> CommitStop | None:
        """A stop for a duplicate of this identifier (naming its snapshot), ``None`` if new.

        Paimon's rule: an identifier at or below the user's highest committed
        one is committed (:func:`~snaplake.commit.duplicate.find_holding_snapshot`
        warns when a lower one is not found among the retained snapshots).
        A batch commit is never a duplicate.

        Source: Paimon ``FileStoreCommitImpl.filterCommitted``.
        """
        ctx = self.context
        if latest is None or self.identifier == BATCH_COMMIT_IDENTIFIER or self.checked:
            return None
        last = ctx.snapshot_commit.txn_map(latest).get(ctx.commit_user)
        if last is None or last < self.identifier:
            return None
        holder = find_holding_snapshot(
            ctx.table.snapshot_manager, commit_user=ctx.commit_user, identifier=self.identifier,
            highest=last,
        )  # fmt: skip
        logger.info(
            "commit of %s by %s with identifier %d is a duplicate of snapshot %s; nothing "
            "published",
            ctx.table.identifier, ctx.commit_user, self.identifier,
            holder.id if holder else "(expired)",
        )  # fmt: skip
        return CommitStop(
            snapshot_id=holder.id if holder else None, outcome=CommitOutcome.DUPLICATE
        )

    def _check_files_exist(self) -> None:
        """Raise ``CommitFilesMissingError`` when a data file the messages add is gone.

        Storage: one existence probe per added data file (a HEAD on S3).
        """
        ctx = self.context
        adds = [e for e in message_entries(self.messages) if e.kind == FileKind.ADD]
        paths = data_file_paths(ctx.table.paths, self.schema, adds)
        missing = [p for p in paths if not ctx.table.file_io.file_exists(p)]
        if missing:
            raise CommitFilesMissingError(
                f"commit of {ctx.table.identifier} by {ctx.commit_user} with identifier "
                f"{self.identifier} retries an unknown outcome, but {len(missing)} of its data "
                f"files are gone (orphan clean past its grace?): {missing[:3]}; nothing "
                "published, write the rows again",
                paths=missing,
            )

    def _prepare(self) -> list[ManifestEntry] | None:
        """Validate the messages and write the delta manifest once; ``None`` = nothing to commit."""
        if self._entries is not None:
            return self._entries
        ctx = self.context
        entries = message_entries(self.messages)
        check_self_consistent(entries)
        adds = [e for e in entries if e.kind == FileKind.ADD]
        check_total_buckets(adds, self.schema.core_options.bucket)
        check_files_readable([e.file for e in adds], self.schema, ctx.table.schema_manager.schema)
        changelog = self._changelog_of_messages()
        has_index = any(self._index_entries)
        if not self.publishes_empty() and not entries and not changelog and not has_index:
            return None
        if entries:
            self._delta = write_manifest(
                ctx.table.file_io, ctx.table.paths, entries, schema=self.schema
            )
        if changelog:
            self._changelog = write_manifest(
                ctx.table.file_io, ctx.table.paths, changelog, schema=self.schema
            )
            self._changelog_entries = changelog
        self._entries = entries
        return entries

    def _changelog_of_messages(self) -> list[ManifestEntry]:
        """ADD entries of the messages' changelog files (none unless :attr:`keeps_changelog`).

        As in Paimon, an overwrite commits no changelog; its changelog files
        are deleted (nothing references them) with a warning.

        Source: Paimon ``ManifestEntryChanges.collect``, ``FileStoreCommitImpl.overwrite``.
        """
        changelog = [
            ManifestEntry(kind=FileKind.ADD, partition=m.partition, bucket=m.bucket,
                          total_buckets=m.total_buckets, file=f)
            for m in self.messages
            for f in (*m.data_increment.changelog_files, *m.compact_increment.changelog_files)
        ]  # fmt: skip
        if changelog and not self.keeps_changelog:
            ctx = self.context
            logger.warning(
                "an overwrite commits no changelog (as in Paimon): deleting its %d changelog "
                "file(s) of %s", len(changelog), ctx.table.identifier,
            )  # fmt: skip
            ctx.table.file_io.delete_many(data_file_paths(ctx.table.paths, self.schema, changelog))
            return []
        return changelog

    def abandon(self) -> None:
        """Delete the delta (and changelog) manifest; the commit did not publish them."""
        names = [m.file_name for m in (self._delta, self._changelog) if m is not None]
        if names:
            self.context.snapshot_commit.delete_manifests(names)
        self._delta = self._changelog = None


class AppendFiles(SnapshotProducer):
    """An ``APPEND`` snapshot: the writers' new files (and changelog files).

    Writers' deletion vectors (a delete of an append table) make it an
    ``OVERWRITE`` snapshot, as in Paimon; the deletion-vector rules
    (:class:`~snaplake.commit.dv_conflict.DeletionVectorRule`) check every commit.

    Source: Paimon ``FileStoreCommitImpl.commit`` (append changes);
    pyiceberg ``_FastAppendFiles``.
    """

    default_kind: ClassVar[CommitKind] = CommitKind.APPEND

    def __init__(self, context: CommitContext, request: CommitRequest) -> None:
        super().__init__(context, request)
        writes = self._index_entries[0]
        if request.kind is None and any(
            e.index_file.index_type == DELETION_VECTORS_INDEX for e in writes
        ):
            self.kind = CommitKind.OVERWRITE  # Paimon: ConflictDetection.shouldBeOverwriteCommit


class CompactFiles(SnapshotProducer):
    """A ``COMPACT`` snapshot: a compaction's rewritten files replacing its inputs.

    The inputs (``compact_before``) must still be live in the snapshot the
    attempt publishes on, and the table kind's rules hold (on a primary-key
    table, the LSM levels >= 1 stay free of overlaps).

    Source: Paimon ``FileStoreCommitImpl.commit`` (compact changes).
    """

    default_kind: ClassVar[CommitKind] = CommitKind.COMPACT
