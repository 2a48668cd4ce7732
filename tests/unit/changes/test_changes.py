"""Table.changes / plan_changes against a model: append and primary-key tables, each mode."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from tests.pk_helpers import ENGINES, PK_KEYS, PK_SCHEMA, engine_options

from snaplake.catalog import FileSystemCatalog
from snaplake.errors import InvalidOptionError, SnapshotNotFoundError, UnsupportedTableError
from snaplake.table import Table

APPEND_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
RETAIN = {
    "snapshot.num-retained.min": "3",
    "snapshot.num-retained.max": "3",
    "snapshot.time-retained": "0 ms",
}


def _catalog(tmp_path: Any) -> FileSystemCatalog:
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    catalog.create_database("db", ignore_if_exists=True)
    return catalog


def _pk_rows(ids: list[int], tag: str, month: int = 1) -> pa.Table:
    n = len(ids)
    return pa.table(
        {"month": [month] * n, "id": ids, "name": [f"{tag}{i}" for i in ids],
         "qty": [i + len(tag) for i in ids], "price": [float(i) / 2 for i in ids],
         "ok": [i % 2 == 0 for i in ids]},
        schema=PK_SCHEMA,
    )  # fmt: skip


def _without_meta(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


def _replay(rows: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """Apply change rows to an empty keyed state; return the state sorted by key."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        key = tuple(r[k] for k in keys)
        if r["_row_kind"] in ("+I", "+U"):
            state[key] = {k: v for k, v in r.items() if not k.startswith("_")}
        else:
            state.pop(key, None)
    return [state[k] for k in sorted(state)]


def _write(table: Table, data: pa.Table, **kwargs: Any) -> int:
    """Write and commit ``data``; the new snapshot's id."""
    sid = table.write(data, **kwargs).snapshot_id
    assert sid is not None
    return sid


def _append_of(table: Table, snapshot_id: int) -> int:
    """The APPEND snapshot a write made (a lifting writer's result is its COMPACT snapshot)."""
    while table.snapshot(snapshot_id).commit_kind != "APPEND":
        snapshot_id -= 1
    return snapshot_id


def _latest(table: Table) -> int:
    snap = table.latest_snapshot()
    assert snap is not None
    return snap.id


def _view(table: Table, snapshot_id: int) -> list[dict[str, Any]]:
    view = table.to_arrow(snapshot_id=snapshot_id)
    rows: list[dict[str, Any]] = view.sort_by([(k, "ascending") for k in PK_KEYS]).to_pylist()
    return rows


# delta ------------------------------------------------------------------------------
def test_append_delta_is_what_each_append_commit_wrote(tmp_path):
    table = _catalog(tmp_path).create_table(
        "db.a", schema=APPEND_SCHEMA, options={"compaction.min.file-num": "2"}
    )
    written: list[tuple[int, dict[str, Any]]] = []
    for i in range(4):
        data = pa.table({"id": [i * 10, i * 10 + 1], "v": [f"r{i}", None]}, schema=APPEND_SCHEMA)
        sid = _write(table, data)
        written += [(sid, r) for r in data.to_pylist()]
    table.compact(full=True)  # a COMPACT snapshot: no delta rows
    over = pa.table({"id": [99], "v": ["o"]}, schema=APPEND_SCHEMA)
    table.write(over, overwrite={})  # an OVERWRITE snapshot: no delta rows (Paimon)
    last = _write(table, pa.table({"id": [7], "v": ["z"]}, schema=APPEND_SCHEMA))
    written.append((last, {"id": 7, "v": "z"}))
    kinds = [str(s.commit_kind) for s in table.snapshots()]
    assert "COMPACT" in kinds and "OVERWRITE" in kinds
    got = table.changes(1).read_all()
    assert got.schema.names == ["id", "v", "_row_kind", "_snapshot_id"]
    assert got.schema.field("_snapshot_id").type == pa.int64()
    assert [(r["_snapshot_id"], _without_meta([r])[0]) for r in got.to_pylist()] == written
    assert set(got.column("_row_kind").to_pylist()) == {"+I"}
    plan = table.plan_changes(1)
    assert plan.snapshot_ids == list(range(1, last + 1)) and plan.mode == "delta"
    assert [s.snapshot_id for s in plan.splits] == sorted(s.snapshot_id for s in plan.splits)


