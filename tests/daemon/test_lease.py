"""TableLease: create-if-absent generations, expiry, takeover, renewal, release."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.store.io.memory_file_io import InMemoryFileIO
from snaplake.store.lease import LEASE_DIR, TableLease


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture(params=["memory", "local"])
def env(request, tmp_path):
    if request.param == "memory":
        return InMemoryFileIO(), "memory://lease/db.db/t"
    return LocalFileIO(fsync=False), str(tmp_path / "db.db" / "t")


def _lease(env, owner, clock, ttl_s=10, nonce=None):
    file_io, root = env
    return TableLease(
        file_io=file_io, table_root=root, owner=owner, ttl=timedelta(seconds=ttl_s),
        clock_skew=timedelta(seconds=1), clock_ms=clock, nonce=nonce,
    )  # fmt: skip


def test_first_daemon_wins_second_skips(env):
    clock = Clock()
    a, b = _lease(env, "a", clock), _lease(env, "b", clock)
    assert a.try_acquire()
    assert a.held
    assert not b.try_acquire()
    assert not b.held
    assert a.current().owner == "a"


def test_renewal_keeps_the_lease_beyond_the_ttl(env):
    clock = Clock()
    a, b = _lease(env, "a", clock), _lease(env, "b", clock)
    assert a.try_acquire()
    for _ in range(5):
        clock.ms += 5_000
        assert a.try_acquire()  # renews
        assert not b.try_acquire()
    assert a.current().generation == 1


def test_crashed_holder_is_taken_over_after_expiry_and_skew(env):
    clock = Clock()
    a, b = _lease(env, "a", clock), _lease(env, "b", clock)
    assert a.try_acquire()
    clock.ms += 10_500  # expired, but within the 1 s clock-skew allowance
    assert not b.try_acquire()
    clock.ms += 1_000
    assert b.try_acquire()
    state = b.current()
    assert (state.owner, state.generation) == ("b", 2)
    # The old generation file is gone; the paused holder notices and gives up.
    file_io, root = env
    names = sorted(s.path.rsplit("/", 1)[-1] for s in file_io.list_files(f"{root}/{LEASE_DIR}"))
    assert names == ["lease-2"]
    assert not a.renew()
    assert not a.held


def test_paused_holder_does_not_renew_over_a_successor(env):
    clock = Clock()
    a, b = _lease(env, "a", clock), _lease(env, "b", clock)
    assert a.try_acquire()
    clock.ms += 20_000
    assert b.try_acquire()
    assert not a.try_acquire()  # a's lease lapsed: it must not come back
    assert b.current().owner == "b"


def test_release_lets_another_daemon_take_over_at_once(env):
    clock = Clock()
    a, b = _lease(env, "a", clock), _lease(env, "b", clock)
    assert a.try_acquire()
    a.release()
    assert not a.held
    assert a.current().released
    assert b.try_acquire()
    assert b.current().generation == 2


def test_same_process_renews_its_own_lease(env):
    clock = Clock()
    a = _lease(env, "a", clock, nonce="n1")
    assert a.try_acquire()
    clock.ms += 5_000
    assert a.try_acquire()
    state = a.current()
    assert (state.owner, state.nonce, state.generation) == ("a", "n1", 1)
    assert state.expires_ms == clock.ms + 10_000


def test_second_daemon_with_the_same_id_does_not_share_the_lease(env, caplog):
    """A copied config (same [daemon] id): the other process is another holder."""
    clock = Clock()
    a, twin = _lease(env, "a", clock, nonce="n1"), _lease(env, "a", clock, nonce="n2")
    assert a.try_acquire()
    with caplog.at_level("WARNING", logger="snaplake.store.lease"):
        assert not twin.try_acquire()
        clock.ms += 5_000
        assert a.try_acquire()
        assert not twin.try_acquire()
    assert not twin.held
    assert a.held
    warnings = [r.getMessage() for r in caplog.records if "same id" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, not at every round
    assert (a.current().nonce, a.current().generation) == ("n1", 1)


def test_crashed_daemon_with_the_same_id_is_taken_over_only_after_expiry(env):
    clock = Clock()
    assert _lease(env, "a", clock, nonce="crashed").try_acquire()
    restarted = _lease(env, "a", clock, nonce="new")
    assert not restarted.try_acquire()
    clock.ms += 10_500  # expired, within the clock-skew allowance
    assert not restarted.try_acquire()
    clock.ms += 1_000
    assert restarted.try_acquire()
    state = restarted.current()
    assert (state.owner, state.nonce, state.generation) == ("a", "new", 2)


def test_restart_with_same_id_after_release_takes_over_at_once(env):
    clock = Clock()
    old = _lease(env, "a", clock)
    assert old.try_acquire()
    old.release()
    again = _lease(env, "a", clock)
    assert again.try_acquire()
    assert again.current().generation == 2


def test_lease_without_nonce_is_another_holder(env):
    """A lease file written before nonces existed blocks until it expires."""
    file_io, root = env
    file_io.write_bytes(
        f"{root}/{LEASE_DIR}/lease-1",
        b'{"owner": "a", "generation": 1, "acquired_ms": 1000000, "expires_ms": 1010000}',
        overwrite=True,
    )
    clock = Clock()
    a = _lease(env, "a", clock)
    assert not a.try_acquire()
    clock.ms += 11_001
    assert a.try_acquire()
    assert a.current().generation == 2


def test_unreadable_lease_is_taken_over(env):
    file_io, root = env
    file_io.write_bytes(f"{root}/{LEASE_DIR}/lease-3", b"{not json", overwrite=True)
    clock = Clock()
    b = _lease(env, "b", clock)
    assert b.try_acquire()
    assert b.current().generation == 4


def test_racing_daemons_exactly_one_wins(tmp_path):
    root = str(tmp_path / "t")
    clock = Clock()
    leases = [
        TableLease(file_io=LocalFileIO(fsync=False), table_root=root, owner=f"d{i}",
                   ttl=timedelta(seconds=30), clock_ms=clock)
        for i in range(8)
    ]  # fmt: skip
    barrier = threading.Barrier(len(leases))
    wins: list[bool] = [False] * len(leases)

    def go(i: int) -> None:
        barrier.wait()
        wins[i] = leases[i].try_acquire()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(wins) == 1
