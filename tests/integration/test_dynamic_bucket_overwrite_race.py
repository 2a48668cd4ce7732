"""A dynamic-bucket writer that restored a partition's index before another writer overwrote it.

Found by tests/property/test_dynamic_bucket_state_machine.py. The writer still
believes a known key lives in the bucket it restored; its upsert of that key
changes no HASH file, so nothing checks it, and the key ends up in two buckets
(the overwrite put it into another one) — one bucket even without a HASH file.
Issue 20 item 2 ("two writers never duplicate a key"): the writer's message
now names the HASH file of every bucket it writes known keys into
(``DataIncrement.kept_index_files``), and the commit refuses with
``HashIndexConflictError`` when that file is no longer live.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, to_table

import snaplake
from snaplake.errors import HashIndexConflictError


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
