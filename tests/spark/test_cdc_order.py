"""Versions of one primary key within one Spark write: ordered by ``order_by`` or
``sequence.field``, refused when nothing orders them (issue 18, item 2).

Spark's file source packs the files of a micro-batch into splits by size, largest
first, so a batch of ``0001.json`` (one row, the older version) and ``0002.json``
(199 rows, the newer one among them) hands the older version over last.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import create_table
from tests.spark.conftest import data_files_on_disk

import snaplake
from snaplake.errors import AmbiguousOrderError, SchemaMismatchError
from snaplake.spark import SnaplakeSink, write

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

EVENT_DDL = "id long, status string, lsn long, op string"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("status", pa.string())])
WITH_LSN = SCHEMA.append(pa.field("lsn", pa.int64()))


def _table(warehouse: Path, schema: pa.Schema = SCHEMA, **options: str) -> snaplake.Table:
    return create_table(
        warehouse, "cdc.flights", schema=schema, primary_keys=["id"],
        options={"bucket": "2", **options},
    )  # fmt: skip


def _write_events(path: Path, events: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def _issue_files(source: Path) -> None:
    """The issue's batch: the small file holds the older version of id 1."""
    _write_events(source / "0001.json", [{"id": 1, "status": "scheduled", "lsn": 1, "op": "+I"}])
    rest = [{"id": i, "status": f"s{i}", "lsn": 1 + i, "op": "+I"} for i in range(2, 200)]
    _write_events(
        source / "0002.json", [{"id": 1, "status": "departed", "lsn": 2, "op": "+U"}, *rest]
    )


def _stream(spark: Any, source: Path, checkpoint: Path, sink: SnaplakeSink, **opts: Any) -> None:
    reader = spark.readStream.schema(EVENT_DDL)
    for key, value in opts.items():
        reader = reader.option(key, value)
    query = (
        reader.json(str(source))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def _rows(table: snaplake.Table) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in table.to_arrow().to_pylist()}


def test_stream_refuses_versions_of_a_key_that_nothing_orders(spark: Any, tmp_path: Path) -> None:
    """Without order_by or sequence.field the batch fails, commits nothing, leaves no file.

    (Before the fix the batch committed ``scheduled`` for id 1.)
    """
    table = _table(tmp_path / "wh", WITH_LSN)
    _issue_files(tmp_path / "src")
    sink = SnaplakeSink(table, row_kind_column="op", check_nullability=False)
    with pytest.raises(Exception, match="AmbiguousOrderError") as caught:
        _stream(spark, tmp_path / "src", tmp_path / "ckpt", sink)
    text = str(caught.value)
    assert "{'id': 1}" in text and "order_by" in text and "sequence.field" in text
    assert table.latest_snapshot() is None
    assert data_files_on_disk(Path(table.root)) == set()


def test_stream_with_order_by_keeps_the_newest_version(spark: Any, tmp_path: Path) -> None:
    """order_by='lsn' (a batch column the table lacks) numbers id 1's versions by lsn."""
    table = _table(tmp_path / "wh")
    _issue_files(tmp_path / "src")
    sink = SnaplakeSink(table, row_kind_column="op", check_nullability=False, order_by="lsn")
    _stream(spark, tmp_path / "src", tmp_path / "ckpt", sink)
    rows = _rows(table)
    assert rows[1] == {"id": 1, "status": "departed"}
    assert len(rows) == 199
    assert table.schema().field_names == ["id", "status"]  # lsn steered, was not written


def test_stream_with_sequence_field_needs_no_order_by(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path / "wh", WITH_LSN, **{"sequence.field": "lsn"})
    _issue_files(tmp_path / "src")
    sink = SnaplakeSink(table, row_kind_column="op", check_nullability=False)
    _stream(spark, tmp_path / "src", tmp_path / "ckpt", sink)
    assert _rows(table)[1] == {"id": 1, "status": "departed", "lsn": 2}


def _change_log(rng: random.Random, files: int) -> list[list[dict[str, Any]]]:
    """Insert/update/delete events of 60 keys over ``files`` files of very different sizes.

    Updates come as Flink-style ``-U``/``+U`` pairs sharing one lsn; every
    event of a file has a higher lsn than those of earlier files.
    """
    live: dict[int, str] = {}
    lsn = 0
    out = []
    for _ in range(files):
        events: list[dict[str, Any]] = []
        for _ in range(rng.choice([1, 2, 5, 40, 120])):
            key = rng.randrange(60)
            lsn += 1
            if key not in live:
                live[key] = f"v{lsn}"
                events.append({"id": key, "status": live[key], "lsn": lsn, "op": "+I"})
            elif rng.random() < 0.3:
                events.append({"id": key, "status": live.pop(key), "lsn": lsn, "op": "-D"})
            else:
                old, live[key] = live[key], f"v{lsn}"
                events.append({"id": key, "status": old, "lsn": lsn, "op": "-U"})
                events.append({"id": key, "status": live[key], "lsn": lsn, "op": "+U"})
        rng.shuffle(events)  # a file's rows in no order: only lsn orders them
        out.append(events)
    return out


