"""The schema publish retries lost races with the commit path's RetryPolicy (real files)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tests.helpers import create_table

import snaplake
from snaplake import SchemaChange
from snaplake.commit.retry import RetryPolicy
from snaplake.commit.schema_alter import commit_schema_changes
from snaplake.errors import CommitRetriesExhaustedError
from snaplake.store.format.schema import SchemaManager


@pytest.fixture
def table(tmp_path):
    return create_table(tmp_path / "wh", partition_keys=["month"])


def _contended(table, wins: int):
    """The table's SchemaManager; before each of its first ``wins`` creates, a competing
    writer (its own SchemaManager on the same directory) creates the next schema file."""
    manager = table.schema_manager
    real_create = manager.create
    competitor = SchemaManager(manager.file_io, manager.paths)
    won: list[int] = []

    def create(schema):
        if len(won) < wins:
            new = commit_schema_changes(
                competitor, [SchemaChange.set_option(f"competitor.{len(won)}", "x")],
                has_snapshots=lambda: False, identifier="db.t",
            )  # fmt: skip
            assert new.id == schema.id  # the competitor took the file this attempt wants
            won.append(new.id)
        return real_create(schema)

    manager.create = create
    return manager


def _alter(manager, **kw):
    return commit_schema_changes(
        manager, [SchemaChange.add_column("late", pa.int32())], has_snapshots=lambda: False,
        identifier="db.t", rng=lambda: 0.5, clock=lambda: 0.0, **kw,
    )  # fmt: skip


def test_lost_races_wait_the_policys_backoff_then_land(table) -> None:
    sleeps: list[float] = []
    policy = RetryPolicy(max_retries=3, min_wait_s=0.01, max_wait_s=0.03, jitter=0.2)
    new = _alter(_contended(table, wins=3), retry_policy=policy, sleep=sleeps.append)
    assert new.id == 4  # schemas 1..3 are the competitor's; ours re-applied on each
    assert sleeps == pytest.approx([0.011, 0.022, 0.033])  # doubling, capped, +10% jitter
    latest = table.schema_manager.latest()
    assert latest.id == 4 and "late" in latest.field_names
    assert {f"competitor.{i}" for i in range(3)} <= set(latest.options)


def test_exhausted_retries_raise_typed_and_write_nothing(table) -> None:
    sleeps: list[float] = []
    policy = RetryPolicy(max_retries=2, min_wait_s=0.01)
    with pytest.raises(CommitRetriesExhaustedError, match=r"alter of db\.t lost the race") as err:
        _alter(_contended(table, wins=10), retry_policy=policy, sleep=sleeps.append)
    assert err.value.attempts == 3  # the first attempt and max_retries retries
    assert len(sleeps) == 2
    assert table.schema_manager.list_schema_ids() == [0, 1, 2, 3]  # the competitor's only
    assert all("late" not in table.schema_manager.schema(i).field_names for i in range(4))


def test_the_default_policy_is_the_tables_commit_options(table, tmp_path) -> None:
    snaplake.FileSystemCatalog(str(tmp_path / "wh")).alter_table(
        "db.t", [SchemaChange.set_option("commit.max-retries", "1")]
    )
    sleeps: list[float] = []
    with pytest.raises(CommitRetriesExhaustedError) as err:
        _alter(_contended(table, wins=10), sleep=sleeps.append)
    assert err.value.attempts == 2  # commit.max-retries = 1
    assert sleeps == pytest.approx([0.011])  # commit.min-retry-wait 10 ms, +10% jitter
