"""LookupLevels: the streaming positional lookup of key-sorted chunks in higher levels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.helpers import write_and_commit
from tests.pk_helpers import PK_SCHEMA, to_table

import snaplake
from snaplake.mergetree.kv import key_column
from snaplake.mergetree.lookup import (
    LOOKUP_FILE,
    LOOKUP_LEVEL,
    LOOKUP_POSITION,
    LOOKUP_ROW,
    LookupKeyCache,
    LookupLevels,
)
from snaplake.mergetree.read import BucketFiles, read_context
from snaplake.store.format.deletion_vector import DeletionVector
from snaplake.store.read.scan import FileStoreScan


def _rows(ids: list[int], tag: str) -> pa.Table:
    return to_table([{"month": 1, "id": i, "name": f"{tag}{i}", "qty": i, "price": 1.0,
                      "ok": True} for i in ids])  # fmt: skip


def _levels(tmp_path: Path) -> tuple[snaplake.Table, list[Any], list[Any]]:
    """One bucket: ids 0..99 (even) at level 3, ids 0..49 (multiples of 3) at level 2."""
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=PK_SCHEMA, primary_keys=["id"],
        options={"bucket": "1", "num-levels": "4", "target-file-size": "1 kb",
                 "write-only": "true", "deletion-vectors.enabled": "true"},
    )  # fmt: skip
    write_and_commit(table, _rows(list(range(0, 100, 2)), "old"))
    table.compact(full=True)  # level 3, several files (1 kb target)
    files = _live(table)
    write_and_commit(table, _rows(list(range(0, 50, 3)), "new"))
    return table, files, []


def _live(table: snaplake.Table) -> list[Any]:
    scan = FileStoreScan(
        file_io=table.file_io, paths=table.paths, schema_manager=table.schema_manager,
        snapshot=table.latest_snapshot(),
    )  # fmt: skip
    return [(f, p) for s in scan.plan() for f, p in zip(s.files, s.paths, strict=True)]


def _keys(ids: list[int]) -> pa.Table:
    return pa.table({key_column("id"): pa.array(ids, pa.int64())})


def test_lookup_finds_file_position_and_record_streaming(tmp_path: Path) -> None:
    table, files, _ = _levels(tmp_path)
    assert len(files) >= 2 and {f.level for f, _ in files} == {3}
    schema = table.schema()
    ctx = read_context(table.file_io, schema)
    # position 3 of the first file is deleted: that key is not live there
    first = min(files, key=lambda fp: fp[0].file_name)
    dead = pq.read_table(first[1]).column("id")[3].as_py()
    vectors = {first[0].file_name: DeletionVector.from_positions([3])}
    bucket = BucketFiles([f for f, _ in files], [p for _, p in files], vectors)
    lookup = LookupLevels(ctx, bucket, value_columns=["name"], batch_rows=7)
    seen: dict[int, tuple[str, int]] = {}
    for chunk in ([1, 2, 4, 9], [10, 11, 40], [41, 62, 98, 99, 150]):
        found = lookup.lookup(_keys(chunk))
        assert found.column(LOOKUP_ROW).to_pylist() == sorted(found.column(LOOKUP_ROW).to_pylist())
        for row in found.to_pylist():
            key = chunk[row[LOOKUP_ROW]]
            assert row[key_column("id")] == key and row["name"] == f"old{key}"
            assert row[LOOKUP_LEVEL] == 3
            seen[key] = (row[LOOKUP_FILE], row[LOOKUP_POSITION])
    expected = {k for k in (2, 4, 10, 40, 62, 98) if k != dead}
    assert set(seen) == expected
    paths = {f.file_name: p for f, p in files}
    for key, (name, pos) in seen.items():  # the position is the row's ordinal in its file
        assert pq.read_table(paths[name]).column("id")[pos].as_py() == key
    with pytest.raises(ValueError, match="ascending"):
        lookup.lookup(_keys([5]))


def test_lookup_prefers_the_lowest_level_and_refuses_level0(tmp_path: Path) -> None:
    table, _, _ = _levels(tmp_path)
    table.compact()  # the level-0 file goes up (below level 3), its keys marked in level 3
    live = _live(table)
    assert {f.level for f, _ in live} >= {3} and len({f.level for f, _ in live}) == 2
    ctx = read_context(table.file_io, table.schema())
    bucket = BucketFiles([f for f, _ in live], [p for _, p in live])  # vectors not applied
    found = LookupLevels(ctx, bucket, value_columns=["name"]).lookup(_keys([0, 2, 6, 7]))
    names = dict(zip(found.column(LOOKUP_ROW).to_pylist(), found.column("name").to_pylist(),
                     strict=True))  # fmt: skip
    assert names == {0: "new0", 1: "old2", 2: "new6"}  # key 6 at both levels: the lower wins
    write_and_commit(table, _rows([1], "x"))  # write-only: stays at level 0
    zero = [(f, p) for f, p in _live(table) if f.level == 0]
    with pytest.raises(ValueError, match="levels >= 1"):
        LookupLevels(ctx, BucketFiles([zero[0][0]], [zero[0][1]]))


def test_key_cache_is_bounded_and_serves_later_lookups(tmp_path: Path) -> None:
    table, files, _ = _levels(tmp_path)
    ctx = read_context(table.file_io, table.schema())
    bucket = BucketFiles([f for f, _ in files], [p for _, p in files])
    keys = _keys(list(range(0, 100, 5)))
    want = LookupLevels(ctx, bucket, value_columns=["name"], cache=None).lookup(keys)
    assert want.num_rows == 10
    roomy = LookupKeyCache()
    assert LookupLevels(ctx, bucket, value_columns=["name"], cache=roomy).lookup(keys) == want
    assert roomy.nbytes > 0
    for _, p in files:  # a later lookup reads no key column: the files may even be gone
        Path(p).rename(p + ".moved")
    with pytest.raises(FileNotFoundError):  # values are still read from the files
        LookupLevels(ctx, bucket, value_columns=["name"], cache=roomy).lookup(keys)
    found = LookupLevels(ctx, bucket, cache=roomy).lookup(keys)
    assert found.column(LOOKUP_POSITION) == want.column(LOOKUP_POSITION)
    tight = LookupKeyCache(max_bytes=roomy.nbytes // 2)
    for _, p in files:
        Path(p + ".moved").rename(p)
    assert LookupLevels(ctx, bucket, value_columns=["name"], cache=tight).lookup(keys) == want
    assert 0 < tight.nbytes <= tight.max_bytes
