"""ManifestFileMerger: rewrite many small manifests into few, as a COMPACT snapshot.

Every snaplake commit appends one manifest to the base list (the commit path
never merges, DESIGN.md §5), so planning cost grows with the number of
commits until a merge folds them together. Two modes, as in Paimon:

* **minor**: walk the manifests oldest first, bin-packing them until the bin
  reaches ``manifest.target-file-size``; a full bin is rewritten as one file
  (entries merged, ADD/DELETE pairs inside the bin cancelled). The trailing
  bin is rewritten only if it holds at least ``manifest.merge-min-count``
  manifests.
* **full**: when the manifests that must change (those with DELETE entries or
  smaller than the target) add up to ``manifest.full-compaction-threshold-size``
  (or ``full=True``), every DELETE entry is applied physically: the deleted
  files' ADD entries and the DELETE entries themselves disappear, and the
  surviving entries are rewritten into target-size manifests.

The result is published as a COMPACT snapshot whose base list is the merged
manifests and whose delta list is empty; its live files equal the latest
snapshot's. If other commits win the race, the plan is carried forward
instead of redone: the live files of snapshot *k* are those of *k - 1* plus
*k*'s delta list (the invariant Paimon's incremental reads rely on; a
manifest merge keeps the live files and has an empty delta), so the merged
output followed by the delta lists of the snapshots committed since is the
new latest's manifest list. A retry reads only those snapshots and their
(small) delta lists, never the whole latest manifest list, so it keeps up
with a writer committing every few milliseconds. Only when the history
since cannot be read that way (the planned-on snapshot was rolled back or
expired meanwhile) is the latest list read and, if its prefix changed, the
merge planned again.

Source: Paimon ``ManifestFileMerger`` / ``ManifestFileLegacyMerger``
(``compactMinor``, ``mergeCandidates``, ``tryFullCompaction`` with its
``mustChange`` filter), ``FileEntry.mergeEntries``; cleanup of new files on
failure as in ``ManifestFileMerger.merge``. Difference: manifests are not
pruned by partition stats before a full compaction reads them (all are read;
reads are cached).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.manifest_rewrite import ManifestMergePlan, RewriteManifests, manifest_names
from snaplake.commit.retry import RetryPolicy
from snaplake.compaction._io import parallel_map, read_entries_strict, read_list_strict
from snaplake.errors import CorruptMetadataError
from snaplake.options import CoreOptions, Operation
from snaplake.store.format.manifest import (
    FileKind,
    ManifestEntry,
    merge_entries,
)
from snaplake.store.format.manifest_list import ManifestFileMeta
from snaplake.store.format.manifest_writer import write_manifest
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.support import check_supported

__all__ = ["ManifestFileMerger", "MergeResult"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class MergeResult:
    """What a manifest merge did.

    Attributes:
        snapshot_id: The COMPACT snapshot published, or ``None`` when nothing
            was due (or the table is empty).
        full_compaction: True when DELETE entries were applied physically.
        manifests_before: Manifests of the snapshot the merge planned on.
        manifests_after: Manifests of the published snapshot (equal to
            ``manifests_before`` when nothing was published).
        bytes_before: Total manifest bytes before.
        bytes_after: Total manifest bytes after.
        manifests_written: Names of the new manifest files.
        entries_removed: ADD and DELETE entries dropped (cancelled pairs).
        attempts: Publish attempts (0 when nothing was due).
        duration_s: Wall time, seconds.
    """

    snapshot_id: int | None
    full_compaction: bool = False
    manifests_before: int = 0
    manifests_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    manifests_written: tuple[str, ...] = ()
    entries_removed: int = 0
    attempts: int = 0
    duration_s: float = 0.0

    @property
    def merged(self) -> bool:
        """True when a new snapshot was published."""
        return self.snapshot_id is not None


class ManifestFileMerger:
    """Merge the manifests of a table's latest snapshot and publish the result.

    Args:
        commit: The maintenance committer (its ``commit_user`` signs the snapshot).
        options: Effective options (``manifest.target-file-size``,
            ``manifest.merge-min-count``,
            ``manifest.full-compaction-threshold-size``; the daemon's
            overrides); ``None`` = the latest schema's.
        retry_policy: Backoff between attempts; defaults to the committer's policy.

    Plans the merge for the commit producer
    :class:`~snaplake.commit.manifest_rewrite.RewriteManifests` (implements its
    :class:`~snaplake.commit.manifest_rewrite.ManifestMergePlanner`).
    """

    def __init__(
        self,
        *,
        commit: FileStoreCommit,
        options: CoreOptions | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.commit = commit
        self.file_io = commit.file_io
        self.paths = commit.paths
        self.options = options
        self._retry_policy = retry_policy

    # ----------------------------------------------------------------- public
    def execute(self, *, full: bool = False) -> MergeResult:
        """Merge the latest snapshot's manifests if due and publish a COMPACT snapshot.

        Args:
            full: Force a full compaction (apply every DELETE entry) even
                below ``manifest.full-compaction-threshold-size``.

        Returns:
            What was merged; ``snapshot_id`` is ``None`` when nothing was due.

        Raises:
            CorruptMetadataError: a manifest or list is missing or undecodable.
            CommitRetriesExhaustedError: other commits kept winning the race
                within the retry policy; safe to run again.
            CommitStateUnknownError: the publish outcome is unknown.

        Storage:
            Writes new manifests, two manifest lists and one snapshot file.
            After a lost race, reads the snapshots committed since and their
            delta manifest lists (see :meth:`catch_up`). On failure (or when
            a re-plan discards them) the new manifests are deleted again; the
            replaced manifests stay until snapshot expiry removes them.

        Source:
            Paimon ``ManifestFileMerger.merge`` + ``FileStoreCommitImpl``.
        """
        sc = self.commit.snapshot_commit
        start = sc.clock()
        schema = self.commit.schema_manager.latest()
        latest = self.commit.snapshot_manager.latest_snapshot()
        if schema is None or latest is None:
            return MergeResult(snapshot_id=None, duration_s=sc.clock() - start)
        check_supported(schema, Operation.MAINTENANCE)
        policy = self._retry_policy or self.commit.retry_policy(schema)
        operation = RewriteManifests(
            planner=self, schema_manager=self.commit.schema_manager, paths=self.paths,
            schema=schema, full=full,
        )  # fmt: skip
        result = sc.commit(operation, policy=policy, latest=latest, start=start)
        plan = operation.plan if result.snapshot_id is not None else None
        before = plan.inputs if plan is not None else operation.metas
        after = plan.output if plan is not None else operation.metas
        return MergeResult(
            snapshot_id=result.snapshot_id if plan is not None else None,
            full_compaction=bool(plan and plan.full),
            manifests_before=len(before),
            manifests_after=len(after),
            bytes_before=sum(m.file_size_bytes for m in before),
            bytes_after=sum(m.file_size_bytes for m in after),
            manifests_written=tuple(manifest_names(plan.new)) if plan else (),
            entries_removed=plan.entries_removed if plan else 0,
            attempts=result.attempts,
            duration_s=sc.clock() - start,
        )

    def plan_merge(
        self, metas: Sequence[ManifestFileMeta], *, schema: TableSchema, full: bool = False
    ) -> ManifestMergePlan | None:
        """Merge ``metas`` (a snapshot's base + delta manifests, oldest first).

        Args:
            metas: The manifests, in commit order.
            schema: The latest table schema (partition types; its options unless given).
            full: Force a full compaction.

        Returns:
            The plan with the replacement list, or ``None`` when nothing is due.

        Raises:
            CorruptMetadataError: a manifest is missing or undecodable.

        Storage:
            Writes the new manifests (deleted again if this raises).
        """
        plan = ManifestMergePlan(inputs=list(metas), output=[])
        try:
            output = self._try_full(plan, schema, force=full)
            if output is None:
                output = self._minor(plan, schema)
            else:
                plan.full = True
        except BaseException:
            self.discard(plan.new)
            raise
        if manifest_names(output) == manifest_names(metas):
            return None
        plan.output = output
        return plan

    # ----------------------------------------------------------------- options
    def _opts(self, schema: TableSchema) -> tuple[int, int, int]:
        o = self.options if self.options is not None else schema.core_options
        return (
            max(o.manifest_target_file_size_bytes, 1),
            max(o.manifest_merge_min_count, 1),
            max(o.manifest_full_compaction_threshold_bytes, 1),
        )

    # ----------------------------------------------------------------- minor
    def _minor(self, plan: ManifestMergePlan, schema: TableSchema) -> list[ManifestFileMeta]:
        target, min_count, _ = self._opts(schema)
        result: list[ManifestFileMeta] = []
        candidates: list[ManifestFileMeta] = []
        total = 0
        for meta in plan.inputs:
            total += meta.file_size_bytes
            candidates.append(meta)
            if total >= target:
                result.extend(self._merge_candidates(candidates, plan, schema))
                candidates, total = [], 0
        if len(candidates) >= min_count:
            result.extend(self._merge_candidates(candidates, plan, schema))
        else:
            result.extend(candidates)
        return result

    def _merge_candidates(
        self, candidates: list[ManifestFileMeta], plan: ManifestMergePlan, schema: TableSchema
    ) -> list[ManifestFileMeta]:
        if len(candidates) == 1:
            return list(candidates)
        entries = self._read(candidates)
        merged = merge_entries(entries)
        plan.entries_removed += len(entries) - len(merged)
        return self._write_rolling(merged, candidates, plan, schema)

    # ------------------------------------------------------------------ full
    def _try_full(
        self, plan: ManifestMergePlan, schema: TableSchema, *, force: bool
    ) -> list[ManifestFileMeta] | None:
        target, _, threshold = self._opts(schema)

        def must_change(m: ManifestFileMeta) -> bool:
            return m.num_deleted_files > 0 or m.file_size_bytes < target

        delta_size = sum(m.file_size_bytes for m in plan.inputs if must_change(m))
        if not force and delta_size < threshold:
            return None
        with_deletes = [m for m in plan.inputs if m.num_deleted_files > 0]
        deleted = {
            e.identifier()
            for chunk in parallel_map(self._read_one, with_deletes)
            for e in chunk
            if e.kind == FileKind.DELETE
        }
        chunks = parallel_map(self._read_one, plan.inputs)
        result: list[ManifestFileMeta] = []
        rewrite: list[ManifestEntry] = []
        sources: list[ManifestFileMeta] = []
        for meta, entries in zip(plan.inputs, chunks, strict=True):
            kept = [e for e in entries if e.kind == FileKind.ADD and e.identifier() not in deleted]
            if must_change(meta) or len(kept) != len(entries):
                plan.entries_removed += len(entries) - len(kept)
                rewrite.extend(kept)
                sources.append(meta)
            else:
                result.append(meta)
        if len(sources) <= 1 and plan.entries_removed == 0:
            return None
        result.extend(self._write_rolling(rewrite, sources, plan, schema))
        return result

    # ----------------------------------------------------------------- I/O
    def _read_one(self, meta: ManifestFileMeta) -> list[ManifestEntry]:
        return read_entries_strict(self.file_io, self.paths, meta.file_name)

    def _read(self, metas: Sequence[ManifestFileMeta]) -> list[ManifestEntry]:
        return [e for chunk in parallel_map(self._read_one, list(metas)) for e in chunk]

    def manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """The base and delta manifests of ``snapshot``, oldest first.

        Raises:
            CorruptMetadataError: a list is missing or undecodable.
        """
        return read_list_strict(self.file_io, self.paths, snapshot.base_manifest_list) + (
            read_list_strict(self.file_io, self.paths, snapshot.delta_manifest_list)
        )

    def catch_up(self, planned_on: Snapshot, latest: Snapshot) -> list[ManifestFileMeta] | None:
        """Read the delta manifests of the snapshots after ``planned_on`` up to ``latest``.

        Args:
            planned_on: The snapshot the current plan's output is live-equal to.
            latest: The snapshot the next attempt publishes on.

        Returns:
            The delta manifests of ``planned_on + 1 .. latest``, in commit
            order; ``None`` when that history cannot be used (``latest`` is
            not newer, ``planned_on`` itself expired or was replaced by a
            rollback, a snapshot or delta list vanished while being read)
            or should not be (another manifest merge, a COMPACT snapshot
            with an empty delta, landed: planning again on its output
            usually finds nothing left to do): the caller then reads the
            latest list in full.

        Raises:
            CorruptMetadataError: a snapshot file exists but is undecodable.

        Storage:
            Reads ``snapshot-<planned_on>`` and each newer snapshot up to
            ``latest``, plus each one's delta manifest list (usually one
            small file, often cached).
        """
        sm = self.commit.snapshot_manager
        if latest.id <= planned_on.id or sm.try_snapshot(planned_on.id) != planned_on:
            return None
        tail: list[ManifestFileMeta] = []
        for sid in range(planned_on.id + 1, latest.id + 1):
            snap = latest if sid == latest.id else sm.try_snapshot(sid)
            if snap is None:
                return None
            try:
                delta = read_list_strict(self.file_io, self.paths, snap.delta_manifest_list)
            except CorruptMetadataError:
                # Expiry deletes a snapshot's lists before the snapshot file; the
                # full read of the latest lists decides whether anything is wrong.
                return None
            if snap.commit_kind is CommitKind.COMPACT and not delta:
                return None  # another manifest merge: re-plan on its result instead
            tail += delta
        logger.debug("manifest merge of %s carried forward to snapshot %d (+%d manifest(s))",
                     self.paths.root, latest.id, len(tail))  # fmt: skip
        return tail

    def _write_rolling(
        self,
        entries: Sequence[ManifestEntry],
        sources: Sequence[ManifestFileMeta],
        plan: ManifestMergePlan,
        schema: TableSchema,
    ) -> list[ManifestFileMeta]:
        """Write ``entries`` into manifests of about the target size (estimated from inputs)."""
        if not entries:
            return []
        target, _, _ = self._opts(schema)
        in_bytes = sum(m.file_size_bytes for m in sources)
        in_entries = max(1, sum(m.num_entries for m in sources))
        per_entry = max(1.0, in_bytes / in_entries)
        step = max(1, int(target / per_entry))
        out = []
        for i in range(0, len(entries), step):
            meta = self._write_manifest(entries[i : i + step], schema)
            plan.new.append(meta)
            out.append(meta)
        return out

    def _write_manifest(
        self, entries: Sequence[ManifestEntry], schema: TableSchema
    ) -> ManifestFileMeta:
        return write_manifest(
            self.file_io,
            self.paths,
            entries,
            schema=schema,
            schema_id=max(e.file.schema_id for e in entries),
        )

    def discard(self, metas: Sequence[ManifestFileMeta]) -> None:
        """Delete manifests written for a plan that is not published (failures logged)."""
        for m in metas:
            path = self.paths.manifest_path(m.file_name)
            try:
                self.file_io.delete(path)
            except OSError:
                logger.warning("could not delete unpublished manifest %s", path, exc_info=True)
