"""Tables other engines wrote in ways snaplake mishandled: fixed buckets without a bucket key,
BINARY partition keys, and partitions pypaimon encodes differently from Java."""

from __future__ import annotations

import pytest
from tests.helpers import SCHEMA, rows
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.store.read.split_read import read_splits

pytestmark = [pytest.mark.integration, requires_paimon]


def _commit(table, data, *, user="s", overwrite=None):
    w = table.new_write(commit_user=user)
    w.write_arrow(data)
    return table.new_commit(commit_user=user).commit(w.prepare_commit(), overwrite=overwrite)


def _placement(table) -> dict[int, tuple[tuple[object, ...], int]]:
    out = {}
    for split in table.new_scan().plan():
        ids = read_splits(table.file_io, [split], schema=table.arrow_schema).column("id")
        for i in ids.to_pylist():
            out[i] = (split.partition_values, split.bucket)
    return out


def test_fixed_buckets_without_bucket_key_land_where_pypaimon_puts_them(tmp_path):
    oracle = PaimonOracle(tmp_path)
    oracle.create_table("db.b", SCHEMA, partition_keys=["month"], options={"bucket": "4"})
    oracle.write("db.b", rows(0, 90))
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.b")
    theirs = _placement(table)
    _commit(table, rows(90, 90))  # used to die with a numpy broadcast error
    ours = _placement(table)
    # every row hashes the empty row (Java 0.9+ and pypaimon alike): one bucket
    assert {b for _, b in theirs.values()} == {b for _, b in ours.values()} == {3}
    assert oracle.read("db.b").sort_by("id").equals(rows(0, 180))
