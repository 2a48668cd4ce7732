"""check_supported: the one decision about what snaplake refuses to do with a table."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import snaplake
from snaplake.errors import SchemaMismatchError, UnsupportedTableError
from snaplake.store.format.schema import TableSchema
from snaplake.store.support import Operation, check_supported

_SCHEMA = pa.schema([("id", pa.int64()), ("b", pa.binary()), ("v", pa.string())])


def test_primary_key_tables_pass_unless_they_use_what_the_merge_tree_lacks():
    schema = TableSchema.from_arrow(_SCHEMA, options={"primary-key": "id", "bucket": "2"})
    assert schema.primary_keys == ("id",)
    assert "primary-key" not in schema.options  # moved into the schema, as Paimon does
    for op in Operation:
        check_supported(schema, op)
    with_dv = dataclasses.replace(
        schema, options={**schema.options, "deletion-vectors.enabled": "true"}
    )
    for op in Operation:
        with pytest.raises(UnsupportedTableError, match="deletion vectors") as info:
            check_supported(with_dv, op)
        assert info.value.operation == op.value
    dynamic = dataclasses.replace(schema, options={**schema.options, "bucket": "-1"})
    check_supported(dynamic, Operation.READ)  # another engine's dynamic-bucket table reads
    for op in (Operation.WRITE, Operation.COMMIT, Operation.MAINTENANCE):
        with pytest.raises(UnsupportedTableError, match="bucket = -1"):
            check_supported(dynamic, op)


def test_append_tables_pass():
    schema = TableSchema.from_arrow(_SCHEMA, partition_keys=["v"])
    for op in Operation:
        check_supported(schema, op)


def test_binary_partition_keys_are_read_only():
    schema = TableSchema.from_arrow(_SCHEMA, partition_keys=["b"])
    check_supported(schema, Operation.READ)
    for op in (Operation.CREATE, Operation.WRITE, Operation.COMMIT, Operation.MAINTENANCE):
        with pytest.raises(UnsupportedTableError, match="BINARY") as info:
            check_supported(schema, op)
        assert info.value.feature == "BINARY partition key"


def test_partition_option_becomes_the_partition_keys(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table("db.t", schema=_SCHEMA, options={"partition": "v"})
    assert table.partition_keys == ["v"]
    assert "partition" not in table.options
    with pytest.raises(SchemaMismatchError, match="both"):
        catalog.create_table(
            "db.u", schema=_SCHEMA, partition_keys=["v"], options={"partition": "v"}
        )


def test_create_refuses_binary_partition_keys_before_writing(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    with pytest.raises(UnsupportedTableError, match="BINARY"):
        catalog.create_table("db.t", schema=_SCHEMA, partition_keys=["b"])
    assert not any(tmp_path.iterdir())
