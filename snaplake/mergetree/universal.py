"""Universal compaction picking: which sorted runs of a bucket to merge, into which level.

Runs come newest first (:meth:`Levels.level_sorted_runs`). ``pick`` follows
Paimon's order: early full compaction (size thresholds, or the delta-commit
count), size amplification, size ratio, then run count. ``pick_full`` picks
everything into the top level.

Source: Paimon ``UniversalCompaction`` (``pick``, ``pickForSizeAmp``,
``pickForSizeRatio``, ``createUnit``), ``EarlyFullCompaction``,
``CompactStrategy.pickFullCompaction``, ``CompactUnit``,
``MergeTreeCompactManager.triggerCompaction`` (the unit filter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from snaplake.mergetree.sorted_run import LevelSortedRun
from snaplake.options import CoreOptions
from snaplake.store.format.data_file import DataFileMeta

__all__ = ["CompactUnit", "UniversalCompaction", "pick_full_compaction"]


@dataclass(frozen=True, slots=True)
class CompactUnit:
    """Files to merge and the level their output goes to (``CompactUnit``).

    Attributes:
        output_level: Level of the outputs.
        files: Input files, run by run (newest run first).
    """

    output_level: int
    files: tuple[DataFileMeta, ...]

    @classmethod
    def from_level_runs(cls, output_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit:
        """All files of ``runs``."""
        return cls(output_level, tuple(f for r in runs for f in r.run.files))


@dataclass(frozen=True, slots=True, kw_only=True)
class UniversalCompaction:
    """Paimon's universal compaction strategy for one table's options.

    Attributes:
        max_size_amp: ``compaction.max-size-amplification-percent``.
        size_ratio: ``compaction.size-ratio`` (percent).
        num_run_compaction_trigger: ``num-sorted-run.compaction-trigger``.
        total_size_threshold: ``compaction.total-size-threshold`` bytes, or None.
        incremental_size_threshold: ``compaction.incremental-size-threshold``
            bytes, or None.
    """

    max_size_amp: int = 200
    size_ratio: int = 1
    num_run_compaction_trigger: int = 5
    total_size_threshold: int | None = None
    incremental_size_threshold: int | None = None

    @classmethod
    def from_options(cls, options: CoreOptions) -> UniversalCompaction:
        """The strategy a table's options configure."""
        return cls(
            max_size_amp=options.compaction_max_size_amplification_percent,
            size_ratio=options.compaction_size_ratio,
            num_run_compaction_trigger=options.num_sorted_run_compaction_trigger,
            total_size_threshold=options.compaction_total_size_threshold,
            incremental_size_threshold=options.compaction_incremental_size_threshold,
        )

    def pick(
        self, num_levels: int, runs: Sequence[LevelSortedRun], *, full_due: bool = False
    ) -> CompactUnit | None:
        """Pick the runs to compact now, or ``None``.

        Args:
            num_levels: Levels of the bucket (``Levels.number_of_levels``).
            runs: The bucket's sorted runs, newest first.
            full_due: ``full-compaction.delta-commits`` is reached: compact
                everything (when there is more than one run).

        Returns:
            The unit, filtered as Paimon's compact manager does: ``None`` when
            it would rewrite one file into its own level.
        """
        unit = self._pick(num_levels, runs, full_due=full_due)
        if unit is None or not unit.files:
            return None
        if len(unit.files) == 1 and unit.files[0].level == unit.output_level:
            return None
        return unit

    def _pick(
        self, num_levels: int, runs: Sequence[LevelSortedRun], *, full_due: bool
    ) -> CompactUnit | None:
        max_level = num_levels - 1
        if len(runs) > 1:
            if full_due:
                return CompactUnit.from_level_runs(max_level, runs)
            early = self._early_full(max_level, runs)
            if early is not None:
                return early
        unit = self._pick_for_size_amp(max_level, runs)
        if unit is not None:
            return unit
        unit = self._pick_for_size_ratio(max_level, runs)
        if unit is not None:
            return unit
        if len(runs) > self.num_run_compaction_trigger:
            candidates = len(runs) - self.num_run_compaction_trigger + 1
            return self._size_ratio(max_level, runs, candidates)
        return None

    def _early_full(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        total = sum(r.run.total_size for r in runs)
        if self.total_size_threshold is not None and total < self.total_size_threshold:
            return CompactUnit.from_level_runs(max_level, runs)
        if self.incremental_size_threshold is not None:
            incremental = sum(r.run.total_size for r in runs if r.level != max_level)
            if incremental > self.incremental_size_threshold:
                return CompactUnit.from_level_runs(max_level, runs)
        return None

    def _pick_for_size_amp(
        self, max_level: int, runs: Sequence[LevelSortedRun]
    ) -> CompactUnit | None:
        if len(runs) < self.num_run_compaction_trigger:
            return None
        candidate = sum(r.run.total_size for r in runs[:-1])
        earliest = runs[-1].run.total_size
        if candidate * 100 > self.max_size_amp * earliest:
            return CompactUnit.from_level_runs(max_level, runs)
        return None

    def _pick_for_size_ratio(
        self, max_level: int, runs: Sequence[LevelSortedRun]
    ) -> CompactUnit | None:
        if len(runs) < self.num_run_compaction_trigger:
            return None
        return self._size_ratio(max_level, runs, 1)

    def force_pick_level0(
        self, num_levels: int, runs: Sequence[LevelSortedRun]
    ) -> CompactUnit | None:
        """Pick every level-0 run (and what size ratio adds) into a level >= 1.

        Source: Paimon ``UniversalCompaction.forcePickL0`` (lookup compaction).
        """
        count = 0
        for r in runs:
            if r.level > 0:
                break
            count += 1
        if count == 0:
            return None
        return self._size_ratio(num_levels - 1, runs, count, force=True)

    def _size_ratio(
        self,
        max_level: int,
        runs: Sequence[LevelSortedRun],
        candidate_count: int,
        *,
        force: bool = False,
    ) -> CompactUnit | None:
        candidate = sum(r.run.total_size for r in runs[:candidate_count])
        triggered = force or candidate_count > 1
        i = candidate_count
        while i < len(runs):
            nxt = runs[i]
            too_big = candidate * (100.0 + self.size_ratio) / 100.0 < nxt.run.total_size
            if too_big and (not triggered or nxt.level > 1):
                break
            candidate += nxt.run.total_size
            candidate_count += 1
            triggered = True
            i += 1
        return self._create_unit(runs, max_level, candidate_count) if triggered else None

    @staticmethod
    def _create_unit(runs: Sequence[LevelSortedRun], max_level: int, run_count: int) -> CompactUnit:
        output = max_level if run_count == len(runs) else max(0, runs[run_count].level - 1)
        if output == 0:
            for i in range(run_count, len(runs)):
                nxt = runs[i]
                run_count += 1
                if nxt.level != 0:
                    output = nxt.level
                    break
        if run_count == len(runs):
            output = max_level
        return CompactUnit.from_level_runs(output, runs[:run_count])


def pick_full_compaction(num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
    """Everything into the top level; ``None`` when the bucket already is one top run.

    Source: Paimon ``CompactStrategy.pickFullCompaction`` (without record-level
    expiry, deletion vectors or forced rewrites).
    """
    max_level = num_levels - 1
    if not runs or (len(runs) == 1 and runs[0].level == max_level):
        return None
    return CompactUnit.from_level_runs(max_level, runs)
