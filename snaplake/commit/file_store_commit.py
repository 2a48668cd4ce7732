"""FileStoreCommit: turn CommitMessages into exactly one new snapshot, atomically.

The user-facing entry of the commit path (DESIGN.md §5). A ``commit(...)``
call picks its named producer (:mod:`snaplake.commit.producer`):
:class:`~snaplake.commit.producer.AppendFiles`,
:class:`~snaplake.commit.producer.CompactFiles` or
:class:`~snaplake.commit.overwrite.OverwriteFiles`. The producer deduplicates
by ``(commit_user, commit_identifier)``, writes the delta manifest once,
checks conflicts on each snapshot the commit tries to publish on (with the
table kind's rules) and recomputes an overwrite's DELETE entries; the one
publishing loop, :class:`~snaplake.commit.snapshot_commit.SnapshotCommit`,
retries lost races with the :class:`~snaplake.commit.retry.RetryPolicy`
(capped, jittered exponential backoff; a semantic conflict is fatal; an
uncertain publish resolved by reading the snapshot back).

The commit path never merges manifests or expires snapshots (Paimon #2483,
#3223): the base list is rebuilt by copying the previous lists' Avro blocks
verbatim, so its cost does not grow with decoding work.

Source: Paimon ``FileStoreCommitImpl`` (commit/overwrite, the duplicate
check, the retry options), ``ConflictDetection``; Delta Lake's ``txn``
action for the carried-forward transaction map.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from snaplake.commit.conflict import ConflictRule
from snaplake.commit.message import CommitMessage, CompactIncrement, DataIncrement
from snaplake.commit.overwrite import DropPartitions, OverwriteFiles
from snaplake.commit.producer import (
    AppendFiles,
    CommitContext,
    CommitRequest,
    CompactFiles,
    SnapshotProducer,
)
from snaplake.commit.result import CommitResult
from snaplake.commit.retry import RetryPolicy
from snaplake.commit.snapshot_commit import SnapshotCommit
from snaplake.errors import CommitConflictError, CommitStateUnknownError, SchemaMismatchError
from snaplake.options import Operation
from snaplake.store.format.index_file import index_path
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from snaplake.store.support import check_supported
from snaplake.store.table_storage import TableStorage

logger = logging.getLogger(__name__)

__all__ = ["ConflictRuleSource", "FileStoreCommit", "FileStoreTable"]


class _UnknownOutcomes:
    """Names of the data files whose commit ended in ``CommitStateUnknownError``, per process.

    A later commit adding one of them is the caller's retry: it checks its files still exist
    before each attempt (spec/commit.qnt ``RETRY_VERIFIES_FILES``). Process-wide, so a retry
    through a new committer of the same process counts too; data file names are unique.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: set[str] = set()

    def holds_any(self, names: frozenset[str]) -> bool:
        with self._lock:
            return not self._names.isdisjoint(names)

    def remember(self, names: frozenset[str]) -> None:
        with self._lock:
            self._names |= names

    def forget(self, names: frozenset[str]) -> None:
        with self._lock:
            self._names -= names


_UNKNOWN_OUTCOMES = _UnknownOutcomes()


def _added_file_names(messages: Sequence[CommitMessage]) -> frozenset[str]:
    """Names of the data files ``messages`` add (new files and compaction outputs)."""
    return frozenset(
        f.file_name
        for m in messages
        for f in (*m.data_increment.new_files, *m.compact_increment.compact_after)
    )


class ConflictRuleSource(Protocol):
    """Gives a table kind's conflict rules (``snaplake.filestore.FileStore`` satisfies it)."""

    def conflict_rules(self) -> tuple[ConflictRule, ...]:
        """The checks a commit to this kind of table must pass beyond "deleted files are live"."""
        ...

    @property
    def index_by_file_name(self) -> frozenset[str]:
        """Index types this kind's commits combine by file name (see ``SnapshotCommit``)."""
        ...


class FileStoreTable(TableStorage, Protocol):
    """What a committer needs from a table (``snaplake.table.Table`` satisfies it).

    ``file_store()`` gives the table kind's conflict rules, so layers below
    ``snaplake.filestore`` build committers without importing it.
    """

    def file_store(self) -> ConflictRuleSource:
        """The table's FileStore in its latest schema."""
        ...