@pytest.mark.parametrize("engine", [e for e in ENGINES if e != "first-row"])
def test_primary_key_delta_is_each_write_unmerged_with_its_row_kinds(tmp_path, engine):
    opts = engine_options(engine, remove_record_on_delete=engine == "partial-update")
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options=opts
    )
    expected: list[tuple[int, str, int]] = []
    writes = [
        (_pk_rows([1, 2, 3], "a"), None),
        (_pk_rows([2, 4], "b"), None),
        (_pk_rows([1], "c"), ["-D"] if engine != "aggregation" else ["+I"]),
        (_pk_rows([3, 5], "d"), ["-U", "+U"] if engine == "deduplicate" else None),
    ]
    for i, (data, kinds) in enumerate(writes):
        sid = _write(table, data, row_kinds=kinds)
        all_kinds = kinds or ["+I"] * data.num_rows
        expected += [(sid, k, r["id"]) for k, r in zip(all_kinds, data.to_pylist(), strict=True)]
        if i == 1:
            table.compact(full=True)  # COMPACT: no delta rows
    got = table.changes(1, mode="delta").read_all().to_pylist()
    assert sorted((r["_snapshot_id"], r["_row_kind"], r["id"]) for r in got) == sorted(expected)
    by_snapshot = Counter(r["_snapshot_id"] for r in got)
    assert all(table.snapshot(s).commit_kind == "APPEND" for s in by_snapshot)
    # auto = delta without a changelog producer; rows of one snapshot come together
    auto = table.changes(1).read_all().to_pylist()
    assert auto == got
    ids = [r["_snapshot_id"] for r in auto]
    assert ids == sorted(ids)


@pytest.mark.parametrize(
    "options",
    [
        {"bucket": "2", "deletion-vectors.enabled": "true"},
        {"bucket": "2", "merge-engine": "first-row"},
        {"bucket": "2", "deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
    ],
    ids=["deletion-vectors", "first-row", "lookup"],
)
def test_a_lifting_writers_delta_is_each_write_and_its_compaction_adds_none(tmp_path, options):
    """Each write is an APPEND snapshot of its level-0 files, then a COMPACT one (Paimon)."""
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options=options
    )
    deletes = options.get("merge-engine") != "first-row"
    writes = [
        (_pk_rows([1, 2, 3], "a"), None),
        (_pk_rows([2, 4], "b"), None),
        (_pk_rows([1], "c"), ["-D"] if deletes else None),
        (_pk_rows([3, 5], "d"), ["-U", "+U"] if deletes else None),
    ]
    expected: list[tuple[int, str, int, str]] = []
    for data, kinds in writes:
        before = _latest(table) if table.latest_snapshot() else 0
        result = table.write(data, row_kinds=kinds)
        assert result.snapshot_id == before + 2  # APPEND, then COMPACT
        assert [str(table.snapshot(i).commit_kind) for i in (before + 1, before + 2)] == [
            "APPEND",
            "COMPACT",
        ]
        assert table.snapshot(before + 2).commit_identifier == (
            table.snapshot(before + 1).commit_identifier
        )
        all_kinds = kinds or ["+I"] * data.num_rows
        expected += [
            (before + 1, k, r["id"], r["name"])
            for k, r in zip(all_kinds, data.to_pylist(), strict=True)
        ]
        # the COMPACT snapshot adds no delta rows
        delta = table.changes(before + 1, before + 2, mode="delta").read_all().to_pylist()
        assert sorted((r["_snapshot_id"], r["_row_kind"], r["id"], r["name"]) for r in delta) == (
            sorted(e for e in expected if e[0] == before + 1)
        )
    got = table.changes(1, mode="delta").read_all().to_pylist()
    assert sorted((r["_snapshot_id"], r["_row_kind"], r["id"], r["name"]) for r in got) == sorted(
        expected
    )
    assert {str(table.snapshot(r["_snapshot_id"]).commit_kind) for r in got} == {"APPEND"}
    if deletes:  # deduplicate: the delta replays to the merged view
        assert _replay(got, PK_KEYS) == _view(table, _latest(table))


def test_deduplicate_delta_replays_to_the_merged_view(tmp_path):
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options={"bucket": "2"}
    )
    table.write(_pk_rows([1, 2, 3, 4], "a"))
    table.write(_pk_rows([2, 5], "b"))
    table.compact(full=True)
    table.write(_pk_rows([3], "c"), row_kinds=["-D"])
    last = _write(table, _pk_rows([6, 1], "d"))
    rows = table.changes(1).read_all().to_pylist()
    assert _replay(rows, PK_KEYS) == _view(table, last)


