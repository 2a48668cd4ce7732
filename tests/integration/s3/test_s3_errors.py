"""Clear, typed errors at the catalog/table level on S3, and nothing written.

Bad credentials and a missing bucket run against SeaweedFS (it checks signatures). A
server that ignores conditional writes is moto behind the fault proxy stripping
``If-None-Match`` (SeaweedFS would reject the request once a signed header is gone).
The data-file path (pyarrow's S3 filesystem, not boto3) must give the same types.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pyarrow as pa
import pytest
from tests.helpers import write_and_commit
from tests.integration.s3.conftest import SCHEMA, S3Warehouse
from tests.s3_servers import fault_proxy

import snaplake
from snaplake.errors import (
    CorruptMetadataError,
    StorageAccessError,
    StorageError,
    UnsafeStorageError,
)
from snaplake.store.format.file_format import DataFileSpec, file_format
from snaplake.store.io.s3.file_io import S3FileIO
from snaplake.store.read.split_read import read_splits
from snaplake.table import Table
from snaplake.write.table_write import write_data_file

pytestmark = [pytest.mark.integration, pytest.mark.s3]

BAD_SECRET = "not-the-secret-0123456789abcdef"


def _spec(compression: str) -> DataFileSpec:
    return DataFileSpec(format=file_format("parquet"), compression=compression, zstd_level=1)


def _data(start: int = 0, n: int = 5) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "user": ["u"] * n}, schema=SCHEMA)


def test_bad_credentials_create_table_is_an_access_error_and_writes_nothing(warehouse):
    catalog = warehouse.catalog(**{"s3.secret-access-key": BAD_SECRET})
    with pytest.raises(StorageAccessError) as info:
        catalog.create_table("db.t", schema=SCHEMA)
    assert "credentials" in str(info.value) and BAD_SECRET not in str(info.value)
    assert warehouse.list_keys() == []


def test_bad_credentials_on_commit_data_files_and_reads_are_access_errors(warehouse):
    good = warehouse.catalog().create_table("db.t", schema=SCHEMA)
    write_and_commit(good, _data(), commit_user="u")
    before = warehouse.list_keys()
    bad_io = S3FileIO({**warehouse.options, "s3.secret-access-key": BAD_SECRET})
    with pytest.raises(StorageAccessError):  # opening the table reads its schema
        Table(file_io=bad_io, root=good.root, identifier="db.t")
    # A data file goes through pyarrow's S3 filesystem: translated, not a raw OSError.
    target = f"{good.root}/bucket-0/data-bad.parquet"
    with pytest.raises(StorageAccessError) as info:
        write_data_file(file_io=bad_io, path=target, data=_data(100), spec=_spec("zstd"))
    assert info.value.operation == "write" and info.value.path == target
    splits = good.new_scan().plan()
    with pytest.raises(StorageAccessError) as read_info:
        read_splits(bad_io, splits, schema=good.arrow_schema)
    assert read_info.value.operation == "read"
    assert warehouse.list_keys() == before  # nothing written, the table reads as before
    assert good.to_arrow().num_rows == 5


def test_missing_bucket_is_a_storage_error_naming_the_bucket(warehouse):
    uri = f"s3://no-such-bucket-{warehouse.bucket}/wh"
    catalog = snaplake.FileSystemCatalog(uri, options=warehouse.options)
    with pytest.raises(StorageError) as info:
        catalog.create_table("db.t", schema=SCHEMA)
    assert "does not exist" in str(info.value) and "no-such-bucket" in str(info.value)
    # Through pyarrow too (a data file of a table whose bucket vanished).
    good = warehouse.catalog().create_table("db.t", schema=SCHEMA)
    write_and_commit(good, _data(), commit_user="u")
    target = f"s3://no-such-bucket-{warehouse.bucket}/wh/db.db/t/bucket-0/data-x.parquet"
    with pytest.raises(StorageError, match="does not exist"):
        write_data_file(file_io=good.file_io, path=target, data=_data(10), spec=_spec("zstd"))
    gone = f"no-such-bucket-{warehouse.bucket}"
    splits = [
        dataclasses.replace(s, paths=tuple(p.replace(warehouse.bucket, gone) for p in s.paths))
        for s in good.new_scan().plan()
    ]
    with pytest.raises(StorageError, match="does not exist"):
        read_splits(good.file_io, splits, schema=good.arrow_schema)


def test_missing_live_data_file_reads_as_corrupt_metadata_with_its_path(warehouse):
    """A file the latest snapshot uses, deleted outside maintenance: corrupt, named (18.9a)."""
    table = warehouse.catalog().create_table("db.t", schema=SCHEMA)
    write_and_commit(table, _data(), commit_user="u")
    victim = next(k for k in warehouse.list_keys() if k.endswith(".parquet"))
    warehouse.endpoint.client().delete_object(Bucket=warehouse.bucket, Key=victim)
    with pytest.raises(CorruptMetadataError) as info:
        table.to_arrow()
    assert victim in str(info.value) and info.value.path.endswith(victim)


@pytest.fixture
def stripping(moto) -> Iterator[S3Warehouse]:
    """A bucket on moto reached through a proxy that drops ``If-None-Match``."""
    bucket = moto.new_bucket("unsafe")
    with fault_proxy(moto) as (proxy, endpoint):
        proxy.strip_headers.add("if-none-match")
        yield S3Warehouse(
            endpoint=moto, bucket=bucket, uri=f"s3://{bucket}/wh", options=endpoint.options()
        )


def test_server_ignoring_conditional_writes_refuses_create_table(stripping):
    with pytest.raises(UnsafeStorageError) as info:
        stripping.catalog().create_table("db.t", schema=SCHEMA)
    assert "If-None-Match" in str(info.value) and "s3.allow-unsafe-create" in str(info.value)
    # Nothing at all: no schema, no probe scratch object, no database marker.
    assert stripping.list_keys() == []


def test_server_ignoring_conditional_writes_refuses_commit(stripping, moto):
    # The table is created directly on moto; only the commit goes through the proxy.
    direct = snaplake.FileSystemCatalog(stripping.uri, options=moto.options()).create_table(
        "db.t", schema=SCHEMA
    )
    table = stripping.catalog().get_table("db.t")
    write = table.new_write(commit_user="u")
    write.write_arrow(_data())
    messages = write.prepare_commit()
    with pytest.raises(UnsafeStorageError):
        table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert not [k for k in stripping.list_keys() if "/snapshot/" in k or "/manifest/" in k]
    assert direct.latest_snapshot() is None
    # Opting in (a single writer) commits.
    unsafe = stripping.catalog(**{"s3.allow-unsafe-create": "true"}).get_table("db.t")
    assert unsafe.new_commit(commit_user="u").commit(messages, commit_identifier=1).snapshot_id == 1
    assert direct.to_arrow().num_rows == 5
