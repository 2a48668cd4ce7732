"""merge_schema: new columns added nullable, widenings applied, the rest named; idempotent."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tests.helpers import create_table

from snaplake.errors import SchemaMismatchError
from snaplake.store.format.schema_change import AddColumn, UpdateColumnType
from snaplake.write.schema_merge import merge_data_schema, schema_changes_for

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("month", pa.int32()),
                    ("v", pa.int16()), ("f", pa.float32()), ("s", pa.string())])  # fmt: skip


@pytest.fixture
def table(tmp_path):
    return create_table(tmp_path / "wh", schema=SCHEMA, partition_keys=["month"])


def test_fitting_data_changes_nothing(table):
    data = pa.schema([("s", pa.large_string()), ("v", pa.int8()), ("id", pa.int64()),
                      ("month", pa.int32()), ("f", pa.float32())])  # fmt: skip
    assert schema_changes_for(table.schema(), data) == []


def test_new_columns_and_widenings(table):
    data = pa.schema([("id", pa.int64()), ("month", pa.int32()), ("v", pa.int64()),
                      ("f", pa.float64()), ("s", pa.string()), ("new", pa.string()),
                      ("n2", pa.int32())])  # fmt: skip
    changes = schema_changes_for(table.schema(), data)
    assert [type(c) for c in changes] == [UpdateColumnType, UpdateColumnType, AddColumn, AddColumn]
    merged = merge_data_schema(table.schema_manager, data, has_snapshots=False, identifier="db.t")
    assert merged.id == 1
    assert [(f.name, f.type) for f in merged.arrow_schema] == [
        ("id", pa.int64()), ("month", pa.int32()), ("v", pa.int64()), ("f", pa.float64()),
        ("s", pa.string()), ("new", pa.string()), ("n2", pa.int32()),
    ]  # fmt: skip
    assert not merged.arrow_schema.field("id").nullable  # nullability kept
    again = merge_data_schema(table.schema_manager, data, has_snapshots=True, identifier="db.t")
    assert again.id == 1  # a replayed batch alters nothing
    assert table.schema_manager.list_schema_ids() == [0, 1]


@pytest.mark.parametrize(
    ("column", "arrow_type"),
    [("v", pa.string()), ("f", pa.int64()), ("s", pa.int32()), ("month", pa.int64()),
     ("x", pa.uint64())],
)  # fmt: skip
def test_columns_that_cannot_widen_are_named(table, column, arrow_type):
    data = pa.schema([(column, arrow_type)])
    with pytest.raises(SchemaMismatchError, match=repr(column)):
        merge_data_schema(table.schema_manager, data, has_snapshots=True, identifier="db.t")
    assert table.schema_manager.list_schema_ids() == [0]


def test_a_concurrent_writer_adding_the_same_column_is_absorbed(table):
    manager = table.schema_manager
    other = type(manager)(manager.file_io, manager.paths)
    data = pa.schema([("id", pa.int64()), ("new", pa.string())])
    real_create = manager.create
    raced: list[int] = []

    def create(schema):
        if not raced:
            raced.append(schema.id)
            merge_data_schema(other, data, has_snapshots=False, identifier="db.t")
        return real_create(schema)

    manager.create = create
    merged = merge_data_schema(manager, data, has_snapshots=False, identifier="db.t")
    assert merged.id == 1  # the other writer's alter; ours had nothing left to do
    assert manager.list_schema_ids() == [0, 1]
