"""Spark writes cross-partition tables (issue 20 item 3): every row of a key goes to one task."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.unit.mergetree.test_cross_partition import (
    SCHEMA,
    assert_one_place_per_key,
    create,
    read,
    rows,
)

from snaplake.spark import SnaplakeSink, write

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]


def _df(spark: Any, data: list[dict[str, Any]]) -> Any:
    return spark.createDataFrame(pa.Table.from_pylist(data, schema=SCHEMA)).repartition(3)


def test_spark_write_and_sink_move_keys_across_partitions(spark: Any, tmp_path: Path) -> None:
    table = create(tmp_path)
    rng = random.Random(5)
    model: dict[int, dict[str, Any]] = {}
    batches = [
        rows([(i, rng.randrange(4)) for i in rng.sample(range(60), 40)], f"b{n}-") for n in range(3)
    ]
    write(_df(spark, batches[0]), table, check_nullability=False)
    write(_df(spark, batches[1]), table, check_nullability=False)
    SnaplakeSink(table, commit_user="cdc", check_nullability=False)(_df(spark, batches[2]), 0)
    for data in batches:
        for r in data:
            model[r["id"]] = r
    assert read(table) == sorted(model.values(), key=lambda r: r["id"])
    assert_one_place_per_key(table)


def test_one_spark_batch_with_a_key_in_two_partitions_keeps_it_once(
    spark: Any, tmp_path: Path
) -> None:
    """Both rows of a key reach the same task, whose writer keeps one (no order is given)."""
    table = create(tmp_path)
    # ten partitions over Spark's two shuffle partitions: by partition, many pairs would split
    data = rows([(i, i % 10) for i in range(30)]) + rows(
        [(i, (i + 1) % 10) for i in range(30)], "x"
    )
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # keep both shuffle partitions
    try:
        write(_df(spark, data), table, check_nullability=False)
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    got = read(table)
    assert [r["id"] for r in got] == list(range(30))
    candidates = {(r["id"], r["month"], r["name"]) for r in data}
    assert {(r["id"], r["month"], r["name"]) for r in got} <= candidates
    assert_one_place_per_key(table)
