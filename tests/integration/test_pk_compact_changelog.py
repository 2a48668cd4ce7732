"""pypaimon 2.1.0 and Java Paimon 0.9 stream the changelog snaplake's compaction produces.

``changelog-producer = lookup``: every commit's keys change from the table's
state before the commit to the state after it (``+I``, ``-D``, ``-U``/``+U``);
``full-compaction``: every full compaction's keys change from the state of the
previous full compaction. A per-key model of both is compared with what the
engines stream (pypaimon: every snapshot with changelog; Java: the COMPACT
snapshots, as its ``CompactionChangelogFollowUpScanner`` reads).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import assert_java_rows, create_table
from tests.oracle import PaimonOracle, requires_paimon
from tests.oracle.java_paimon import JavaPaimon, java_values, requires_java_paimon
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    engine_model,
    engine_options,
    make_rows,
    sorted_rows,
    to_table,
)

pytestmark = [pytest.mark.integration, requires_paimon, requires_java_paimon]

Change = tuple[str, tuple[Any, ...]]
Batch = tuple[list[dict[str, Any]], list[str]]


def _history() -> list[list[Batch]]:
    """Commits of inserts, updates (equal ones too), deletes of present and absent keys."""
    first = make_rows(0, 60)
    return [
        [(first, ["+I"] * 60)],
        [(make_rows(30, 40, seed=1), ["+U"] * 40), (first[:5], ["+I"] * 5)],
        [(make_rows(0, 20, seed=2)[::2], ["-D"] * 10), (make_rows(500, 3), ["-D"] * 3)],
        [(make_rows(100, 10, seed=3), ["+I"] * 10), (make_rows(0, 4, seed=2), ["+I"] * 4)],
    ]


def _state(model: TableModel) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in PK_KEYS): r for r in model.rows()}


def _changes(
    old: dict[tuple[Any, ...], dict[str, Any]],
    new: dict[tuple[Any, ...], dict[str, Any]],
    keys: set[tuple[Any, ...]],
    *,
    insert_only: bool = False,
    compared: tuple[str, ...] = (),
) -> list[Change]:
    """The model's changelog of ``keys`` going from ``old`` to ``new``."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for key in sorted(keys):
        before, after = old.get(key), new.get(key)
        if before is None and after is not None:
            rows.append(("+I", after))
        elif insert_only or before is None:
            continue
        elif after is None:
            rows.append(("-D", before))
        elif not compared or any(before[c] != after[c] for c in compared):
            rows += [("-U", before), ("+U", after)]
    encoded = java_values(to_table([r for _, r in rows]), sort=False) if rows else []
    return list(zip([k for k, _ in rows], encoded, strict=True))


def _pypaimon(t: Any, from_snapshot: int = 1) -> dict[int, list[Change]]:
    theirs = PaimonOracle(Path(t.root).parents[1]).changelog("db.t", from_snapshot=from_snapshot)
    out: dict[int, list[Change]] = {}
    for sid in sorted(set(theirs.column("__snapshot").to_pylist())):
        part = theirs.filter(pa.compute.equal(theirs.column("__snapshot"), sid))
        rows = java_values(part.select(PK_SCHEMA.names).cast(PK_SCHEMA), sort=False)
        out[sid] = list(zip(part.column("_row_kind").to_pylist(), rows, strict=True))
    return out


def _commit(t: Any, batches: list[Batch], model: TableModel) -> tuple[int, set[Any]]:
    w = t.new_write(commit_user="w")
    keys = set()
    for rows, kinds in batches:
        w.write_arrow(to_table(rows), row_kinds=kinds)
        model.apply(rows, kinds)
        keys |= {tuple(r[k] for k in PK_KEYS) for r in rows}
    result = t.new_commit(commit_user="w").commit(w.prepare_commit())
    assert result.snapshot_id is not None
    return result.snapshot_id, keys


def _assert_streams(got: dict[int, list[Change]], expected: dict[int, list[Change]]) -> None:
    assert sorted(got) == sorted(s for s, c in expected.items() if c)
    for sid, changes in expected.items():
        assert Counter(got.get(sid, [])) == Counter(changes), sid


