"""Round-trip properties of Snapshot JSON and CommitMessage bytes; RetryPolicy bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import data_file_metas

from snaplake.commit.message import CommitMessage, CompactIncrement, DataIncrement
from snaplake.commit.retry import RetryPolicy
from snaplake.store.format.snapshot import CommitKind, Snapshot

longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
names = st.text(min_size=1, max_size=30)

snapshots = st.builds(
    Snapshot,
    id=st.integers(min_value=1, max_value=2**40),
    schema_id=st.integers(min_value=0, max_value=1000),
    base_manifest_list=names,
    base_manifest_list_size=st.none() | st.integers(min_value=0, max_value=2**40),
    delta_manifest_list=names,
    delta_manifest_list_size=st.none() | st.integers(min_value=0, max_value=2**40),
    changelog_manifest_list=st.none() | names,
    index_manifest=st.none() | names,
    commit_user=names,
    commit_identifier=longs,
    commit_kind=st.sampled_from(CommitKind),
    time_millis=st.integers(min_value=0, max_value=2**50),
    total_record_count=st.none() | st.integers(min_value=0, max_value=2**50),
    delta_record_count=st.none() | longs,
    watermark=st.none() | longs,
    properties=st.none() | st.dictionaries(names, st.text(max_size=20), max_size=5),
    next_row_id=st.none() | st.integers(min_value=0, max_value=2**50),
)


@given(snapshots)
def test_snapshot_json_round_trip(snap: Snapshot) -> None:
    assert Snapshot.from_bytes(snap.to_bytes(), path="p") == snap


files = st.lists(data_file_metas, max_size=3).map(tuple)


@given(
    st.binary(min_size=12, max_size=64),
    st.integers(min_value=0, max_value=1000),
    st.integers(min_value=-1, max_value=1000),
    files, files, files, files,
    st.none() | st.integers(min_value=0, max_value=2**62),
)  # fmt: skip
def test_commit_message_bytes_round_trip(
    partition, bucket, total, new, deleted, before, after, key_map_snapshot
):
    message = CommitMessage(
        partition=partition,
        bucket=bucket,
        total_buckets=total,
        data_increment=DataIncrement(
            new_files=new, deleted_files=deleted, key_map_snapshot=key_map_snapshot
        ),
        compact_increment=CompactIncrement(compact_before=before, compact_after=after),
    )
    assert CommitMessage.from_bytes(message.to_bytes()) == message


@given(
    st.integers(min_value=1, max_value=60),
    st.floats(min_value=0.0, max_value=0.999),
)
def test_retry_wait_is_capped_and_jittered(retry: int, fraction: float) -> None:
    policy = RetryPolicy(min_wait_s=0.01, max_wait_s=10.0)
    wait = policy.wait_s(retry, random_fraction=fraction)
    assert 0.01 <= wait <= 10.0 * 1.2
    assert wait >= min(0.01 * 2 ** (retry - 1), 10.0)
