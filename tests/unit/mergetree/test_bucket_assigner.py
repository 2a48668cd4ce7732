"""Dynamic-bucket assignment invariants (Paimon ``PartitionIndex`` semantics), by hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snaplake.errors import InvalidOptionError
from snaplake.store.format.index_file import HASH_INDEX, IndexFileMeta
from snaplake.write.bucket_assigner import HashBucketAssigner, PartitionIndex

_HASH = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@st.composite
def _restored(draw: st.DrawFn) -> dict[int, np.ndarray]:
    """A partition's HASH files: distinct hashes spread over a few bucket ids."""
    hashes = draw(st.lists(_HASH, unique=True, max_size=40))
    ids = draw(st.lists(st.integers(0, 6), min_size=len(hashes), max_size=len(hashes)))
    out: dict[int, list[int]] = {}
    for h, b in zip(hashes, ids, strict=True):
        out.setdefault(b, []).append(h)
    return {b: np.array(v, dtype=np.int32) for b, v in out.items()}


@settings(max_examples=200, deadline=None)
@given(
    restored=_restored(),
    batches=st.lists(st.lists(_HASH, max_size=30), max_size=5),
    target=st.integers(1, 8),
    max_buckets=st.sampled_from([-1, 1, 2, 3, 5]),
)
def test_assignment_invariants(
    restored: dict[int, np.ndarray], batches: list[list[int]], target: int, max_buckets: int
) -> None:
    index = PartitionIndex(restored, target_row_num=target, max_buckets=max_buckets)
    known = {int(h): b for b, hs in restored.items() for h in hs.tolist()}
    seen = dict(known)
    for batch in batches:
        before = {b: len(index.bucket_hashes(b)) for b in index.counts}
        full_before = {b for b, n in before.items() if n >= target}
        out = index.assign(np.array(batch, dtype=np.int32))
        assert out.dtype == np.int32 and len(out) == len(batch)
        for h, b in zip(batch, out.tolist(), strict=True):
            # a hash always gets the same bucket, and a restored one keeps its own
            assert seen.setdefault(h, b) == b
        new = [h for h in dict.fromkeys(batch) if h not in known]
        for h in new:
            known[h] = seen[h]
            # a new hash never goes into a bucket that was full while a non-full one or an
            # unused id (below the cap) was available
            if seen[h] in full_before:
                assert max_buckets != -1
    # every hash is in exactly one bucket's hash set; counts are those sets' sizes
    sets = {b: index.bucket_hashes(b).tolist() for b in index.counts}
    flat = [h for hs in sets.values() for h in hs]
    assert len(flat) == len(set(flat)) == len(known)
    assert {h: b for b, hs in sets.items() for h in hs} == known
    assert index.counts == {b: len(hs) for b, hs in sets.items()}
    created = set(index.counts) - set(restored)
    if max_buckets != -1:
        assert all(b <= max_buckets - 1 for b in created)
    # new buckets are the smallest unused ids: no gap below a created id
    for b in created:
        assert all(i in index.counts for i in range(b))


@settings(max_examples=100, deadline=None)
@given(hashes=st.lists(_HASH, unique=True, min_size=1, max_size=200), target=st.integers(1, 10))
def test_new_hashes_fill_buckets_in_order(hashes: list[int], target: int) -> None:
    index = PartitionIndex({}, target_row_num=target, max_buckets=-1)
    out = index.assign(np.array(hashes, dtype=np.int32))
    counts = np.bincount(out)
    # every bucket but the last holds exactly target distinct hashes
    assert (counts[:-1] == target).all() and 0 < counts[-1] <= target
    assert len(counts) == -(-len(hashes) // target)


def test_capped_partition_reuses_its_buckets() -> None:
    index = PartitionIndex({}, target_row_num=2, max_buckets=3)
    out = index.assign(np.arange(50, dtype=np.int32))
    assert set(out.tolist()) == {0, 1, 2}
    assert sum(index.counts.values()) == 50
    assert index.assign(np.arange(50, dtype=np.int32)).tolist() == out.tolist()


def test_restored_full_bucket_is_skipped_and_counts_continue() -> None:
    restored = {0: np.array([1, 2], dtype=np.int32), 3: np.array([7], dtype=np.int32)}
    index = PartitionIndex(restored, target_row_num=2, max_buckets=-1)
    assert index.assign(np.array([2, 7, 9, 10, 11], dtype=np.int32)).tolist() == [0, 3, 3, 1, 1]
    assert index.take_changed_buckets() == [1, 3]
    assert index.take_changed_buckets() == []
    assert sorted(index.bucket_hashes(3).tolist()) == [7, 9]


def test_running_out_of_bucket_ids_is_a_typed_error() -> None:
    index = PartitionIndex({}, target_row_num=1, max_buckets=-1)
    index.assign(np.arange(32767, dtype=np.int32))
    assert max(index.counts) == 32766
    with pytest.raises(InvalidOptionError, match="target-row-num") as info:
        index.assign(np.array([-5], dtype=np.int32))
    assert info.value.key == "dynamic-bucket.target-row-num"


def test_assigner_restores_each_partition_once() -> None:
    loads: list[bytes] = []

    def load(partition: bytes) -> dict[int, tuple[IndexFileMeta, np.ndarray]]:
        loads.append(partition)
        meta = IndexFileMeta(HASH_INDEX, "index-x-0", 4, 1)
        return {4: (meta, np.array([11], dtype=np.int32))} if partition == b"a" else {}

    assigner = HashBucketAssigner(load, target_row_num=10, max_buckets=-1)
    assert assigner.assign(b"a", np.array([11, 12], dtype=np.int32)).tolist() == [4, 4]
    assert assigner.assign(b"b", np.array([11], dtype=np.int32)).tolist() == [0]
    assert assigner.assign(b"a", np.array([13], dtype=np.int32)).tolist() == [4]
    assert loads == [b"a", b"b"]
