"""Reading deletion-vector tables: each file's vector drops its rows, as Java and pypaimon read.

The tables are written without vectors, then a commit publishes DELETION_VECTORS files
(tests/dv_helpers.py) and a new schema turns ``deletion-vectors.enabled`` on, the state
Spark's DELETE (append tables) or Java's lookup compaction (primary-key tables) leaves.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from tests.dv_helpers import (
    append_dv_table,
    append_positions,
    enable_deletion_vectors,
    pk_dv_table,
    pk_positions,
    rows_without,
)
from tests.helpers import assert_same_rows, rows
from tests.oracle import PaimonOracle, pred, requires_paimon

import snaplake
from snaplake.cli import cli
from snaplake.errors import CorruptMetadataError, InvalidOptionError
from snaplake.store.format.deletion_vector import DeletionVector, write_deletion_vectors_index
from snaplake.store.read.split_read import read_splits


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


@pytest.mark.parametrize("bucket", [-1, 2])
@pytest.mark.parametrize("bitmap64", [False, True])
def test_append_table_reads_without_the_vectors_rows(tmp_path: Path, bucket, bitmap64) -> None:
    table = append_dv_table(tmp_path / "wh", bucket=bucket, bitmap64=bitmap64)
    positions = append_positions(table)
    expected = rows_without(table, positions)
    assert expected.num_rows == 180 - sum(len(p) for p in positions.values())
    assert _sorted(table.to_arrow()) == _sorted(expected)
    splits = table.new_scan().plan()
    carried = {
        r.data_file_name for s in splits for m in s.deletion_files for r in m.dv_ranges or ()
    }
    assert carried == set(positions)
    # projection, filters, limit, batches
    got = table.to_arrow(columns=["carrier", "id"], filter=[("id", ">=", 30), ("month", "=", 1)])
    want = expected.filter(pc.and_(pc.greater_equal(expected["id"], 30),
                                   pc.equal(expected["month"], 1)))  # fmt: skip
    assert _sorted(got) == _sorted(want.select(["carrier", "id"]))
    limited = table.to_arrow(limit=7)
    assert limited.num_rows == 7
    assert set(limited["id"].to_pylist()) <= set(expected["id"].to_pylist())
    batches = pa.Table.from_batches(list(table.to_batches()))
    assert _sorted(batches) == _sorted(expected)
    # time travel: the snapshot before the vectors holds every row
    assert table.to_arrow(snapshot_id=3).num_rows == 180
    table.create_tag("dv", snapshot_id=4)
    assert _sorted(table.to_arrow(tag="dv")) == _sorted(expected)


@requires_paimon
@pytest.mark.parametrize("bucket", [-1, 2])
def test_pypaimon_reads_the_same_rows(tmp_path: Path, bucket) -> None:
    table = append_dv_table(tmp_path / "wh", bucket=bucket)
    oracle = PaimonOracle(tmp_path / "wh")
    assert_same_rows(table.to_arrow(), oracle.read("db.t"))
    columns = ["id", "month", "distance"]
    filtered = table.to_arrow(columns=columns, filter=("month", "=", 2))
    assert_same_rows(filtered, oracle.read("db.t", columns=columns, filter=pred.equal("month", 2)))


@pytest.mark.parametrize("bitmap64", [False, True])
def test_primary_key_table_skips_level0_and_reads_files_raw(tmp_path: Path, bitmap64) -> None:
    table = pk_dv_table(tmp_path / "wh", bitmap64=bitmap64)
    splits = table.new_scan().plan()
    assert splits and all(s.raw_convertible for s in splits)
    assert all(f.level > 0 for s in splits for f in s.files)  # level 0 skipped
    expected = rows_without(table, pk_positions(table), min_level=1)
    assert expected.num_rows == 96
    assert _sorted(table.to_arrow()) == _sorted(expected)
    got = table.to_arrow(columns=["id", "carrier"], filter=("id", "<", 10))
    want = expected.filter(pc.less(expected["id"], 10)).select(["id", "carrier"])
    assert _sorted(got) == _sorted(want)
    assert _sorted(pa.Table.from_batches(list(table.to_batches()))) == _sorted(expected)


def test_merge_on_read_merges_level0_over_the_vectors(tmp_path: Path) -> None:
    table = pk_dv_table(tmp_path / "wh", options={"deletion-vectors.merge-on-read": "true"})
    splits = table.new_scan().plan()
    assert any(f.level == 0 for s in splits for f in s.files)
    assert not any(s.raw_convertible for s in splits)
    model = {r["id"]: r for r in rows_without(table, pk_positions(table), min_level=1).to_pylist()}
    model.update({r["id"]: r for r in rows(0, 20).to_pylist()} | {})
    for i in range(20):
        model[i]["distance"] = -1.0
    expected = pa.Table.from_pylist(list(model.values()), schema=table.arrow_schema)
    assert _sorted(table.to_arrow()) == _sorted(expected)


@requires_paimon
def test_pypaimon_reads_the_primary_key_table_the_same(tmp_path: Path) -> None:
    table = pk_dv_table(tmp_path / "wh")
    assert_same_rows(table.to_arrow(), PaimonOracle(tmp_path / "wh").read("db.t"))


def test_a_corrupt_vector_file_is_named(tmp_path: Path) -> None:
    table = append_dv_table(tmp_path / "wh", bucket=2)
    split = next(s for s in table.new_scan().plan() if s.deletion_files)
    path = split.deletion_paths[0]
    data = bytearray(Path(path).read_bytes())
    ranges = split.deletion_files[0].dv_ranges
    assert ranges
    data[ranges[0].offset + 5] ^= 0xFF  # the magic
    Path(path).write_bytes(bytes(data))
    before = sorted(os.listdir(tmp_path / "wh" / "db.db" / "t" / "index"))
    with pytest.raises(CorruptMetadataError, match=os.path.basename(path)) as info:
        table.to_arrow()
    assert info.value.path == path
    assert sorted(os.listdir(tmp_path / "wh" / "db.db" / "t" / "index")) == before


def test_a_missing_vector_file_is_a_typed_error(tmp_path: Path) -> None:
    table = pk_dv_table(tmp_path / "wh")
    split = next(s for s in table.new_scan().plan() if s.deletion_files)
    os.remove(split.deletion_paths[0])
    with pytest.raises(CorruptMetadataError, match=os.path.basename(split.deletion_paths[0])):
        table.to_arrow()
    with pytest.raises(CorruptMetadataError):
        list(table.to_batches())


@pytest.mark.parametrize(
    "key", ["deletion-vectors.enabled", "deletion-vectors.bitmap64",
            "deletion-vectors.merge-on-read", "deletion-vectors.modifiable"],
)  # fmt: skip
def test_a_bad_deletion_vectors_value_is_refused_before_reading(tmp_path: Path, key) -> None:
    table = append_dv_table(tmp_path / "wh", bucket=2)
    enable_deletion_vectors(table, **{key: "maybe"})
    with pytest.raises(InvalidOptionError, match=key):
        snaplake.FileSystemCatalog(str(tmp_path / "wh")).get_table("db.t").to_arrow()


def test_cli_reads_without_the_deleted_rows(tmp_path: Path) -> None:
    table = append_dv_table(tmp_path / "wh", bucket=-1)
    wh = str(tmp_path / "wh")
    out = tmp_path / "rows.parquet"
    args = ["--warehouse", wh, "read", "db.t", "--filter", "id < 90", "--to-parquet", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    want = table.to_arrow(filter=("id", "<", 90))
    assert want.num_rows < 90
    assert _sorted(pq.read_table(out).cast(want.schema)) == _sorted(want)


def test_several_vector_files_of_one_bucket_are_combined_by_file_name(tmp_path: Path) -> None:
    """An unaware-bucket append table's vector files roll: one split carries several."""
    table = append_dv_table(tmp_path / "wh", bucket=-1)
    split = next(s for s in table.new_scan().plan() if len(s.files) > 1)
    names = [f.file_name for f in split.files]
    metas = [
        write_deletion_vectors_index(
            table.file_io,
            table.paths,
            {name: DeletionVector.from_positions([i, i + 2])},  # one file per data file
        )
        for i, name in enumerate(names)
    ]
    rolled = dataclasses.replace(
        split,
        deletion_files=tuple(metas),
        deletion_paths=tuple(table.paths.index_file_path(m.file_name) for m in metas),
    )
    vectors = rolled.read_deletion_vectors(table.file_io)
    assert sorted(vectors) == sorted(names)
    got = read_splits(table.file_io, [rolled], schema=table.arrow_schema)
    want = rows_without(table, {n: [i, i + 2] for i, n in enumerate(names)})
    want = want.filter(pc.is_in(want["month"], pa.array(split.partition_values, pa.int32())))
    assert _sorted(got) == _sorted(want)
