"""Cross-partition upserts (``bucket = -1``, primary key lacking a partition key): issue 20 item 3.

snaplake upserts keys that move between partitions: deduplicate retracts a
moved key in its old partition, first-row keeps the first row; every read
equals a dict model, and every key lives in exactly one (partition, bucket).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from tests.helpers import write_and_commit

import snaplake
from snaplake.errors import UnsupportedTableError
from snaplake.store.format.schema import TableSchema
from snaplake.write.cross_partition import CrossPartitionIndex

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("month", pa.int32()),
        pa.field("name", pa.string()),
        pa.field("qty", pa.int64()),
    ]
)


def create(root: Path, name: str = "db.t", **options: str) -> snaplake.Table:
    """A cross-partition table partitioned by ``month``, keyed by ``id``."""
    return snaplake.FileSystemCatalog(str(root)).create_table(
        name, schema=SCHEMA, partition_keys=["month"], primary_keys=["id"],
        options={"dynamic-bucket.target-row-num": "3", **options},
    )  # fmt: skip


def rows(pairs: list[tuple[int, int]], tag: str = "") -> list[dict[str, Any]]:
    """Rows for ``(id, month)`` pairs; name and qty identify the write."""
    return [{"id": i, "month": m, "name": f"{tag}{i}@{m}", "qty": i * 10 + m} for i, m in pairs]


def to_table(data: list[dict[str, Any]]) -> pa.Table:
    """``data`` as an Arrow table of :data:`SCHEMA`."""
    return pa.Table.from_pylist(data, schema=SCHEMA)


def read(table: snaplake.Table) -> list[dict[str, Any]]:
    """The table's rows, sorted by id."""
    return sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])


def key_places(table: snaplake.Table) -> dict[int, list[tuple[Any, int]]]:
    """Every live id with the (partition, bucket) splits holding it (merged per bucket)."""
    out: dict[int, list[tuple[Any, int]]] = {}
    store = table.file_store()
    for split in table.new_scan().plan():
        got = store.read(
            [split], read_schema=table.schema(), columns=["id"], predicates=[], limit=None,
            evolution=None, schema_of=table.schema_manager.schema,  # type: ignore[arg-type]
        )  # fmt: skip
        for key in got.column("id").to_pylist():
            out.setdefault(key, []).append((split.partition_values, split.bucket))
    return out


def assert_one_place_per_key(table: snaplake.Table) -> None:
    """No key lives in two (partition, bucket)s."""
    twice = {k: v for k, v in key_places(table).items() if len(v) > 1}
    assert not twice, twice


def test_deduplicate_moves_keys_across_partitions(tmp_path: Path) -> None:
    table = create(tmp_path)
    assert table.bucket_mode == "cross-partition" and table.options["bucket"] == "-1"
    model: dict[int, dict[str, Any]] = {}
    history = [
        rows([(1, 1), (2, 1), (3, 2), (4, 2), (5, 1)]),
        rows([(1, 2), (3, 3), (6, 3)], "b"),  # 1 and 3 move; 6 is new
        rows([(1, 1), (1, 3), (2, 1)], "c"),  # one batch moves 1 twice: the last row wins
    ]
    for data in history:
        write_and_commit(table, to_table(data))
        for r in data:
            model[r["id"]] = r
        assert read(table) == sorted(model.values(), key=lambda r: r["id"])
        assert_one_place_per_key(table)
    assert {s.total_buckets for s in table.new_scan().plan()} == {-1}
    assert not list(Path(table.root).glob("index/*"))  # no HASH files, as in Paimon
    latest = table.latest_snapshot()
    assert latest is not None and latest.index_manifest is None