def _expected(files: list[list[dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    rank = {"-U": 0, "-D": 1, "+I": 1, "+U": 1}
    state: dict[int, dict[str, Any]] = {}
    events = sorted((e for f in files for e in f), key=lambda e: (e["lsn"], rank[e["op"]]))
    for e in events:
        if e["op"] in ("+I", "+U"):
            state[e["id"]] = {"id": e["id"], "status": e["status"]}
        else:
            state.pop(e["id"], None)
    return state


def test_stream_of_a_change_log_with_order_by_matches_the_log(spark: Any, tmp_path: Path) -> None:
    """Several files per micro-batch, updates as -U/+U pairs of one lsn: exact final state."""
    table = _table(tmp_path / "wh")
    files = _change_log(random.Random(18), 12)
    for i, events in enumerate(files):
        path = tmp_path / "src" / f"{i:04d}.json"
        _write_events(path, events)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the source's file order
    sink = SnaplakeSink(table, row_kind_column="op", check_nullability=False, order_by=["lsn"])
    _stream(spark, tmp_path / "src", tmp_path / "ckpt", sink, maxFilesPerTrigger=3)
    assert len(table.snapshots()) == 4
    assert _rows(table) == _expected(files)


def _versions_df(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """Rows spread over 3 partitions at random, so one key's versions start in several."""
    return spark.createDataFrame(rows, EVENT_DDL).repartition(3)


def test_batch_write_refuses_then_orders_versions_spread_over_partitions(
    spark: Any, tmp_path: Path
) -> None:
    table = _table(tmp_path / "wh", WITH_LSN)
    rng = random.Random(7)
    rows = [(k, f"k{k}-v{v}", v * 100 + k, "+U") for k in range(50) for v in range(5)]
    rng.shuffle(rows)
    with pytest.raises(AmbiguousOrderError, match="several versions of the key"):
        write(_versions_df(spark, rows), table, row_kind_column="op", check_nullability=False)
    assert table.latest_snapshot() is None
    assert data_files_on_disk(Path(table.root)) == set()
    write(
        _versions_df(spark, rows),
        table,
        row_kind_column="op",
        check_nullability=False,
        order_by="lsn",
    )
    assert _rows(table) == {k: {"id": k, "status": f"k{k}-v4", "lsn": 400 + k} for k in range(50)}


def test_ties_on_order_by(spark: Any, tmp_path: Path) -> None:
    """A -U sorts before the other kinds of its order value; identical repeats pass;
    other ties and null order values are refused."""
    table = _table(tmp_path / "wh")
    kwargs: dict[str, Any] = {"row_kind_column": "op", "check_nullability": False}
    write(
        _versions_df(
            spark,
            [(1, "new", 5, "+U"), (1, "old", 5, "-U"), (1, "older", 4, "+I"),
             (2, "same", 3, "+I"), (2, "same", 3, "+I")],
        ),
        table, order_by="lsn", **kwargs,
    )  # fmt: skip
    assert _rows(table) == {1: {"id": 1, "status": "new"}, 2: {"id": 2, "status": "same"}}
    tied = [(3, "a", 7, "+U"), (3, "b", 7, "+U")]
    with pytest.raises(AmbiguousOrderError, match=r"equal order_by values \{'lsn': 7\}"):
        write(_versions_df(spark, tied), table, order_by="lsn", **kwargs)
    with pytest.raises(AmbiguousOrderError, match="'lsn' is null"):
        write(_versions_df(spark, [(4, "x", None, "+I")]), table, order_by="lsn", **kwargs)
    assert len(table.snapshots()) == 1


def test_order_free_aggregation_takes_many_rows_per_key(spark: Any, tmp_path: Path) -> None:
    """A sum has no order to lose: several rows of a key need no order_by."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int64())])
    table = _table(
        tmp_path / "wh",
        schema,
        **{"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"},
    )
    df = spark.createDataFrame([(i % 3, 1) for i in range(30)], "id long, n long").repartition(3)
    write(df, table, check_nullability=False)
    assert _rows(table) == {i: {"id": i, "n": 10} for i in range(3)}


def test_bad_order_by_is_refused_before_any_job(spark: Any, tmp_path: Path) -> None:
    table = _table(tmp_path / "wh")
    df = spark.createDataFrame([(1, "a")], "id long, status string")
    with pytest.raises(SchemaMismatchError, match="'lsn' is not a column"):
        write(df, table, check_nullability=False, order_by="lsn")
    with pytest.raises(ValueError, match="order_by must name"):
        SnaplakeSink(table, order_by=[])
    append = snaplake.FileSystemCatalog(str(tmp_path / "wh")).create_table("cdc.log", schema=SCHEMA)
    with pytest.raises(SchemaMismatchError, match="needs a primary-key table"):
        write(df, append, check_nullability=False, order_by="id")
