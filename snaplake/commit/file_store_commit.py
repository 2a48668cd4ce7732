"""FileStoreCommit: turn CommitMessages into exactly one new snapshot, atomically.

The commit (DESIGN.md §5): deduplicate by ``(commit_user, commit_identifier)``;
write the delta manifest once; then, for each snapshot the commit tries to
publish on, check conflicts when files are deleted, recompute an
overwrite's DELETE entries, and hand the delta to the one publishing loop,
:class:`~snaplake.commit.snapshot_commit.SnapshotCommit` (lost races
retried with capped, jittered exponential backoff; a semantic conflict is
fatal; an uncertain publish resolved by reading the snapshot back).

The commit path never merges manifests or expires snapshots (Paimon #2483,
#3223): the base list is rebuilt by copying the previous lists' Avro blocks
verbatim, so its cost does not grow with decoding work.

Source: Paimon ``FileStoreCommitImpl`` (commit/overwrite, the duplicate
check, the retry options), ``ConflictDetection``; Delta Lake's ``txn``
action for the carried-forward transaction map.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from snaplake.commit.conflict import ConflictDetection, ConflictRule, check_self_consistent
from snaplake.commit.duplicate import (
    data_file_paths,
    delete_unreferenced_files,
    find_holding_snapshot,
)
from snaplake.commit.message import CommitMessage
from snaplake.commit.operation import CommitChanges, CommitStop
from snaplake.commit.result import CommitOutcome, CommitResult
from snaplake.commit.retry import RetryPolicy
from snaplake.commit.snapshot_commit import SnapshotCommit
from snaplake.errors import CommitConflictError, SchemaMismatchError
from snaplake.options import Operation
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.manifest import FileKind, ManifestEntry
from snaplake.store.format.manifest_list import ManifestFileMeta
from snaplake.store.format.manifest_writer import write_manifest
from snaplake.store.format.partition import canonical_partition
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.read.schema_evolution import check_files_readable
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.support import check_supported

__all__ = ["FileStoreCommit", "FileStoreTable"]

logger = logging.getLogger(__name__)


class FileStoreTable(Protocol):
    """What a committer needs from a table (``snaplake.table.Table`` satisfies it)."""

    file_io: FileIO
    paths: PathFactory
    schema_manager: SchemaManager
    snapshot_manager: SnapshotManager
    identifier: str


class FileStoreCommit:
    """Publishes CommitMessages of one ``commit_user`` as snapshots of one table.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        schema_manager: Reads the table schema.
        snapshot_manager: Reads snapshots.
        table_name: ``db.table`` (for logs and metrics labels).
        commit_user: Who commits. Must stay the same across restarts of a
            streaming job so that replayed identifiers are recognised.
        retry_policy: Backoff; defaults to the table's ``commit.*`` options.
        clock: Monotonic seconds (injected by tests).
        wall_clock_ms: Epoch milliseconds for ``timeMillis`` (injected by tests).
        sleep: Sleeps seconds (injected by tests so retries never sleep).
        rng: Uniform [0, 1) numbers for jitter.
        after_commit: Called with the result after each successful,
            non-duplicate commit (the facade hooks inline maintenance here);
            its failures are the hook's own business and must not raise.
        conflict_rules: Checks beyond "deleted files are live", run by
            :class:`~snaplake.commit.conflict.ConflictDetection` on every
            attempt (e.g. the LSM key-range rule of primary-key tables).

    Attributes:
        snapshot_commit: The publishing loop every commit of this user goes
            through (manifest merge uses it too).
    """

    def __init__(
        self,
        *,
        file_io: FileIO,
        paths: PathFactory,
        schema_manager: SchemaManager,
        snapshot_manager: SnapshotManager,
        table_name: str,
        commit_user: str,
        retry_policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        after_commit: Callable[[CommitResult], None] | None = None,
        conflict_rules: Sequence[ConflictRule] = (),
    ) -> None:
        self.snapshot_commit = SnapshotCommit(
            file_io=file_io,
            paths=paths,
            snapshot_manager=snapshot_manager,
            table_name=table_name,
            commit_user=commit_user,
            clock=clock,
            wall_clock_ms=wall_clock_ms,
            sleep=sleep,
            rng=rng,
        )
        self.file_io = file_io
        self.paths = paths
        self.schema_manager = schema_manager
        self.snapshot_manager = snapshot_manager
        self.table_name = table_name
        self.commit_user = commit_user
        self._retry_policy = retry_policy
        self._after_commit = after_commit
        self.conflict_rules = tuple(conflict_rules)
        self._supported_schema_id: int | None = None

    @classmethod
    def of(
        cls,
        table: FileStoreTable,
        *,
        commit_user: str,
        retry_policy: RetryPolicy | None = None,
        after_commit: Callable[[CommitResult], None] | None = None,
        conflict_rules: Sequence[ConflictRule] = (),
    ) -> FileStoreCommit:
        """Return a committer of ``commit_user`` for ``table`` (other arguments as the class)."""
        return cls(
            file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
            snapshot_manager=table.snapshot_manager, table_name=table.identifier,
            commit_user=commit_user, retry_policy=retry_policy, after_commit=after_commit,
            conflict_rules=conflict_rules,
        )  # fmt: skip

    # ------------------------------------------------------------------ public
    def commit(
        self,
        messages: Sequence[CommitMessage],
        *,
        commit_identifier: int | None = None,
        overwrite: Mapping[str, Any] | bool | None = None,
        kind: CommitKind | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Publish the files described by ``messages`` as one new snapshot.

        Args:
            messages: Output of ``TableWrite.prepare_commit()`` (or a
                compaction), one per (partition, bucket). Empty messages are
                ignored; an append with no files writes nothing.
            commit_identifier: Increasing per ``commit_user`` (the Spark sink
                passes ``batch_id``). If this user already committed this
                identifier or a higher one, the commit is a duplicate:
                nothing is published, ``was_duplicate`` is true and
                ``snapshot_id`` names the snapshot holding the identifier
                (``None`` when it is no longer retained). As in Paimon, an
                identifier *below* the user's highest counts as committed
                even if it never landed (a WARNING is logged when no retained
                snapshot holds it). ``None`` = a one-off batch commit (stored
                as ``9223372036854775807``), never a duplicate.
            overwrite: ``None`` = append. A mapping = static overwrite of the
                partitions matching that (possibly partial) spec (``{}`` = the
                whole table); every new file must lie in it. ``True`` = dynamic
                partition overwrite of the partitions the new files touch (the
                whole table when the table option ``dynamic-partition-overwrite``
                is ``false``, as in Paimon). Recomputed against each snapshot the commit retries on.
            kind: Override the snapshot kind (``COMPACT`` for maintenance);
                default APPEND, or OVERWRITE with ``overwrite``.
            properties: Extra snapshot properties (snaplake keys are reserved).

        Returns:
            The snapshot id, kind, attempts, wall time and file/row counts.

        Raises:
            CommitConflictError: a file this commit deletes is no longer live,
                the bucket count changed, or the messages are inconsistent.
                Retrying the same messages cannot succeed.
            CommitRetriesExhaustedError: every attempt lost the race within
                ``commit.max-retries``/``commit.timeout``. Safe to retry later.
            CommitStateUnknownError: the publish failed without telling whether
                it landed; nothing was cleaned up. Retrying with the same
                identifier is safe (it dedups).

            Any other exception means nothing was published (a step that
            failed after the snapshot landed is logged and the commit
            returns); ``KeyboardInterrupt`` and ``SystemExit`` may come after
            the publish, so they delete nothing and callers must not either.
            SchemaMismatchError: an overwrite's files lie outside its spec, or
                files were written under a schema that can no longer be read.
            UnsupportedTableError: the table uses something snaplake cannot
                commit to (:func:`snaplake.store.support.check_supported`);
                nothing was written.

        Storage:
            Writes one delta manifest per call (and one changelog manifest
            when the messages carry changelog files; an overwrite deletes
            them instead, as Paimon commits no changelog with an overwrite),
            two manifest lists (three with changelog) and one snapshot file
            per attempt (plus one DELETE manifest per attempt for
            overwrites), and the ``LATEST`` hint; a lost attempt deletes its
            manifest lists; a failed call deletes its manifests. A duplicate
            deletes the data files its messages ADD that no retained snapshot
            or tag references (see :mod:`snaplake.commit.duplicate`); no
            other data file is ever deleted here.

        Source:
            Paimon ``FileStoreCommitImpl.commit`` / ``overwrite``.
        """
        sc = self.snapshot_commit
        start = sc.clock()
        latest = sc.latest_snapshot()
        schema = self._commit_schema(latest, messages)
        if schema is None:
            raise SchemaMismatchError(f"table {self.table_name} has no schema; create it first")
        self.check_supported(schema)  # the schema at hand: no extra listing
        operation = _MessagesCommit(
            owner=self,
            schema=schema,
            messages=[m for m in messages if not m.is_empty()],
            identifier=BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier,
            overwrite=overwrite,
            kind=kind or (CommitKind.OVERWRITE if overwrite is not None else CommitKind.APPEND),
            properties=properties or {},
        )
        result = sc.commit(operation, policy=self.retry_policy(schema), latest=latest, start=start)
        if self._after_commit is not None and not result.was_duplicate:
            self._after_commit(result)
        return result

    def _commit_schema(
        self, latest: Snapshot | None, messages: Sequence[CommitMessage]
    ) -> TableSchema | None:
        """The schema a new snapshot records: the newest this commit knows of.

        Paimon lists ``schema/`` on every commit; this takes the newest of the
        latest snapshot's schema, the schemas the added files were written
        with and any newer schema this process has read, without a request.
        Every file of a snapshot is thus written under its schema or an older
        one. Readers of the latest state use the latest schema regardless.
        """
        known = [f.schema_id for m in messages for f in m.added_files()]
        if latest is not None:
            known.append(latest.schema_id)
        known.extend(self.schema_manager.cached_ids())
        if not known:
            return self.schema_manager.latest()
        return self.schema_manager.schema(max(known))

    def retry_policy(self, schema: TableSchema) -> RetryPolicy:
        """The backoff of this committer: the one given, else the table's ``commit.*`` options."""
        return self._retry_policy or RetryPolicy.from_options(schema.core_options)

    def txn_map(self, latest: Snapshot | None) -> dict[str, int]:
        """Return ``{commit_user: last identifier}`` as of ``latest``.

        O(1) when ``latest`` was written by snaplake (it carries the map);
        otherwise walks back to the newest snaplake snapshot, folding in the
        non-snaplake commits met on the way (Paimon's backward scan).
        """
        return self.snapshot_commit.txn_map(latest)

    def check_supported(self, schema: TableSchema) -> None:
        """Refuse to commit to a table of ``schema`` snaplake cannot commit to.

        :func:`snaplake.store.support.check_supported` with ``Operation.COMMIT``,
        run once per schema id by this committer: a schema file never
        changes, so neither does the answer. ``Table.new_commit`` calls it
        with the latest schema, so its first commit in that schema checks
        nothing again.

        Raises:
            UnsupportedTableError: see :func:`snaplake.store.support.check_supported`.
        """
        if schema.id != self._supported_schema_id:
            check_supported(schema, Operation.COMMIT)
            self._supported_schema_id = schema.id

    # ----------------------------------------------------------------- helpers
    def _duplicate_of(self, latest: Snapshot | None, identifier: int) -> CommitStop | None:
        """A stop for a duplicate of ``identifier`` (naming its snapshot), ``None`` if new.

        Paimon's rule: an identifier at or below the user's highest committed
        one is committed (:func:`~snaplake.commit.duplicate.find_holding_snapshot`
        warns when a lower one is not found among the retained snapshots).
        """
        if identifier == BATCH_COMMIT_IDENTIFIER or latest is None:
            return None
        last = self.txn_map(latest).get(self.commit_user)
        if last is None or last < identifier:
            return None
        holder = find_holding_snapshot(
            self.snapshot_manager, commit_user=self.commit_user, identifier=identifier,
            highest=last,
        )  # fmt: skip
        logger.info(
            "commit of %s by %s with identifier %d is a duplicate of snapshot %s; nothing "
            "published",
            self.table_name, self.commit_user, identifier, holder.id if holder else "(expired)",
        )  # fmt: skip
        return CommitStop(
            snapshot_id=holder.id if holder else None, outcome=CommitOutcome.DUPLICATE
        )

    def _check_buckets(self, adds: Sequence[ManifestEntry], schema: TableSchema) -> None:
        expected = schema.core_options.bucket
        wrong = sorted({e.total_buckets for e in adds if e.total_buckets != expected})
        if wrong:
            raise CommitConflictError(
                f"files were written for {wrong} bucket(s) but the table now has "
                f"bucket = {expected} (it was rescaled); rewrite the data with a new writer",
                paths=[e.file.file_name for e in adds if e.total_buckets != expected],
            )

    def _overwrite_deletes(
        self,
        latest: Snapshot | None,
        overwrite: Mapping[str, Any] | bool,  # noqa: FBT001 - True = dynamic overwrite
        adds: Sequence[ManifestEntry],
        schema: TableSchema,
    ) -> list[ManifestEntry]:
        """DELETE entries for every live file the overwrite replaces in ``latest``."""
        scan_filter: Mapping[str, Any] | None = None
        if isinstance(overwrite, Mapping):
            scan_filter = overwrite
            index = {k: i for i, k in enumerate(schema.partition_keys)}
            for key in overwrite:
                if key not in index:
                    raise SchemaMismatchError(
                        f"overwrite key {key!r} is not a partition key "
                        f"{list(schema.partition_keys)}"
                    )
            for e in adds:
                values = decode_binary_row(e.partition, schema.partition_types)
                for key, value in overwrite.items():
                    if values[index[key]] != value:
                        raise SchemaMismatchError(
                            f"file {e.file.file_name} has {key}={values[index[key]]!r}, outside "
                            f"the overwritten partition {dict(overwrite)}; filter the data first"
                        )
        if latest is None:
            return []
        scan = FileStoreScan(
            file_io=self.file_io,
            paths=self.paths,
            schema_manager=self.schema_manager,
            snapshot=latest,
            partition_filter=scan_filter,
        )
        live = scan.plan_entries()
        dynamic = schema.core_options.dynamic_partition_overwrite  # Paimon's default: true
        if overwrite is True and schema.partition_keys and dynamic:
            types = schema.partition_types  # by value: writers encode some values differently
            touched = {canonical_partition(e.partition, types) for e in adds}
            live = [e for e in live if canonical_partition(e.partition, types) in touched]
        return [e.as_delete() for e in live]


