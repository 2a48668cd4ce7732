"""Stateful model test of dynamic-bucket primary-key tables (``bucket = -1``).

Upserts, deletes, minor and full compactions, partition overwrites, snapshot
expiries and restarts of the writer (a new writer restoring the HASH index from
the latest snapshot) run against a real local table with a small
``dynamic-bucket.target-row-num`` (several buckets per partition fill) and a
dict model ``{(month, id): row}`` (deduplicate). One writer is reused across
commits until a restart. An overwrite (by its own writer) restarts the reused
writer too: a writer that restored a partition's HASH index before another
writer overwrote the partition may still send a known key to its old bucket
(see tests/integration/test_dynamic_bucket_overwrite_race.py), and its sequence
numbers may tie the overwrite's (as with fixed buckets).

After every step: the latest merged view equals the model, and every key of
every live data file is in exactly one bucket of its partition whose HASH file
(read from the index manifest) holds the key's hash — the hash computed here
with ``hash_binary_rows`` of the trimmed primary key.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows, to_table

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.bucket import hash_binary_rows
from snaplake.store.format.hash_index import read_hash_index
from snaplake.store.format.index_file import HASH_INDEX, read_index_manifest

_MONTHS = 3
_OPTIONS = {
    "num-sorted-run.compaction-trigger": "3",
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "5",
    "snapshot.time-retained": "0 ms",
}

_ids = st.lists(st.integers(0, 60), min_size=1, max_size=25)


class DynamicBucketMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="snaplake-dyn-sm-")
        self.model: dict[tuple[int, int], dict[str, Any]] = {}
        self.seed = 0
        self.ident = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(target_rows=st.integers(2, 6), initial=st.sampled_from([None, "1", "2"]))
    def create(self, target_rows: int, initial: str | None) -> None:
        options = {**_OPTIONS, "dynamic-bucket.target-row-num": str(target_rows)}
        if initial is not None:
            options["dynamic-bucket.initial-buckets"] = initial
        self.table = FileSystemCatalog(self.dir).create_table(
            "db.t", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
            options=options,
        )  # fmt: skip
        assert self.table.bucket_mode == "dynamic"
        self._new_writer()

    def _new_writer(self) -> None:
        self.writer = self.table.new_write(commit_user="w")
        self.commit = self.table.new_commit(commit_user="w")

    def _rows(self, ids: list[int]) -> list[dict[str, Any]]:
        self.seed += 1
        return [make_rows(i, 1, month_mod=_MONTHS, seed=self.seed)[0] for i in ids]

    def _write(self, rows: list[dict[str, Any]], *, delete: bool) -> None:
        """Write ``rows`` (or delete their keys) with the reused writer and commit.

        One writer at a time: no commit may lose a HASH index race.
        """
        data = to_table(rows)
        if delete:
            self.writer.delete_arrow(data.select(PK_KEYS))
        else:
            self.writer.write_arrow(data)
        self.ident += 1
        self.commit.commit(self.writer.prepare_commit(), commit_identifier=self.ident)
        for r in rows:
            key = (r["month"], r["id"])
            if delete:
                self.model.pop(key, None)
            else:
                self.model[key] = r

    @rule(ids=_ids)
    def upsert(self, ids: list[int]) -> None:
        self._write(self._rows(ids), delete=False)

    @rule(ids=st.lists(st.integers(0, 60), min_size=1, max_size=10))
    def delete(self, ids: list[int]) -> None:
        self._write(self._rows(ids), delete=True)

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self.table.compact(full=full)

    @rule(month=st.integers(1, _MONTHS), ids=st.lists(st.integers(0, 60), max_size=20))
    def overwrite_partition(self, month: int, ids: list[int]) -> None:
        rows = [r for r in self._rows(ids) if r["month"] == month]
        self.table.write(to_table(rows), overwrite={"month": month})
        self.model = {k: v for k, v in self.model.items() if k[0] != month}
        self.model.update({(r["month"], r["id"]): r for r in rows})
        self.restart_writer()

    @rule()
    def expire(self) -> None:
        self.table.expire_snapshots()

    @rule()
    def restart_writer(self) -> None:
        self.writer.close()
        self._new_writer()

    @invariant()
    def latest_equals_model(self) -> None:
        if hasattr(self, "table"):
            want = sorted(self.model.values(), key=lambda r: (r["month"], r["id"]))
            assert sorted_rows(self.table.to_arrow()) == want

    @invariant()
    def every_key_in_one_bucket_whose_hash_file_holds_it(self) -> None:
        if not hasattr(self, "table"):
            return
        table = self.table
        snapshot = table.latest_snapshot()
        if snapshot is None:
            return
        schema = table.schema()
        key_names = list(schema.trimmed_primary_keys)
        # The HASH files of the latest index manifest, read with the format modules.
        files: dict[tuple[bytes, int], np.ndarray] = {}
        if snapshot.index_manifest is not None:
            for entry in read_index_manifest(table.file_io, table.paths, snapshot.index_manifest):
                if entry.index_file.index_type != HASH_INDEX:
                    continue
                assert (entry.partition, entry.bucket) not in files, "two HASH files, one bucket"
                hashes = read_hash_index(table.file_io, table.paths, entry.index_file)
                assert len(np.unique(hashes)) == len(hashes), "a HASH file repeats a hash"
                assert entry.index_file.row_count == len(hashes)
                files[(entry.partition, entry.bucket)] = hashes
        # Keys of every row version in the live data files, per (partition, bucket).
        owner: dict[tuple[Any, ...], int] = {}
        for split in table.new_scan().plan():
            assert split.total_buckets == -1
            parts = []
            for file_path in split.paths:
                with table.file_io.open_input(file_path) as f:
                    parts.append(pq.read_table(f, columns=[f"_KEY_{k}" for k in key_names]))
            keys = pa.concat_tables(parts).rename_columns(key_names)
            for row in keys.to_pylist():
                key = (split.partition, *(row[k] for k in key_names))
                other = owner.setdefault(key, split.bucket)
                assert other == split.bucket, f"key {key} in buckets {other} and {split.bucket}"
            stored = files.get((split.partition, split.bucket))
            assert stored is not None, f"bucket {split.bucket} holds keys but has no HASH file"
            keys = keys.cast(pa.schema([f.with_nullable(True) for f in keys.schema]))
            hashes = hash_binary_rows(keys, key_names, list(schema.key_types))
            missing = np.setdiff1d(hashes, stored)
            assert len(missing) == 0, f"bucket {split.bucket}: key hashes not in its HASH file"
        stored_keys = {(schema.partition_path_of(k[0]), k[1]) for k in owner}
        assert {(f"month={m}", i) for m, i in self.model} <= stored_keys


def test_dynamic_bucket_state_machine_short() -> None:
    """Default-profile run: short interleavings."""
    DynamicBucketMachine.TestCase.settings = settings(
        max_examples=30, stateful_step_count=16, deadline=None
    )
    DynamicBucketMachine.TestCase().runTest()


@pytest.mark.slow
def test_dynamic_bucket_state_machine_long() -> None:
    """Longer interleavings (``-m slow``)."""
    DynamicBucketMachine.TestCase.settings = settings(
        max_examples=60, stateful_step_count=40, deadline=None
    )
    DynamicBucketMachine.TestCase().runTest()
