"""snaplake reads and carries forward the index of a dynamic-bucket table pypaimon 2.1.0 wrote.

pypaimon writes a dynamic-bucket primary-key table (``bucket`` unset = -1, small
``dynamic-bucket.target-row-num`` so keys spread over several buckets). snaplake
reads its index manifest and HASH files (each bucket's hashes are the trimmed
primary key hashes of the keys in its data files), then publishes two snapshots
of its own: an APPEND whose only change is a snaplake-written HASH file replacing
one bucket's (so pypaimon must read snaplake's index manifest and HASH file), and a
full manifest merge. pypaimon's next upsert of every key must land in the same
buckets: no key twice.

snaplake refuses writes to dynamic-bucket tables until issue 20's writer lands, so
the commits go through the committer's producers directly (the commit machinery
under test), not through ``FileStoreCommit.commit``'s support check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.manifest_rewrite import RewriteManifests
from snaplake.commit.message import CommitMessage, DataIncrement
from snaplake.commit.producer import CommitRequest
from snaplake.commit.retry import RetryPolicy
from snaplake.compaction.manifest_merge import ManifestFileMerger
from snaplake.store.format.bucket import hash_binary_rows
from snaplake.store.format.hash_index import read_hash_index, write_hash_index
from snaplake.store.format.index_file import HASH_INDEX
from snaplake.store.format.types import parse_type
from snaplake.store.read.index_scan import read_index_entries
from snaplake.store.read.scan import FileStoreScan

pytestmark = [pytest.mark.integration, requires_paimon]

SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("v", pa.string()),
    ]
)


def _rows(dt: str, ids: list[int], tag: str) -> pa.Table:
    return pa.table(
        {"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA
    )


def _hashes(ids: list[int]) -> list[int]:
    data = pa.table({"id": pa.array(ids, pa.int64())})
    return sorted(int(h) for h in hash_binary_rows(data, ["id"], [parse_type("BIGINT NOT NULL")]))


def _keys_by_bucket(table: snaplake.Table) -> dict[tuple[bytes, int], list[int]]:
    scan = FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=table.latest_snapshot(),
    )  # fmt: skip
    out: dict[tuple[bytes, int], list[int]] = {}
    for split in scan.plan():
        ids: set[int] = set()
        for path in split.paths:
            ids.update(pq.read_table(path, columns=["id"]).column("id").to_pylist())
        out[(split.partition, split.bucket)] = sorted(ids)
    return out


def test_snaplake_keeps_a_pypaimon_dynamic_bucket_index(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    oracle.create_table(
        "db.t", SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
        options={"dynamic-bucket.target-row-num": "5"},
    )  # fmt: skip
    first = pa.concat_tables([_rows("a", list(range(12)), "p"), _rows("b", [1], "p")])
    oracle.write("db.t", first, commits=3)  # three manifests, for the merge below
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert table.options.get("bucket", "-1") == "-1"

    # 1. snaplake reads pypaimon's index: one HASH file per (partition, bucket), the hashes
    #    of the trimmed primary key (id) of the keys in that bucket
    entries = read_index_entries(table, table.latest_snapshot(), index_type=HASH_INDEX)
    keys = _keys_by_bucket(table)
    assert len(keys) >= 3  # 12 keys, 5 per bucket
    assert {(e.partition, e.bucket) for e in entries} == set(keys)
    for e in entries:
        got = read_hash_index(table.file_io, table.paths, e.index_file)
        assert sorted(got.tolist()) == _hashes(keys[(e.partition, e.bucket)])

    # 2. an APPEND carrying one snaplake-written HASH file (same hashes, new file)
    victim = entries[0]
    hashes = read_hash_index(table.file_io, table.paths, victim.index_file)
    meta = write_hash_index(table.file_io, table.paths, hashes[::-1].astype(np.int32))
    commit = FileStoreCommit(table, commit_user="snaplake", sleep=lambda s: None)
    schema = table.schema_manager.latest()
    assert schema is not None
    policy = RetryPolicy.from_options(schema.core_options)
    message = CommitMessage(
        partition=victim.partition, bucket=victim.bucket, total_buckets=-1,
        data_increment=DataIncrement(new_index_files=(meta,)),
    )  # fmt: skip
    producer = commit.producer(CommitRequest(schema=schema, messages=(message,)), overwrite=None)
    before = table.latest_snapshot()
    result = commit.snapshot_commit.commit(producer, policy=policy, latest=before)
    after = table.latest_snapshot()
    assert after is not None and before is not None and after.id == result.snapshot_id
    assert after.index_manifest not in (None, before.index_manifest)
    new_entries = read_index_entries(table, after)
    assert len(new_entries) == len(entries)
    assert {(e.partition, e.bucket, e.index_file.file_name) for e in new_entries} == {
        (e.partition, e.bucket, meta.file_name if e is victim else e.index_file.file_name)
        for e in entries
    }

    # 3. a full manifest merge (COMPACT) reuses the index manifest
    merge = RewriteManifests(
        planner=ManifestFileMerger(commit=commit), schema_manager=table.schema_manager,
        paths=table.paths, schema=schema, full=True,
    )  # fmt: skip
    merged = commit.snapshot_commit.commit(merge, policy=policy, latest=after)
    assert merged.snapshot_id == after.id + 1
    latest = table.latest_snapshot()
    assert latest is not None and latest.index_manifest == after.index_manifest

    # 4. pypaimon reads snaplake's index manifest and HASH file: its upserts reuse the buckets
    oracle.write("db.t", pa.concat_tables([_rows("a", list(range(14)), "u"), _rows("b", [1], "u")]))
    read = oracle.read("db.t")
    pairs = sorted(zip(read.column("dt").to_pylist(), read.column("id").to_pylist(), strict=True))
    assert pairs == sorted([("a", i) for i in range(14)] + [("b", 1)])  # no key twice
    assert set(read.column("v").to_pylist()) == {f"u{i}" for i in range(14)} | {"u1"}
    keys_after = _keys_by_bucket(table)
    for (part, bucket), ids in keys.items():
        assert set(ids) <= set(keys_after[(part, bucket)])
