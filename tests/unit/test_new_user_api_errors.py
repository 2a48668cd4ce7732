"""Python API errors a new user meets (issue 10, item 11): typed, naming what to pass instead.

- A filter literal whose type cannot be compared with its column raises
  ``SchemaMismatchError`` (like the CLI's bad literal), not a raw Arrow error,
  on every read path, before anything is read; compatible literals still work.
- ``write_arrow`` of something that is not Arrow raises ``TypeError`` naming
  the accepted types, and nothing is written.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from tests.helpers import SCHEMA, create_table, rows, write_and_commit

import snaplake
from snaplake.errors import SchemaMismatchError


@pytest.fixture
def table(tmp_path):
    t = create_table(tmp_path / "wh", partition_keys=["month"])
    write_and_commit(t, rows(0, 30), commit_user="u", commit_identifier=1)
    return t


@pytest.mark.parametrize(
    "spec",
    [
        ("id", "=", "abc"),
        ("carrier", ">", 5),
        ("distance", "=", "1.5"),
        ("id", "in", ["a", "b"]),
        ("day", "<", "2024-01-01"),
        ("month", "=", "7"),  # a partition column: pruned by the scan, refused all the same
        ("ts", ">=", 3),
    ],
)
def test_filter_value_of_the_wrong_type_is_a_schema_mismatch(table, spec) -> None:
    column = spec[0]
    with pytest.raises(SchemaMismatchError, match=f"column '{column}' of type") as info:
        table.to_arrow(filter=[spec])
    assert not isinstance(info.value, pa.ArrowException)
    with pytest.raises(SchemaMismatchError):
        list(table.to_batches(filter=[spec]))


def test_filter_type_is_checked_even_when_no_file_is_left(tmp_path) -> None:
    empty = snaplake.FileSystemCatalog(str(tmp_path / "wh")).create_table("db.e", schema=SCHEMA)
    with pytest.raises(SchemaMismatchError):
        empty.to_arrow(filter=[("id", "=", "abc")])
    with pytest.raises(SchemaMismatchError):
        list(empty.to_batches(filter=[("id", "=", "abc")]))


@pytest.mark.parametrize(
    ("spec", "keep"),
    [
        (("distance", ">", 1000), lambda r: r["distance"] > 1000),  # int literal, DOUBLE column
        (("id", "<", 2.5), lambda r: r["id"] < 2.5),  # float literal, BIGINT column
        (("price", ">=", Decimal("1")), lambda r: r["price"] >= Decimal("1")),
        (("day", ">=", dt.date(2013, 1, 10)), lambda r: r["day"] >= dt.date(2013, 1, 10)),
        (("carrier", "in", ["AA", "UA"]), lambda r: r["carrier"] in ("AA", "UA")),
        (("carrier", "is null"), lambda r: r["carrier"] is None),
    ],
)
def test_compatible_filter_values_still_work(table, spec, keep) -> None:
    expected = sorted(r["id"] for r in rows(0, 30).to_pylist() if keep(r))
    assert sorted(table.to_arrow(filter=[spec]).column("id").to_pylist()) == expected


@pytest.mark.parametrize("data", [[1, 2, 3], {"id": [1]}, None, "id,month\n1,2\n"])
def test_write_arrow_of_a_non_arrow_value_is_a_type_error(table, data) -> None:
    before = sorted(s.path for s in table.file_io.list_files(table.root))
    w = table.new_write(commit_user="u")
    with pytest.raises(TypeError, match=r"pyarrow\.Table or pyarrow\.RecordBatch") as info:
        w.write_arrow(data)
    assert type(data).__name__ in str(info.value)
    assert w.prepare_commit() == []
    assert sorted(s.path for s in table.file_io.list_files(table.root)) == before