def test_deduplicate_deletes_find_the_key_in_its_partition(tmp_path: Path) -> None:
    table = create(tmp_path)
    write_and_commit(table, to_table(rows([(1, 1), (2, 2), (3, 3)])))
    # -D rows naming another partition (or none known) still delete the key where it lives
    doomed = rows([(1, 5), (2, 2), (9, 1)])
    write_and_commit(table, to_table(doomed), row_kinds=["-D"] * 3)
    assert [r["id"] for r in read(table)] == [3]
    write_and_commit(table, to_table(rows([(1, 4)], "again")))
    assert read(table) == rows([(1, 4)], "again") + rows([(3, 3)])
    assert_one_place_per_key(table)


def test_first_row_keeps_the_first_row_of_a_key_anywhere(tmp_path: Path) -> None:
    table = create(tmp_path, **{"merge-engine": "first-row"})
    first = rows([(1, 1), (2, 1), (3, 2), (2, 3)])  # the second 2 in the same batch is later
    write_and_commit(table, to_table(first))
    write_and_commit(table, to_table(rows([(1, 2), (3, 2), (4, 3)], "b")))
    expected = rows([(1, 1), (2, 1), (3, 2)]) + rows([(4, 3)], "b")
    assert read(table) == sorted(expected, key=lambda r: r["id"])
    assert_one_place_per_key(table)


def test_a_restarted_writer_bootstraps_every_key(tmp_path: Path) -> None:
    """Each round is a new Table object and a new writer: the map comes from the snapshot."""
    create(tmp_path)
    rng = random.Random(3)
    model: dict[int, dict[str, Any]] = {}
    for round_ in range(6):
        table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
        data = rows([(rng.randrange(30), rng.randrange(4)) for _ in range(15)], f"r{round_}")
        write = table.new_write(commit_user="u")
        write.write_arrow(to_table(data))
        table.new_commit(commit_user="u").commit(write.prepare_commit(), commit_identifier=round_)
        write.close()
        for r in data:
            model[r["id"]] = r
        if round_ == 3:
            table.compact(full=True)
    table = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    assert read(table) == sorted(model.values(), key=lambda r: r["id"])
    assert_one_place_per_key(table)
    # within a partition, buckets fill to target-row-num keys (3)
    counts: dict[tuple[Any, int], int] = {}
    for places in key_places(table).values():
        counts[places[0]] = counts.get(places[0], 0) + 1
    assert max(counts.values()) <= 3


@pytest.mark.parametrize(
    "options",
    [
        {"merge-engine": "partial-update"},
        {"merge-engine": "aggregation", "fields.qty.aggregate-function": "sum"},
    ],
)
def test_partial_update_and_aggregation_are_refused(
    tmp_path: Path, options: dict[str, str]
) -> None:
    with pytest.raises(UnsupportedTableError, match="old partition") as info:
        create(tmp_path, **options)
    assert info.value.key == "merge-engine"
    assert not list(tmp_path.rglob("*.json")) and not list(tmp_path.rglob("schema-*"))


def test_index_ttl_forgets_old_keys(tmp_path: Path) -> None:
    """Paimon's documented TTL: a forgotten key written elsewhere is duplicated."""
    table = create(tmp_path, **{"cross-partition-upsert.index-ttl": "1 h"})
    write_and_commit(table, to_table(rows([(1, 1), (2, 1)])))
    now = [0]
    schema: TableSchema = table.schema()
    index = CrossPartitionIndex(
        schema=schema, bootstrap=table.file_store().bootstrap_keys,  # type: ignore[attr-defined]
        clock=lambda: now[0],
    )  # fmt: skip
    kinds = pa.array([0], pa.int8())
    out, _ = index.rewrite_rows(to_table(rows([(1, 2)])), kinds)
    assert sorted(out.column("month").to_pylist()) == [1, 2]  # -D in month 1, row in 2
    now[0] = 3_600_001  # an hour later: key 2 (bootstrapped at 0) is forgotten
    out, _ = index.rewrite_rows(to_table(rows([(2, 3)])), kinds)
    assert out.column("month").to_pylist() == [3]  # no retraction: as Paimon documents
    out, _ = index.rewrite_rows(to_table(rows([(2, 1)])), kinds)
    assert sorted(out.column("month").to_pylist()) == [1, 3]  # 2 was written again at 3


