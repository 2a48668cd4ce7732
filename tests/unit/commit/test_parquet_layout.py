"""Data files store DECIMAL as Java Paimon's Parquet writer does: INT32 / INT64 / binary.

Paimon's ``ParquetRowDataWriter`` writes DECIMAL(p <= 9) as INT32 and DECIMAL(p <= 18)
as INT64; Java Paimon 0.9 cannot read pyarrow's default for those (FIXED_LEN_BYTE_ARRAY
with a dictionary). Checked here on the Parquet footers of written and of compacted
files; ``tests/integration/test_java_paimon_reads.py`` checks that Java reads them.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

import snaplake

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("d5", pa.decimal128(5, 2)),
        ("d18", pa.decimal128(18, 6)),
        ("d19", pa.decimal128(19, 2)),
        ("d38", pa.decimal128(38, 10)),
        ("nested", pa.list_(pa.decimal128(9, 1))),
    ]
)
EXPECTED = {
    "d5": "INT32",
    "d18": "INT64",
    "d19": "FIXED_LEN_BYTE_ARRAY",
    "d38": "FIXED_LEN_BYTE_ARRAY",
    "nested.list.element": "INT32",
}


def _data(start: int) -> pa.Table:
    n = 5
    return pa.table(
        {
            "id": list(range(start, start + n)),
            "d5": [Decimal("1.25"), None, Decimal("-999.99"), Decimal("0.00"), Decimal("3.10")],
            "d18": [Decimal("123456789012.123456")] * n,
            "d19": [Decimal("12345678901234567.89")] * n,
            "d38": [None] * n,
            "nested": [[Decimal("1.5"), None]] * n,
        },
        schema=SCHEMA,
    )


def _physical_types(path: str) -> dict[str, str]:
    schema = pq.ParquetFile(path).schema
    return {schema.column(i).path: schema.column(i).physical_type for i in range(len(schema))}


def test_written_and_compacted_decimals_use_javas_physical_types(tmp_path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table("db.t", schema=SCHEMA, options={"compaction.min.file-num": "3"})
    for i in range(3):
        write = table.new_write(commit_user="u")
        write.write_arrow(_data(i * 5))
        table.new_commit(commit_user="u").commit(write.prepare_commit())
    (written,) = table.new_scan(snapshot_id=1).plan()
    assert _physical_types(written.paths[0]) == {**EXPECTED, "id": "INT64"}
    assert table.compact().snapshot_id is not None
    (compacted,) = table.new_scan().plan()
    assert len(compacted.paths) == 1
    assert _physical_types(compacted.paths[0]) == {**EXPECTED, "id": "INT64"}
    expected = pa.concat_tables([_data(i * 5) for i in range(3)])
    assert table.to_arrow().sort_by("id").equals(expected)
