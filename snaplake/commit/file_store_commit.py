"""FileStoreCommit: turn CommitMessages into exactly one new snapshot, atomically.

The commit (DESIGN.md §5): deduplicate by ``(commit_user, commit_identifier)``;
write the delta manifest once; then loop — read the latest snapshot, check
conflicts when files are deleted, write the base and delta manifest lists,
and publish ``snapshot-<latest+1>`` with a create-only write. A lost race is
retried with capped, jittered exponential backoff; a semantic conflict is
fatal; an uncertain publish is resolved by reading the snapshot back.

The commit path never merges manifests or expires snapshots (Paimon #2483,
#3223): the base list is rebuilt by copying the previous lists' Avro blocks
verbatim, so its cost does not grow with decoding work.

Source: Paimon ``FileStoreCommitImpl`` (tryCommitOnce/tryOverwrite, the
duplicate check, the retry options), ``ConflictDetection``; Delta Lake's
``txn`` action for the carried-forward transaction map.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from snaplake.commit.conflict import ConflictDetection, check_self_consistent
from snaplake.commit.message import CommitMessage
from snaplake.commit.result import (
    CommitEvent,
    CommitOutcome,
    CommitResult,
    notify_commit_listeners,
)
from snaplake.commit.retry import RetryPolicy
from snaplake.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    FileAlreadyExistsError,
    SchemaMismatchError,
    StorageError,
)
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.manifest import FileKind, ManifestEntry
from snaplake.store.format.manifest_list import (
    ManifestFileMeta,
    concat_manifest_lists,
    encode_manifest_list,
)
from snaplake.store.format.manifest_writer import write_manifest
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import (
    BATCH_COMMIT_IDENTIFIER,
    TXN_PROPERTY_PREFIX,
    CommitKind,
    Snapshot,
)
from snaplake.store.io.file_io import FileIO
from snaplake.store.read.scan import FileStoreScan
from snaplake.store.snapshot_manager import SnapshotManager

__all__ = ["SNAPLAKE_MARKER_PROPERTY", "FileStoreCommit"]

logger = logging.getLogger(__name__)

SNAPLAKE_MARKER_PROPERTY = "snaplake.version"
ATTEMPTS_PROPERTY = "snaplake.commit.attempts"
DURATION_PROPERTY = "snaplake.commit.duration-ms"
_SNAPLAKE_VERSION = "1"
_UNCERTAIN_READBACKS = 5


@dataclass(slots=True)
class _Published:
    """What this committer published last, to rebuild the next base list without reads."""

    snapshot: Snapshot
    base_name: str
    base_bytes: bytes
    delta_name: str
    delta_bytes: bytes


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
    ) -> None:
        if not commit_user:
            raise ValueError("commit_user must be a non-empty string")
        self.file_io = file_io
        self.paths = paths
        self.schema_manager = schema_manager
        self.snapshot_manager = snapshot_manager
        self.table_name = table_name
        self.commit_user = commit_user
        self._retry_policy = retry_policy
        self._clock = clock
        self._wall_clock_ms = wall_clock_ms
        self._sleep = sleep
        self._rng = rng
        self._published: _Published | None = None
        self._after_commit = after_commit

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
                passes ``batch_id``). If a snapshot by this user already has an
                identifier at or past this one, nothing is written and
                ``was_duplicate`` is true. ``None`` = a one-off batch commit
                (stored as ``9223372036854775807``), never a duplicate.
            overwrite: ``None`` = append. A mapping = static overwrite of the
                partitions matching that (possibly partial) spec (``{}`` = the
                whole table); every new file must lie in it. ``True`` = dynamic
                partition overwrite of the partitions the new files touch.
                Recomputed against each snapshot the commit retries on.
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
            SchemaMismatchError: an overwrite's files lie outside its spec.

        Storage:
            Writes one delta manifest per call, two manifest lists and one
            snapshot file per attempt (plus one DELETE manifest per attempt for
            overwrites), and the ``LATEST`` hint; a lost attempt deletes its
            manifest lists; a failed call deletes its manifests. Data files
            are never deleted here.

        Source:
            Paimon ``FileStoreCommitImpl.commit`` / ``overwrite``.
        """
        start = self._clock()
        identifier = BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier
        kind = kind or (CommitKind.OVERWRITE if overwrite is not None else CommitKind.APPEND)
        attempts = 0
        try:
            result, attempts = self._commit(
                messages, identifier=identifier, overwrite=overwrite, kind=kind,
                properties=properties or {}, start=start,
            )  # fmt: skip
        except CommitConflictError:
            self._notify(kind, CommitOutcome.CONFLICT, attempts, start, None)
            raise
        except CommitRetriesExhaustedError as exc:
            self._notify(kind, CommitOutcome.EXHAUSTED, exc.attempts, start, None)
            raise
        except CommitStateUnknownError:
            self._notify(kind, CommitOutcome.UNKNOWN, attempts, start, None)
            raise
        outcome = CommitOutcome.DUPLICATE if result.was_duplicate else CommitOutcome.SUCCESS
        self._notify(kind, outcome, result.attempts, start, result)
        if self._after_commit is not None and outcome == CommitOutcome.SUCCESS:
            self._after_commit(result)
        return result

    # ----------------------------------------------------------------- helpers
    def _notify(
        self,
        kind: CommitKind,
        outcome: CommitOutcome,
        attempts: int,
        start: float,
        result: CommitResult | None,
    ) -> None:
        notify_commit_listeners(
            CommitEvent(
                table=self.table_name,
                kind=kind,
                outcome=outcome,
                attempts=attempts,
                duration_s=self._clock() - start,
                result=result,
            )
        )

    def _policy(self, schema: TableSchema) -> RetryPolicy:
        return self._retry_policy or RetryPolicy.from_options(schema.core_options)

    def txn_map(self, latest: Snapshot | None) -> dict[str, int]:
        """Return ``{commit_user: last identifier}`` as of ``latest``.

        O(1) when ``latest`` was written by snaplake (it carries the map);
        otherwise walks back to the newest snaplake snapshot, folding in the
        non-snaplake commits met on the way (Paimon's backward scan).
        """
        if latest is None:
            return {}
        folded: dict[str, int] = {}
        snap: Snapshot | None = latest
        while snap is not None:
            props = snap.properties or {}
            if SNAPLAKE_MARKER_PROPERTY in props:
                base = snap.txn_map()
                for user, ident in folded.items():
                    base[user] = max(base.get(user, ident), ident)
                return base
            if snap.commit_identifier != BATCH_COMMIT_IDENTIFIER:
                prev = folded.get(snap.commit_user, snap.commit_identifier)
                folded[snap.commit_user] = max(prev, snap.commit_identifier)
            # Older snapshots may have expired: the walk ends at the first gap.
            snap = self.snapshot_manager.try_snapshot(snap.id - 1) if snap.id > 1 else None
        return folded

    def _duplicate_of(self, latest: Snapshot | None, identifier: int) -> Snapshot | None:
        """Return the snapshot that already holds ``identifier`` for our user, if any."""
        if identifier == BATCH_COMMIT_IDENTIFIER or latest is None:
            return None
        last = self.txn_map(latest).get(self.commit_user)
        if last is None or last < identifier:
            return None
        # Locate the snapshot for the result (rare path); fall back to latest.
        found = self.snapshot_manager.find_commit(self.commit_user)
        return found if found is not None else latest

    def _entries(self, messages: Sequence[CommitMessage]) -> list[ManifestEntry]:
        out: list[ManifestEntry] = []
        for m in messages:
            for kind, files in (
                (FileKind.ADD, m.added_files()),
                (FileKind.DELETE, m.deleted_files()),
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

    def _write_manifest(
        self, entries: Sequence[ManifestEntry], schema: TableSchema
    ) -> ManifestFileMeta:
        """Write one manifest of ``entries`` and describe it for a manifest list."""
        return write_manifest(self.file_io, self.paths, entries, schema=schema)

    def _base_list_bytes(self, latest: Snapshot | None, schema: TableSchema) -> bytes:
        """Bytes of the new base list = latest.base + latest.delta, copied block-wise."""
        compression = schema.core_options.manifest_compression
        if latest is None:
            return encode_manifest_list([], compression=compression)
        pub = self._published
        if (
            pub is not None
            and pub.snapshot.id == latest.id
            and pub.base_name == latest.base_manifest_list
            and pub.delta_name == latest.delta_manifest_list
        ):
            parts = [pub.base_bytes, pub.delta_bytes]
        else:
            parts = [
                self.file_io.read_bytes(self.paths.manifest_path(latest.base_manifest_list)),
                self.file_io.read_bytes(self.paths.manifest_path(latest.delta_manifest_list)),
            ]
        return concat_manifest_lists(parts, [])

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
        if overwrite is True and schema.partition_keys:
            touched = {e.partition for e in adds}
            live = [e for e in live if e.partition in touched]
        return [e.as_delete() for e in live]

    def _delete_quietly(self, names: Sequence[str]) -> None:
        for name in names:
            path = self.paths.manifest_path(name)
            try:
                self.file_io.delete(path)
            except OSError:
                logger.warning("could not delete unreferenced %s", path, exc_info=True)

    # -------------------------------------------------------------------- core
    def _commit(
        self,
        messages: Sequence[CommitMessage],
        *,
        identifier: int,
        overwrite: Mapping[str, Any] | bool | None,
        kind: CommitKind,
        properties: Mapping[str, str],
        start: float,
    ) -> tuple[CommitResult, int]:
        latest = self._latest_snapshot()
        schema = (
            self.schema_manager.schema(latest.schema_id)
            if latest is not None
            else self.schema_manager.latest()
        )
        if schema is None:
            raise SchemaMismatchError(f"table {self.table_name} has no schema; create it first")
        policy = self._policy(schema)
        dup = self._duplicate_of(latest, identifier)
        if dup is not None:
            return self._duplicate_result(dup, kind, start), 0

        entries = self._entries([m for m in messages if not m.is_empty()])
        check_self_consistent(entries)
        adds = [e for e in entries if e.kind == FileKind.ADD]
        deletes = [e for e in entries if e.kind == FileKind.DELETE]
        self._check_buckets(adds, schema)
        if overwrite is None and not entries:
            result = CommitResult(
                snapshot_id=latest.id if latest else None, kind=kind, attempts=0,
                duration_s=self._clock() - start, files_added=0, files_deleted=0,
                records_added=0,
            )  # fmt: skip
            return result, 0

        fixed_meta = self._write_manifest(entries, schema) if entries else None
        fixed_names = [fixed_meta.file_name] if fixed_meta else []
        conflicts = ConflictDetection(
            file_io=self.file_io,
            paths=self.paths,
            schema_manager=self.schema_manager,
            snapshot_manager=self.snapshot_manager,
        )
        attempts = 0
        try:
            while True:
                attempts += 1
                attempt_names: list[str] = []
                conflicts.check(deletes, latest, adds=adds)
                delta_metas = [fixed_meta] if fixed_meta else []
                extra_deletes: list[ManifestEntry] = []
                if overwrite is not None:
                    extra_deletes = self._overwrite_deletes(latest, overwrite, adds, schema)
                    if extra_deletes:
                        meta = self._write_manifest(extra_deletes, schema)
                        attempt_names.append(meta.file_name)
                        delta_metas.append(meta)
                try:
                    published, snapshot_bytes, snapshot = self._write_attempt(
                        latest=latest, schema=schema, delta_metas=delta_metas, adds=adds,
                        deletes=deletes + extra_deletes, identifier=identifier, kind=kind,
                        properties=properties, attempts=attempts, start=start,
                        attempt_names=attempt_names,
                    )  # fmt: skip
                except FileNotFoundError:
                    # ``latest`` was expired (its lists deleted) while we built on it:
                    # the table moved on, which is a lost race, not a failure.
                    outcome = False
                else:
                    outcome = self._publish(snapshot, snapshot_bytes, policy)
                if outcome:
                    self._published = published
                    self._write_latest_hint(snapshot.id)
                    records = snapshot.delta_record_count or 0
                    result = CommitResult(
                        snapshot_id=snapshot.id, kind=kind, attempts=attempts,
                        duration_s=self._clock() - start, files_added=len(adds),
                        files_deleted=len(deletes) + len(extra_deletes), records_added=records,
                    )  # fmt: skip
                    logger.info(
                        "committed %s snapshot %d of %s (user %s, identifier %d) in %d "
                        "attempt(s), %.1f ms",
                        kind.value, snapshot.id, self.table_name, self.commit_user, identifier,
                        attempts, result.duration_s * 1000,
                    )  # fmt: skip
                    return result, attempts
                # Lost the race: drop this attempt's lists, maybe retry.
                self._delete_quietly(attempt_names)
                elapsed = self._clock() - start
                if not policy.may_retry(retries_done=attempts - 1, elapsed_s=elapsed):
                    raise CommitRetriesExhaustedError(
                        f"commit to {self.table_name} lost the race for a new snapshot "
                        f"{attempts} times in {elapsed:.1f} s; other writers are committing "
                        "faster — retry later or raise commit.max-retries / commit.timeout",
                        attempts=attempts,
                        elapsed_s=elapsed,
                    )
                self._sleep(policy.wait_s(attempts, random_fraction=self._rng()))
                latest = self.snapshot_manager.latest_snapshot()
                dup = self._duplicate_of(latest, identifier)
                if dup is not None:
                    self._delete_quietly(fixed_names)
                    return self._duplicate_result(dup, kind, start), attempts
        except CommitStateUnknownError:
            raise  # everything stays in place: the snapshot may reference it
        except BaseException:
            self._delete_quietly(fixed_names)
            raise

    def _latest_snapshot(self) -> Snapshot | None:
        """The latest snapshot; one existence probe when this committer made the last one.

        A writer that published ``snapshot-N`` itself only checks that
        ``snapshot-(N+1)`` is absent (one HEAD on S3) instead of reading the
        ``LATEST`` hint and the snapshot file again.
        """
        pub = self._published
        if pub is not None and not self.snapshot_manager.snapshot_exists(pub.snapshot.id + 1):
            return pub.snapshot
        return self.snapshot_manager.latest_snapshot()

    def _check_buckets(self, adds: Sequence[ManifestEntry], schema: TableSchema) -> None:
        expected = schema.core_options.bucket
        wrong = sorted({e.total_buckets for e in adds if e.total_buckets != expected})
        if wrong:
            raise CommitConflictError(
                f"files were written for {wrong} bucket(s) but the table now has "
                f"bucket = {expected} (it was rescaled); rewrite the data with a new writer",
                paths=[e.file.file_name for e in adds if e.total_buckets != expected],
            )

    def _write_attempt(
        self,
        *,
        latest: Snapshot | None,
        schema: TableSchema,
        delta_metas: list[ManifestFileMeta],
        adds: Sequence[ManifestEntry],
        deletes: Sequence[ManifestEntry],
        identifier: int,
        kind: CommitKind,
        properties: Mapping[str, str],
        attempts: int,
        start: float,
        attempt_names: list[str],
    ) -> tuple[_Published, bytes, Snapshot]:
        compression = schema.core_options.manifest_compression
        base_bytes = self._base_list_bytes(latest, schema)
        base_name = self.paths.new_manifest_list_name()
        self.file_io.write_new(self.paths.manifest_path(base_name), base_bytes)
        attempt_names.append(base_name)
        delta_bytes = encode_manifest_list(delta_metas, compression=compression)
        delta_name = self.paths.new_manifest_list_name()
        self.file_io.write_new(self.paths.manifest_path(delta_name), delta_bytes)
        attempt_names.append(delta_name)

        delta_records = sum(e.file.added_row_count for e in adds) - sum(
            e.file.added_row_count for e in deletes
        )
        previous_total = (latest.total_record_count or 0) if latest else 0
        txn = self.txn_map(latest)
        if identifier != BATCH_COMMIT_IDENTIFIER:
            txn[self.commit_user] = identifier
        props = {k: v for k, v in properties.items() if not k.startswith("snaplake.")}
        props.update({f"{TXN_PROPERTY_PREFIX}{u}": str(i) for u, i in sorted(txn.items())})
        props[SNAPLAKE_MARKER_PROPERTY] = _SNAPLAKE_VERSION
        props[ATTEMPTS_PROPERTY] = str(attempts)
        props[DURATION_PROPERTY] = str(round((self._clock() - start) * 1000, 3))
        snapshot = Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=schema.id,
            base_manifest_list=base_name,
            base_manifest_list_size=len(base_bytes),
            delta_manifest_list=delta_name,
            delta_manifest_list_size=len(delta_bytes),
            commit_user=self.commit_user,
            commit_identifier=identifier,
            commit_kind=kind,
            time_millis=self._wall_clock_ms(),
            total_record_count=previous_total + delta_records,
            delta_record_count=delta_records,
            changelog_record_count=0,
            watermark=latest.watermark if latest else None,
            properties=props,
        )
        published = _Published(
            snapshot=snapshot,
            base_name=base_name,
            base_bytes=base_bytes,
            delta_name=delta_name,
            delta_bytes=delta_bytes,
        )
        return published, snapshot.to_bytes(), snapshot

    def _publish(self, snapshot: Snapshot, data: bytes, policy: RetryPolicy) -> bool:
        """Create ``snapshot-<id>``; True if ours landed, False if the race was lost.

        Raises:
            CommitStateUnknownError: repeated storage failures left the outcome open.
        """
        path = self.paths.snapshot_path(snapshot.id)
        last_error: StorageError | None = None
        for _ in range(_UNCERTAIN_READBACKS):
            try:
                self.file_io.write_if_absent(path, data)
                return True
            except FileAlreadyExistsError:
                if last_error is None:
                    return False
                # An earlier uncertain attempt may have landed: compare content.
                return self._is_ours(path, data)
            except StorageError as exc:
                last_error = exc
                logger.warning("publishing %s had an uncertain outcome; reading back", path,
                               exc_info=True)  # fmt: skip
                try:
                    if self.file_io.exists(path):
                        return self._is_ours(path, data)
                except OSError:
                    logger.warning("read-back of %s failed", path, exc_info=True)
                self._sleep(policy.min_wait_s)
        raise CommitStateUnknownError(
            f"publishing {path} failed {_UNCERTAIN_READBACKS} times without telling whether it "
            f"landed ({last_error}); check the table history for commit user "
            f"{snapshot.commit_user!r} identifier {snapshot.commit_identifier} before retrying "
            "(a retry with the same identifier is deduplicated)",
            commit_identifier=snapshot.commit_identifier,
            snapshot_id=snapshot.id,
        ) from last_error

    def _is_ours(self, path: str, data: bytes) -> bool:
        return self.file_io.read_bytes(path) == data

    def _write_latest_hint(self, snapshot_id: int) -> None:
        try:
            self.file_io.write_bytes(
                self.paths.latest_hint_path, str(snapshot_id).encode(), overwrite=True
            )
        except OSError:
            logger.warning("could not update the LATEST hint (advisory only)", exc_info=True)

    def _duplicate_result(self, snap: Snapshot, kind: CommitKind, start: float) -> CommitResult:
        logger.info(
            "commit of %s by %s is a duplicate of snapshot %d; nothing written",
            self.table_name, self.commit_user, snap.id,
        )  # fmt: skip
        return CommitResult(
            snapshot_id=snap.id, kind=kind, attempts=0, duration_s=self._clock() - start,
            files_added=0, files_deleted=0, records_added=0, was_duplicate=True,
        )  # fmt: skip
