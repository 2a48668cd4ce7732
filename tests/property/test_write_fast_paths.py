"""The primary-key writer's batch fast paths give the bytes of their one-at-a-time references.

- ``encode_binary_rows`` == ``encode_binary_row`` row by row (and raises the same errors);
- ``grouped_value_stats`` on integer and floating columns (numpy ``reduceat``, nulls,
  NaN, infinities, extreme values, chunked and sliced arrays) == ``compute_value_stats``
  of each range;
- ``KeyValueFileWriter.file_summaries`` == what a writer fed the range row by row
  records (min/max key, sequence range, delete count, key and value stats).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import SnaplakeError
from snaplake.mergetree.kv import to_key_value
from snaplake.store.format.binary_row import encode_binary_row, encode_binary_rows
from snaplake.store.format.data_file import FileSource
from snaplake.store.format.grouped_stats import grouped_value_stats
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.stats import compute_value_stats
from snaplake.store.format.types import parse_type
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.write.kv_file_writer import KeyValueFileWriter

# Values of the fast-path types and of their neighbours (subclasses, wrong types,
# out-of-range ints, non-ASCII text, surrogates) that must take the reference path.
_VALUES: list[tuple[str, st.SearchStrategy[object]]] = [
    ("TINYINT", st.integers(-(2**7) - 2, 2**7 + 1)),
    ("SMALLINT", st.integers(-(2**15) - 2, 2**15 + 1)),
    ("INT", st.one_of(st.integers(-(2**31) - 2, 2**31 + 1), st.booleans())),
    ("BIGINT", st.one_of(st.integers(-(2**64), 2**64), st.just(np.int64(-3)))),
    ("DOUBLE", st.one_of(st.floats(), st.integers(-5, 5), st.just(np.float64(1.5)))),
    ("FLOAT", st.floats(width=32)),
    ("BOOLEAN", st.one_of(st.booleans(), st.integers(0, 1))),
    ("STRING", st.one_of(st.text(), st.text(alphabet="abc", max_size=12), st.just("\ud800"))),
    ("VARCHAR(9)", st.text(max_size=9)),
    ("DATE", st.one_of(st.dates(), st.datetimes(max_value=dt.datetime(2100, 1, 1)))),
    ("BYTES", st.binary(max_size=12)),
    ("TIMESTAMP(3)", st.datetimes().map(lambda d: d.replace(microsecond=0))),
    ("DECIMAL(20, 2)", st.integers(-(10**17), 10**17)),
]


@st.composite
def _rows(draw: st.DrawFn) -> tuple[list[str], list[list[object]]]:
    picked = draw(st.lists(st.sampled_from(range(len(_VALUES))), min_size=0, max_size=8))
    rows = draw(
        st.lists(
            st.tuples(*[st.one_of(st.none(), _VALUES[i][1]) for i in picked]).map(list),
            max_size=6,
        )
    )
    return [_VALUES[i][0] for i in picked], rows


def _outcome(fn: object) -> object:
    try:
        return fn()  # type: ignore[operator]
    except SnaplakeError as exc:
        return type(exc)


@given(_rows())
def test_encode_binary_rows_equals_encode_binary_row(
    case: tuple[list[str], list[list[object]]],
) -> None:
    names, rows = case
    types = [parse_type(n) for n in names]
    expected = []
    for row in rows:
        expected.append(_outcome(lambda row=row: encode_binary_row(row, types)))
    errors = [e for e in expected if not isinstance(e, bytes)]
    got = _outcome(lambda: encode_binary_rows(rows, types))
    if errors:
        assert got == errors[0]  # the first failing row's error, as row by row
    else:
        assert got == expected


def test_encode_binary_rows_refuses_a_row_of_another_length() -> None:
    with pytest.raises(SnaplakeError):
        encode_binary_rows([[1, 2]], [parse_type("INT")])


_NUMERIC = [
    (pa.int8(), "TINYINT"),
    (pa.int16(), "SMALLINT"),
    (pa.int32(), "INT"),
    (pa.int64(), "BIGINT"),
    (pa.float32(), "FLOAT"),
    (pa.float64(), "DOUBLE"),
]


def _numbers(kind: pa.DataType) -> st.SearchStrategy[object]:
    if pa.types.is_integer(kind):
        info = np.iinfo(kind.to_pandas_dtype())
        return st.one_of(
            st.integers(int(info.min), int(info.max)), st.sampled_from([info.min, info.max, 0])
        )
    return st.one_of(
        st.floats(width=32) if kind == pa.float32() else st.floats(),
        st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan]),
    )


@st.composite
def _numeric_case(draw: st.DrawFn) -> tuple[pa.Table, list[int], list[str]]:
    picked = draw(st.lists(st.sampled_from(_NUMERIC), min_size=1, max_size=4))
    sizes = draw(st.lists(st.integers(1, 7), min_size=1, max_size=5))
    lead = draw(st.integers(0, 3))  # rows sliced off the front: arrays with an offset
    n = sum(sizes) + lead
    columns = {}
    for i, (kind, _) in enumerate(picked):
        values = draw(st.lists(st.one_of(st.none(), _numbers(kind)), min_size=n, max_size=n))
        cut = draw(st.integers(0, n))  # two chunks
        columns[f"c{i}"] = pa.chunked_array(
            [pa.array(values[:cut], kind), pa.array(values[cut:], kind)], type=kind
        )
    table = pa.table(columns).slice(lead)
    return table, sizes, [name for _, name in picked]


@given(_numeric_case(), st.sampled_from(["full", "truncate(16)"]))
def test_grouped_numeric_stats_equal_each_ranges_own(
    case: tuple[pa.Table, list[int], list[str]], mode: str
) -> None:
    table, sizes, names = case
    types = [parse_type(n) for n in names]
    grouped = grouped_value_stats(table, sizes, types, stats_mode=mode)
    offset = 0
    for size, parts in zip(sizes, grouped, strict=True):
        assert parts == compute_value_stats(table.slice(offset, size), types, stats_mode=mode)
        offset += size


_SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("s", pa.string()),
        ("d", pa.float64()),
        ("t", pa.timestamp("us")),
        ("b", pa.bool_()),
    ]
)


@pytest.fixture(scope="module")
def kv_schema_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[TableSchema, str]:
    root = tmp_path_factory.mktemp("summaries")
    table = FileSystemCatalog(str(root)).create_table(
        "db.s", schema=_SCHEMA, primary_keys=["k", "s"], options={"bucket": "1"}
    )
    return table.schema(), str(root / "db.db" / "s")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.data())
def test_file_summaries_equal_a_row_by_row_writer(
    kv_schema_root: tuple[TableSchema, str], sizes: list[int], data: st.DataObject
) -> None:
    schema, root = kv_schema_root
    n = sum(sizes)

    def column(values: st.SearchStrategy[object]) -> list[object]:
        return data.draw(st.lists(values, min_size=n, max_size=n))

    rows = pa.table(
        {
            "k": pa.array(
                sorted(data.draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n))),
                pa.int64(),
            ),
            "s": pa.array(column(st.text(max_size=9))),
            "d": pa.array(column(st.one_of(st.none(), st.floats())), pa.float64()),
            "t": pa.array(
                column(st.one_of(st.none(), st.integers(-(2**40), 2**40))), pa.timestamp("us")
            ),
            "b": pa.array(column(st.one_of(st.none(), st.booleans())), pa.bool_()),
        }
    )
    seqs = np.array(column(st.integers(0, 10**12)), np.int64)
    kinds = np.array(column(st.integers(0, 3)), np.int8)
    kv = to_key_value(rows, schema.trimmed_primary_keys, seqs, kinds)

    def writer() -> KeyValueFileWriter:
        return KeyValueFileWriter(
            file_io=LocalFileIO(), paths=PathFactory(root), schema=schema, partition_path="",
            bucket=0, level=0, file_source=FileSource.APPEND, target_file_size=1 << 30,
        )  # fmt: skip

    kv = writer().conform(kv)
    summaries = writer().file_summaries(kv, sizes)
    offset = 0
    for size, summary in zip(sizes, summaries, strict=True):
        one = writer()
        one.write(kv.slice(offset, size))  # the chunk-by-chunk path
        (reference,) = one.close()
        fast = writer()
        fast.write_file(kv.slice(offset, size), summary)
        (got,) = fast.close()
        assert replace(got.meta, file_name="", creation_time_ms=0) == replace(
            reference.meta, file_name="", creation_time_ms=0
        )
        offset += size


def test_file_summaries_refuse_sizes_that_do_not_split_the_rows(
    kv_schema_root: tuple[TableSchema, str],
) -> None:
    schema, root = kv_schema_root
    writer = KeyValueFileWriter(
        file_io=LocalFileIO(), paths=PathFactory(root), schema=schema, partition_path="",
        bucket=0, level=0, file_source=FileSource.APPEND, target_file_size=1 << 30,
    )  # fmt: skip
    rows = pa.table({"k": pa.array([1, 2], pa.int64()), "s": ["a", "b"], "d": [1.0, 2.0],
                     "t": pa.array([1, 2], pa.timestamp("us")), "b": [True, False]})  # fmt: skip
    kv = writer.conform(to_key_value(rows, ["k", "s"], np.arange(2), np.zeros(2, np.int8)))
    with pytest.raises(ValueError, match="do not split"):
        writer.file_summaries(kv, [1, 2])
    with pytest.raises(ValueError, match="do not split"):
        writer.file_summaries(kv, [2, 0])
