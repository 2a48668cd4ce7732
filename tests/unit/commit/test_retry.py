"""RetryPolicy and the one retry loop: backoff bounds, retries, timeout, all on a fake clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tests.helpers import create_table, rows

from snaplake.commit.file_store_commit import FileStoreCommit
from snaplake.commit.retry import RetryPolicy
from snaplake.errors import CommitRetriesExhaustedError, FileAlreadyExistsError
from snaplake.options import CoreOptions


class FakeClock:
    """Monotonic seconds that only the fake ``sleep`` advances."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_waits_double_from_the_minimum_up_to_the_cap() -> None:
    policy = RetryPolicy(min_wait_s=0.01, max_wait_s=0.1, jitter=0.2)
    waits = [policy.wait_s(n, random_fraction=0.0) for n in range(1, 7)]
    assert waits == pytest.approx([0.01, 0.02, 0.04, 0.08, 0.1, 0.1])


def test_jitter_adds_at_most_its_fraction() -> None:
    policy = RetryPolicy(min_wait_s=1.0, max_wait_s=1.0, jitter=0.2)
    assert policy.wait_s(5, random_fraction=0.0) == 1.0
    assert policy.wait_s(5, random_fraction=0.5) == pytest.approx(1.1)
    assert policy.wait_s(5, random_fraction=0.999) < 1.2


def test_retries_are_bounded_by_count_and_by_timeout() -> None:
    policy = RetryPolicy(max_retries=3, timeout_s=2.0)
    assert policy.may_retry(retries_done=2, elapsed_s=0.0)
    assert not policy.may_retry(retries_done=3, elapsed_s=0.0)
    assert policy.may_retry(retries_done=0, elapsed_s=1.999)
    assert not policy.may_retry(retries_done=0, elapsed_s=2.0)
    assert RetryPolicy(max_retries=0).may_retry(retries_done=0, elapsed_s=0.0) is False


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="min_wait_s"):
        RetryPolicy(min_wait_s=2.0, max_wait_s=1.0)


def test_policy_from_the_commit_options() -> None:
    options = CoreOptions(
        {"commit.max-retries": "4", "commit.timeout": "30 s", "commit.min-retry-wait": "5 ms",
         "commit.max-retry-wait": "2 s"}
    )  # fmt: skip
    policy = RetryPolicy.from_options(options)
    assert (policy.max_retries, policy.timeout_s, policy.min_wait_s, policy.max_wait_s) == (
        4, 30.0, 0.005, 2.0,
    )  # fmt: skip
    assert RetryPolicy.from_options(CoreOptions({})).timeout_s is None
    assert timedelta(seconds=policy.max_wait_s) == options.commit_max_retry_wait


# ------------------------------------------------------------------ the loop
@pytest.fixture
def table():
    table = create_table("memory://retry-loop", ignore_if_exists=True)
    yield table
    table.file_io.delete_dir(table.root)


def _lose_every_race(table, times: int) -> None:
    for n in range(1, times + 1):
        table.file_io.inject_fault(
            "write_if_absent", path_contains="/snapshot/snapshot-", nth=n,
            error=lambda p: FileAlreadyExistsError("taken", path=p, operation="w"),
        )  # fmt: skip


def _committer(table, policy: RetryPolicy, clock: FakeClock) -> FileStoreCommit:
    return FileStoreCommit(
        table, commit_user="u", retry_policy=policy, clock=clock, sleep=clock.sleep,
        rng=lambda: 0.5,
    )  # fmt: skip


def _messages(table):
    write = table.new_write(commit_user="u")
    write.write_arrow(rows(0, 3))
    return write.prepare_commit()


def test_the_loop_sleeps_the_policys_waits_and_never_really_sleeps(table) -> None:
    clock = FakeClock()
    _lose_every_race(table, 3)
    policy = RetryPolicy(max_retries=5, min_wait_s=0.01, max_wait_s=0.03, jitter=0.2)
    result = _committer(table, policy, clock).commit(_messages(table), commit_identifier=1)
    assert result.attempts == 4
    assert clock.sleeps == pytest.approx([0.011, 0.022, 0.033])  # doubling, capped, +10%
    assert result.duration_s == pytest.approx(sum(clock.sleeps))


def test_the_loop_stops_at_the_retry_count(table) -> None:
    clock = FakeClock()
    _lose_every_race(table, 10)
    policy = RetryPolicy(max_retries=2, min_wait_s=0.01)
    with pytest.raises(CommitRetriesExhaustedError) as err:
        _committer(table, policy, clock).commit(_messages(table), commit_identifier=1)
    assert err.value.attempts == 3 and len(clock.sleeps) == 2


def test_the_loop_stops_at_the_timeout_on_the_injected_clock(table) -> None:
    clock = FakeClock()
    _lose_every_race(table, 10)
    policy = RetryPolicy(max_retries=100, timeout_s=1.0, min_wait_s=0.3, max_wait_s=0.3, jitter=0.0)
    with pytest.raises(CommitRetriesExhaustedError) as err:
        _committer(table, policy, clock).commit(_messages(table), commit_identifier=1)
    # Attempts at t = 0, 0.3, 0.6, 0.9 lose; at 1.2 s the timeout has passed.
    assert err.value.attempts == 5
    assert err.value.elapsed_s == pytest.approx(1.2)
    assert table.latest_snapshot() is None
