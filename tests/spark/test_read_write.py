"""Spark reads planned by snaplake, batch writes, bad input refused before any file is written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table, write_and_commit
from tests.spark.conftest import (
    ROWS_SCHEMA,
    ROWS_SPARK_DDL,
    data_files_on_disk,
    numbered_rows,
    write_parquet_files,
)

import snaplake
from snaplake.errors import SchemaMismatchError
from snaplake.spark import SnaplakeSink, read, write
from snaplake.table import Table

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

WIDE = pa.schema(
    [
        ("id", pa.int64()),
        ("month", pa.int64()),
        ("carrier", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("distance", pa.float64()),
    ]
)


def _wide_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    base = dt.datetime(2013, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": ids,
            "month": [1 + i % 4 for i in ids],
            "carrier": [None if i % 7 == 0 else f"c{i % 5}" for i in ids],
            "ts": [base + dt.timedelta(minutes=i) for i in ids],
            "distance": [float(i % 997) for i in ids],
        },
        schema=WIDE,
    )


@pytest.fixture
def wide_table(tmp_path: Path) -> Table:
    table = create_table(tmp_path / "wh", "db.wide", schema=WIDE, partition_keys=["month"])
    for i in range(3):  # three commits: ids grow with each, so id stats prune files
        write_and_commit(table, _wide_rows(i * 1_000, 1_000), commit_user="py", commit_identifier=i)
    return table


def _sorted_rows(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def test_read_equals_to_arrow_with_pruning(spark: Any, wide_table: Table) -> None:
    """The whole table, a partition and an id range read through Spark equal to_arrow()."""
    full = read(spark, wide_table)
    assert _sorted_rows(full.toArrow()) == _sorted_rows(wide_table.to_arrow())
    all_files = len(full.inputFiles())
    assert all_files == 12  # 3 commits x 4 months

    july = read(spark, wide_table, filter={"month": 2})
    assert _sorted_rows(july.toArrow()) == _sorted_rows(wide_table.to_arrow(filter={"month": 2}))
    assert len(july.inputFiles()) == 3 < all_files

    low = read(spark, wide_table, filter=[("id", "<", 500), ("carrier", "is not null")])
    want = wide_table.to_arrow(filter=[("id", "<", 500), ("carrier", "is not null")])
    assert _sorted_rows(low.toArrow()) == _sorted_rows(want)
    assert len(low.inputFiles()) == 4 < all_files  # only the first commit's files

    first = read(spark, wide_table, snapshot_id=1, columns=["distance", "id"])
    assert first.columns == ["distance", "id"]
    assert _sorted_rows(first.toArrow()) == _sorted_rows(
        wide_table.to_arrow(snapshot_id=1, columns=["distance", "id"])
    )


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_orc_and_avro_tables_read_and_write(spark: Any, tmp_path: Path, fmt: str) -> None:
    """Spark cannot read these files itself here: executors read them with snaplake's readers."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table(
        "db.f", schema=WIDE, partition_keys=["month"], options={"file.format": fmt}
    )
    w = table.new_write(commit_user="py")
    w.write_arrow(_wide_rows(0, 500))
    table.new_commit(commit_user="py").commit(w.prepare_commit())
    write(spark.createDataFrame(_wide_rows(500, 100).to_pandas()), table)
    assert all(p.endswith(f".{fmt}") for s in table.new_scan().plan() for p in s.paths)
    got = read(spark, table, filter=("id", ">=", 450))
    assert _sorted_rows(got.toArrow()) == _sorted_rows(table.to_arrow(filter=("id", ">=", 450)))
    assert read(spark, table).count() == 600


def test_unsupported_primary_key_tables_are_refused_on_the_driver(
    spark: Any, tmp_path: Path
) -> None:
    """Deletion vectors with first-row (Paimon refuses the pair): refused before any job."""
    from snaplake.errors import InvalidOptionError
    from snaplake.store.format.paths import PathFactory
    from snaplake.store.format.schema import SchemaManager, TableSchema

    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    plain = TableSchema.from_arrow(WIDE, partition_keys=["month"])
    raw = plain.to_json_dict()
    raw["primaryKeys"] = ["id", "month"]
    raw["options"] = {**raw["options"], "bucket": "2", "deletion-vectors.enabled": "true",
                      "merge-engine": "first-row"}  # fmt: skip
    root = tmp_path / "wh" / "db.db" / "pk"
    SchemaManager(catalog.file_io, PathFactory(str(root))).create(TableSchema.from_json_dict(raw))
    df = spark.createDataFrame(_wide_rows(0, 10).to_pandas())
    with pytest.raises(InvalidOptionError, match="deletion vectors"):
        write(df, "db.pk", warehouse=str(tmp_path / "wh"))
    with pytest.raises(InvalidOptionError, match="deletion vectors"):
        read(spark, "db.pk", warehouse=str(tmp_path / "wh"))
    assert sorted(p.name for p in root.iterdir()) == ["schema"]  # nothing written