# changelog --------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_input_changelog_is_the_input(tmp_path, engine):
    opts = {**engine_options(engine), "changelog-producer": "input"}
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options=opts
    )
    expected = []
    for tag, ids in (("a", [1, 2]), ("b", [2, 3]), ("c", [4])):
        data = _pk_rows(ids, tag)
        sid = _append_of(table, _write(table, data))  # first-row: APPEND then COMPACT
        expected += [(sid, "+I", r["id"], r["name"]) for r in data.to_pylist()]
    table.compact(full=True)
    got = table.changes(1).read_all().to_pylist()  # auto = changelog
    assert sorted((r["_snapshot_id"], r["_row_kind"], r["id"], r["name"]) for r in got) == sorted(
        expected
    )
    assert table.plan_changes(1).mode == "changelog"


@pytest.mark.parametrize("producer", ["lookup", "lookup+dv", "full-compaction"])
@pytest.mark.parametrize("engine", ENGINES)
def test_lookup_and_full_compaction_changelog_replays_to_the_merged_view(
    tmp_path, engine, producer
):
    opts = {**engine_options(engine), "changelog-producer": producer.removesuffix("+dv")}
    if producer.endswith("+dv"):
        if engine == "first-row":
            pytest.skip("Paimon refuses deletion vectors with first-row")
        opts["deletion-vectors.enabled"] = "true"
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options=opts
    )
    checked = 0
    for step, (tag, ids) in enumerate((("a", [1, 2, 3]), ("b", [2, 4]), ("c", [1, 5]))):
        table.write(_pk_rows(ids, tag))
        if engine not in ("first-row", "aggregation", "partial-update") and step == 2:
            table.write(_pk_rows([4], "x"), row_kinds=["-D"])
        table.compact(full=True)
        last = _latest(table)
        rows = table.changes(1, last, mode="changelog").read_all().to_pylist()
        assert _replay(rows, PK_KEYS) == _view(table, last)
        assert {r["_row_kind"] for r in rows} <= {"+I", "-U", "+U", "-D"}
        checked += 1
    # an incremental range continues from the earlier one
    first = table.changes(1, 3, mode="changelog").read_all().to_pylist()
    rest = table.changes(4, mode="changelog").read_all().to_pylist()
    assert first + rest == table.changes(1, mode="changelog").read_all().to_pylist()
    assert checked == 3


def test_changelog_mode_needs_a_changelog_producer(tmp_path):
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options={"bucket": "1"}
    )
    table.write(_pk_rows([1], "a"))
    with pytest.raises(UnsupportedTableError, match="changelog-producer"):
        table.changes(1, mode="changelog")
    append = _catalog(tmp_path).create_table("db.a", schema=APPEND_SCHEMA)
    append.write(pa.table({"id": [1], "v": ["x"]}, schema=APPEND_SCHEMA))
    with pytest.raises(UnsupportedTableError):
        append.changes(1, mode="changelog")


# diff -------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_primary_key_diff_turns_one_view_into_the_other(tmp_path, engine):
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options=engine_options(engine)
    )
    table.write(_pk_rows([1, 2, 3, 4], "a"))
    table.write(_pk_rows([2, 5], "bb"))
    table.compact(full=True)
    if engine == "deduplicate":
        table.write(_pk_rows([3], "c"), row_kinds=["-D"])
    table.write(_pk_rows([6, 1], "ddd"))
    last = _latest(table)
    for start in range(1, last + 1):
        rows = table.changes(start, last, mode="diff").read_all().to_pylist()
        before = {
            tuple(r[k] for k in PK_KEYS): r for r in (_view(table, start - 1) if start > 1 else [])
        }
        rows_before = [{**r, "_row_kind": "+I"} for r in before.values()]
        assert _replay(rows_before + rows, PK_KEYS) == _view(table, last)
        assert all(r["_snapshot_id"] == last for r in rows)
        assert {r["_row_kind"] for r in rows} <= {"+I", "-D"}
        unchanged = [r for r in rows if r["_row_kind"] == "+I" and before.get(
            tuple(r[k] for k in PK_KEYS)) == _without_meta([r])[0]]  # fmt: skip
        assert not unchanged


