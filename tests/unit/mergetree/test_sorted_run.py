"""Key ordering, interval partitioning, levels and the LSM conflict rule."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snaplake.errors import CommitConflictError
from snaplake.mergetree.conflict import check_lsm_levels
from snaplake.mergetree.sorted_run import KeyComparator, Levels, interval_partition, java_order_key
from snaplake.store.format.binary_row import encode_binary_row
from snaplake.store.format.data_file import EMPTY_STATS, DataFileMeta
from snaplake.store.format.manifest import FileKind, ManifestEntry
from snaplake.store.format.types import parse_type

_TYPES = (parse_type("INT NOT NULL"), parse_type("STRING NOT NULL"))
_CMP = KeyComparator(_TYPES)
_N = iter(range(10**9))


def _file(
    lo: tuple[int, str], hi: tuple[int, str], *, level: int = 0, seq: int = 0
) -> DataFileMeta:
    return DataFileMeta(
        file_name=f"data-{next(_N)}.parquet",
        file_size_bytes=10,
        row_count=1,
        min_key=encode_binary_row(list(lo), _TYPES),
        max_key=encode_binary_row(list(hi), _TYPES),
        key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS,
        min_sequence_number=seq,
        max_sequence_number=seq,
        schema_id=0,
        level=level,
        extra_files=(),
    )


def test_java_order_key() -> None:
    assert java_order_key([None]) < java_order_key([-(10**9)])
    assert java_order_key([-0.0]) < java_order_key([0.0]) < java_order_key([float("nan")])
    assert java_order_key([float("inf")]) < java_order_key([float("nan")])
    assert java_order_key(["z"]) < java_order_key(["é"])  # UTF-8 byte order


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 5)), min_size=1, max_size=12))
def test_interval_partition(ranges: list[tuple[int, int]]) -> None:
    files = [_file((lo, "a"), (lo + span, "a")) for lo, span in ranges]
    sections = interval_partition(files, _CMP)
    assert sorted(f.file_name for s in sections for r in s for f in r.files) == sorted(
        f.file_name for f in files
    )
    bounds = []
    for section in sections:
        keys = [(_CMP.min_key(f), _CMP.max_key(f)) for r in section for f in r.files]
        bounds.append((min(k[0] for k in keys), max(k[1] for k in keys)))
        for run in section:  # each run: ordered, non-overlapping
            for a, b in zip(run.files, run.files[1:], strict=False):
                assert _CMP.max_key(a) < _CMP.min_key(b)
    for (_, hi), (lo, _) in itertools.pairwise(bounds):
        assert hi < lo  # sections never overlap


def test_levels_order_and_runs() -> None:
    old = _file((1, "a"), (5, "a"), level=0, seq=1)
    new = _file((1, "a"), (5, "a"), level=0, seq=9)
    top = _file((0, "a"), (9, "z"), level=3, seq=0)
    levels = Levels(_CMP, [old, top, new], 3)
    assert levels.number_of_levels == 4  # raised to hold level 3
    runs = levels.level_sorted_runs()
    assert [(r.level, r.run.files[0].file_name) for r in runs] == [
        (0, new.file_name),
        (0, old.file_name),
        (3, top.file_name),
    ]
    assert levels.number_of_sorted_runs() == 3
    assert levels.non_empty_highest_level() == 3


def _entry(f: DataFileMeta) -> ManifestEntry:
    return ManifestEntry(kind=FileKind.ADD, partition=b"p", bucket=0, total_buckets=1, file=f)


def test_lsm_rule() -> None:
    a = _file((1, "a"), (3, "b"), level=2)
    b = _file((3, "c"), (7, "a"), level=2)
    check_lsm_levels([_entry(a), _entry(b)], _CMP)  # touching but not overlapping
    overlapping = _file((3, "b"), (4, "a"), level=2)
    with pytest.raises(CommitConflictError, match="LSM conflicts detected"):
        check_lsm_levels([_entry(a), _entry(overlapping)], _CMP)
    # level 0 and other buckets/levels are exempt
    check_lsm_levels(
        [_entry(a), _entry(dataclasses.replace(overlapping, level=0)),
         _entry(dataclasses.replace(overlapping, level=1))],
        _CMP,
    )  # fmt: skip
