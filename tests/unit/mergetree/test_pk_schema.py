"""Creating primary-key tables: Paimon's schema rules, refusals before anything is written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from tests.helpers import write_and_commit

from snaplake import SchemaChange
from snaplake.catalog import FileSystemCatalog
from snaplake.errors import (
    InvalidOptionError,
    SchemaChangeError,
    SchemaMismatchError,
    UnsupportedTableError,
)

_SCHEMA = pa.schema(
    [("month", pa.int32()), ("id", pa.int64()), ("v", pa.string()), ("n", pa.int64())]
)


def test_primary_key_schema(tmp_path: Path) -> None:
    catalog = FileSystemCatalog(str(tmp_path))
    table = catalog.create_table(
        "db.t",
        schema=_SCHEMA,
        partition_keys=["month"],
        options={"bucket": "2", "primary-key": "month, id"},
    )
    schema = table.schema()
    assert schema.primary_keys == ("month", "id")
    assert "primary-key" not in schema.options  # moved into primaryKeys, as Paimon does
    assert schema.trimmed_primary_keys == ("id",)
    assert schema.bucket_keys == ("id",)
    assert [f["type"] for f in schema.fields] == ["INT NOT NULL", "BIGINT NOT NULL", "STRING",
                                                  "BIGINT"]  # fmt: skip
    assert table.arrow_schema.field("id").nullable is False
    nullable = catalog.create_table(
        "db.n",
        schema=_SCHEMA,
        primary_keys=["id"],
        options={"bucket": "1", "primary-key.nullable": "true"},
    )
    assert nullable.arrow_schema.field("id").nullable is True


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"primary_keys": ["id"], "partition_keys": ["month"]}, SchemaMismatchError,
         "must contain every partition key"),
        ({"primary_keys": ["month"], "partition_keys": ["month"]}, SchemaMismatchError,
         "equals the partition keys"),
        ({"primary_keys": ["nope"]}, SchemaMismatchError, "not a column"),
        ({"primary_keys": ["id"], "options": {"bucket": "-3"}}, SchemaMismatchError,
         "bucket = -3"),
        ({"primary_keys": ["id"], "options": {"bucket-key": "id"}}, SchemaMismatchError,
         "'bucket-key' cannot be set with bucket = -1"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "upsert"}},
         InvalidOptionError, "unknown merge-engine"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "aggregation",
                                              "fields.n.aggregate-function": "count"}},
         InvalidOptionError, "no 'count'"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "aggregation",
                                              "fields.n.aggregate-function": "median"}},
         InvalidOptionError, "not an aggregate function"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "aggregation",
                                              "fields.v.aggregate-function": "sum"}},
         InvalidOptionError, "does not fit"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "aggregation",
                                              "fields.n.aggregate-function": "rbm64"}},
         UnsupportedTableError, "does not merge"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "first-row",
                                              "deletion-vectors.enabled": "true"}},
         InvalidOptionError, "deletion vectors"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "deletion-vectors.enabled": "true",
                                              "changelog-producer": "full-compaction"}},
         InvalidOptionError, "deletion vectors need changelog-producer"),
        ({"primary_keys": ["id"], "options": {"bucket": "2",
                                              "changelog-producer": "on-read"}},
         UnsupportedTableError, "changelog"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "merge-engine": "partial-update",
                                              "fields.n.sequence-group": "v"}},
         UnsupportedTableError, "sequence groups"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "sequence.field": "zz"}},
         SchemaMismatchError, "sequence.field"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "rowkind.field": "n"}},
         SchemaMismatchError, "STRING"),
        ({"primary_keys": ["id"], "options": {"bucket": "2", "bucket-key": "v"}},
         SchemaMismatchError, "bucket key"),
        *(({"primary_keys": ["id"], "options": {"bucket": "2", key: value}},
           UnsupportedTableError, re.escape(key)) for key, value in (
            ("sequence.snapshot-ordering", "true"), ("data-file.thin-mode", "true"),
            ("record-level.expire-time", "1 d"), ("compaction.force-up-level-0", "true"),
            ("write.sequence-number-init-mode", "snapshot"),
            ("compaction.optimization-interval", "1 h"), ("pk-clustering-override", "true"),
            ("aggregation.remove-record-on-delete", "true"),
            ("partial-update.remove-record-on-sequence-group", "v"))),
    ],
)  # fmt: skip
def test_refused_before_anything_is_written(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    catalog = FileSystemCatalog(str(tmp_path))
    kwargs.setdefault("options", {"bucket": "2"})
    with pytest.raises(error, match=match):
        catalog.create_table("db.t", schema=_SCHEMA, **kwargs)
    assert not catalog.table_exists("db.t")
    assert not any(tmp_path.iterdir())


def test_scan_bucket_refuses_reads_only(tmp_path: Path) -> None:
    """``scan.bucket`` (Paimon reads one bucket) is refused for reads; writes are unaffected."""
    catalog = FileSystemCatalog(str(tmp_path))
    table = catalog.create_table("db.t", schema=_SCHEMA, primary_keys=["id"],
                                 options={"bucket": "2", "scan.bucket": "1"})  # fmt: skip
    write_and_commit(
        table,
        pa.table({"month": [1], "id": [7], "v": ["x"], "n": [2]}, schema=_SCHEMA),
        commit_user="u",
    )
    with pytest.raises(UnsupportedTableError, match=r"scan\.bucket"):
        table.to_arrow()


_AGG = {"bucket": "2", "merge-engine": "aggregation"}


@pytest.mark.parametrize(
    ("primary_keys", "options", "match"),
    [
        (["id"], {**_AGG, "fields.nn.aggregate-function": "sum"}, "did you mean 'n'"),
        (["id"], {**_AGG, "fields.N.aggregate-function": "sum"}, "case-sensitive"),
        (["id"], {**_AGG, "fields.N.ignore-retract": "true"}, "case-sensitive"),
        (["id"], {"bucket": "2", "fields.zz,v.sequence-group": "n"}, "'zz'"),
        ([], {"fields.vv.stats-mode": "none"}, "did you mean 'v'"),
    ],
)
def test_fields_options_naming_no_column_are_refused_at_create_as_at_alter(
    tmp_path: Path, primary_keys: list[str], options: dict[str, str], match: str
) -> None:
    """Issue 18 item 3: ``create_table`` stored such a key and then ignored it (a typo'd
    ``aggregate-function`` summed nothing), while ``alter_table`` refused it."""
    catalog = FileSystemCatalog(str(tmp_path))
    key = next(k for k in options if k.startswith("fields."))
    with pytest.raises(InvalidOptionError, match=match) as created:
        catalog.create_table("db.t", schema=_SCHEMA, primary_keys=primary_keys, options=options)
    assert created.value.key == key
    assert not any(tmp_path.iterdir())
    base = {k: v for k, v in options.items() if k != key}
    table = catalog.create_table("db.t", schema=_SCHEMA, primary_keys=primary_keys, options=base)
    with pytest.raises(SchemaChangeError, match=match) as altered:
        catalog.alter_table("db.t", [SchemaChange.set_option(key, options[key])])
    assert altered.value.rule == "option-column"
    assert str(altered.value) == str(created.value)  # one check, one message
    assert table.schema_manager.list_schema_ids() == [0]


def test_a_typo_in_an_aggregate_function_key_cannot_lose_sums(tmp_path: Path) -> None:
    """The reported case: ``fields.distnace.aggregate-function = sum`` read 300, not 600."""
    catalog = FileSystemCatalog(str(tmp_path))
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("distance", pa.int64())])
    with pytest.raises(InvalidOptionError, match="did you mean 'distance'"):
        catalog.create_table(
            "db.t",
            schema=schema,
            primary_keys=["id"],
            options={**_AGG, "fields.distnace.aggregate-function": "sum"},
        )
    table = catalog.create_table(
        "db.t",
        schema=schema,
        primary_keys=["id"],
        options={**_AGG, "fields.distance.aggregate-function": "sum"},
    )
    for i, d in enumerate([100, 200, 300]):
        write_and_commit(
            table,
            pa.table({"id": [1], "distance": [d]}, schema=schema),
            commit_user="u",
            commit_identifier=i,
        )
    assert table.to_arrow().column("distance").to_pylist() == [600]


def test_a_stored_bad_fields_key_can_be_removed_by_an_alter(tmp_path: Path) -> None:
    """A table created before the check keeps working: the alter that removes the key passes."""
    catalog = FileSystemCatalog(str(tmp_path))
    table = catalog.create_table("db.t", schema=_SCHEMA, primary_keys=["id"], options=_AGG)
    doc = orjson.loads(table.file_io.read_bytes(table.paths.schema_path(0)))
    doc["options"]["fields.nn.aggregate-function"] = "sum"
    table.file_io.write_bytes(table.paths.schema_path(0), orjson.dumps(doc), overwrite=True)
    with pytest.raises(SchemaChangeError, match="remove the option"):
        catalog.alter_table("db.t", [SchemaChange.set_option("write-only", "true")])
    catalog.alter_table(
        "db.t",
        [
            SchemaChange.remove_option("fields.nn.aggregate-function"),
            SchemaChange.set_option("fields.n.aggregate-function", "sum"),
        ],
    )
    assert catalog.get_table("db.t").options["fields.n.aggregate-function"] == "sum"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"fields.default-aggregate-function": "summ"}, "not an aggregate function"),
        ({"fields.default-aggregate-function": "count"}, "no 'count'"),
        ({"fields.default-aggregate-function": "sum"}, "set fields.v.aggregate-function"),
    ],
)
def test_a_bad_default_aggregate_function_is_reported_under_its_own_key(
    tmp_path: Path, options: dict[str, str], match: str
) -> None:
    """Issue 18 item 14: the error named ``fields.<column>.aggregate-function``, a key the
    user never wrote."""
    catalog = FileSystemCatalog(str(tmp_path))
    with pytest.raises(InvalidOptionError, match=match) as info:
        catalog.create_table(
            "db.t", schema=_SCHEMA, primary_keys=["id"], options={**_AGG, **options}
        )
    assert info.value.key == "fields.default-aggregate-function"
    assert str(info.value).startswith("fields.default-aggregate-function = ")
    with pytest.raises(InvalidOptionError) as partial:
        catalog.create_table(
            "db.p",
            schema=_SCHEMA,
            primary_keys=["id"],
            options={
                "bucket": "2",
                "merge-engine": "partial-update",
                "fields.default-aggregate-function": "sum",
            },
        )
    assert partial.value.key == "fields.default-aggregate-function"
    assert "fields.default-aggregate-function" in str(partial.value)
