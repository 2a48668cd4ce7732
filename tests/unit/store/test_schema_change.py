"""alter_table: schema-N+1 in Paimon JSON, field ids, rules (typed, nothing written), races."""

from __future__ import annotations

import json
import re
import threading

import pyarrow as pa
import pytest
from tests.helpers import create_table

import snaplake
from snaplake import SchemaChange
from snaplake.commit.schema_alter import commit_schema_changes
from snaplake.errors import (
    ColumnAlreadyExistsError,
    ColumnNotFoundError,
    InvalidOptionError,
    SchemaChangeError,
    SchemaConflictError,
    TableNotFoundError,
    UnsupportedTableError,
    UnsupportedTypeError,
)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("carrier", pa.string()),
        pa.field("flight", pa.int32()),
        pa.field("point", pa.struct([("x", pa.int32()), ("y", pa.int32())])),
    ]
)


@pytest.fixture
def table(catalog):
    return create_table(catalog, schema=SCHEMA, partition_keys=["month"])


def _commit_rows(table, n=1):
    w = table.new_write(commit_user="u")
    w.write_arrow(
        pa.table(
            {
                "id": pa.array([n], pa.int64()),
                "month": pa.array([1], pa.int32()),
                "carrier": ["AA"],
                "flight": pa.array([7], pa.int32()),
                "point": pa.array([{"x": 1, "y": 2}], SCHEMA.field("point").type),
            },
            schema=table.arrow_schema,
        )
    )
    table.new_commit(commit_user="u").commit(w.prepare_commit(), commit_identifier=n)


def _schema_file(table, schema_id):
    return json.loads(table.file_io.read_bytes(table.paths.schema_path(schema_id)))


