"""Nested columns read by nested field id (ROW inside ARRAY and MAP, slices, NULLs), and an
append table whose ROW column another engine changed."""

from __future__ import annotations

import orjson
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st
from tests.helpers import write_and_commit

import snaplake
from snaplake.store.format.types import DataField, DataType, TypeRoot, parse_type
from snaplake.store.read.field_evolution import can_evolve, evolve_column


def _row(*fields: tuple[int, str, str]) -> DataType:
    return DataType(
        root=TypeRoot.ROW,
        fields=tuple(DataField(id=i, name=n, type=parse_type(t)) for i, n, t in fields),
    )


OLD = _row((1, "a", "INT"), (2, "b", "STRING"))
# a renamed to x and widened, b dropped, a new "b" (id 3) added
NEW = _row((1, "x", "BIGINT"), (3, "b", "STRING"))


def _expected(values: list[dict[str, object] | None]) -> list[dict[str, object] | None]:
    return [None if v is None else {"x": v["a"], "b": None} for v in values]


@given(
    st.lists(
        st.none()
        | st.fixed_dictionaries(
            {
                "a": st.none() | st.integers(-(2**31), 2**31 - 1),
                "b": st.none() | st.text(max_size=3),
            }
        ),
        max_size=20,
    ),
    st.integers(0, 5),
)
def test_row_fields_map_by_id_in_slices(values, start):
    array = pa.array(values, pa.struct([("a", pa.int32()), ("b", pa.string())]))[start:]
    got = evolve_column(array, OLD, NEW)
    assert got.to_pylist() == _expected(values[start:])
    chunked = evolve_column(pa.chunked_array([array, array]), OLD, NEW)
    assert chunked.to_pylist() == _expected(values[start:]) * 2


def test_rows_inside_arrays_and_maps():
    old_list = DataType(root=TypeRoot.ARRAY, children=(OLD,))
    new_list = DataType(root=TypeRoot.ARRAY, children=(NEW,))
    values = [[{"a": 1, "b": "q"}, None], None, [], [{"a": None, "b": None}]]
    struct = pa.struct([("a", pa.int32()), ("b", pa.string())])
    got = evolve_column(pa.array(values, pa.list_(struct))[1:], old_list, new_list)
    assert got.to_pylist() == [None, [], [{"x": None, "b": None}]]
    old_map = DataType(root=TypeRoot.MAP, children=(parse_type("STRING NOT NULL"), OLD))
    new_map = DataType(root=TypeRoot.MAP, children=(parse_type("STRING NOT NULL"), NEW))
    maps = pa.array([[("k", {"a": 5, "b": "z"})], None], pa.map_(pa.string(), struct))
    assert evolve_column(maps, old_map, new_map).to_pylist() == [[("k", {"x": 5, "b": None})], None]
    assert can_evolve(old_list, new_list) and can_evolve(old_map, new_map)
    assert not can_evolve(NEW, _row((1, "x", "INT")))  # BIGINT -> INT would lose


def test_append_table_reads_a_row_column_changed_by_another_engine(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    addr = pa.struct([("city", pa.string()), ("zip", pa.int32())])
    table = catalog.create_table("db.a", schema=pa.schema([("id", pa.int64()), ("addr", addr)]))
    write_and_commit(
        table,
        pa.table({"id": [1], "addr": pa.array([{"city": "c", "zip": 7}], addr)}),
        commit_user="u",
    )
    doc = table.schema().to_json_dict()
    city, zipcode = doc["fields"][1]["type"]["fields"]
    doc["fields"][1]["type"]["fields"] = [
        {**zipcode, "type": "BIGINT"},
        {"id": doc["highestFieldId"] + 1, "name": "city", "type": "STRING"},
        {**city, "name": "town"},
    ]
    doc["highestFieldId"] += 1
    doc["id"] = 1
    table.file_io.write_if_absent(table.paths.schema_path(1), orjson.dumps(doc))
    assert table.to_arrow().column("addr").to_pylist() == [{"zip": 7, "city": None, "town": "c"}]
    assert table.to_arrow(snapshot_id=1).column("addr").to_pylist() == [{"city": "c", "zip": 7}]
    # a writer of the new schema and a compaction read both layouts
    w = table.new_write(commit_user="u")
    w.write_arrow(pa.table({"id": [2], "addr": [{"zip": 8, "city": "n", "town": "t"}]},
                           schema=table.arrow_schema))  # fmt: skip
    table.new_commit(commit_user="u").commit(w.prepare_commit())
    got = sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["addr"] for r in got] == [
        {"zip": 7, "city": None, "town": "c"},
        {"zip": 8, "city": "n", "town": "t"},
    ]
