"""``Table.check`` on tables pypaimon wrote (issue 18 item 17): clean ones pass, lies are found.

pypaimon records stats its own way (untruncated bounds with ``metadata.stats-mode =
full``, none by default: ``_VALUE_STATS_COLS = []``); the check must accept both and
still find a lying entry.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.check_helpers import live_files, rewrite_entry, with_bound
from tests.helpers import SCHEMA, rows
from tests.oracle import PaimonOracle, requires_paimon

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.binary_row import decode_binary_row, encode_binary_row

pytestmark = [pytest.mark.integration, requires_paimon]


def test_check_pypaimon_tables(tmp_path: Path) -> None:
    oracle = PaimonOracle(tmp_path)
    full = {"metadata.stats-mode": "full"}
    oracle.create_table("db.full", SCHEMA, partition_keys=["month"], options=full)
    oracle.write("db.full", rows(0, 40), commits=2)
    oracle.create_table("db.none", SCHEMA, partition_keys=["month"])
    oracle.write("db.none", rows(0, 40), commits=2)
    oracle.create_table("db.pk", SCHEMA, partition_keys=["month"], primary_keys=["id", "month"],
                        options={"bucket": "2", **full})  # fmt: skip
    oracle.write("db.pk", rows(0, 40))
    oracle.write("db.pk", rows(20, 40))
    catalog = FileSystemCatalog(str(tmp_path))
    tables = {n: catalog.get_table(f"db.{n}") for n in ("full", "none", "pk")}
    for name, table in tables.items():
        result = table.check()
        assert result.ok, (name, result.mismatches)
        assert result.rows_checked == (80 if name == "pk" else 40)

    table = tables["full"]
    meta, path = live_files(table)[0]
    types, names = table.schema().value_types, table.schema().field_names
    i = names.index("distance")
    real_max = decode_binary_row(meta.value_stats.max_values, types)[i]
    assert isinstance(real_max, float)
    lower = with_bound(meta.value_stats, types, i, which="max", value=real_max - 1)
    rewrite_entry(table, meta.file_name, value_stats=lower)
    [m] = table.check().mismatches
    assert (m.path, m.field, m.column, m.actual) == (
        path, "_VALUE_STATS._MAX_VALUES", "distance", real_max
    )  # fmt: skip

    table = tables["none"]
    meta, path = live_files(table)[0]
    rewrite_entry(table, meta.file_name, row_count=meta.row_count - 1)
    [m] = table.check().mismatches
    assert (m.path, m.field) == (path, "_ROW_COUNT")

    table = tables["pk"]
    table.compact()
    assert table.check().ok  # snaplake's compaction of pypaimon's files
    meta, path = max(live_files(table), key=lambda fp: fp[0].row_count)
    assert meta.row_count > 1
    first = decode_binary_row(meta.min_key, table.schema().key_types)
    rewrite_entry(table, meta.file_name, max_key=encode_binary_row(first, table.schema().key_types))
    found = {(m.path, m.field) for m in table.check().mismatches}
    assert (path, "_MAX_KEY") in found
