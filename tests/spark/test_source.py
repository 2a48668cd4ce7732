"""``spark.read.format("snaplake")``: rows equal ``to_arrow``, pushed filters prune, time travel."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualTo, GreaterThan, LessThan, Not, StringStartsWith
from tests.helpers import create_table, write_and_commit
from tests.pk_helpers import PK_KEYS, PK_SCHEMA, make_rows, sorted_rows
from tests.spark.conftest import ROWS_SCHEMA, numbered_rows

from snaplake.errors import InvalidOptionError
from snaplake.spark import register_data_source
from snaplake.spark.source import SnaplakeBatchReader, SnaplakeSourceOptions, SplitPartition
from snaplake.store.format.snapshot import Snapshot
from snaplake.table import Table

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

META = ["_row_kind", "_snapshot_id"]


@pytest.fixture(scope="module")
def source(spark: Any) -> Any:
    """The module's session with ``format("snaplake")`` registered."""
    register_data_source(spark)
    return spark


def _load(spark: Any, warehouse: Path, identifier: str, **options: Any) -> Any:
    reader = spark.read.format("snaplake").option("warehouse", str(warehouse))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(identifier)


def _rows(df: Any, schema: pa.Schema) -> list[dict[str, Any]]:
    return sorted_rows(df.drop(*META).toArrow().cast(schema))


