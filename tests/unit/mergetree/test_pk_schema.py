"""Creating primary-key tables: Paimon's schema rules, refusals before anything is written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import (
    InvalidOptionError,
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
        ({"primary_keys": ["id"], "options": {}}, UnsupportedTableError, "bucket = N"),
        ({"primary_keys": ["id"], "options": {"bucket": "-1"}}, UnsupportedTableError,
         "dynamic buckets"),
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
        ({"primary_keys": ["id"], "options": {"bucket": "2",
                                              "deletion-vectors.enabled": "true"}},
         UnsupportedTableError, "deletion vectors"),
        ({"primary_keys": ["id"], "options": {"bucket": "2",
                                              "changelog-producer": "lookup"}},
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
            ("force-lookup", "true"), ("write.sequence-number-init-mode", "snapshot"),
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
    w = table.new_write(commit_user="u")
    w.write_arrow(pa.table({"month": [1], "id": [7], "v": ["x"], "n": [2]}, schema=_SCHEMA))
    table.new_commit(commit_user="u").commit(w.prepare_commit())
    with pytest.raises(UnsupportedTableError, match=r"scan\.bucket"):
        table.to_arrow()
