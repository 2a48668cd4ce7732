"""Java Paimon 0.9 and pypaimon 2.1.0 read snaplake's ``changelog-producer = input`` tables.

Batch reads see the merged table; streaming reads (Java: ``newStreamScan()``
from a snapshot, as a Flink/Spark streaming job plans; pypaimon: its stream
scan's changelog follow-up plans) see, per APPEND snapshot, exactly the rows
written, with their row kinds and, per key, in write order. COMPACT snapshots
carry no changelog, so streams skip them; after expiry a stream starts at the
earliest retained snapshot and the expired snapshots' changelog files are gone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import assert_java_rows, create_table, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.oracle.java_paimon import JavaPaimon, java_values, requires_java_paimon
from tests.pk_helpers import (
    PK_KEYS,
    PK_SCHEMA,
    TableModel,
    engine_model,
    make_rows,
    sorted_rows,
    to_table,
)

import snaplake

pytestmark = [pytest.mark.integration, requires_java_paimon, requires_paimon]

Batch = tuple[list[dict[str, Any]], list[str]]


def _history() -> list[list[Batch]]:
    """Commits of upserts, update pairs, repeated keys and deletes."""
    first = make_rows(0, 120)
    second = make_rows(60, 40, seed=1)
    third = make_rows(150, 30, seed=2)
    deletes = make_rows(0, 20, seed=3)[::2]
    return [
        [(first, ["+I"] * 120), (first[:10], ["+I"] * 10)],
        [(second, ["-U"] * 40), (second, ["+U"] * 40), (third, ["+I"] * 30)],
        [(deletes, ["-D"] * 10), (make_rows(200, 5, seed=4), ["+I"] * 5)],
        [(make_rows(100, 30, seed=5), ["+U"] * 30)],
    ]


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return row[:2]  # (month, id)


@pytest.fixture(scope="module")
def table(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Any, dict[int, list[Batch]], TableModel]:
    """Four APPEND commits (several flushes each) with a compaction after the second."""
    wh = tmp_path_factory.mktemp("changelog")
    t = create_table(
        wh,
        schema=PK_SCHEMA,
        partition_keys=["month"],
        primary_keys=PK_KEYS,
        options={"bucket": "2", "changelog-producer": "input", "write-buffer-size": "8 kb",
                 "snapshot.num-retained.min": "3", "snapshot.time-retained": "0 s"},
    )  # fmt: skip
    model = TableModel(engine_model("deduplicate"))
    by_snapshot: dict[int, list[Batch]] = {}
    for ident, batches in enumerate(_history()):
        w = t.new_write(commit_user="w")
        for rows, kinds in batches:
            w.write_arrow(to_table(rows), row_kinds=kinds)
            model.apply(rows, kinds)
        result = t.new_commit(commit_user="w").commit(w.prepare_commit(), commit_identifier=ident)
        assert result.snapshot_id is not None
        by_snapshot[result.snapshot_id] = batches
        if ident == 1:
            assert t.compact(full=True).snapshot_id is not None
    return t, by_snapshot, model


def _expected(batches: list[Batch]) -> list[tuple[str, tuple[Any, ...]]]:
    encoded = java_values(to_table([r for rows, _ in batches for r in rows]), sort=False)
    kinds = [k for _, ks in batches for k in ks]
    return list(zip(kinds, encoded, strict=True))


def _assert_changes(
    got: list[tuple[str, tuple[Any, ...]]], expected: list[tuple[str, tuple[Any, ...]]]
) -> None:
    assert Counter(got) == Counter(expected)
    per_key: dict[tuple[Any, ...], list[str]] = {}
    for kind, row in expected:
        per_key.setdefault(_key(row), []).append(kind)
    seen: dict[tuple[Any, ...], list[str]] = {}
    for kind, row in got:
        seen.setdefault(_key(row), []).append(kind)
    assert seen == per_key  # each key's versions in the order they were written


def test_java_and_pypaimon_stream_the_changelog(
    table: tuple[Any, dict[int, list[Batch]], TableModel],
) -> None:
    t, by_snapshot, model = table
    snaps = t.snapshots()
    assert [s.commit_kind.value for s in snaps] == [
        "APPEND",
        "APPEND",
        "COMPACT",
        "APPEND",
        "APPEND",
    ]
    assert all(len(m) > 1 for m in [s.changelog_manifest_list for s in snaps if s.id != 3])
    java = JavaPaimon()
    stream = java.stream(t.root, from_snapshot=1)
    changes = stream.changes()
    assert sorted(changes) == sorted(by_snapshot)  # the COMPACT snapshot brings no change
    assert all(s.streaming for s in stream.splits)
    for sid, batches in by_snapshot.items():
        _assert_changes(changes[sid], _expected(batches))

    theirs = PaimonOracle(Path(t.root).parents[1]).changelog("db.t", from_snapshot=1)
    assert sorted(set(theirs.column("__snapshot").to_pylist())) == sorted(by_snapshot)
    for sid, batches in by_snapshot.items():
        part = theirs.filter(pa.compute.equal(theirs.column("__snapshot"), sid))
        rows = java_values(part.select(PK_SCHEMA.names).cast(PK_SCHEMA), sort=False)
        got = list(zip(part.column("_row_kind").to_pylist(), rows, strict=True))
        assert Counter(got) == Counter(_expected(batches))

    expected = model.rows()
    assert sorted_rows(t.to_arrow()) == expected
    batch = java.read(t.root)
    assert_java_rows(batch.rows, to_table(expected))
    assert set(batch.splits[0].kinds) <= {"+I", "+U"} and not any(s.streaming for s in batch.splits)
    py = PaimonOracle(Path(t.root).parents[1]).read("db.t").select(PK_SCHEMA.names)
    assert sorted_rows(py.cast(PK_SCHEMA)) == expected


def test_streams_start_at_the_earliest_retained_snapshot_after_expiry(
    table: tuple[Any, dict[int, list[Batch]], TableModel],
) -> None:
    t, by_snapshot, model = table
    result = t.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2)
    assert result.changelog_files and not any(t.file_io.exists(p) for p in result.changelog_files)
    stream = JavaPaimon().stream(t.root, from_snapshot=3)
    changes = stream.changes()
    assert sorted(changes) == [4, 5]
    for sid in (4, 5):
        _assert_changes(changes[sid], _expected(by_snapshot[sid]))
    theirs = PaimonOracle(Path(t.root).parents[1]).changelog("db.t", from_snapshot=3)
    assert sorted(set(theirs.column("__snapshot").to_pylist())) == [4, 5]
    full = JavaPaimon().stream(t.root)  # Paimon's default start: the latest snapshot in full
    assert sorted(full.changes()) == [5]
    assert_java_rows(full.rows, to_table(model.rows()))


def test_snaplake_maintains_a_pypaimon_input_changelog_table(tmp_path: Path) -> None:
    """pypaimon writes changelog files too; snaplake appends, compacts and expires the table."""
    oracle = PaimonOracle(tmp_path)
    options = {"bucket": "2", "changelog-producer": "input", "snapshot.num-retained.min": "2",
               "snapshot.time-retained": "0 s"}  # fmt: skip
    oracle.create_table(
        "db.t", PK_SCHEMA, partition_keys=["month"], primary_keys=PK_KEYS, options=options
    )
    model = TableModel(engine_model("deduplicate"))
    for start in (0, 20):
        rows = make_rows(start, 40, seed=start)
        oracle.write("db.t", to_table(rows))
        model.apply(rows)
    t = snaplake.FileSystemCatalog(str(tmp_path)).get_table("db.t")
    theirs = [s for s in t.snapshots() if s.changelog_manifest_list]
    assert len(theirs) == 2  # pypaimon committed changelog with both snapshots
    rows = make_rows(30, 20, seed=7)
    write_and_commit(t, to_table(rows), row_kinds=["+U"] * 20, commit_user="snaplake")
    model.apply(rows, ["+U"] * 20)
    assert t.compact(full=True).snapshot_id is not None
    assert sorted_rows(t.to_arrow()) == model.rows()
    changes = JavaPaimon().stream(t.root, from_snapshot=1).changes()
    assert sorted(changes) == [1, 2, 3]
    assert Counter(changes[3]) == Counter(_expected([(rows, ["+U"] * 20)]))
    result = t.expire_snapshots()
    assert result.expired_snapshot_ids == (1, 2)
    first_logs = {p.rsplit("/", 1)[-1] for p in result.changelog_files}
    assert len(first_logs) >= 2 and not any(t.file_io.exists(p) for p in result.changelog_files)
    assert sorted_rows(PaimonOracle(tmp_path).read("db.t").cast(PK_SCHEMA)) == model.rows()