def _by_id(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def _files(reader: SnaplakeBatchReader) -> int:
    parts = reader.partitions()
    assert all(isinstance(p, SplitPartition) for p in parts)
    return sum(len(p.split.files) for p in parts if isinstance(p, SplitPartition))


def _latest(table: Table) -> Snapshot:
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    return snapshot


def test_append_table_rows_filters_and_pruning(source: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table = create_table(wh, "db.events", schema=ROWS_SCHEMA, partition_keys=["month"])
    for i in range(3):  # ids grow per commit: id stats prune files too
        write_and_commit(table, numbered_rows(i * 100, 100), commit_identifier=i)
    latest = _latest(table).id

    df = _load(source, wh, "db.events")
    assert df.columns == [*ROWS_SCHEMA.names, *META]
    whole = df.toArrow()
    assert set(whole["_row_kind"].to_pylist()) == {"+I"}
    assert set(whole["_snapshot_id"].to_pylist()) == {latest}
    assert _by_id(whole.drop_columns(META).cast(ROWS_SCHEMA)) == _by_id(table.to_arrow())

    # Pushed (month, id) and kept by Spark (an expression) filters give the exact rows.
    filtered = df.where("month = 2 AND id < 150 AND NOT (id = 7) AND value * 2 > 10")
    expected = table.to_arrow(filter=[("month", "=", 2), ("id", "<", 150), ("id", "!=", 7)])
    expected = expected.filter(pa.compute.greater(expected["value"], 5.0))
    back = filtered.drop(*META).toArrow().cast(ROWS_SCHEMA)
    assert _by_id(back) == _by_id(expected) and back.num_rows > 0

    # The pushed filters prune files: month 2 of the commits holding ids < 150.
    opts = SnaplakeSourceOptions.parse({"path": "db.events", "warehouse": str(wh)}, streaming=False)
    everything = SnaplakeBatchReader(opts, df.schema)
    assert _files(everything) == 9  # 3 commits x 3 months
    pushed = SnaplakeBatchReader(opts, df.schema)
    month, low, prefix = (
        EqualTo(("month",), 2),
        LessThan(("id",), 150),
        StringStartsWith(("x",), "a"),
    )
    assert list(pushed.pushFilters([month, low, prefix])) == [prefix]
    assert _files(pushed) == 2
    negated = SnaplakeBatchReader(opts, df.schema)
    kept = Not(GreaterThan(("month",), "2"))  # a string literal for a bigint column
    assert list(negated.pushFilters([kept])) == [kept]


def test_a_user_specified_schema_reads_only_its_columns(source: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table = create_table(wh, "db.events", schema=ROWS_SCHEMA, partition_keys=["month"])
    write_and_commit(table, numbered_rows(0, 50), commit_identifier=0)
    projection = "id BIGINT, month BIGINT"
    reader = source.read.format("snaplake").option("warehouse", str(wh)).schema(projection)
    df = reader.load("db.events").where("id < 10")
    assert df.columns == ["id", "month"]
    expected = table.to_arrow(columns=["id", "month"], filter=[("id", "<", 10)])
    assert _by_id(df.toArrow().cast(expected.schema)) == _by_id(expected)
    opts = SnaplakeSourceOptions.parse({"path": "db.events", "warehouse": str(wh)}, streaming=False)
    parts = SnaplakeBatchReader(opts, df.schema).partitions()
    assert parts and all(getattr(p, "columns", None) == ("id", "month") for p in parts)
    with pytest.raises(Exception, match="SchemaMismatchError"):
        reader.schema("id BIGINT, colour STRING").load("db.events").collect()


def test_primary_key_table_and_time_travel(source: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table = create_table(
        wh, "db.pk", schema=PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS,
        options={"bucket": "2"},
    )  # fmt: skip
    write_and_commit(table, make_rows(0, 60))
    first = _latest(table)
    table.create_tag("v1", snapshot_id=first.id)
    second_rows = make_rows(30, 60, seed=5)
    kinds = ["-D" if r["id"] % 5 == 0 else "+U" for r in second_rows]
    write_and_commit(table, second_rows, row_kinds=kinds)

    assert _rows(_load(source, wh, "db.pk"), PK_SCHEMA) == sorted_rows(table.to_arrow())
    pushed = _load(source, wh, "db.pk").where("month = 1 AND id >= 40")
    expected = table.to_arrow(filter=[("month", "=", 1), ("id", ">=", 40)])
    assert _rows(pushed, PK_SCHEMA) == sorted_rows(expected)

    old = sorted_rows(table.to_arrow(snapshot_id=first.id))
    assert old != sorted_rows(table.to_arrow())
    by_id = _load(source, wh, "db.pk", snapshotId=first.id)
    assert set(by_id.toArrow()["_snapshot_id"].to_pylist()) == {first.id}
    assert _rows(by_id, PK_SCHEMA) == old
    assert _rows(_load(source, wh, "db.pk", tag="v1"), PK_SCHEMA) == old
    at = dt.datetime.fromtimestamp(first.time_millis / 1000, tz=dt.UTC)
    as_of = _load(source, wh, "db.pk", asOf=first.time_millis)
    assert _rows(as_of, PK_SCHEMA) == sorted_rows(table.to_arrow(as_of=at))
    iso = _load(source, wh, "db.pk", asOf=at.isoformat())
    assert _rows(iso, PK_SCHEMA) == sorted_rows(table.to_arrow(as_of=at))


def test_bad_input_is_a_typed_error(source: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    create_table(wh, "db.events", schema=ROWS_SCHEMA)
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("db.missing", {}, "TableNotFoundError"),
        ("db.events", {"snapshotId": "x"}, "InvalidOptionError"),
        ("db.events", {"snapshotId": 1, "tag": "v1"}, "InvalidOptionError"),
        ("db.events", {"asOf": "2026-01-01T00:00:00"}, "InvalidOptionError"),  # no zone
        ("db.events", {"snapshotid": 5}, "SnapshotNotFoundError"),
        ("db.events", {"tag": "nope"}, "TagNotFoundError"),
        ("db.events", {"startingSnapshot": "earliest", "snapshotId": 1}, "InvalidOptionError"),
        ("db.events", {"colour": "red"}, "InvalidOptionError"),
    ]
    for identifier, options, error in cases:
        with pytest.raises(Exception, match=error):
            _load(source, wh, identifier, **options).collect()
    with pytest.raises(InvalidOptionError, match="warehouse"):
        SnaplakeSourceOptions.parse({"path": "db.events"}, streaming=False)
    with pytest.raises(InvalidOptionError, match="mode"):
        SnaplakeSourceOptions.parse(
            {"path": "db.events", "warehouse": str(wh), "mode": "full"}, streaming=True
        )


def test_empty_table_reads_no_rows(source: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table: Table = create_table(wh, "db.events", schema=ROWS_SCHEMA)
    assert table.latest_snapshot() is None
    assert _load(source, wh, "db.events").count() == 0


# (kind, ids) per commit: inserts, updates, a delete of a present and of an absent key
CHANGE_ROUNDS: list[list[tuple[str, Sequence[int]]]] = [
    [("+I", range(8))],
    [("+U", range(3)), ("-D", (5, 99)), ("+I", (8,))],
    [("+U", (1, 8)), ("-D", (0,))],
]


def _changelog_table(wh: Path, producer: str) -> tuple[Table, Counter[tuple[Any, ...]]]:
    """A table of ``producer`` after CHANGE_ROUNDS, and the model's changelog rows.

    Each round is one commit and, for ``full-compaction``, a full compaction (a
    ``lookup`` writer compacts its level 0 before its commit): the changelog of the
    round's COMPACT snapshot is then, per touched key, ``+I`` (new), ``-U``/``+U``
    (changed) or ``-D`` (gone), as ``(snapshot, kind, id, month, value)``.
    """
    table = create_table(
        wh, f"db.{producer.replace('-', '_')}", schema=ROWS_SCHEMA, primary_keys=["id"],
        options={"bucket": "1", "changelog-producer": producer},
    )  # fmt: skip
    state: dict[int, tuple[int, float]] = {}
    expected: Counter[tuple[Any, ...]] = Counter()
    for n, changes in enumerate(CHANGE_ROUNDS):
        rows: list[dict[str, Any]] = []
        kinds: list[str] = []
        old = dict(state)
        for kind, ids in changes:
            for i in ids:
                rows.append({"id": i, "month": 1 + i % 2, "value": float(10 * n + i)})
                kinds.append(kind)
                if kind == "-D":
                    state.pop(i, None)
                else:
                    state[i] = (1 + i % 2, float(10 * n + i))
        write_and_commit(table, rows, row_kinds=kinds)
        if producer == "full-compaction":
            table.compact(full=True)
        sid = _latest(table).id
        for key in {r["id"] for r in rows}:
            before, after = old.get(key), state.get(key)
            if before is not None:
                expected[(sid, "-D" if after is None else "-U", key, *before)] += 1
            if after is not None:
                expected[(sid, "+U" if before is not None else "+I", key, *after)] += 1
    assert str(_latest(table).commit_kind) == "COMPACT"
    return table, expected


def test_stream_reads_the_lookup_and_full_compaction_changelog(source: Any, tmp_path: Path) -> None:
    """``readStream.format("snaplake")`` (mode auto: the changelog files) equals the model."""
    wh = tmp_path / "wh"
    for producer in ("lookup", "full-compaction"):
        table, expected = _changelog_table(wh, producer)
        name = f"changelog_{producer.replace('-', '_')}"
        stream = source.readStream.format("snaplake").option("warehouse", str(wh))
        query = (
            stream.load(table.identifier)
            .writeStream.format("memory")
            .queryName(name)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        got = source.table(name).toArrow().to_pylist()
        assert (
            Counter(
                (r["_snapshot_id"], r["_row_kind"], r["id"], r["month"], r["value"]) for r in got
            )
            == expected
        ), producer