def test_each_change_set_writes_the_next_schema_file_in_paimon_json(catalog, table):
    new = catalog.alter_table(
        "db.t",
        [
            SchemaChange.add_column("delay_reason", pa.string(), comment="why"),
            SchemaChange.rename_column("carrier", "airline"),
            SchemaChange.update_column_type("flight", pa.int64()),
            SchemaChange.update_column_comment("flight", "flight number"),
            SchemaChange.set_option("snapshot.num-retained.min", "20"),
            SchemaChange.update_comment("flights from NYC"),
        ],
    )
    assert new is not None
    assert new.id == 1
    assert table.schema_id == 1
    assert sorted(table.schemas()) == [0, 1]
    doc = _schema_file(table, 1)
    assert doc["version"] == 3
    assert doc["id"] == 1
    # point's nested x, y took ids 4, 5 and point 6 at creation: the new column is 7
    assert doc["highestFieldId"] == 7
    assert doc["fields"][:4] == [
        {"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
        {"id": 1, "name": "month", "type": "INT"},
        {"id": 2, "name": "airline", "type": "STRING"},
        {"id": 3, "name": "flight", "type": "BIGINT", "description": "flight number"},
    ]
    assert doc["fields"][-1] == {
        "id": 7, "name": "delay_reason", "type": "STRING", "description": "why"
    }  # fmt: skip
    assert doc["options"]["snapshot.num-retained.min"] == "20"
    assert doc["comment"] == "flights from NYC"
    assert doc["partitionKeys"] == ["month"]
    assert _schema_file(table, 0)["fields"][2]["name"] == "carrier"  # schema-0 untouched


def test_field_ids_are_never_reused(catalog, table):
    catalog.alter_table("db.t", [SchemaChange.drop_column("carrier")])
    catalog.alter_table("db.t", [SchemaChange.add_column("carrier", pa.string())])
    schema = table.schema()
    ids = {f["name"]: f["id"] for f in schema.fields}
    assert ids["carrier"] == 7  # not 2 again
    assert schema.highest_field_id == 7
    catalog.alter_table("db.t", [SchemaChange.drop_column("carrier")])
    assert table.schema().highest_field_id == 7  # kept after the drop


def test_nested_added_column_takes_ids_after_it(catalog, table):
    catalog.alter_table(
        "db.t", [SchemaChange.add_column("geo", pa.struct([("lat", pa.float64())]))]
    )
    geo = next(f for f in table.schema().fields if f["name"] == "geo")
    assert geo["id"] == 7
    assert geo["type"]["fields"][0]["id"] == 8
    assert table.schema().highest_field_id == 8


def test_positions(catalog, table):
    catalog.alter_table(
        "db.t",
        [
            SchemaChange.add_column("a", pa.int32(), first=True),
            SchemaChange.add_column("b", pa.int32(), after="month"),
            SchemaChange.update_column_position("flight", before="id"),
        ],
    )
    assert table.schema().field_names == ["a", "flight", "id", "month", "b", "carrier", "point"]


def test_add_column_before_partition_option(catalog, tmp_path):
    t = catalog.create_table(
        "db.p",
        schema=pa.schema([("x", pa.int32()), ("month", pa.int32())]),
        partition_keys=["month"],
        options={"add-column-before-partition": "true"},
    )
    catalog.alter_table("db.p", [SchemaChange.add_column("y", pa.string())])
    assert t.schema().field_names == ["x", "y", "month"]


def test_rename_of_a_bucket_key_renames_the_option(catalog):
    t = catalog.create_table(
        "db.b", schema=SCHEMA, options={"bucket": "2", "bucket-key": "carrier,flight"}
    )
    catalog.alter_table("db.b", [SchemaChange.rename_column("carrier", "airline")])
    assert t.options["bucket-key"] == "airline,flight"


def test_later_changes_see_earlier_ones(catalog, table):
    catalog.alter_table(
        "db.t",
        [
            SchemaChange.add_column("tmp", pa.int8()),
            SchemaChange.rename_column("tmp", "small"),
            SchemaChange.update_column_type("small", pa.int16()),
        ],
    )
    assert table.schema().field_type("small").sql() == "SMALLINT"


def test_options_take_effect_for_writers_and_maintenance_opened_afterwards(catalog, table):
    _commit_rows(table)
    committer = table.new_commit(commit_user="u")
    assert committer.retry_policy(table.schema()).max_retries == 10
    catalog.alter_table("db.t", [SchemaChange.set_option("commit.max-retries", "3")])
    fresh = catalog.get_table("db.t")
    assert fresh.new_commit(commit_user="u").retry_policy(fresh.schema()).max_retries == 3
    assert table.schema().core_options.commit_max_retries == 3  # same Table object, next call


# ---------------------------------------------------------------- rules: refused, nothing written
def _refused(catalog, table, change, error=SchemaChangeError, rule=None, match=None):
    before = table.schema_manager.list_schema_ids()
    with pytest.raises(error, match=match) as info:
        catalog.alter_table("db.t", [change])
    assert table.schema_manager.list_schema_ids() == before
    if rule is not None:
        assert info.value.rule == rule
    return info.value


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (SchemaChange.drop_column("month"), "partition-key"),
        (SchemaChange.rename_column("month", "m"), "partition-key"),
        (SchemaChange.update_column_type("month", pa.int64()), "partition-key"),
        (SchemaChange.update_column_type("flight", pa.int16()), "type-widening"),
        (SchemaChange.update_column_type("flight", pa.string()), "type-widening"),
        (SchemaChange.update_column_type("carrier", "VARCHAR(10)"), "type-widening"),
        (SchemaChange.update_column_type("flight", pa.float32()), "type-widening"),
        (SchemaChange.add_column("z", "INT NOT NULL"), "not-null"),
        (SchemaChange.update_column_nullability("flight", False), "not-null"),
        (SchemaChange.set_option("type", "format-table"), "immutable-option"),
        (SchemaChange.remove_option("bucket"), "required-option"),
        (SchemaChange.add_column("blob", pa.binary(), comment="__BLOB_FIELD"), "column-directive"),
        (SchemaChange.set_option("bucket", "0"), "table-schema"),
    ],
)
def test_rules_are_refused_with_nothing_written(catalog, table, change, rule):
    _refused(catalog, table, change, rule=rule)


