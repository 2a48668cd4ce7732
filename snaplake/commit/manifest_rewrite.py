"""RewriteManifests: a manifest merge as a ``COMPACT`` snapshot with the same live files.

The producer publishes a replacement base list (the merged manifests) and an
empty delta list. The planning (which manifests to merge, how, writing the
merged ones) is the planner's (:class:`ManifestMergePlanner`, in
``snaplake.compaction.manifest_merge``); this producer runs it against the
snapshots the commit tries to publish on: it plans once and, after a lost
race, carries the plan forward with the delta manifests of the snapshots
committed since (the live files of snapshot *k* are those of *k - 1* plus
*k*'s delta list), re-planning only when that history cannot be used.

Source: Paimon ``ManifestFileMerger.merge`` + ``FileStoreCommitImpl``
(``tryCommit`` with a replacement base list).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from snaplake.commit.operation import CommitChanges, CommitStop
from snaplake.errors import CommitRetriesExhaustedError
from snaplake.store.format.manifest_list import ManifestFileMeta
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot

__all__ = ["ManifestMergePlan", "ManifestMergePlanner", "RewriteManifests"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class ManifestMergePlan:
    """A planned manifest merge.

    Attributes:
        inputs: The manifests planned on (a snapshot's base + delta, oldest first).
        output: The replacement list (merged manifests and untouched ones).
        new: The manifests written for the plan (deleted if not published).
        full: True when DELETE entries were applied physically.
        entries_removed: Entries dropped by the merge.
    """

    inputs: list[ManifestFileMeta]
    output: list[ManifestFileMeta]
    new: list[ManifestFileMeta] = field(default_factory=list)
    full: bool = False
    entries_removed: int = 0


class ManifestMergePlanner(Protocol):
    """Plans manifest merges (``snaplake.compaction.manifest_merge.ManifestFileMerger``)."""

    def manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """The base and delta manifests of ``snapshot``, oldest first."""
        ...

    def plan_merge(
        self, metas: Sequence[ManifestFileMeta], *, schema: TableSchema, full: bool = False
    ) -> ManifestMergePlan | None:
        """Merge ``metas``; ``None`` when nothing is due (writes the merged manifests)."""
        ...

    def catch_up(self, planned_on: Snapshot, latest: Snapshot) -> list[ManifestFileMeta] | None:
        """The delta manifests of ``planned_on + 1 .. latest``; ``None`` if unusable."""
        ...

    def discard(self, metas: Sequence[ManifestFileMeta]) -> None:
        """Delete manifests written for a plan that will not be published."""
        ...


def manifest_names(metas: Sequence[ManifestFileMeta]) -> list[str]:
    """The file names of ``metas``, in order."""
    return [m.file_name for m in metas]


class RewriteManifests:
    """A manifest merge as a commit: plan once, carry the plan forward on lost races.

    Args:
        planner: Plans the merge and reads manifest lists.
        schema_manager: Gives the latest schema at each attempt.
        paths: The table's PathFactory.
        schema: The latest schema when the merge began (used if none is found later).
        full: Force a full compaction.

    Attributes:
        plan: The plan published (or last tried); ``None`` when nothing was due.
        metas: The manifests of the snapshot last read in full.

    Implements :class:`~snaplake.commit.operation.CommitOperation`.

    Source: Paimon ``ManifestFileMerger.merge``.
    """

    kind: CommitKind = CommitKind.COMPACT

    def __init__(
        self,
        *,
        planner: ManifestMergePlanner,
        schema_manager: SchemaManager,
        paths: PathFactory,
        schema: TableSchema,
        full: bool,
    ) -> None:
        self.planner = planner
        self.schema_manager = schema_manager
        self.paths = paths
        self.schema = schema
        self.full = full
        self.plan: ManifestMergePlan | None = None
        self.metas: list[ManifestFileMeta] = []
        self._planned_on: Snapshot | None = None

    def attempt(self, latest: Snapshot | None) -> CommitChanges | CommitStop:
        """Return the merged base list for ``latest``, or stop when nothing is due.

        Raises:
            CommitRetriesExhaustedError: the table lost all its snapshots meanwhile.
            CorruptMetadataError: a manifest or list is missing or undecodable.

        Storage: the first attempt (and a re-plan) writes the merged manifests;
        a carried-forward attempt reads the delta lists of the snapshots since.
        """
        planner = self.planner
        if latest is None:  # rolled back to nothing: nothing to merge against
            raise CommitRetriesExhaustedError(
                "the table lost all snapshots during a manifest merge", attempts=1, elapsed_s=0.0
            )
        schema = self.schema_manager.latest() or self.schema
        if self.plan is None or self._planned_on is None:
            self.metas = planner.manifests(latest)
            self.plan = planner.plan_merge(self.metas, schema=schema, full=self.full)
        elif latest != self._planned_on:
            tail = planner.catch_up(self._planned_on, latest)
            if tail is not None:
                self.plan.inputs += tail
                self.plan.output += tail
            else:
                self.metas = planner.manifests(latest)
                kept = self.plan.inputs
                if manifest_names(self.metas[: len(kept)]) == manifest_names(kept):
                    # Only appended since: keep our merged prefix, add the new tail.
                    self.plan.output += self.metas[len(kept) :]
                    self.plan.inputs = self.metas
                else:
                    logger.info("manifest merge of %s re-plans on snapshot %d",
                                self.paths.root, latest.id)  # fmt: skip
                    planner.discard(self.plan.new)
                    self.plan = planner.plan_merge(self.metas, schema=schema, full=self.full)
        self._planned_on = latest
        if self.plan is None:
            return CommitStop(snapshot_id=None)
        return CommitChanges(
            schema=schema,
            base=tuple(self.plan.output),
            new_files=tuple(self.paths.manifest_path(m.file_name) for m in self.plan.new),
        )

    def abandon(self) -> None:
        """Delete the merged manifests; the merge did not publish them."""
        if self.plan is not None:
            self.planner.discard(self.plan.new)
            self.plan.new = []