@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
@pytest.mark.parametrize("overwrite", [{"month": 1}, True])
def test_overwrite_is_refused_before_writing(
    tmp_path: Path, engine: str, overwrite: dict[str, int] | bool
) -> None:
    table = create(tmp_path, **{"merge-engine": engine})
    write_and_commit(table, to_table(rows([(1, 1), (2, 2)])))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(UnsupportedTableError, match="overwrite"):
        table.write(to_table(rows([(2, 1)])), overwrite=overwrite)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_multi_column_keys(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.string(), nullable=False),
            pa.field("b", pa.int32(), nullable=False),
            pa.field("p", pa.string()),
        ]
    )
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.m", schema=schema, partition_keys=["p"], primary_keys=["a", "b"]
    )
    first = [
        {"a": "1", "b": 1, "p": "x"},
        {"a": "1:1", "b": 1, "p": "x"},
        {"a": "11", "b": 1, "p": "y"},
    ]
    write_and_commit(table, pa.Table.from_pylist(first, schema=schema))
    second = [{"a": "1", "b": 1, "p": "y"}, {"a": "11", "b": 1, "p": "x"}]
    write_and_commit(table, pa.Table.from_pylist(second, schema=schema))
    got = sorted(table.to_arrow().to_pylist(), key=lambda r: (r["a"], r["b"]))
    assert got == sorted([first[1], *second], key=lambda r: (r["a"], r["b"]))


class CrossPartitionMachine(RuleBasedStateMachine):
    """Upserts and deletes that move keys across partitions, restarts, compactions vs a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp: Path | None = None
        self.model: dict[int, dict[str, Any]] = {}
        self.commits = 0

    @initialize(engine=st.sampled_from(["deduplicate", "first-row"]))
    def start(self, engine: str) -> None:
        import tempfile

        self.tmp = Path(tempfile.mkdtemp(prefix="cross-sm-"))
        self.engine = engine
        options = {"merge-engine": engine}
        if engine == "first-row":
            options["ignore-delete"] = "true"
        self.table = create(self.tmp, **options)
        self.write = self.table.new_write(commit_user="sm")

    def _commit(self) -> None:
        self.table.new_commit(commit_user="sm").commit(
            self.write.prepare_commit(), commit_identifier=self.commits
        )
        self.commits += 1

    @rule(pairs=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 3)), min_size=1, max_size=12))
    def upsert(self, pairs: list[tuple[int, int]]) -> None:
        data = rows(pairs, f"c{self.commits}-")
        self.write.write_arrow(to_table(data))
        self._commit()
        for r in data:
            if self.engine == "deduplicate" or r["id"] not in self.model:
                self.model[r["id"]] = r

    @rule(ids=st.lists(st.integers(0, 12), min_size=1, max_size=4), month=st.integers(0, 3))
    def delete(self, ids: list[int], month: int) -> None:
        if self.engine != "deduplicate":
            return
        data = rows([(i, month) for i in ids])
        self.write.write_arrow(to_table(data), row_kinds=["-D"] * len(data))
        self._commit()
        for i in ids:
            self.model.pop(i, None)

    @rule()
    def restart(self) -> None:
        self.write.close()
        assert self.tmp is not None
        self.table = snaplake.FileSystemCatalog(str(self.tmp)).get_table("db.t")
        self.write = self.table.new_write(commit_user="sm")

    @rule()
    def compact(self) -> None:
        self.table.compact(full=True)

    @invariant()
    def matches_the_model(self) -> None:
        if self.tmp is None:
            return
        assert read(self.table) == sorted(self.model.values(), key=lambda r: r["id"])
        assert_one_place_per_key(self.table)

    def teardown(self) -> None:
        import shutil

        if self.tmp is not None:
            self.write.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


TestCrossPartitionMachine = CrossPartitionMachine.TestCase
TestCrossPartitionMachine.settings = settings(
    max_examples=15, stateful_step_count=8, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