@pytest.mark.parametrize("disabled", ["true", "false"])
def test_no_explicit_cast_whatever_disable_explicit_type_casting_says(catalog, table, disabled):
    """Paimon allows explicit (lossy) casts unless the option is true; snaplake never makes one."""
    catalog.alter_table("db.t", [SchemaChange.set_option("disable-explicit-type-casting",
                                                         disabled)])  # fmt: skip
    _refused(catalog, table, SchemaChange.update_column_type("flight", pa.int16()),
             rule="type-widening")  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value"),
    [("file.format", "lance"), ("file.compression", "nope")],
)  # fmt: skip
def test_options_create_table_refuses_are_refused_by_alter_too(catalog, table, key, value):
    """An alter must not make a table that every later read or write refuses."""
    _refused(catalog, table, SchemaChange.set_option(key, value), error=UnsupportedTableError,
             match=re.escape(key))  # fmt: skip


def test_not_null_add_is_refused_on_an_empty_table_too(catalog, table):
    """Paimon refuses a NOT NULL added column on any table (rows written later would need it)."""
    _refused(catalog, table, SchemaChange.add_column("z", "BIGINT NOT NULL"), rule="not-null")


def test_the_last_value_column_cannot_be_dropped(catalog):
    t = catalog.create_table(
        "db.t", schema=pa.schema([("v", pa.int32()), ("month", pa.int32())]),
        partition_keys=["month"],
    )  # fmt: skip
    err = _refused(catalog, t, SchemaChange.drop_column("v"), rule="last-value-column")
    assert "last column outside the partition keys" in str(err)


def test_bucket_key_cannot_be_dropped_or_retyped(catalog):
    t = catalog.create_table("db.t", schema=SCHEMA, options={"bucket": "2", "bucket-key": "flight"})
    _refused(catalog, t, SchemaChange.drop_column("flight"), rule="bucket-key")
    _refused(catalog, t, SchemaChange.update_column_type("flight", pa.int64()), rule="bucket-key")


def test_options_frozen_once_the_table_has_snapshots(catalog, table):
    catalog.alter_table("db.t", [SchemaChange.set_option("merge-engine", "deduplicate")])
    catalog.alter_table("db.t", [SchemaChange.remove_option("merge-engine")])
    _commit_rows(table)
    _refused(catalog, table, SchemaChange.set_option("merge-engine", "first-row"),
             rule="immutable-option")  # fmt: skip
    _refused(catalog, table, SchemaChange.set_option("bucket-key", "flight"),
             rule="immutable-option")  # fmt: skip
    _refused(catalog, table, SchemaChange.set_option("bucket", "4"), rule="bucket-rescale")


def test_not_null_needs_the_option_and_an_empty_table(catalog, table):
    catalog.alter_table(
        "db.t", [SchemaChange.set_option("alter-column-null-to-not-null.disabled", "false")]
    )
    catalog.alter_table("db.t", [SchemaChange.update_column_nullability("flight", False)])
    assert not table.schema().field_type("flight").nullable
    catalog.alter_table("db.t", [SchemaChange.update_column_nullability("flight", True)])
    _commit_rows(table)
    _refused(catalog, table, SchemaChange.update_column_nullability("flight", False),
             rule="not-null")  # fmt: skip


def test_names(catalog, table):
    _refused(catalog, table, SchemaChange.rename_column("nope", "x"), ColumnNotFoundError)
    _refused(catalog, table, SchemaChange.drop_column("nope"), ColumnNotFoundError)
    _refused(catalog, table, SchemaChange.rename_column("carrier", "flight"),
             ColumnAlreadyExistsError)  # fmt: skip
    _refused(catalog, table, SchemaChange.add_column("carrier", pa.string()),
             ColumnAlreadyExistsError)  # fmt: skip
    _refused(catalog, table, SchemaChange.add_column("x", pa.int32(), after="nope"),
             ColumnNotFoundError)  # fmt: skip
    _refused(catalog, table, SchemaChange.update_column_position("id", first=True),
             rule="move-itself")  # fmt: skip