class FileStoreCommit:
    """Publishes CommitMessages of one ``commit_user`` as snapshots of one table.

    Args:
        table: The table's storage, paths and managers; its ``identifier``
            (``db.table``) names it in logs and metrics labels.
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
            attempt: the table kind's rules
            (:meth:`snaplake.filestore.FileStore.conflict_rules`, e.g. the
            LSM key-range rule of primary-key tables) and any extra ones.
            Nothing is added here: build through :meth:`of` or
            ``FileStore.new_commit`` to get the kind's rules. Fixing them at
            construction is correct because a table's kind never changes:
            primary keys cannot be added, dropped, renamed or retyped
            (:mod:`snaplake.commit.schema_alter`), so every schema a conflict
            is checked against has the same rules.
        index_by_file_name: Index types whose index manifest entries are
            combined by file name (``FileStore.index_by_file_name``: the
            DELETION_VECTORS files of a bucket-unaware append table).

    Attributes:
        snapshot_commit: The publishing loop every commit of this user goes
            through (manifest merge uses it too).
    """

    def __init__(
        self,
        table: TableStorage,
        *,
        commit_user: str,
        retry_policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        after_commit: Callable[[CommitResult], None] | None = None,
        conflict_rules: Sequence[ConflictRule] = (),
        index_by_file_name: Collection[str] = (),
    ) -> None:
        self.file_io, self.paths = table.file_io, table.paths
        self.schema_manager, self.snapshot_manager = table.schema_manager, table.snapshot_manager
        self.table_name = table.identifier
        self.commit_user = commit_user
        self.snapshot_commit = SnapshotCommit(
            file_io=self.file_io, paths=self.paths, snapshot_manager=self.snapshot_manager,
            table_name=self.table_name, commit_user=commit_user, clock=clock,
            wall_clock_ms=wall_clock_ms, sleep=sleep, rng=rng,
            index_by_file_name=index_by_file_name,
        )  # fmt: skip
        self._retry_policy = retry_policy
        self._after_commit = after_commit
        self.conflict_rules = tuple(conflict_rules)
        self.context = CommitContext(
            table=table, commit_user=commit_user, snapshot_commit=self.snapshot_commit,
            conflict_rules=self.conflict_rules,
        )  # fmt: skip
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
        """Return a committer of ``commit_user`` for ``table`` with its kind's conflict rules.

        Args:
            table: The table; ``table.file_store().conflict_rules()`` gives
                the rules of its kind (the LSM rule of a primary-key table).
            commit_user: Who commits.
            retry_policy: As the class.
            after_commit: As the class.
            conflict_rules: Extra rules, checked after the kind's.

        Raises:
            TableNotFoundError: the table has no schema (dropped).
        """
        store = table.file_store()
        rules = (*store.conflict_rules(), *conflict_rules)
        return cls(
            table, commit_user=commit_user, retry_policy=retry_policy,
            after_commit=after_commit, conflict_rules=rules,
            index_by_file_name=store.index_by_file_name,
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
                identifier is safe (it dedups); such a retry (the same
                messages, in this process) first checks that its data files
                still exist.
            CommitFilesMissingError: a retry of an unknown outcome that did not
                land found some of its data files deleted (orphan clean past
                its grace): nothing is published; write the rows again.

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
            overwrites, and an index manifest when the messages' index files
            or an overwrite change the index), and the ``LATEST`` hint; a lost
            attempt deletes its manifest lists and index manifest; a failed
            call deletes its manifests. A duplicate
            deletes the data and index files its messages ADD that no retained
            snapshot or tag references (see :mod:`snaplake.commit.duplicate`); no
            other data file is ever deleted here.

        Messages that carry both new files and a compaction (a writer that
        lifts its level-0 files before the commit: first-row, deletion-vector
        and ``lookup`` changelog tables) are published as Paimon does: an
        APPEND snapshot of the new files, then a COMPACT snapshot of the
        compactions with the same identifier (a delta read sees the new files
        in the APPEND one; streams read lookup changelog from the COMPACT
        one). The identifier is checked once, by the APPEND snapshot: a
        duplicate deletes the compactions' outputs. When the COMPACT snapshot
        cannot be published (a conflicting compaction of the bucket won, or
        any other failure), its outputs are deleted (kept when its outcome is
        unknown) and the APPEND result returned: the level-0 files wait for
        the next compaction. An overwrite is split the same way (its OVERWRITE
        snapshot, then the COMPACT one), so a compaction the writer built on
        files the overwrite drops is refused on its own.

        Source:
            Paimon ``FileStoreCommitImpl.commit`` / ``overwrite``.
        """
        split = _split_compactions(messages) if kind is None else None
        if split is not None:
            return self._append_then_compact(
                *split, commit_identifier=commit_identifier, overwrite=overwrite,
                properties=properties,
            )  # fmt: skip
        return self._commit(
            messages, commit_identifier=commit_identifier, overwrite=overwrite, kind=kind,
            properties=properties,
        )  # fmt: skip

    def _commit(
        self,
        messages: Sequence[CommitMessage],
        *,
        commit_identifier: int | None,
        overwrite: Mapping[str, Any] | bool | None,
        kind: CommitKind | None,
        properties: Mapping[str, str] | None,
        checked: bool = False,
    ) -> CommitResult:
        """:meth:`commit` of one snapshot (``checked``: see ``CommitRequest.checked``)."""
        sc = self.snapshot_commit
        start = sc.clock()
        latest = sc.latest_snapshot()
        schema = self._commit_schema(latest, messages)
        if schema is None:
            raise SchemaMismatchError(f"table {self.table_name} has no schema; create it first")
        self.check_supported(schema)  # the schema at hand: no extra listing
        names = _added_file_names(messages)
        retry = _UNKNOWN_OUTCOMES.holds_any(names)
        request = CommitRequest(
            schema=schema,
            messages=tuple(m for m in messages if not m.is_empty()),
            identifier=BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier,
            properties=properties or {},
            kind=kind,
            checked=checked,
            verify_files=retry,
        )
        producer = self.producer(request, overwrite=overwrite)
        try:
            result = self._publish(producer, latest=latest, start=start)
        except CommitStateUnknownError:
            _UNKNOWN_OUTCOMES.remember(names)
            raise
        except Exception:
            if retry:
                _UNKNOWN_OUTCOMES.forget(names)
            raise
        if retry:
            _UNKNOWN_OUTCOMES.forget(names)
        return result

    def drop_partitions(
        self,
        partitions: Collection[bytes],
        *,
        expected_files: Collection[str] | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Publish an ``OVERWRITE`` snapshot deleting every file of ``partitions``.

        Args:
            partitions: Canonical partition BinaryRows
                (:func:`~snaplake.store.format.partition.canonical_partition`).
            expected_files: The data file names the caller planned to drop;
                see :class:`~snaplake.commit.overwrite.DropPartitions`.
            properties: Extra snapshot properties.

        Returns:
            As :meth:`commit` (``files_deleted``: the files dropped).

        Raises:
            CommitConflictError: a deleted file is no longer live, or the
                partitions' live files differ from ``expected_files``.
            CommitRetriesExhaustedError, CommitStateUnknownError,
            UnsupportedTableError: as :meth:`commit`.

        Storage: as an overwrite of :meth:`commit` without new files (a
        DELETE manifest per attempt, the index manifest when the partitions
        have index files).

        Source: Paimon ``FileStoreCommit.dropPartitions``.
        """
        sc = self.snapshot_commit
        start = sc.clock()
        latest = sc.latest_snapshot()
        schema = self._commit_schema(latest, ())
        if schema is None:
            raise SchemaMismatchError(f"table {self.table_name} has no schema; create it first")
        self.check_supported(schema)
        request = CommitRequest(schema=schema, messages=(), properties=properties or {})
        producer = DropPartitions(
            self.context, request, partitions=partitions, expected_files=expected_files
        )
        return self._publish(producer, latest=latest, start=start)

    def _publish(
        self, producer: SnapshotProducer, *, latest: Snapshot | None, start: float
    ) -> CommitResult:
        """Run ``producer`` through the publishing loop, then the after-commit hook."""
        policy = self.retry_policy(producer.schema)
        result = self.snapshot_commit.commit(producer, policy=policy, latest=latest, start=start)
        if self._after_commit is not None and not result.was_duplicate:
            self._after_commit(result)
        return result

    def _append_then_compact(
        self,
        appends: list[CommitMessage],
        compacts: list[CommitMessage],
        *,
        commit_identifier: int | None,
        overwrite: Mapping[str, Any] | bool | None,
        properties: Mapping[str, str] | None,
    ) -> CommitResult:
        """The APPEND (or OVERWRITE) snapshot of ``appends``, then the COMPACT one of ``compacts``.

        Returns the COMPACT result, or the APPEND one when the identifier was
        a duplicate or the COMPACT snapshot was not published. Raises only
        what the APPEND commit raises (then nothing was published).

        Storage: a duplicate or unpublished COMPACT commit deletes the
        compactions' outputs (new data, changelog and index files); one of
        unknown outcome deletes nothing.

        Source: Paimon ``FileStoreCommitImpl.commit`` (two ``tryCommit`` calls),
        ``overwritePartition`` (``withCompact``).
        """
        first = self._commit(
            appends, commit_identifier=commit_identifier, overwrite=overwrite, kind=None,
            properties=properties,
        )  # fmt: skip
        if first.was_duplicate:
            self._delete_outputs(compacts)
            return first
        try:
            return self._commit(
                compacts, commit_identifier=commit_identifier, overwrite=None,
                kind=CommitKind.COMPACT, properties=None, checked=True,
            )  # fmt: skip
        except CommitStateUnknownError:
            logger.warning(
                "the level-0 compaction of %s after snapshot %s has an unknown outcome; its "
                "files are kept", self.table_name, first.snapshot_id, exc_info=True,
            )  # fmt: skip
            return first
        except Exception as e:  # noqa: BLE001 - the APPEND landed: its rows are committed
            logger.log(
                logging.INFO if isinstance(e, CommitConflictError) else logging.WARNING,
                "the level-0 compaction of %s after snapshot %s was not committed (%s); its "
                "level-0 files wait for the next compaction", self.table_name,
                first.snapshot_id, e,
            )  # fmt: skip
            self._delete_outputs(compacts)
            return first

    def _delete_outputs(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the files the compactions of uncommitted ``messages`` wrote."""
        schema = self.schema_manager.latest()
        if schema is None:
            return
        paths = self.paths
        targets: list[str] = []
        for m in messages:
            ci = m.compact_increment
            inputs = {f.file_name for f in ci.compact_before}
            part = schema.partition_path_of(m.partition)
            targets += [
                paths.data_file_path(part, m.bucket, f.file_name, external_path=f.external_path)
                for f in (*ci.compact_after, *ci.changelog_files)
                if f.file_name not in inputs
            ]
            targets += [index_path(paths, f) for f in ci.new_index_files]
        self.file_io.delete_many(targets)

    def producer(
        self, request: CommitRequest, *, overwrite: Mapping[str, Any] | bool | None
    ) -> SnapshotProducer:
        """The named producer of one commit (arguments as :meth:`commit`, resolved).

        ``overwrite`` set: :class:`~snaplake.commit.overwrite.OverwriteFiles`;
        else kind ``COMPACT``: :class:`~snaplake.commit.producer.CompactFiles`;
        else :class:`~snaplake.commit.producer.AppendFiles`. ``request.kind``
        overrides the producer's snapshot kind.
        """
        if overwrite is not None:
            return OverwriteFiles(self.context, request, overwrite=overwrite)
        if request.kind is CommitKind.COMPACT:
            return CompactFiles(self.context, request)
        return AppendFiles(self.context, request)

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


def _split_compactions(
    messages: Sequence[CommitMessage],
) -> tuple[list[CommitMessage], list[CommitMessage]] | None:
    """(new files, compactions) of messages holding both, else ``None`` (one snapshot).

    Source: Paimon ``FileStoreCommitImpl.commit`` (append and compact changes
    committed as two snapshots).
    """
    if all(m.compact_increment.is_empty() for m in messages):
        return None
    if all(m.data_increment.is_empty() for m in messages):
        return None
    appends = [dataclasses.replace(m, compact_increment=CompactIncrement()) for m in messages]
    compacts = [dataclasses.replace(m, data_increment=DataIncrement()) for m in messages]
    return [m for m in appends if not m.is_empty()], [m for m in compacts if not m.is_empty()]
