"""Bad input gets a clear typed error, and the table still reads afterwards."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, create_table, rows, write_and_commit

import snaplake
from snaplake.errors import (
    CorruptMetadataError,
    InvalidNameError,
    SchemaMismatchError,
    UnsupportedTypeError,
)


@pytest.fixture
def table(tmp_path):
    t = create_table(tmp_path / "wh", partition_keys=["month"])
    write_and_commit(t, rows(0, 30), commit_user="u", commit_identifier=1)
    return t


def _data_files(table):
    return [s.path for s in table.file_io.list_files(table.root) if s.path.endswith(".parquet")]


def test_schema_mismatch_is_refused_before_any_file(table):
    before = _data_files(table)
    w = table.new_write(commit_user="u")
    with pytest.raises(SchemaMismatchError, match="missing"):
        w.write_arrow(rows(0, 3).drop_columns(["carrier"]))
    with pytest.raises(SchemaMismatchError, match="unexpected"):
        w.write_arrow(rows(0, 3).append_column("extra", pa.array([1, 2, 3])))
    with pytest.raises(SchemaMismatchError, match="distance"):
        w.write_arrow(rows(0, 3).set_column(3, "distance", pa.array(["a", "b", "c"])))
    bad_nulls = rows(0, 3).set_column(0, pa.field("id", pa.int64()), pa.array([1, None, 3]))
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        w.write_arrow(bad_nulls)
    assert w.prepare_commit() == []
    assert _data_files(table) == before
    assert table.to_arrow().num_rows == 30


def test_compatible_types_are_cast(table):
    w = table.new_write(commit_user="u")
    data = rows(100, 3)
    data = data.set_column(2, "carrier", data.column("carrier").cast(pa.large_string()))
    data = data.set_column(1, "month", data.column("month").cast(pa.int8()))
    w.write_arrow(data.select(list(reversed(data.column_names))))
    table.new_commit(commit_user="u").commit(w.prepare_commit(), commit_identifier=2)
    assert table.to_arrow().num_rows == 33


def test_partition_key_not_in_schema(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    with pytest.raises(SchemaMismatchError, match="nope"):
        catalog.create_table("db.x", schema=SCHEMA, partition_keys=["nope"])
    with pytest.raises(SchemaMismatchError, match="bucket-key"):
        catalog.create_table("db.x", schema=SCHEMA, options={"bucket": "4"})
    assert not catalog.table_exists("db.x")


def test_unsupported_type(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    with pytest.raises(UnsupportedTypeError):
        catalog.create_table("db.x", schema=pa.schema([("u", pa.uint64())]))


def test_corrupt_snapshot_json_names_the_file(table):
    path = table.paths.snapshot_path(1)
    with open(path, "rb") as f:
        good = f.read()
    os.chmod(path, 0o644)
    with open(path, "wb") as f:
        f.write(good[: len(good) // 2])
    with pytest.raises(CorruptMetadataError) as err:
        table.to_arrow()
    assert err.value.path == path
    with open(path, "wb") as f:
        f.write(good)
    assert table.to_arrow().num_rows == 30


def test_truncated_manifest_names_the_file(table):
    snap = table.latest_snapshot()
    delta = table.new_scan()._scan.manifest_metas()[-1]
    path = table.paths.manifest_path(delta.file_name)
    with open(path, "rb") as f:
        good = f.read()
    with open(path, "wb") as f:
        f.write(good[:40])
    from snaplake.store.format.decoded_cache import metadata_cache

    metadata_cache.clear()
    with pytest.raises(CorruptMetadataError) as err:
        table.to_arrow()
    assert err.value.path == path
    with open(path, "wb") as f:
        f.write(good)
    metadata_cache.clear()
    assert table.to_arrow(snapshot_id=snap.id).num_rows == 30


@pytest.mark.parametrize("value", ["a/b", "x=y", "..", "../..", "50%", "a b:c", "", None])
def test_awkward_partition_values_are_escaped(tmp_path, value):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    schema = pa.schema([("p", pa.string()), ("v", pa.int64())])
    t = catalog.create_table("db.p", schema=schema, partition_keys=["p"])
    write_and_commit(
        t,
        pa.table({"p": [value, "plain"], "v": [1, 2]}, schema=schema),
        commit_user="u",
        commit_identifier=1,
    )
    table_root = os.path.realpath(t.root)
    for s in t.file_io.list_files(str(tmp_path)):
        if s.path.endswith(".snaplake-database"):
            continue
        assert os.path.realpath(s.path).startswith(table_root + os.sep)
    got = t.to_arrow(partition_filter={"p": value})
    if value == "":  # Paimon stores empty and null partition values as the default partition
        assert got.num_rows in (0, 1)
    else:
        assert got.column("v").to_pylist() == [1]
    assert sorted(t.to_arrow().column("v").to_pylist()) == [1, 2]


@pytest.mark.parametrize("name", ["db.t\n", "db\n.t", "db.t\r", "db.t\x00"])
def test_names_are_matched_in_full(tmp_path, name):
    """A final newline used to pass the name check (``$`` matches before it)."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_table("db.t", schema=SCHEMA)
    with pytest.raises(InvalidNameError, match="invalid") as info:
        catalog.create_table(name, schema=SCHEMA)
    assert info.value.name in (name, *name.split("."))
    assert catalog.list_tables("db") == ["t"]


def test_tag_and_consumer_names_are_matched_in_full(table):
    for bad in ["v1\n", "v1\nv2", "v\x001"]:
        with pytest.raises(InvalidNameError, match="invalid tag name"):
            table.create_tag(bad)
    with pytest.raises(InvalidNameError, match="invalid consumer id"):
        table.set_consumer("reader\n", next_snapshot=1)
    assert table.list_tags() == []
    assert table.consumers() == {}


def test_snapshot_and_schema_file_names_are_matched_in_full():
    from snaplake.store.format.paths import PathFactory

    assert PathFactory.parse_snapshot_id("snapshot-3") == 3
    assert PathFactory.parse_snapshot_id("snapshot-3\n") is None
    assert PathFactory.parse_schema_id("schema-0\n") is None
