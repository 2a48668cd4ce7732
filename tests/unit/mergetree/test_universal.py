"""UniversalCompaction picks what Paimon's UniversalCompaction picks (scenarios from its tests)."""

from __future__ import annotations

from snaplake.mergetree.sorted_run import LevelSortedRun, SortedRun
from snaplake.mergetree.universal import UniversalCompaction, pick_full_compaction
from snaplake.store.format.data_file import EMPTY_BINARY_ROW, EMPTY_STATS, DataFileMeta

_COUNTER = iter(range(1_000_000))


def _file(size: int, level: int = 0) -> DataFileMeta:
    return DataFileMeta(
        file_name=f"f{next(_COUNTER)}",
        file_size_bytes=size,
        row_count=1,
        min_key=EMPTY_BINARY_ROW,
        max_key=EMPTY_BINARY_ROW,
        key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS,
        min_sequence_number=0,
        max_sequence_number=0,
        schema_id=0,
        level=level,
        extra_files=(),
    )


def _run(level: int, size: int) -> LevelSortedRun:
    return LevelSortedRun(level, SortedRun((_file(size, level),)))


def _level0(*sizes: int) -> list[LevelSortedRun]:
    return [_run(0, s) for s in sizes]


def _strategy(max_amp: int, ratio: int, trigger: int) -> UniversalCompaction:
    return UniversalCompaction(
        max_size_amp=max_amp, size_ratio=ratio, num_run_compaction_trigger=trigger
    )


def test_output_level() -> None:
    c = _strategy(25, 1, 3)
    runs = [_run(lv, 1) for lv in (0, 0, 1, 3, 4)]
    assert [c._create_unit(runs, 5, n).output_level for n in range(1, 6)] == [1, 1, 2, 3, 5]


def test_pick_by_amplification_ratio_and_count() -> None:
    c = _strategy(25, 1, 3)
    unit = c.pick(3, _level0(1, 2, 3, 3))
    assert unit is not None and [f.file_size_bytes for f in unit.files] == [1, 2, 3, 3]
    unit = c.pick(4, [_run(0, 1), _run(1, 1), _run(2, 1), _run(3, 50)])
    assert unit is not None and [f.file_size_bytes for f in unit.files] == [1, 1, 1]
    unit = c.pick(4, [_run(0, 1), _run(1, 2), _run(2, 3), _run(3, 50)])
    assert unit is not None and [f.file_size_bytes for f in unit.files] == [1, 2, 3]


def _append_and_pick_amp(c: UniversalCompaction, sizes: list[int]) -> list[int]:
    sizes = [1, *sizes]
    unit = c._pick_for_size_amp(2, _level0(*sizes))
    return [sum(f.file_size_bytes for f in unit.files)] if unit else sizes


def test_size_amplification_sequence() -> None:
    c = _strategy(25, 0, 1)
    sizes = [1]
    seen = []
    for _ in range(17):
        sizes = _append_and_pick_amp(c, sizes)
        seen.append(sizes)
    assert seen == [
        [2], [3], [4], [1, 4], [6], [1, 6], [8], [1, 8], [1, 1, 8], [11], [1, 11],
        [1, 1, 11], [14], [1, 14], [1, 1, 14], [1, 1, 1, 14], [18],
    ]  # fmt: skip


def _pick_ratio(c: UniversalCompaction, sizes: list[int]) -> list[int]:
    runs = [_run(i, s) for i, s in enumerate(sizes)]
    unit = c._pick_for_size_ratio(len(sizes) - 1, runs)
    if unit is None:
        return sizes
    compact = [f.file_size_bytes for f in unit.files]
    rest = list(sizes)
    for s in compact:
        rest.remove(s)
    return [sum(compact), *rest]


def test_size_ratio_sequence() -> None:
    c = _strategy(25, 1, 5)
    sizes = [1, 1, 1, 1]
    seen = []
    for _ in range(22):
        sizes = _pick_ratio(c, [1, *sizes])
        seen.append(sizes)
    assert seen == [
        [5], [1, 5], [1, 1, 5], [1, 1, 1, 5], [4, 5], [1, 4, 5], [1, 1, 4, 5], [3, 4, 5],
        [1, 3, 4, 5], [2, 3, 4, 5], [1, 2, 3, 4, 5], [16], [1, 16], [1, 1, 16],
        [1, 1, 1, 16], [4, 16], [1, 4, 16], [1, 1, 4, 16], [3, 4, 16], [1, 3, 4, 16],
        [2, 3, 4, 16], [1, 2, 3, 4, 16],
    ]  # fmt: skip
    assert _pick_ratio(c, [1, *sizes]) == [11, 16]


def test_size_ratio_threshold() -> None:
    assert _pick_ratio(_strategy(25, 10, 2), [8, 9, 10]) == [8, 9, 10]
    assert _pick_ratio(_strategy(25, 20, 2), [8, 9, 10]) == [27]


def test_full_compaction_and_filters() -> None:
    assert pick_full_compaction(3, [_run(2, 10)]) is None
    unit = pick_full_compaction(3, [_run(0, 1), _run(2, 10)])
    assert unit is not None and unit.output_level == 2 and len(unit.files) == 2
    # one file already at its output level is no compaction
    assert _strategy(200, 1, 1).pick(2, [_run(1, 5)]) is None
    # early full compaction below a total size, and when delta commits are due
    early = UniversalCompaction(num_run_compaction_trigger=5, total_size_threshold=100)
    unit = early.pick(6, [_run(0, 1), _run(5, 10)])
    assert unit is not None and unit.output_level == 5
    unit = _strategy(200, 1, 5).pick(6, [_run(0, 1), _run(5, 10)], full_due=True)
    assert unit is not None and unit.output_level == 5