@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
def test_pypaimon_streams_the_lookup_changelog_of_lifted_writes(
    tmp_path: Path, engine: str
) -> None:
    """Each writer compacts its level 0 in prepare_commit (lookup-wait): changelog per commit.

    The commit publishes the level-0 files (APPEND), then their compaction and
    its changelog (COMPACT), which Java's stream reads too.
    """
    options = {**engine_options(engine), "changelog-producer": "lookup"}
    t = create_table(tmp_path, schema=PK_SCHEMA, partition_keys=["month"],
                     primary_keys=PK_KEYS, options=options)  # fmt: skip
    model = TableModel(engine_model(engine), ignore_delete=engine == "first-row")
    history = _history()
    if engine == "first-row":  # ignores retractions
        history = [[(r, k) for r, k in c if k[0] != "-D"] for c in history]
        history = [c for c in history if c]
    expected: dict[int, list[Change]] = {}
    for batches in history:
        old = _state(model)
        sid, keys = _commit(t, batches, model)
        expected[sid] = _changes(old, _state(model), keys, insert_only=engine == "first-row")
    kinds = [(s.commit_kind.value, bool(s.changelog_manifest_list)) for s in t.snapshots()]
    assert kinds == [("APPEND", False), ("COMPACT", True)] * len(history)  # as Paimon commits
    _assert_streams(_pypaimon(t), expected)
    if engine == "deduplicate":
        _assert_streams(JavaPaimon().stream(t.root, from_snapshot=1).changes(), expected)
    assert sorted_rows(t.to_arrow()) == model.rows()


def _full_compaction_table(tmp_path: Path, **extra: str) -> tuple[Any, dict[int, list[Change]]]:
    """Four commits, a full compaction after the second and the fourth."""
    options = {"bucket": "2", "changelog-producer": "full-compaction", **extra}
    t = create_table(tmp_path, schema=PK_SCHEMA, partition_keys=["month"],
                     primary_keys=PK_KEYS, options=options)  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    compared = ()
    if extra.get("changelog-producer.row-deduplicate") == "true":
        ignored = set(extra.get("changelog-producer.row-deduplicate-ignore-fields", "").split(","))
        compared = tuple(n for n in PK_SCHEMA.names if n not in ignored)
    expected: dict[int, list[Change]] = {}
    old = _state(model)
    touched: set[Any] = set()
    for i, batches in enumerate(_history()):
        sid, keys = _commit(t, batches, model)
        expected[sid] = []
        touched |= keys
        if i in (1, 3):
            result = t.compact(full=True)
            assert result.snapshot_id is not None
            new = _state(model)
            expected[result.snapshot_id] = _changes(old, new, touched, compared=compared)
            old, touched = new, set()
    assert sorted_rows(t.to_arrow()) == model.rows()
    return t, expected


def test_pypaimon_streams_the_full_compaction_changelog(tmp_path: Path) -> None:
    t, expected = _full_compaction_table(tmp_path)
    assert [s.commit_kind.value for s in t.snapshots()].count("COMPACT") == 2
    _assert_streams(_pypaimon(t), expected)


def test_row_deduplicate_drops_equal_update_pairs(tmp_path: Path) -> None:
    """Equal values (ignoring ``ok`` and ``price``) emit no -U/+U; +I and -D stay."""
    t, expected = _full_compaction_table(
        tmp_path,
        **{"changelog-producer.row-deduplicate": "true",
           "changelog-producer.row-deduplicate-ignore-fields": "ok,price"},
    )  # fmt: skip
    assert any(kind == "-D" for c in expected.values() for kind, _ in c)
    _assert_streams(_pypaimon(t), expected)


def test_full_compaction_delta_commits_triggers_the_changelog(tmp_path: Path) -> None:
    """``full-compaction.delta-commits = 2``: the table's compaction is full every two commits."""
    options = {
        "bucket": "1",
        "changelog-producer": "full-compaction",
        "full-compaction.delta-commits": "2",
        "num-sorted-run.compaction-trigger": "50",
    }
    t = create_table(tmp_path, schema=PK_SCHEMA, partition_keys=["month"],
                     primary_keys=PK_KEYS, options=options)  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    history = _history()
    old = _state(model)
    _, keys = _commit(t, history[0], model)
    assert t.compact().snapshot_id is None  # one commit: not due, nothing to pick
    _, more = _commit(t, history[1], model)
    result = t.compact()  # two commits since the last full compaction: full
    assert result.snapshot_id is not None
    expected = {result.snapshot_id: _changes(old, _state(model), keys | more)}
    got = _pypaimon(t)
    assert Counter(got[result.snapshot_id]) == Counter(expected[result.snapshot_id])


