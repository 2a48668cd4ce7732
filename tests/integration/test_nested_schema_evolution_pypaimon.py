"""Nested ROW changes made by pypaimon 2.1.0, read by snaplake by nested field id.

snaplake's own ``alter_table`` refuses nested changes (tests/unit/mergetree/
test_pk_schema_evolution.py); pypaimon makes them with dotted paths, through ROW
fields and the ``element`` / ``value`` of ARRAY and MAP. After each kind of change
pypaimon writes in the new schema and snaplake reads every file exactly as pypaimon
does; snaplake then appends in the final schema, compacts (outputs in the current
schema), and pypaimon reads it all again.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon

import snaplake

pytestmark = [pytest.mark.integration, requires_paimon]

GEO = pa.struct([("lat", pa.float32()), ("lon", pa.float32())])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("addr", pa.struct([("city", pa.string()), ("zip", pa.int32()), ("geo", GEO)])),
        pa.field("tags", pa.list_(pa.int32())),
        pa.field("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
        pa.field("attrs", pa.map_(pa.string(), pa.struct([("a", pa.int32()), ("b", pa.string())]))),
    ]
)
# (pypaimon change JSON, what snaplake then reads)
CHANGES: list[dict[str, Any]] = [
    {"kind": "add_column", "name": ["addr", "country"], "type": "STRING"},
    {"kind": "rename_column", "name": ["addr", "city"], "new_name": "town"},
    {"kind": "drop_column", "name": ["addr", "zip"]},
    {"kind": "add_column", "name": ["addr", "zip"], "type": "STRING"},  # same name, new id
    {"kind": "update_column_type", "name": ["addr", "geo", "lat"], "type": "DOUBLE"},
    {"kind": "update_column_type", "name": ["tags", "element"], "type": "BIGINT"},
    {"kind": "add_column", "name": ["items", "element", "price"], "type": "DOUBLE"},
    {"kind": "rename_column", "name": ["items", "element", "qty"], "new_name": "count"},
    {"kind": "rename_column", "name": ["attrs", "value", "b"], "new_name": "bee"},
    {"kind": "update_column_type", "name": ["attrs", "value", "a"], "type": "BIGINT"},
    {"kind": "update_column_comment", "name": ["addr", "town"], "comment": "city"},
]


def _value(t: pa.DataType, i: int, depth: int = 0) -> Any:
    if pa.types.is_struct(t):
        return {f.name: _value(f.type, i + k, depth + 1) for k, f in enumerate(t)}
    if pa.types.is_map(t):
        return [(f"k{i % 3}", _value(t.item_type, i, depth + 1))]
    if pa.types.is_list(t):
        return [_value(t.value_type, i + k, depth + 1) for k in range(i % 3)]
    if pa.types.is_string(t):
        return f"s{i}.{depth}"
    if pa.types.is_floating(t):
        return i / 4
    return i


def _rows(schema: pa.Schema, ids: range) -> pa.Table:
    return pa.table(
        {f.name: pa.array([_value(f.type, i) if f.name != "id" else i for i in ids], f.type)
         for f in schema},
        schema=schema,
    )  # fmt: skip


def test_snaplake_reads_nested_changes_pypaimon_made(tmp_path: Any) -> None:
    wh = tmp_path / "wh"
    with PaimonOracle(wh).session() as oracle:  # one pypaimon process for the 37 calls
        _check_nested_changes(wh, oracle)


def _check_nested_changes(wh: Any, oracle: PaimonOracle) -> None:
    oracle.create_table("db.n", SCHEMA)
    oracle.write("db.n", _rows(SCHEMA, range(10)))
    table = snaplake.FileSystemCatalog(str(wh)).get_table("db.n")
    for step, change in enumerate(CHANGES, start=1):
        oracle.alter_table("db.n", [change])
        assert table.schema_id == step
        schema = table.arrow_schema.remove_metadata()
        oracle.write("db.n", _rows(schema, range(step * 10, step * 10 + 10)))
        assert_same_rows(table.to_arrow(), oracle.read("db.n"), same_columns=True)
    rows = {r["id"]: r for r in table.to_arrow().to_pylist()}
    assert rows[1]["addr"] == {"town": "s1.1", "country": None, "geo": {"lat": 0.75,
                                                                        "lon": 1.0},
                               "zip": None}  # fmt: skip
    assert rows[1]["items"] == [{"sku": "s1.2", "count": 2, "price": None}]
    assert rows[1]["attrs"] == [("k1", {"a": 1, "bee": "s2.2"})]
    # snaplake appends in the final schema and compacts every file into it
    final = table.arrow_schema.remove_metadata()
    write_and_commit(table, _rows(final, range(500, 520)), commit_user="s")
    assert_same_rows(table.to_arrow(), oracle.read("db.n"), same_columns=True)
    expected = table.to_arrow()
    snaplake.FileSystemCatalog(str(wh)).alter_table(
        "db.n", [snaplake.SchemaChange.set_option("compaction.min.file-num", "2")]
    )
    assert table.compact().files_after > 0
    assert {f.schema_id for s in table.new_scan().plan() for f in s.files} == {table.schema_id}
    assert_same_rows(table.to_arrow(), expected, same_columns=True)
    assert_same_rows(expected, oracle.read("db.n"), same_columns=True)
