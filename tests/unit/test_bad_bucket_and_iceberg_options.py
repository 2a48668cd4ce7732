"""Bad bucket options and Iceberg metadata options: typed errors, nothing written (issue 20).

Paimon's ``SchemaValidation.validateBucket`` rejects ``bucket-key`` with
``bucket = -1`` and bucket counts other than -1, -2 (primary-key tables) and
N > 0; ``dynamic-bucket.initial-buckets`` is immutable once the table has
snapshots. ``metadata.iceberg.*`` options ask every commit to write Iceberg
metadata, which snaplake does not, so they are refused (reads still work).
ORC/Avro primary-key files snaplake cannot write (a codec the format lacks,
an unknown format) are refused at create.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, create_table, rows, write_and_commit

import snaplake
from snaplake import SchemaChange
from snaplake.errors import (
    InvalidOptionError,
    SchemaChangeError,
    SchemaMismatchError,
    UnsupportedTableError,
)


def _files(root: Path) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)


@pytest.mark.parametrize("primary_keys", [(), ("id",)], ids=["append", "primary-key"])
@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"bucket": "-1", "bucket-key": "id"}, SchemaMismatchError, "bucket-key"),
        ({"bucket-key": "id"}, SchemaMismatchError, "bucket-key"),  # bucket defaults to -1
        ({"bucket": "0"}, SchemaMismatchError, "bucket = 0"),
        ({"bucket": "-3"}, SchemaMismatchError, "bucket = -3"),
        ({"bucket": "-100"}, SchemaMismatchError, "bucket = -100"),
        ({"bucket": "two"}, InvalidOptionError, "bucket"),
        ({"bucket": "1.5"}, InvalidOptionError, "bucket"),
        ({"bucket": ""}, InvalidOptionError, "bucket"),
    ],
)
def test_bad_bucket_options_are_refused_at_create(
    tmp_path: Path, primary_keys: tuple[str, ...], options: dict[str, str], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        create_table(tmp_path, primary_keys=primary_keys, options=options)
    assert _files(tmp_path) == []


def test_postpone_bucket_is_refused_on_an_append_table(tmp_path: Path) -> None:
    with pytest.raises(SchemaMismatchError, match="bucket = -2"):
        create_table(tmp_path, options={"bucket": "-2"})
    assert _files(tmp_path) == []


def test_bucket_key_with_bucket_minus_one_is_refused_by_alter(tmp_path: Path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = create_table(catalog)  # an append table, bucket = -1
    before = _files(tmp_path)
    with pytest.raises(SchemaChangeError, match="bucket-key") as info:
        catalog.alter_table("db.t", [SchemaChange.set_option("bucket-key", "id")])
    assert info.value.rule == "table-schema"
    assert _files(tmp_path) == before
    assert table.schema_manager.list_schema_ids() == [0]


def test_dynamic_bucket_initial_buckets_cannot_change_once_written(tmp_path: Path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = create_table(
        catalog, primary_keys=["id"], bucket=2, options={"dynamic-bucket.initial-buckets": "2"}
    )
    write_and_commit(table, rows(0, 10))
    before = _files(tmp_path)
    for change in (
        SchemaChange.set_option("dynamic-bucket.initial-buckets", "4"),
        SchemaChange.remove_option("dynamic-bucket.initial-buckets"),
    ):
        with pytest.raises(SchemaChangeError, match="initial-buckets") as info:
            catalog.alter_table("db.t", [change])
        assert info.value.rule == "immutable-option"
        assert _files(tmp_path) == before
    # setting it on a table that never had it is a change too
    other = create_table(catalog, "db.u", primary_keys=["id"], bucket=2)
    write_and_commit(other, rows(0, 3))
    with pytest.raises(SchemaChangeError, match="initial-buckets"):
        catalog.alter_table(
            "db.u", [SchemaChange.set_option("dynamic-bucket.initial-buckets", "3")]
        )
    assert other.schema_manager.list_schema_ids() == [0]


@pytest.mark.parametrize(
    "option",
    [
        ("metadata.iceberg.storage", "table-location"),
        ("metadata.iceberg.storage", "hadoop-catalog"),
        ("metadata.iceberg.storage", "hive-catalog"),
        ("metadata.iceberg.format-version", "2"),
        ("metadata.iceberg.manifest-compression", "snappy"),
        ("metadata.iceberg.storage-location", "table-location"),
    ],
)
@pytest.mark.parametrize("primary_keys", [(), ("id",)], ids=["append", "primary-key"])
def test_iceberg_metadata_options_are_refused_at_create(
    tmp_path: Path, option: tuple[str, str], primary_keys: tuple[str, ...]
) -> None:
    key, value = option
    opts = {key: value, **({"bucket": "2"} if primary_keys else {})}
    with pytest.raises(UnsupportedTableError, match="Iceberg") as info:
        create_table(tmp_path, primary_keys=primary_keys, options=opts)
    assert info.value.key == key and info.value.operation == "create"
    assert _files(tmp_path) == []


def test_iceberg_storage_disabled_is_paimons_default_and_accepted(tmp_path: Path) -> None:
    table = create_table(tmp_path, options={"metadata.iceberg.storage": "disabled"})
    write_and_commit(table, rows(0, 5))
    assert table.to_arrow().num_rows == 5


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"file.format": "avro", "file.compression": "lz4"}, "avro"),
        ({"file.format.per.level": "0:lance"}, "lance"),
        ({"file.format.per.level": "0:orc", "file.compression.per.level": "0:brotli"}, "orc"),
        ({"changelog-producer": "input", "changelog-file.format": "vortex"}, "vortex"),
        ({"file.format.per.level": "2:avro", "file.compression.per.level": "2:gzip"}, "avro"),
    ],
)
def test_primary_key_files_snaplake_cannot_write_are_refused_at_create(
    tmp_path: Path, options: dict[str, str], match: str
) -> None:
    with pytest.raises(UnsupportedTableError, match=match):
        create_table(tmp_path, primary_keys=["id"], bucket=1, options=options)
    assert _files(tmp_path) == []


def test_avro_primary_key_table_refuses_nested_columns(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.list_(pa.int32()))])
    with pytest.raises(UnsupportedTableError, match="Avro"):
        create_table(
            tmp_path, schema=schema, primary_keys=["id"], bucket=1,
            options={"file.format.per.level": "0:avro"},
        )  # fmt: skip
    assert _files(tmp_path) == []
    create_table(tmp_path, schema=schema, primary_keys=["id"], bucket=1)  # Parquet: fine


def test_valid_bucket_values_still_create_tables(tmp_path: Path) -> None:
    """Append -1 and N with a bucket key; primary-key N."""
    create_table(tmp_path, "db.a", schema=SCHEMA)
    create_table(tmp_path, "db.b", schema=SCHEMA, bucket=3, options={"bucket-key": "id"})
    create_table(tmp_path, "db.c", schema=SCHEMA, primary_keys=["id"], bucket=2)
