"""Java Paimon 0.9 restores a dynamic-bucket index from the index manifest snaplake wrote.

Java 0.9 (``tests/oracle/java/JavaDynamicIndexWriter.java``) writes a dynamic-bucket
table; snaplake publishes a snapshot replacing every HASH file with one it wrote
(same hashes, new files, a new index manifest); Java then upserts into bucket 0 of
partition ``a``: its index maintainer must restore that bucket's hashes from
snaplake's files, so the new HASH file holds the old hashes plus the new key's,
and the other buckets keep snaplake's files.

snaplake refuses writes to dynamic-bucket tables until issue 20's writer lands, so
the commit goes through the committer's producer directly.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from tests.oracle.java_paimon import requires_java_paimon, run_java

import snaplake
from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.message import CommitMessage, DataIncrement
from snaplake.commit.producer import CommitRequest
from snaplake.commit.retry import RetryPolicy
from snaplake.store.format.binary_row import encode_binary_row
from snaplake.store.format.bucket import hash_binary_rows
from snaplake.store.format.hash_index import read_hash_index, write_hash_index
from snaplake.store.format.types import parse_type
from snaplake.store.read.index_scan import read_index_entries

pytestmark = [pytest.mark.integration, requires_java_paimon]


def _hashes(ids: list[int]) -> list[int]:
    data = pa.table({"id": pa.array(ids, pa.int64())})
    return sorted(int(h) for h in hash_binary_rows(data, ["id"], [parse_type("BIGINT NOT NULL")]))


def test_java_09_restores_the_index_snaplake_wrote(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    run_java("JavaDynamicIndexWriter", "create", str(warehouse))
    table = snaplake.FileSystemCatalog(str(warehouse)).get_table("db.t")
    java_entries = read_index_entries(table, table.latest_snapshot())
    assert len(java_entries) == 4

    messages = []
    for e in java_entries:
        hashes = read_hash_index(table.file_io, table.paths, e.index_file)
        meta = write_hash_index(table.file_io, table.paths, hashes[::-1].copy())
        messages.append(
            CommitMessage(
                partition=e.partition,
                bucket=e.bucket,
                total_buckets=-1,
                data_increment=DataIncrement(new_index_files=(meta,)),
            )
        )
    schema = table.schema_manager.latest()
    assert schema is not None
    commit = FileStoreCommit(table, commit_user="snaplake", sleep=lambda s: None)
    producer = commit.producer(
        CommitRequest(schema=schema, messages=tuple(messages)), overwrite=None
    )
    commit.snapshot_commit.commit(
        producer, policy=RetryPolicy.from_options(schema.core_options),
        latest=table.latest_snapshot(),
    )  # fmt: skip
    ours = {
        (m.partition, m.bucket): m.data_increment.new_index_files[0].file_name for m in messages
    }

    run_java(
        "JavaDynamicIndexWriter", "append", str(warehouse), "a", "0", "2", "100"
    )  # id 2 exists, 100 is new
    snap = table.latest_snapshot()
    assert snap is not None and snap.id == 3
    after = {(e.partition, e.bucket): e for e in read_index_entries(table, snap)}
    a0 = (encode_binary_row(["a"], [parse_type("STRING NOT NULL")]), 0)
    assert set(after) == set(ours)
    for key, name in ours.items():
        if key != a0:
            assert after[key].index_file.file_name == name  # Java kept snaplake's files
    assert after[a0].index_file.file_name != ours[a0]
    got = read_hash_index(table.file_io, table.paths, after[a0].index_file)
    assert sorted(got.tolist()) == _hashes([0, 2, 100])
    rows = table.to_arrow().sort_by([("dt", "ascending"), ("id", "ascending")])
    assert list(zip(rows.column("dt").to_pylist(), rows.column("id").to_pylist(), strict=True)) == [
        ("a", 0), ("a", 1), ("a", 2), ("a", 3), ("a", 100), ("b", 4), ("b", 5),
    ]  # fmt: skip