def test_bad_values(catalog, table):
    _refused(catalog, table, SchemaChange.set_option("commit.max-retries", "many"),
             InvalidOptionError)  # fmt: skip
    _refused(catalog, table, SchemaChange.set_option("snaplake.typo", "1"), InvalidOptionError)
    with pytest.raises(UnsupportedTypeError):
        SchemaChange.add_column("x", pa.uint64())
    with pytest.raises(ValueError, match="not both"):
        SchemaChange.add_column("x", pa.int32(), first=True, after="id")
    with pytest.raises(ValueError, match="at least one"):
        catalog.alter_table("db.t", [])
    with pytest.raises(TableNotFoundError):
        catalog.alter_table("db.nope", [SchemaChange.drop_column("x")])
    assert catalog.alter_table("db.nope", [SchemaChange.drop_column("x")],
                               ignore_if_not_exists=True) is None  # fmt: skip
    # a refused change anywhere in the list leaves nothing of the others
    before = table.schema_manager.list_schema_ids()
    with pytest.raises(SchemaChangeError):
        catalog.alter_table(
            "db.t", [SchemaChange.add_column("ok", pa.int32()), SchemaChange.drop_column("month")]
        )
    assert table.schema_manager.list_schema_ids() == before


# ----------------------------------------------------------------------------- concurrent alters
def _race(table, winner_changes):
    """A SchemaManager whose first create loses to ``winner_changes`` committed just before."""
    manager = table.schema_manager
    real_create = manager.create
    calls: list[int] = []

    def create(schema):
        if not calls:
            calls.append(schema.id)
            other = type(manager)(manager.file_io, manager.paths)
            commit_schema_changes(other, winner_changes, has_snapshots=lambda: False,
                                  identifier="db.t")  # fmt: skip
        return real_create(schema)

    manager.create = create
    return manager


def test_concurrent_alters_that_fit_both_land(table):
    manager = _race(table, [SchemaChange.add_column("a", pa.int32())])
    new = commit_schema_changes(
        manager, [SchemaChange.add_column("b", pa.int32())], has_snapshots=lambda: False,
        identifier="db.t",
    )  # fmt: skip
    assert new.id == 2
    fields = {f["name"]: f["id"] for f in new.fields}
    assert (fields["a"], fields["b"]) == (7, 8)  # re-applied on the winner: no id reused
    assert new.highest_field_id == 8


@pytest.mark.parametrize(
    ("winner", "loser"),
    [
        (SchemaChange.rename_column("carrier", "airline"),
         SchemaChange.rename_column("carrier", "operator")),
        (SchemaChange.add_column("x", pa.int32()), SchemaChange.add_column("x", pa.string())),
        (SchemaChange.drop_column("flight"), SchemaChange.update_column_type("flight", pa.int64())),
    ],
)  # fmt: skip
def test_concurrent_alters_that_clash_fail_typed(table, winner, loser):
    manager = _race(table, [winner])
    with pytest.raises(SchemaConflictError) as info:
        commit_schema_changes(manager, [loser], has_snapshots=lambda: False, identifier="db.t")
    assert info.value.schema_id == 1
    assert isinstance(info.value.__cause__, SchemaChangeError)
    assert table.schema_manager.list_schema_ids() == [0, 1]  # the loser wrote nothing


def test_threads_racing_alters_each_land_exactly_once(catalog, table):
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def alter(i: int) -> None:
        cat = snaplake.FileSystemCatalog(catalog.warehouse)
        barrier.wait()
        try:
            for j in range(5):
                cat.alter_table("db.t", [SchemaChange.add_column(f"c{i}_{j}", pa.int32())])
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=alter, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert table.schema_manager.list_schema_ids() == list(range(21))
    schema = table.schema()
    added = [f for f in schema.fields if f["name"][0] == "c" and "_" in f["name"]]
    assert len(added) == 20
    assert sorted(f["id"] for f in added) == list(range(7, 27))
    assert schema.highest_field_id == 26
