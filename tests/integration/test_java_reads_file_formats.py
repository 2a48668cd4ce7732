"""Java Paimon 0.9 reads the ORC and Avro data files snaplake writes (values equal).

Uses the Java oracle (``tests/oracle/java_paimon.py``, built by ``make java-paimon``);
skipped where it is absent. Covered: every flat column type in ORC and Avro with
several codecs, TIMESTAMP_LTZ in both ORC encodings, a table whose ``file.format``
changed (ORC, then Avro) with compaction, ``data-file.prefix`` and
``file.suffix.include.compression`` file names.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import assert_java_rows, write_and_commit

import snaplake

jp = pytest.importorskip("tests.oracle.java_paimon", reason="the Java Paimon oracle is absent")

pytestmark = [pytest.mark.integration, jp.requires_java_paimon]

_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("d10", pa.decimal128(10, 2)),
        ("d38", pa.decimal128(38, 6)),
        ("day", pa.date32()),
        ("t", pa.time32("ms")),
        ("ts3", pa.timestamp("ms")),
        ("ts6", pa.timestamp("us")),
        ("ltz", pa.timestamp("us", tz="UTC")),
        ("f", pa.float64()),
        ("b", pa.bool_()),
        ("m", pa.int32()),
    ]
)


def _data(n: int = 60) -> pa.Table:
    base = dt.datetime(2024, 2, 29, 23, 59, 58)
    return pa.table(
        {
            "id": list(range(n)),
            "i8": [i - 10 if i % 5 else None for i in range(n)],
            "i16": [i * 100 for i in range(n)],
            "s": [f"s{i}" if i % 4 else None for i in range(n)],
            "bin": [bytes([i, 1]) for i in range(n)],
            "d10": [Decimal(i * 37 - 900) / 100 for i in range(n)],
            "d38": [Decimal(-(2**90) + i) / 10**6 for i in range(n)],
            "day": [dt.date(1969, 12, 1) + dt.timedelta(days=i) for i in range(n)],
            "t": [dt.time(i % 24, i % 60, 1, 5000) for i in range(n)],
            "ts3": [base + dt.timedelta(milliseconds=i * 7) for i in range(n)],
            "ts6": [base - dt.timedelta(microseconds=i * 13) for i in range(n)],
            "ltz": [dt.datetime(2001, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=i * 7)
                    for i in range(n)],
            "f": [i / 3 for i in range(n)],
            "b": [i % 2 == 0 for i in range(n)],
            "m": [i % 3 for i in range(n)],
        },
        schema=_SCHEMA,
    )  # fmt: skip


def test_java_reads_orc_and_avro_tables(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    data = _data()
    roots = []
    for fmt, compression, extra in [
        ("orc", "zstd", {}),
        ("orc", "snappy", {"orc.timestamp-ltz.legacy.type": "false"}),
        ("avro", "zstd", {}),
        ("avro", "deflate", {}),
    ]:
        options = {"file.format": fmt, "file.compression": compression, **extra}
        table = catalog.create_table(
            f"db.{fmt}_{compression}", schema=_SCHEMA, partition_keys=["m"], options=options
        )
        write_and_commit(table, data, commit_user="u")
        roots.append((table.root, None))
    for (root, _), read in zip(roots, jp.JavaPaimon().read_many(roots), strict=True):
        assert_java_rows(read.rows, data, context=root)


def test_java_reads_a_table_whose_format_changed(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    options = {
        "file.format": "orc",
        "data-file.prefix": "part-",
        "file.suffix.include.compression": "true",
        "compaction.min.file-num": "3",
    }
    table = catalog.create_table("db.t", schema=_SCHEMA, partition_keys=["m"], options=options)
    data = _data()
    for i in range(3):
        write_and_commit(table, data.slice(i * 20, 20), commit_user="u")
    assert table.compact().files_after == 3
    latest = table.schema()  # what ALTER TABLE ... SET ('file.format' = 'avro') leaves behind
    schema = {**latest.to_json_dict(), "id": latest.id + 1}
    schema["options"] = {**latest.options, "file.format": "avro"}
    Path(table.paths.schema_path(latest.id + 1)).write_text(json.dumps(schema))
    write_and_commit(table, data, commit_user="u")
    names = {p.name.split(".", 1)[1] for p in Path(table.root).rglob("bucket-*/part-*")}
    assert names == {"zst.orc", "zst.avro"}
    read = jp.JavaPaimon().read(table.root)
    assert_java_rows(read.rows, pa.concat_tables([data, data]))
