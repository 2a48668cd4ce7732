"""``read_kv_file`` reads key/value files of every format, thin-mode files included.

A file written without ``_KEY_`` columns (Paimon's ``data-file.thin-mode``)
gives its key columns from the value columns, whatever its format; batches
hold at most ``batch_rows`` rows and concatenate to the whole file.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from snaplake.mergetree.kv import kv_schema
from snaplake.mergetree.read import read_kv_file
from snaplake.store.format.file_format import file_format
from snaplake.store.io.local_file_io import LocalFileIO

_VALUE = pa.schema(
    [pa.field("k", pa.int64(), nullable=False), ("s", pa.string()), ("d", pa.date32())]
)


def _rows(n: int) -> pa.Table:
    return pa.table(
        {
            "_KEY_k": pa.array(range(n), pa.int64()),
            "_SEQUENCE_NUMBER": pa.array(range(100, 100 + n), pa.int64()),
            "_VALUE_KIND": pa.array([i % 4 for i in range(n)], pa.int8()),
            "k": pa.array(range(n), pa.int64()),
            "s": [None if i % 3 == 0 else f"v{i}" for i in range(n)],
            "d": pa.array(range(n), pa.int32()).cast(pa.date32()),
        }
    ).cast(kv_schema(_VALUE, ["k"]))


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
@pytest.mark.parametrize("thin", [False, True], ids=["full", "thin"])
@pytest.mark.parametrize("batch_rows", [None, 7])
def test_read_kv_file_of_every_format(
    tmp_path: Path, fmt: str, thin: bool, batch_rows: int | None
) -> None:
    data = _rows(50)
    stored = data.drop_columns(["_KEY_k"]) if thin else data
    path = tmp_path / f"data-x-0.{fmt}"
    with path.open("wb") as out:
        file_format(fmt).write(stored, out, compression="zstd", zstd_level=1)
    got = list(read_kv_file(LocalFileIO(), str(path), data.schema, batch_rows=batch_rows))
    assert all(t.schema == data.schema for t in got)
    if batch_rows is not None:
        assert all(t.num_rows <= batch_rows for t in got)
    assert pa.concat_tables(got).equals(data)
    keys_only = pa.schema([data.schema.field("_KEY_k"), data.schema.field("_VALUE_KIND")])
    projected = pa.concat_tables(list(read_kv_file(LocalFileIO(), str(path), keys_only)))
    assert projected.equals(data.select(keys_only.names))
