"""CommitOperation: one kind of commit (append, overwrite, compact, manifest merge), per attempt.

A commit kind tells :class:`~snaplake.commit.snapshot_commit.SnapshotCommit`
what to publish on top of each snapshot it tries: :class:`CommitChanges`,
or a :class:`CommitStop` when nothing is left to publish. Conflict checks run
inside :meth:`CommitOperation.attempt`, so a new kind or rule plugs in
without touching the publishing loop.

Source: the per-kind parts of Paimon ``FileStoreCommitImpl`` (``commit``,
``overwrite``, ``tryCommitOnce``'s inputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from snaplake.commit.result import CommitOutcome
from snaplake.store.format.index_file import IndexManifestEntry
from snaplake.store.format.manifest_list import ManifestFileMeta
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot

__all__ = ["CommitChanges", "CommitOperation", "CommitStop"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitChanges:
    """What one attempt publishes on top of the latest snapshot.

    Attributes:
        schema: The new snapshot's schema (its id, ``manifest.compression``).
        delta: The manifests of the new delta list (this commit's entries).
        changelog: The manifests of the new snapshot's changelog manifest list
            (ADD entries of the changelog files); empty = no list, as in Paimon.
        changelog_record_count: Rows of the changelog files (``None`` when
            there are none: Paimon's ``nullableRecordCount``).
        base: The complete base list of the new snapshot; ``None`` = the
            latest snapshot's base list followed by its delta list (what
            every commit but a manifest merge publishes).
        identifier: The commit identifier (``BATCH_COMMIT_IDENTIFIER`` for
            one-off and maintenance commits).
        properties: Extra snapshot properties (``snaplake.*`` keys are
            reserved and dropped).
        files_added: Data files ADDed (for the result).
        files_deleted: Data files DELETEd (for the result).
        delta_record_count: Rows of the ADDed data files minus rows of the
            DELETEd ones, retraction rows included (Paimon's ``recordCountAdd -
            recordCountDelete`` over the delta).
        new_files: Paths of the files the new snapshot references that were
            written for it (data and changelog files, manifests): made durable, with their
            directories, before the publish.
        attempt_manifests: Manifest names written for this attempt only;
            deleted with the attempt's lists when the attempt fails.
        index_changes: Index ADD/DELETE entries, in groups applied in order to the
            latest snapshot's index manifest, each combined per Paimon's
            ``BucketedCombiner`` (the writes' changes, then the compactions');
            empty = the new snapshot reuses the latest's index manifest.
    """

    schema: TableSchema
    delta: tuple[ManifestFileMeta, ...] = ()
    changelog: tuple[ManifestFileMeta, ...] = ()
    changelog_record_count: int | None = None
    base: tuple[ManifestFileMeta, ...] | None = None
    identifier: int = BATCH_COMMIT_IDENTIFIER
    properties: Mapping[str, str] = field(default_factory=dict)
    files_added: int = 0
    files_deleted: int = 0
    delta_record_count: int = 0
    new_files: tuple[str, ...] = ()
    attempt_manifests: tuple[str, ...] = ()
    index_changes: tuple[tuple[IndexManifestEntry, ...], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitStop:
    """An operation ends without publishing.

    Attributes:
        snapshot_id: The snapshot to report (the duplicate's, or the latest).
        outcome: ``DUPLICATE``, ``SUCCESS`` (nothing to commit), or ``None``
            when the call is not reported to the commit listeners (a
            maintenance run that found nothing to do).
    """

    snapshot_id: int | None
    outcome: CommitOutcome | None = None


class CommitOperation(Protocol):
    """One kind of commit, re-planned against each snapshot it tries to publish on."""

    @property
    def kind(self) -> CommitKind:
        """The snapshot's commit kind."""

    def attempt(self, latest: Snapshot | None) -> CommitChanges | CommitStop:
        """Return what to publish on top of ``latest``, or why to stop.

        Raises:
            CommitConflictError: the commit cannot succeed on ``latest``
                (fatal: the loop does not retry it).
        """

    def abandon(self) -> None:
        """Delete the files written for every attempt; the commit did not publish them."""
