"""A dynamic-bucket writer that restored a partition's index before another writer overwrote it.

Found by tests/property/test_dynamic_bucket_state_machine.py. The writer still
believes a known key lives in the bucket it restored; its upsert of that key
changes no HASH file, so nothing checks it, and the key ends up in two buckets
(the overwrite put it into another one) — one bucket even without a HASH file.
Issue 20 item 2 ("two writers never duplicate a key"): the writer's message
now names the HASH file of every bucket it writes known keys into
(``DataIncrement.kept_index_files``), and the commit refuses with
``HashIndexConflictError`` when that file is no longer live.

An overwrite drops the index entries of the overwritten partitions as Paimon
does (``OverwriteChangesProvider.buildResult``): every type, HASH and
DELETION_VECTORS alike; only a HASH file a message names as kept stays.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.helpers import assert_same_rows
from tests.oracle import PaimonOracle, requires_paimon
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows, to_table

import snaplake
from snaplake.errors import HashIndexConflictError
from snaplake.store.format.binary_row import decode_binary_row
from snaplake.store.format.index_file import DELETION_VECTORS_INDEX, HASH_INDEX
from snaplake.store.format.snapshot import CommitKind
from snaplake.store.read.index_scan import read_index_entries


def test_upsert_of_a_known_key_after_another_writers_overwrite_keeps_one_bucket(
    tmp_path: Path,
) -> None:
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"dynamic-bucket.target-row-num": "2"},
    )  # fmt: skip
    month1 = [r for r in make_rows(0, 12) if r["month"] == 1]  # ids 0, 3, 6, 9
    table.write(to_table(month1[:3]))  # bucket 0: ids 0, 3; bucket 1: id 6
    write = table.new_write(commit_user="w")
    commit = table.new_commit(commit_user="w")
    write.write_arrow(to_table(month1[:1]))  # restores month 1's index
    commit.commit(write.prepare_commit(), commit_identifier=1)
    table.write(to_table(month1[2:3]), overwrite={"month": 1})  # id 6 now in bucket 0
    write.write_arrow(to_table(make_rows(6, 1, seed=5)))  # the stale writer: id 6 -> bucket 1
    messages = write.prepare_commit()
    with pytest.raises(HashIndexConflictError):  # refused before publishing
        commit.commit(messages, commit_identifier=2)
    write.abort(messages)
    ids = table.to_arrow().column("id").to_pylist()
    assert ids == [6]
    assert_one_bucket_per_key(table)


def _index(table: snaplake.Table) -> dict[tuple[int, int, str], str]:
    """``{(month, bucket, index type): file name}`` of the latest snapshot's index manifest."""
    types = table.schema().partition_types
    out: dict[tuple[int, int, str], str] = {}
    for e in read_index_entries(table, table.latest_snapshot()):
        month = decode_binary_row(e.partition, types)[0]
        assert isinstance(month, int)
        key = (month, e.bucket, e.index_file.index_type)
        assert key not in out, f"two index files for {key}"
        out[key] = e.index_file.file_name
    return out


@requires_paimon
def test_overwrite_drops_every_index_type_of_the_overwritten_partitions(tmp_path: Path) -> None:
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"deletion-vectors.enabled": "true", "dynamic-bucket.target-row-num": "4"},
    )  # fmt: skip
    table.write(to_table(make_rows(0, 24)))
    table.compact(full=True)
    table.write(to_table(make_rows(0, 6, seed=3)))
    table.compact()  # upserts looked up in the top level: deletion vectors
    before = _index(table)
    assert {t for _, _, t in before} == {HASH_INDEX, DELETION_VECTORS_INDEX}
    assert {(m, t) for m, _, t in before} >= {(1, DELETION_VECTORS_INDEX), (2, HASH_INDEX)}
    # two-phase overwrite of month 1 by a writer that restored the index: the known key
    # it writes keeps its bucket's HASH file; month 1's other entries go, every type
    write = table.new_write(commit_user="w")
    month1 = [r for r in make_rows(0, 24, seed=4) if r["month"] == 1][:1]
    write.write_arrow(to_table(month1))
    messages = write.prepare_commit()
    (kept,) = [f for m in messages for f in m.data_increment.kept_index_files]
    # the writer's level-0 compaction looked up month 1's old files: its vectors name files
    # the overwrite drops, so its COMPACT snapshot (after the OVERWRITE one) is refused
    assert any(m.compact_increment.new_index_files for m in messages)
    result = table.new_commit(commit_user="w").commit(messages, overwrite={"month": 1})
    assert table.snapshot(result.snapshot_id or 0).commit_kind == CommitKind.OVERWRITE
    after = _index(table)
    assert {k: v for k, v in after.items() if k[0] == 1} == {
        k: v for k, v in before.items() if v == kept.file_name
    }
    assert {k: v for k, v in after.items() if k[0] != 1} == {
        k: v for k, v in before.items() if k[0] != 1
    }
    # an overwrite by a writer that restored nothing: month 2 holds only its new HASH files
    month2 = [r for r in make_rows(100, 12, seed=5) if r["month"] == 2]
    table.write(to_table(month2), overwrite={"month": 2})
    final = _index(table)
    assert {(b, t) for m, b, t in final if m == 2} == {
        (b, HASH_INDEX) for m, b, _ in final if m == 2
    }
    assert not {v for k, v in final.items() if k[0] == 2} & set(before.values())
    assert {k: v for k, v in final.items() if k[0] != 2} == {
        k: v for k, v in after.items() if k[0] != 2
    }
    assert_one_bucket_per_key(table)
    # a deletion-vector table reads no level-0 file: compact, then every month is back
    table.compact()
    assert_one_bucket_per_key(table)
    rows = sorted_rows(table.to_arrow())
    assert [r for r in rows if r["month"] == 1] == sorted_rows(to_table(month1))
    assert [r for r in rows if r["month"] == 2] == sorted_rows(to_table(month2))
    theirs = PaimonOracle(tmp_path).read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
    assert_same_rows(table.to_arrow(), theirs, by=("month", "id"))
