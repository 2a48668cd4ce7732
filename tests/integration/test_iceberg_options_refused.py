"""A table another engine wrote with ``metadata.iceberg.storage``: read, never changed.

Paimon's writers keep Iceberg metadata next to the table's own at every
commit when ``metadata.iceberg.storage`` is set; snaplake writes none, so a
commit of its would leave that metadata stale. pypaimon 2.1.0 creates and
writes such a table (append and primary-key); snaplake reads it and refuses
writes, commits and maintenance (compaction, expiry) with
:class:`~snaplake.errors.UnsupportedTableError` before writing anything.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import assert_same_rows
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake.errors import UnsupportedTableError

pytestmark = [pytest.mark.integration, requires_paimon]

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
_ICEBERG = {"metadata.iceberg.storage": "table-location"}


def _files(root: Path) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)


@pytest.mark.parametrize("primary_keys", [(), ("id",)], ids=["append", "primary-key"])
def test_snaplake_reads_but_never_changes_a_table_with_iceberg_metadata(
    tmp_path: Path, primary_keys: tuple[str, ...]
) -> None:
    oracle = PaimonOracle(tmp_path)
    options = {**_ICEBERG, **({"bucket": "1"} if primary_keys else {})}
    oracle.create_table("db.t", _SCHEMA, primary_keys=primary_keys, options=options)
    data = pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=_SCHEMA)
    oracle.write("db.t", data)
    oracle.write("db.t", data)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert table.options["metadata.iceberg.storage"] == "table-location"
    expected = data if primary_keys else pa.concat_tables([data, data])
    assert_same_rows(expected, table.to_arrow(), reader="snaplake")
    before = _files(tmp_path)

    def refused(call, *operations: str) -> None:
        with pytest.raises(UnsupportedTableError, match="Iceberg") as info:
            call()
        assert info.value.key == "metadata.iceberg.storage"
        assert info.value.operation in operations
        assert _files(tmp_path) == before

    refused(lambda: table.new_write(commit_user="u"), "write")
    refused(lambda: table.write(data), "write", "commit")  # one call: either check first
    refused(lambda: table.new_commit(commit_user="u").commit([]), "commit")
    refused(lambda: table.compact(full=True), "maintenance")
    refused(lambda: table.expire_snapshots(), "maintenance")
    assert_same_rows(expected, oracle.read("db.t"))
