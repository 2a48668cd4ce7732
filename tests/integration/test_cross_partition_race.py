"""Concurrent writers of one cross-partition table (issue 20 items 2/3).

Paimon allows one writer job per cross-partition table; snaplake refuses a
commit that writes a key another writer wrote since its key map
(``CrossPartitionConflictError``, retryable) and the writer, after
``abort``, writes the same rows again by the new map. Two writers
interleaved step by step show each race; four processes upserting
overlapping keys (some changing partition) end with every key once, equal
to the last acknowledged write of it, and pypaimon 2.1.0 reads the same.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.helpers import assert_same_rows
from tests.integration.cross_partition_writer_proc import batch
from tests.oracle import PaimonOracle, requires_paimon
from tests.unit.mergetree.test_cross_partition import (
    assert_one_place_per_key,
    create,
    read,
    rows,
    to_table,
)

import snaplake
from snaplake.errors import CrossPartitionConflictError

pytestmark = pytest.mark.integration

PROC = Path(__file__).with_name("cross_partition_writer_proc.py")


def _prepare(table: snaplake.Table, user: str, data: list[dict[str, Any]]) -> Any:
    write = table.new_write(commit_user=user)
    write.write_arrow(to_table(data))
    return write, write.prepare_commit()


def _commit(table: snaplake.Table, user: str, messages: Any) -> int:
    result = table.new_commit(commit_user=user).commit(messages)
    assert result.snapshot_id is not None
    return result.snapshot_id


_RACES = [
    # both writers put the new key 10 into different partitions
    ("deduplicate", [(10, 1)], [(10, 2)], [(10, 2)]),
    ("first-row", [(10, 1)], [(10, 2)], []),
    # the second moves key 1 (in month 1) that the first moved to month 3
    ("deduplicate", [(1, 3)], [(1, 2)], [(1, 2)]),
    # the second updates key 1 where its map has it (month 1); the first moved it
    ("deduplicate", [(1, 3)], [(1, 1)], [(1, 1)]),
    # both update key 1 in its bucket (their sequence numbers would tie)
    ("deduplicate", [(1, 1)], [(1, 1)], [(1, 1)]),
]


@pytest.mark.parametrize(("engine", "first", "second", "expected"), _RACES)
def test_second_writer_is_refused_then_writes_again(
    tmp_path: Path,
    first: list[tuple[int, int]],
    second: list[tuple[int, int]],
    expected: list[tuple[int, int]],
    engine: str,
) -> None:
    options = {"merge-engine": engine}
    if engine == "first-row":
        options["ignore-delete"] = "true"
    table = create(tmp_path, **options)
    setup = _commit(table, "setup", table_messages(table, rows([(1, 1), (2, 1)], "s-")))
    # Both writers read their key map at the setup snapshot, before either commits. A
    # first-row writer lifts its level-0 files: APPEND, then COMPACT (the result's id).
    _, messages_a = _prepare(table, "a", rows(first, "a-"))
    write_b, messages_b = _prepare(table, "b", rows(second, "b-"))
    a = _commit(table, "a", messages_a)
    assert a == setup + (1 if engine == "deduplicate" else 2)
    with pytest.raises(CrossPartitionConflictError, match="write these rows again") as info:
        table.new_commit(commit_user="b").commit(messages_b)
    assert info.value.retryable and info.value.conflicting_snapshot_ids == (setup + 1,)
    assert table.latest_snapshot().id == a  # type: ignore[union-attr]  # nothing published
    write_b.abort(messages_b)
    write_b.write_arrow(to_table(rows(second, "b-")))  # the same rows, by the new map
    again = write_b.prepare_commit()
    if engine == "deduplicate":
        assert _commit(table, "b", again) == a + 1
    else:
        assert again == []  # first-row: the key exists now, the rows are dropped
    model = {r["id"]: r for r in rows([(1, 1), (2, 1)], "s-")}
    for tag, pairs in (("a-", first), ("b-", second)):
        for r in rows(pairs, tag):
            if engine == "deduplicate" or r["id"] not in model:
                model[r["id"]] = r
    assert read(table) == sorted(model.values(), key=lambda r: r["id"])
    assert expected == [(r["id"], r["month"]) for r in read(table) if r["name"].startswith("b-")]
    assert_one_place_per_key(table)


def table_messages(table: snaplake.Table, data: list[dict[str, Any]]) -> Any:
    """Messages of one writer of user ``setup`` writing ``data``."""
    return _prepare(table, "setup", data)[1]


def test_disjoint_keys_and_compactions_never_conflict(tmp_path: Path) -> None:
    table = create(tmp_path)
    _commit(table, "setup", table_messages(table, rows([(1, 1), (2, 2)])))
    _, messages_a = _prepare(table, "a", rows([(1, 2), (5, 1)], "a-"))
    _, messages_b = _prepare(table, "b", rows([(2, 3), (6, 3)], "b-"))
    _commit(table, "a", messages_a)
    table.compact()  # a COMPACT snapshot moves no key
    _commit(table, "b", messages_b)
    assert [(r["id"], r["month"]) for r in read(table)] == [(1, 2), (2, 3), (5, 1), (6, 3)]
    assert_one_place_per_key(table)


def test_a_writer_kept_across_commits_follows_its_own_and_others_commits(tmp_path: Path) -> None:
    table = create(tmp_path)
    write = table.new_write(commit_user="a")
    for k in range(3):  # its own commits never conflict with it
        write.write_arrow(to_table(rows([(1, k + 1), (2, 1)], f"a{k}-")))
        _commit(table, "a", write.prepare_commit())
    # Another writer moves key 1 (to month 1) and updates key 2 in its bucket.
    _commit(table, "b", table_messages(table, rows([(1, 1), (2, 1)], "b-")))
    write.write_arrow(to_table(rows([(3, 2)], "a3-")))  # a key nobody else wrote: fine
    _commit(table, "a", write.prepare_commit())
    data = rows([(1, 2), (2, 1)], "a4-")
    write.write_arrow(to_table(data))
    messages = write.prepare_commit()
    with pytest.raises(CrossPartitionConflictError):
        table.new_commit(commit_user="a").commit(messages)
    write.abort(messages)
    write.write_arrow(to_table(data))
    _commit(table, "a", write.prepare_commit())
    # The last writes win: after the abort the writer's sequence numbers follow b's.
    assert [(r["id"], r["month"], r["name"]) for r in read(table)] == [
        (1, 2, "a4-1@2"), (2, 1, "a4-2@1"), (3, 2, "a3-3@2"),
    ]  # fmt: skip
    assert_one_place_per_key(table)


def test_a_single_writer_reads_nothing_more_when_alone(tmp_path: Path) -> None:
    """With no other writer, the commit check reads no manifest or data file."""
    table = create(tmp_path)
    write = table.new_write(commit_user="a")
    write.write_arrow(to_table(rows([(1, 1)])))
    _commit(table, "a", write.prepare_commit())
    write.write_arrow(to_table(rows([(1, 2)])))
    messages = write.prepare_commit()
    assert {m.data_increment.key_map_snapshot for m in messages} == {1}
    _commit(table, "a", messages)
    write.write_arrow(to_table(rows([(1, 3)])))
    # The map followed the writer's own commit: the commit check has nothing to read.
    assert {m.data_increment.key_map_snapshot for m in write.prepare_commit()} == {2}


WRITERS, ROUNDS = 4, 6


@requires_paimon
def test_four_writer_processes_keep_every_key_once(tmp_path: Path) -> None:
    table = create(tmp_path, **{"dynamic-bucket.target-row-num": "4"})
    go = tmp_path / "go"
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROC), str(tmp_path), str(w), str(ROUNDS), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        for w in range(WRITERS)
    ]
    go.touch()
    acks: list[tuple[int, int, int, int]] = []  # (snapshot, writer, round, tries)
    for w, proc in enumerate(procs):
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        lines = [line.split() for line in out.splitlines() if line.startswith("ACK")]
        assert [int(a[1]) for a in lines] == list(range(ROUNDS))
        acks.extend((int(a[2]), w, int(a[1]), int(a[3])) for a in lines)
    assert len({a[0] for a in acks}) == WRITERS * ROUNDS  # one snapshot per batch
    model: dict[int, dict[str, Any]] = {}
    for _, w, k, _ in sorted(acks):  # the acknowledged commits in commit order
        for r in batch(w, k):
            model[r["id"]] = r
    expected = sorted(model.values(), key=lambda r: r["id"])
    assert read(table) == expected
    assert_one_place_per_key(table)
    theirs = PaimonOracle(tmp_path).read("db.t")
    assert_same_rows(pa.Table.from_pylist(expected, schema=table.to_arrow().schema), theirs)