def test_read_errors_and_empty_table(spark: Any, tmp_path: Path) -> None:
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_table("db.empty", schema=ROWS_SCHEMA, partition_keys=["month"])
    empty = read(spark, "db.empty", warehouse=str(tmp_path / "wh"))
    assert empty.count() == 0
    assert empty.columns == ["id", "month", "value"]
    with pytest.raises(SchemaMismatchError, match="nope"):
        read(spark, "db.empty", warehouse=str(tmp_path / "wh"), columns=["nope"])


def test_batch_write_append_and_overwrites(spark: Any, wide_table: Table) -> None:
    """append adds; a static partition overwrite, a dynamic one and a full one replace rows."""
    extra = spark.createDataFrame(
        _wide_rows(5_000, 40).to_pylist(), schema=read(spark, wide_table).schema
    )
    result = write(extra, wide_table)
    assert result.records_added == 40
    assert wide_table.to_arrow().num_rows == 3_040

    month1 = extra.where("month = 1")
    write(month1, wide_table, mode="overwrite", overwrite_partitions={"month": 1})
    back = wide_table.to_arrow()
    assert back.filter(pa.compute.equal(back["month"], 1)).num_rows == 10
    assert back.num_rows == 3_040 - 760 + 10

    write(extra.where("month = 2"), wide_table, mode="overwrite", overwrite_partitions="dynamic")
    assert wide_table.to_arrow(filter={"month": 2}).num_rows == 10
    assert wide_table.to_arrow(filter={"month": 3}).num_rows == 760

    write(extra, wide_table, mode="overwrite")
    assert wide_table.to_arrow().num_rows == 40
    with pytest.raises(ValueError, match="overwrite_partitions"):
        write(extra, wide_table, overwrite_partitions={"month": 1})


def _strict_table(tmp_path: Path) -> Table:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("month", pa.int64()), ("value", pa.float64())]
    )
    return create_table(tmp_path / "wh", "db.strict", schema=schema, partition_keys=["month"])


def test_schema_mismatch_fails_the_query_before_any_file(spark: Any, tmp_path: Path) -> None:
    """A stream whose columns do not fit the table fails with SchemaMismatchError, no file."""
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    table = catalog.create_table("db.t", schema=ROWS_SCHEMA, partition_keys=["month"])
    bad = numbered_rows(0, 50).set_column(0, "id", pa.array([str(i) for i in range(50)]))
    write_parquet_files(tmp_path / "src", [bad])
    query = (
        spark.readStream.schema("id string, month long, value double")
        .parquet(str(tmp_path / "src"))
        .writeStream.foreachBatch(SnaplakeSink(table))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="SchemaMismatchError") as caught:
        query.awaitTermination()
    assert "column 'id' has type string" in str(caught.value)
    assert table.latest_snapshot() is None
    assert data_files_on_disk(Path(table.root)) == set()

    extra_col = spark.createDataFrame(
        [(1, 1, 1.0, "x")], "id long, month long, value double, z string"
    )
    with pytest.raises(SchemaMismatchError, match="unexpected \\['z'\\]"):
        SnaplakeSink(table, commit_user="u")(extra_col, 0)
    assert data_files_on_disk(Path(table.root)) == set()


def test_nullable_column_into_not_null_field(spark: Any, tmp_path: Path) -> None:
    """Nullable-by-schema is refused on the driver; with value checks, an actual null is refused."""
    table = _strict_table(tmp_path)
    nullable = spark.createDataFrame(numbered_rows(0, 20).to_pylist(), ROWS_SPARK_DDL)
    with pytest.raises(SchemaMismatchError, match="nullable in the DataFrame but NOT NULL"):
        SnaplakeSink(table, commit_user="u")(nullable, 0)

    # The same check in a streaming query (file sources mark every column nullable).
    write_parquet_files(tmp_path / "src", [numbered_rows(0, 20)])
    query = (
        spark.readStream.schema(ROWS_SPARK_DDL)
        .parquet(str(tmp_path / "src"))
        .writeStream.foreachBatch(SnaplakeSink(table))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="SchemaMismatchError"):
        query.awaitTermination()
    assert data_files_on_disk(Path(table.root)) == set()

    # Checking values instead: the nulls are found on the executors, files removed.
    rows = [(None if i == 13 else i, 1 + i % 3, 0.5) for i in range(40)]
    with_null = spark.createDataFrame(rows, ROWS_SPARK_DDL).repartition(2)
    lenient = SnaplakeSink(table, commit_user="u", check_nullability=False)
    with pytest.raises(SchemaMismatchError, match="NOT NULL in the table"):
        lenient(with_null, 0)
    assert data_files_on_disk(Path(table.root)) == set()
    assert table.latest_snapshot() is None
    lenient(nullable, 0)  # no actual nulls: accepted
    assert table.to_arrow().num_rows == 20