def test_append_diff_is_the_multiset_difference(tmp_path):
    table = _catalog(tmp_path).create_table(
        "db.a", schema=APPEND_SCHEMA, options={"compaction.min.file-num": "3"}
    )
    table.write(pa.table({"id": [1, 1, 2], "v": ["a", "a", "b"]}, schema=APPEND_SCHEMA))
    table.write(pa.table({"id": [3], "v": ["c"]}, schema=APPEND_SCHEMA))
    table.write(pa.table({"id": [4], "v": ["d"]}, schema=APPEND_SCHEMA))
    compacted = table.compact(full=True).snapshot_id  # rewrites files: no row changes
    assert compacted == 4 and table.snapshot(4).commit_kind == "COMPACT"
    assert table.changes(4, 4, mode="diff").read_all().num_rows == 0
    table.write(pa.table({"id": [1, 5], "v": ["a", "e"]}, schema=APPEND_SCHEMA), overwrite={})
    rows = table.changes(3, mode="diff").read_all().to_pylist()  # view at 2 -> view at 5
    got = Counter((r["_row_kind"], r["id"], r["v"]) for r in rows)
    assert got == Counter({("-D", 1, "a"): 1, ("-D", 2, "b"): 1, ("-D", 3, "c"): 1,
                           ("+I", 5, "e"): 1})  # fmt: skip


# projection, filter, pickling -------------------------------------------------------
@pytest.mark.parametrize("mode", ["delta", "changelog", "diff"])
def test_columns_and_filter_are_exact(tmp_path, mode):
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, partition_keys=["month"],
        options={"bucket": "2", "changelog-producer": "input"},
    )  # fmt: skip
    table.write(pa.concat_tables([_pk_rows([1, 2, 3], "a", 1), _pk_rows([4, 5], "a", 2)]))
    table.write(pa.concat_tables([_pk_rows([2, 9], "b", 1), _pk_rows([5], "b", 2)]))
    everything = table.changes(1, mode=mode).read_all().to_pylist()
    got = table.changes(
        1, mode=mode, columns=["name", "id"], filter=[("month", "=", 1), ("id", ">=", 2)]
    ).read_all()
    assert got.schema.names == ["name", "id", "_row_kind", "_snapshot_id"]
    want = [{"name": r["name"], "id": r["id"], "_row_kind": r["_row_kind"],
             "_snapshot_id": r["_snapshot_id"]}
            for r in everything if r["month"] == 1 and r["id"] >= 2]  # fmt: skip
    assert got.to_pylist() == want and want


def test_plan_and_read_task_pickle_and_read_the_same_rows(tmp_path):
    table = _catalog(tmp_path).create_table(
        "db.pk", schema=PK_SCHEMA, primary_keys=PK_KEYS, options={"bucket": "2"}
    )
    table.write(_pk_rows([1, 2, 3], "a"))
    table.write(_pk_rows([2], "b"), row_kinds=["-D"])
    for mode in ("delta", "diff"):
        plan = table.plan_changes(1, mode=mode)
        task = pickle.loads(pickle.dumps(plan.read_task))
        splits = pickle.loads(pickle.dumps(plan.splits))
        batches = [b for s in splits for b in task(s)]
        again = pa.Table.from_batches(batches, schema=plan.schema)
        assert again.equals(table.changes(1, mode=mode).read_all())
        assert all(b.schema.equals(plan.schema) for b in batches)


# bad input --------------------------------------------------------------------------
def test_bad_ranges_and_modes_are_refused(tmp_path):
    table = _catalog(tmp_path).create_table("db.a", schema=APPEND_SCHEMA, options=RETAIN)
    with pytest.raises(SnapshotNotFoundError, match="no snapshot"):
        table.changes(1)
    for i in range(6):
        table.write(pa.table({"id": [i], "v": ["x"]}, schema=APPEND_SCHEMA))
    with pytest.raises(SnapshotNotFoundError, match="after the latest snapshot 6"):
        table.changes(7)
    with pytest.raises(SnapshotNotFoundError, match="never written"):
        table.changes(2, 8)
    with pytest.raises(InvalidOptionError, match="unknown change read mode"):
        table.changes(1, mode="full")
    with pytest.raises(InvalidOptionError, match="before start"):
        table.changes(3, 2)
    table.expire_snapshots()
    earliest = table.snapshot_manager.earliest_snapshot_id()
    assert earliest is not None and earliest > 2
    with pytest.raises(SnapshotNotFoundError, match=f"earliest retained snapshot is {earliest}"):
        table.changes(earliest - 1)
    assert table.changes(earliest).read_all().column("id").to_pylist() == list(
        range(earliest - 1, 6)
    )
    with pytest.raises(SnapshotNotFoundError, match=f"earliest retained snapshot is {earliest}"):
        table.changes(earliest, mode="diff")  # diff reads the view at start - 1
    assert table.changes(earliest + 1, mode="diff").read_all().column("id").to_pylist() == list(
        range(earliest, 6)
    )