def test_java_streams_lookup_and_full_compaction_changelog(tmp_path: Path) -> None:
    """Java reads changelog of COMPACT snapshots: daemon-style compactions (lookup-wait off)."""
    options = {"bucket": "2", "changelog-producer": "lookup", "lookup-wait": "false"}
    t = create_table(tmp_path / "lookup", schema=PK_SCHEMA, partition_keys=["month"],
                     primary_keys=PK_KEYS, options=options)  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    expected: dict[int, list[Change]] = {}
    for batches in _history():
        old = _state(model)
        _, keys = _commit(t, batches, model)
        result = t.compact()
        assert result.snapshot_id is not None
        expected[result.snapshot_id] = _changes(old, _state(model), keys)
    java = JavaPaimon().stream(t.root, from_snapshot=1).changes()
    _assert_streams(java, expected)
    _assert_streams(_pypaimon(t), expected)

    full, full_expected = _full_compaction_table(tmp_path / "full")
    _assert_streams(JavaPaimon().stream(full.root, from_snapshot=1).changes(), full_expected)


def _stacked_history() -> list[list[Batch]]:
    """60 inserts, then small updates of overlapping keys: lifts leave keys in two levels > 0."""
    history = [[(make_rows(0, 60), ["+I"] * 60)]]
    for c in range(1, 7):
        history.append([(make_rows(7 * c % 48, 12, seed=c), ["+U"] * 12)])
    return history


@pytest.mark.parametrize("dv", [False, True], ids=["merge-on-read", "dv"])
@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_lookup_changelog_of_merging_engines(tmp_path: Path, engine: str, dv: bool) -> None:
    """Lookup compaction writes merge(newest higher-level record, level-0 versions).

    Without vectors a key keeps its older records in higher levels and Paimon
    reads it with ``LookupMergeFunction`` (only the lowest level > 0 counts).
    Java reads the table as the model before and after a full compaction, and
    pypaimon and Java stream the model's changelog. pypaimon 2.1.0 has no lookup
    merge: it reads such an aggregation table right only once a full compaction
    (or deletion vectors) leaves one record per key.
    """
    options = {**engine_options(engine), "changelog-producer": "lookup",
               "deletion-vectors.enabled": str(dv).lower()}  # fmt: skip
    t = create_table(tmp_path, schema=PK_SCHEMA, partition_keys=["month"],
                     primary_keys=PK_KEYS, options=options)  # fmt: skip
    model = TableModel(engine_model(engine))
    expected: dict[int, list[Change]] = {}
    stacked = 0
    for batches in _stacked_history():
        old = _state(model)
        sid, keys = _commit(t, batches, model)
        expected[sid] = _changes(old, _state(model), keys)
        for split in t.new_scan().plan():
            stacked += len({f.level for f in split.files if f.level > 0}) > 1
    assert dv or stacked, "no bucket ever held two levels above 0"
    _assert_streams(_pypaimon(t), expected)
    _assert_streams(JavaPaimon().stream(t.root, from_snapshot=1).changes(), expected)
    for stage in ("before", "after"):
        if stage == "after":
            assert t.compact(full=True).snapshot_id is not None
            assert all(len({f.level for f in s.files}) == 1 for s in t.new_scan().plan())
        want = model.rows()
        assert sorted_rows(t.to_arrow()) == want, stage
        py = PaimonOracle(tmp_path).read("db.t").select(PK_SCHEMA.names).cast(PK_SCHEMA)
        if dv or stage == "after" or engine == "partial-update":
            assert sorted_rows(py) == want, stage
        else:  # pypaimon 2.1.0 has no lookup merge: it sums a key's stacked records
            assert sorted_rows(py) != want
        java = JavaPaimon().read_many([(t.root, None)])[0]
        assert_java_rows(java.rows, to_table(want), context=stage)