def test_a_batch_write_error_speaks_of_the_dataframe(spark: Any, tmp_path: Path) -> None:
    """Issue 18 item 14: a batch ``write()`` said "a micro-batch row does not fit"."""
    table = _strict_table(tmp_path)
    rows = [(None if i == 3 else i, 1, 0.5) for i in range(8)]
    with_null = spark.createDataFrame(rows, ROWS_SPARK_DDL)
    with pytest.raises(SchemaMismatchError, match="NOT NULL in the table") as info:
        write(with_null, table, check_nullability=False)
    assert str(info.value).startswith(f"a DataFrame row does not fit table {table.identifier}")
    assert "micro-batch" not in str(info.value)
    assert data_files_on_disk(Path(table.root)) == set()


def test_binary_n_tables_read_and_write_through_spark(spark: Any, tmp_path: Path) -> None:
    """Issue 18 item 11: BINARY(n) reads as ``fixed_size_binary(n)``, which Spark lacks; every
    read path hands Spark ``binary`` (``BinaryType``) and writes take Spark's binary."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("b", pa.binary(4))])
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    data = pa.table({"id": [1, 2], "b": pa.array([b"abcd", None], pa.binary(4))}, schema=schema)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("parquet", {}),  # Spark's own Parquet reader
        ("orc", {"options": {"file.format": "orc"}}),  # the mapInArrow file reader
        ("keyed", {"primary_keys": ["id"], "options": {"bucket": "1"}}),  # merge on read
    ]
    for name, kwargs in cases:
        table = catalog.create_table(f"db.{name}", schema=schema, **kwargs)
        w = table.new_write(commit_user="u")
        w.write_arrow(data)
        table.new_commit(commit_user="u").commit(w.prepare_commit())
        rows = sorted(read(spark, table).collect())
        assert [(r.id, r.b) for r in rows] == [(1, bytearray(b"abcd")), (2, None)], name
        more = spark.createDataFrame([(3, bytearray(b"wxyz"))], "id long, b binary")
        write(more, table, check_nullability=False)
        assert table.to_arrow().sort_by("id").column("b").to_pylist() == [b"abcd", None, b"wxyz"]


@pytest.mark.s3
def test_sink_and_read_on_s3(spark: Any, tmp_path: Path) -> None:
    """Executors write and read an s3:// warehouse through the picklable FileIO (no s3a jars)."""
    from tests.s3_servers import start_moto

    server = start_moto()
    try:
        endpoint = server.endpoint
        warehouse = f"s3://{endpoint.new_bucket()}/wh"
        options = endpoint.options()
        catalog = snaplake.FileSystemCatalog(warehouse, options=options)
        catalog.create_table("db.t", schema=ROWS_SCHEMA, partition_keys=["month"])
        sink = SnaplakeSink("db.t", warehouse=warehouse, options=options, commit_user="s3")
        df = spark.createDataFrame(numbered_rows(0, 600).to_pylist(), ROWS_SPARK_DDL)
        sink(df.repartition(2), 0)
        sink(df.repartition(2), 0)  # replay: no-op
        table = catalog.get_table("db.t")
        assert len(table.snapshots()) == 1
        back = read(spark, "db.t", warehouse=warehouse, options=options, filter={"month": 2})
        assert _sorted_rows(back.toArrow()) == _sorted_rows(table.to_arrow(filter={"month": 2}))
        assert back.count() == 200
    finally:
        server.stop()