def test_postpone_bucket_delta_reads_the_pending_files(tmp_path):
    """Without a changelog producer a postpone table's delta is its pending files (Paimon's
    ``DataTableStreamScan`` reads real buckets only when a producer is set)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    table = _catalog(tmp_path).create_table(
        "db.pp", schema=schema, primary_keys=["id"], options={"bucket": "-2"}
    )
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema))
    table.write(pa.table({"id": [2], "v": ["b"]}, schema=schema), row_kinds=["-D"])
    table.compact()
    got = [
        (r["id"], r["_row_kind"], r["_snapshot_id"])
        for r in table.changes(1).read_all().to_pylist()
    ]
    assert got == [(1, "+I", 1), (2, "+I", 1), (2, "-D", 2)]
    diff = table.changes(1, mode="diff").read_all().to_pylist()
    assert diff == [{"id": 1, "v": "a", "_row_kind": "+I", "_snapshot_id": 3}]


@pytest.mark.parametrize(
    ("keys", "options"),
    [
        (["id", "p"], {"bucket": "-1"}),  # dynamic buckets
        (["id"], {"bucket": "-1"}),  # cross-partition: a key moves between partitions
        (["id", "p"], {"bucket": "1", "deletion-vectors.enabled": "true"}),
        (
            ["id", "p"],
            {"bucket": "1", "deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
        ),
    ],
)
def test_bucket_modes_and_deletion_vectors_replay_to_the_merged_view(tmp_path, keys, options):
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.int32(), nullable=False),
         pa.field("v", pa.string())]
    )  # fmt: skip
    table = _catalog(tmp_path).create_table(
        "db.t", schema=schema, primary_keys=keys, partition_keys=["p"], options=options
    )
    table.write(pa.table({"id": [1, 2, 3], "p": [1, 1, 2], "v": ["a", "b", "c"]}, schema=schema))
    table.write(pa.table({"id": [2, 4], "p": [2, 1], "v": ["B", "d"]}, schema=schema))
    table.write(pa.table({"id": [1], "p": [1], "v": ["a"]}, schema=schema), row_kinds=["-D"])
    table.compact(full=True)
    last = _latest(table)
    order = [("id", "ascending"), ("p", "ascending")]
    view = table.to_arrow().sort_by(order).to_pylist()
    # deletion-vector writers publish their level-0 files (APPEND) before lifting them
    # (COMPACT), as Paimon: the delta holds the rows written, the delete's -D row included
    for mode in ("auto", "delta", "diff"):
        rows = table.changes(1, mode=mode).read_all().to_pylist()
        replayed = sorted(_replay(rows, keys), key=lambda r: (r["id"], r["p"]))
        assert replayed == view, mode
    before = table.to_arrow(snapshot_id=2).to_pylist()
    rows = table.changes(3, last, mode="diff").read_all().to_pylist()
    start = [{**r, "_row_kind": "+I"} for r in before]
    assert sorted(_replay(start + rows, keys), key=lambda r: (r["id"], r["p"])) == view


def test_a_snapshot_expiring_while_its_changes_are_read_raises_snapshot_not_found(tmp_path):
    table = _catalog(tmp_path).create_table("db.a", schema=APPEND_SCHEMA, options=RETAIN)
    for i in range(3):
        table.write(pa.table({"id": [i], "v": ["x"]}, schema=APPEND_SCHEMA))
    reader = table.changes(1)  # planned: snapshots 1..3
    table.write(pa.table({"id": [3], "v": ["x"]}, schema=APPEND_SCHEMA))
    table.compact(full=True)  # the compaction deletes the files of 1..3 ...
    for i in range(4, 9):
        table.write(pa.table({"id": [i], "v": ["x"]}, schema=APPEND_SCHEMA))
    table.expire_snapshots()  # ... and their expiry removes them
    with pytest.raises(SnapshotNotFoundError, match="expired while its changes were read"):
        reader.read_all()