def _entries(messages: Sequence[CommitMessage]) -> list[ManifestEntry]:
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


@dataclass(slots=True, kw_only=True)
class _MessagesCommit:
    """An append, overwrite or compaction of CommitMessages, planned per attempt.

    Implements :class:`~snaplake.commit.operation.CommitOperation`.
    """

    owner: FileStoreCommit
    schema: TableSchema
    messages: list[CommitMessage]
    identifier: int
    overwrite: Mapping[str, Any] | bool | None
    kind: CommitKind
    properties: Mapping[str, str]
    _delta: ManifestFileMeta | None = None
    _changelog: ManifestFileMeta | None = None
    _changelog_entries: list[ManifestEntry] = field(default_factory=list)
    _entries: list[ManifestEntry] | None = None
    _conflicts: ConflictDetection | None = field(default=None)

    def attempt(self, latest: Snapshot | None) -> CommitChanges | CommitStop:
        owner = self.owner
        duplicate = owner._duplicate_of(latest, self.identifier)
        if duplicate is not None and latest is not None:
            delete_unreferenced_files(
                file_io=owner.file_io, paths=owner.paths, schema_manager=owner.schema_manager,
                snapshot_manager=owner.snapshot_manager, schema=self.schema,
                messages=self.messages, latest=latest,
            )  # fmt: skip
            return duplicate
        entries = self._prepare()
        if entries is None:
            return CommitStop(
                snapshot_id=latest.id if latest else None, outcome=CommitOutcome.SUCCESS
            )
        adds = [e for e in entries if e.kind == FileKind.ADD]
        deletes = [e for e in entries if e.kind == FileKind.DELETE]
        if self._conflicts is None:
            self._conflicts = ConflictDetection(
                file_io=owner.file_io,
                paths=owner.paths,
                schema_manager=owner.schema_manager,
                snapshot_manager=owner.snapshot_manager,
                rules=owner.conflict_rules,
            )
        self._conflicts.check(entries, latest)
        delta = [self._delta] if self._delta is not None else []
        attempt_manifests: list[str] = []
        extra_deletes: list[ManifestEntry] = []
        if self.overwrite is not None:
            extra_deletes = owner._overwrite_deletes(latest, self.overwrite, adds, self.schema)
            if extra_deletes:
                meta = write_manifest(owner.file_io, owner.paths, extra_deletes, schema=self.schema)
                attempt_manifests.append(meta.file_name)
                delta.append(meta)
        all_deletes = deletes + extra_deletes
        changelog = self._changelog_entries
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
                *data_file_paths(owner.paths, self.schema, [*adds, *changelog]),
                *(owner.paths.manifest_path(m.file_name) for m in delta),
                *(owner.paths.manifest_path(m.file_name) for m in [self._changelog] if m),
            ),
            attempt_manifests=tuple(attempt_manifests),
        )

    def _prepare(self) -> list[ManifestEntry] | None:
        """Validate the messages and write the delta manifest once; ``None`` = nothing to commit."""
        if self._entries is not None:
            return self._entries
        entries = _entries(self.messages)
        check_self_consistent(entries)
        adds = [e.file for e in entries if e.kind == FileKind.ADD]
        self.owner._check_buckets([e for e in entries if e.kind == FileKind.ADD], self.schema)
        check_files_readable(adds, self.schema, self.owner.schema_manager.schema)
        changelog = self._changelog_of_messages()
        if self.overwrite is None and not entries and not changelog:
            return None
        owner = self.owner
        if entries:
            self._delta = write_manifest(owner.file_io, owner.paths, entries, schema=self.schema)
        if changelog:
            self._changelog = write_manifest(
                owner.file_io, owner.paths, changelog, schema=self.schema
            )
            self._changelog_entries = changelog
        self._entries = entries
        return entries

    def _changelog_of_messages(self) -> list[ManifestEntry]:
        """ADD entries of the messages' changelog files (none for an overwrite).

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
        if changelog and self.overwrite is not None:
            logger.warning(
                "an overwrite commits no changelog (as in Paimon): deleting its %d changelog "
                "file(s) of %s", len(changelog), self.owner.table_name,
            )  # fmt: skip
            owner = self.owner
            owner.file_io.delete_many(data_file_paths(owner.paths, self.schema, changelog))
            return []
        return changelog

    def abandon(self) -> None:
        names = [m.file_name for m in (self._delta, self._changelog) if m is not None]
        if names:
            self.owner.snapshot_commit.delete_manifests(names)
        self._delta = self._changelog = None