def test_readme_spark_blocks_run(spark: Any, tmp_path: Path) -> None:
    """The README's Spark blocks, pasted into this session (issue 18, item 12).

    What they leave to the reader is made real: ``demo.flights`` exists, Parquet
    files land in a directory, ``schema`` describes them, ``df`` holds rows of
    the table; the paths are rewritten to temporary directories.
    """
    from tests.readme_blocks import SPARK_DDL, blocks_of, flights, rewrite

    warehouse = str(tmp_path / "warehouse")
    snaplake.FileSystemCatalog(warehouse).create_table(
        "demo.flights", schema=flights().schema, partition_keys=["month"]
    )
    landing = tmp_path / "landing"
    write_parquet_files(landing, [flights(), flights().slice(0, 3)])
    namespace: dict[str, Any] = {
        "spark": spark,
        "schema": SPARK_DDL,
        "df": spark.read.schema(SPARK_DDL).parquet(str(landing)).where("month = 1"),
        "wh": warehouse,
    }
    stream, cdc, source, maintenance = blocks_of("spark")
    code = rewrite(
        stream,
        {
            '"/landing"': repr(str(landing)),
            '"/data/warehouse"': repr(warehouse),
            '"/data/checkpoints/flights"': repr(str(tmp_path / "checkpoint")),
        },
    )
    try:
        exec(compile(code, f"README.md:{stream.line}", "exec"), namespace)
        query = namespace["query"]
        query.processAllAvailable()
    finally:
        for active in spark.streams.active:
            active.stop()
    assert namespace["df"].columns == ["dest", "distance"]
    assert namespace["df"].count() >= 3  # month 1 of the overwrite (and maybe of the stream)
    table = snaplake.FileSystemCatalog(warehouse).get_table("demo.flights")
    assert {s.commit_kind for s in table.snapshots()} >= {"APPEND", "OVERWRITE"}
    # The primary-key block: two versions of flight 11 in one write, ordered by order_by.
    snaplake.FileSystemCatalog(warehouse).create_table(
        "cdc.flights",
        schema=pa.schema([pa.field("flight", pa.int32(), nullable=False), ("dest", pa.string())]),
        primary_keys=["flight"],
        options={"bucket": "2"},
    )
    namespace["changes"] = spark.createDataFrame(
        [(11, "MIA", "+U", 2, 0), (11, "BOS", "+I", 1, 0), (12, "ORD", "+I", 1, 1)],
        "flight int not null, dest string, op string, commit_ts long, pos long",
    )
    exec(compile(cdc.code, f"README.md:{cdc.line}", "exec"), namespace)
    cdc_rows = snaplake.FileSystemCatalog(warehouse).get_table("cdc.flights").to_arrow()
    assert sorted(cdc_rows.to_pylist(), key=lambda r: r["flight"]) == [
        {"flight": 11, "dest": "MIA"},
        {"flight": 12, "dest": "ORD"},
    ]
    exec(compile(maintenance.code, f"README.md:{maintenance.line}", "exec"), namespace)
    _run_source_block(source, namespace, tmp_path)


def _run_source_block(block: Any, namespace: dict[str, Any], tmp_path: Path) -> None:
    """The ``format("snaplake")`` block: a time-travel read and a changelog mirror."""
    from tests.readme_blocks import rewrite

    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("month", pa.int32()),
            ("amount", pa.float64()),
        ]
    )
    wh = namespace["wh"]
    orders = create_table(
        wh, "db.orders", schema=schema, primary_keys=["id"], options={"bucket": "2"}
    )
    create_table(
        wh, "db.orders_mirror", schema=schema, primary_keys=["id"], options={"bucket": "2"}
    )
    rows = [{"id": 990 + i, "month": 6 + i % 2, "amount": float(i)} for i in range(20)]
    at = write_and_commit(orders, pa.Table.from_pylist(rows, schema=schema)).snapshot_id
    later = [{"id": 1000 + i, "month": 7, "amount": -1.0} for i in range(5)]  # not read at `at`
    write_and_commit(orders, pa.Table.from_pylist(later, schema=schema))
    namespace["ckpt"] = str(tmp_path / "ckpt-orders")
    code = rewrite(block, {'.option("snapshotId", 42)': f'.option("snapshotId", {at})'})
    try:
        exec(compile(code, f"README.md:{block.line}", "exec"), namespace)
        for query in namespace["spark"].streams.active:
            query.processAllAvailable()
    finally:
        for active in namespace["spark"].streams.active:
            active.stop()
    read = namespace["orders"].drop("_row_kind", "_snapshot_id").toPandas()
    expected = sorted(r["id"] for r in rows if r["month"] == 7 and r["id"] > 1000)
    assert sorted(read["id"]) == expected and (read["amount"] >= 0).all()
    mirror = snaplake.FileSystemCatalog(wh).get_table("db.orders_mirror").to_arrow()
    by_id = lambda t: sorted(t.to_pylist(), key=lambda r: r["id"])  # noqa: E731
    assert by_id(mirror) == by_id(orders.to_arrow())


def test_deletion_vector_tables_read_without_their_deleted_rows(spark: Any, tmp_path: Path) -> None:
    """The executors get each split's vector files: append and primary-key tables."""
    from tests.dv_helpers import append_dv_table, pk_dv_table

    for name, table in (
        ("append", append_dv_table(tmp_path / "append", bucket=-1)),
        ("pk", pk_dv_table(tmp_path / "pk")),
    ):
        assert any(s.deletion_files for s in table.new_scan().plan())
        expected = table.to_arrow()
        wh = str(Path(table.root).parent.parent)
        got = read(spark, "db.t", warehouse=wh).toArrow()
        assert _sorted_rows(got.cast(expected.schema)) == _sorted_rows(expected), name
        filtered = read(spark, "db.t", warehouse=wh, columns=["id"], filter=("id", "<", 30))
        want = table.to_arrow(columns=["id"], filter=("id", "<", 30))
        assert sorted(r.id for r in filtered.collect()) == sorted(want["id"].to_pylist()), name
