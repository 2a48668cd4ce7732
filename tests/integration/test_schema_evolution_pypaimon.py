"""Schema evolution both ways with pypaimon 2.1.0 (the format oracle), on real files.

* snaplake alters (add, rename, drop, widen, nullability, comments, options) and
  writes after each change; pypaimon reads every step exactly as snaplake does,
  on unpartitioned, partitioned and bucketed append tables; pypaimon's time travel
  to a snapshot before the changes agrees too.
* pypaimon alters its own table with its ``SchemaChange`` and writes; snaplake reads
  it exactly, appends in the new schema, and pypaimon reads it again.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from tests.helpers import assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon

import snaplake
from snaplake import SchemaChange

pytestmark = [pytest.mark.integration, requires_paimon]

BASE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("dest", pa.string()),
        pa.field("flight", pa.int32()),
        pa.field("delay", pa.float32()),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("air_time", pa.int16()),
        pa.field("day", pa.date32()),
    ]
)

LAYOUTS = {
    "plain": {},
    "partitioned": {"partition_keys": ["month"]},
    "bucketed": {"partition_keys": ["month"], "options": {"bucket": "3", "bucket-key": "dest"}},
}

# Each step: the changes, then a write in the new schema; pypaimon reads after every step.
STEPS: list[tuple[str, list[SchemaChange]]] = [
    ("add", [SchemaChange.add_column("reason", pa.string(), comment="why"),
             SchemaChange.add_column("first_col", pa.int32(), first=True)]),
    ("rename", [SchemaChange.rename_column("flight", "flight_no")]),
    ("widen", [SchemaChange.update_column_type("flight_no", pa.int64()),
               SchemaChange.update_column_type("delay", pa.float64()),
               SchemaChange.update_column_type("price", "DECIMAL(14, 2)"),
               SchemaChange.update_column_type("air_time", pa.int32())]),
    ("drop", [SchemaChange.drop_column("air_time")]),
    ("nullability-comment-option", [SchemaChange.update_column_nullability("id", True),
                                    SchemaChange.update_column_comment("dest", "IATA"),
                                    SchemaChange.set_option("snapshot.num-retained.min", "20"),
                                    SchemaChange.update_comment("flights")]),
    ("add-again", [SchemaChange.add_column("air_time", pa.float64(), after="dest")]),
]  # fmt: skip


def _rows(schema: pa.Schema, start: int, n: int) -> pa.Table:
    """``n`` rows of ``schema`` with ids from ``start`` (values derived from the id)."""
    ids = range(start, start + n)
    gen = {
        "id": lambda i: i,
        "first_col": lambda i: i % 7,
        "month": lambda i: 1 + i % 3,
        "dest": lambda i: f"D{i % 5}",
        "flight": lambda i: 100 + i,
        "flight_no": lambda i: 10_000_000_000 + i,
        "delay": lambda i: i / 4,
        "price": lambda i: Decimal(i) / 4,
        "air_time": lambda i: i % 300,
        "day": lambda i: dt.date(2013, 1, 1) + dt.timedelta(days=i % 30),
        "reason": lambda i: None if i % 2 else f"r{i}",
    }
    if schema.field("flight_no" if "flight_no" in schema.names else "flight").type == pa.int32():
        gen["flight_no"] = gen["flight"]
    return pa.table({f.name: pa.array([gen[f.name](i) for i in ids], f.type) for f in schema},
                    schema=schema)  # fmt: skip


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_pypaimon_reads_snaplake_tables_after_every_kind_of_change(tmp_path, layout):
    wh = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = catalog.create_table("db.t", schema=BASE, **LAYOUTS[layout])  # type: ignore[arg-type]
    oracle = PaimonOracle(wh)
    write_and_commit(table, _rows(BASE, 0, 30), commit_user="s", commit_identifier=1)
    write_and_commit(table, _rows(BASE, 30, 30), commit_user="s", commit_identifier=2)
    ident = 3
    for step, changes in STEPS:
        catalog.alter_table("db.t", changes)
        write_and_commit(
            table,
            _rows(table.arrow_schema.remove_metadata(), ident * 100, 20),
            commit_user="s",
            commit_identifier=ident,
        )
        ident += 1
        ours = table.to_arrow()
        theirs = oracle.read("db.t")
        assert ours.num_rows == 60 + 20 * (ident - 3), step
        assert_same_rows(ours, theirs, same_columns=True)
    # filters on evolved columns agree (pypaimon prunes by its own stats evolution)
    pred = {"op": "greater_or_equal", "field": "flight_no", "value": 130}
    assert_same_rows(
        table.to_arrow(filter=("flight_no", ">=", 130)),
        oracle.read("db.t", filter=pred),
        same_columns=True,
    )
    # time travel to before the first change reads the old schema on both sides
    old_ours = table.to_arrow(snapshot_id=2)
    assert old_ours.schema.names == BASE.names
    assert_same_rows(old_ours, oracle.read("db.t", snapshot_id=2), same_columns=True)
    # compaction rewrites every file in the current schema; pypaimon still agrees
    catalog.alter_table("db.t", [SchemaChange.set_option("compaction.min.file-num", "2")])
    assert table.compact().files_after > 0
    assert_same_rows(table.to_arrow(), oracle.read("db.t"), same_columns=True)


def test_snaplake_reads_and_appends_to_a_table_pypaimon_altered(tmp_path):
    wh = tmp_path / "wh"
    oracle = PaimonOracle(wh)
    oracle.create_table("db.p", BASE, partition_keys=["month"])
    oracle.write("db.p", _rows(BASE, 0, 40), commits=2)
    schema = oracle.alter_table(
        "db.p",
        [
            {"kind": "add_column", "name": "reason", "type": "STRING", "comment": "why"},
            {"kind": "rename_column", "name": "flight", "new_name": "flight_no"},
            {"kind": "update_column_type", "name": "flight_no", "type": "BIGINT"},
            {"kind": "update_column_type", "name": "delay", "type": "DOUBLE"},
            {"kind": "drop_column", "name": "air_time"},
            {"kind": "set_option", "key": "snapshot.num-retained.min", "value": "15"},
        ],
    )
    assert schema["id"] == 1
    catalog = snaplake.FileSystemCatalog(str(wh))
    table = catalog.get_table("db.p")
    assert table.schema_id == 1
    assert table.schema().to_json_dict()["fields"] == schema["fields"]
    evolved = table.arrow_schema.remove_metadata()
    oracle.write("db.p", _rows(evolved, 100, 10))
    assert_same_rows(table.to_arrow(), oracle.read("db.p"), same_columns=True)
    assert table.to_arrow().num_rows == 50
    # snaplake appends in pypaimon's new schema; pypaimon reads all of it
    write_and_commit(table, _rows(evolved, 200, 15), commit_user="s", commit_identifier=1)
    ours = table.to_arrow()
    assert ours.num_rows == 65
    assert_same_rows(ours, oracle.read("db.p"), same_columns=True)
    # a second pypaimon alter on top of snaplake's commit, then both read again
    oracle.alter_table("db.p", [{"kind": "add_column", "name": "extra", "type": "INT"}])
    write_and_commit(
        table,
        _rows(evolved, 300, 5).append_column("extra", pa.array([1] * 5, pa.int32())),
        commit_user="s",
        commit_identifier=2,
    )
    ours = table.to_arrow()
    assert ours.column("extra").null_count == 65
    assert_same_rows(ours, oracle.read("db.p"), same_columns=True)
    # snaplake's time travel to pypaimon's first snapshot reads schema 0 like pypaimon
    assert_same_rows(
        table.to_arrow(snapshot_id=1), oracle.read("db.p", snapshot_id=1), same_columns=True
    )
