"""One live subscription per consumer id: refusal, release, takeover of a dead holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import snaplake
from snaplake.errors import ConsumerBusyError
from snaplake.store.consumers import ConsumerManager
from snaplake.store.lease import LeaseState, pid_alive
from snaplake.subscription import delete_consumer, reset_consumer

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])
REPO = Path(__file__).resolve().parents[3]

HOLDER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    import snaplake
    table = snaplake.FileSystemCatalog(sys.argv[1]).get_table("db.t")
    sub = table.subscribe(sys.argv[2], stop_when_idle=True)
    print("HOLDING", flush=True)
    sys.stdin.read()  # hold until the parent closes stdin (or kills us)
    sub.close()
    print("RELEASED", flush=True)
    """
)


@pytest.fixture
def table(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path / "wh"))
    t = catalog.create_table("db.t", schema=SCHEMA)
    t.write(pa.table({"id": [1, 2]}, schema=SCHEMA))
    t.write(pa.table({"id": [3]}, schema=SCHEMA))
    return t


def _holder(table, consumer_id: str) -> subprocess.Popen[str]:
    warehouse = table.root.rsplit("/db.db/", 1)[0]
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, warehouse, consumer_id, str(REPO)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "HOLDING"
    return proc


def test_same_id_twice_in_one_process_is_refused_until_closed(table):
    first = table.subscribe("job", stop_when_idle=True)
    with pytest.raises(ConsumerBusyError) as err:
        table.subscribe("job")
    assert err.value.consumer_id == "job"
    assert f"pid {os.getpid()}" in str(err.value)
    assert "another consumer id" in str(err.value)
    assert err.value.retryable
    other = table.subscribe("other", stop_when_idle=True)  # another id is fine
    other.close()
    first.close()
    with table.subscribe("job", stop_when_idle=True) as again:
        assert [b.snapshot_id for b in again] == [1, 2]


def test_live_process_blocks_the_id_and_releases_it_on_close(table):
    proc = _holder(table, "job")
    try:
        with pytest.raises(ConsumerBusyError, match=f"pid {proc.pid}"):
            table.subscribe("job")
        with pytest.raises(ConsumerBusyError):
            reset_consumer(table, "job", next_snapshot=1)
        with pytest.raises(ConsumerBusyError):
            delete_consumer(table, "job")
        assert table.consumers() == {"job": 1}
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        assert proc.stdout.readline().strip() == "RELEASED"
        assert proc.wait(timeout=60) == 0
    with table.subscribe("job", stop_when_idle=True) as sub:
        assert [b.snapshot_id for b in sub] == [1, 2]


def test_killed_holder_on_this_host_is_taken_over_at_once(table):
    proc = _holder(table, "job")
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL  # reaped: the pid is gone
    assert not pid_alive(proc.pid)
    # No waiting for the 60 s lease: the recorded holder is a dead local pid.
    with table.subscribe("job", stop_when_idle=True) as sub:
        assert [b.snapshot_id for b in sub] == [1, 2]


def _plant_lease(table, *, host: str, pid: int, expires_ms: int) -> None:
    state = LeaseState(
        owner="job", generation=1, acquired_ms=0, expires_ms=expires_ms, nonce="x",
        host=host, pid=pid,
    )  # fmt: skip
    table.file_io.write_bytes(
        f"{table.root}/.snaplake/subscription-job-1", state.to_bytes(), overwrite=True
    )


def test_holder_on_another_host_blocks_until_its_lease_expires(table):
    far = 2**62
    _plant_lease(table, host="some-other-host", pid=1, expires_ms=far)
    with pytest.raises(ConsumerBusyError, match="some-other-host"):
        table.subscribe("job")
    _plant_lease(table, host="some-other-host", pid=1, expires_ms=0)  # expired long ago
    with table.subscribe("job", stop_when_idle=True) as sub:
        assert len(list(sub)) == 2


def test_lease_of_a_dead_local_pid_is_taken_over(table):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    import socket

    _plant_lease(table, host=socket.gethostname(), pid=int(dead.stdout), expires_ms=2**62)
    with table.subscribe("job", stop_when_idle=True) as sub:
        assert len(list(sub)) == 2


def test_daemon_lease_does_not_take_over_dead_local_pids(table):
    """The daemon's maintenance lease keeps its behaviour: expiry only."""
    import socket

    from snaplake.store.lease import TableLease

    planted = LeaseState(owner="d", generation=1, acquired_ms=0, expires_ms=2**62,
                         host=socket.gethostname(), pid=2**22 + 12345)  # fmt: skip
    table.file_io.write_bytes(f"{table.root}/.snaplake/lease-1", planted.to_bytes(),
                              overwrite=True)  # fmt: skip
    lease = TableLease(file_io=table.file_io, table_root=table.root, owner="d2",
                       ttl=timedelta(seconds=10))  # fmt: skip
    assert not lease.try_acquire()
    # and the daemon's lease files are not a consumer's (and vice versa)
    with table.subscribe("job", stop_when_idle=True) as sub:
        assert len(list(sub)) == 2
    assert not lease.try_acquire()


def test_lost_lease_refuses_the_ack(table):
    sub = table.subscribe("job", stop_when_idle=True)
    batch = next(sub)
    # Another holder takes a newer generation (as after an expiry elsewhere).
    manager = ConsumerManager(table.file_io, table.paths)
    gens = [s.path for s in table.file_io.list_files(f"{table.root}/.snaplake")]
    assert len(gens) == 1
    state = LeaseState(owner="job", generation=2, acquired_ms=0, expires_ms=2**62, nonce="thief",
                       host="elsewhere", pid=1)  # fmt: skip
    table.file_io.write_bytes(f"{table.root}/.snaplake/subscription-job-2", state.to_bytes(),
                              overwrite=True)  # fmt: skip
    assert not sub._lease.renew()  # what the renewal thread finds on its next round
    with pytest.raises(ConsumerBusyError, match="lost the consumer id"):
        batch.ack()
    assert manager.consumer("job") == 1  # nothing written
    sub.close()
    # the thief's generation is untouched by the close
    assert table.file_io.exists(f"{table.root}/.snaplake/subscription-job-2")


def test_reset_and_delete_when_free(table):
    reset_consumer(table, "job", next_snapshot=2)
    assert table.consumers() == {"job": 2}
    reset_consumer(table, "job", next_snapshot=3)  # latest + 1 is allowed
    assert table.consumers() == {"job": 3}
    with pytest.raises(snaplake.SnapshotNotFoundError):
        reset_consumer(table, "job", next_snapshot=4)
    delete_consumer(table, "job")
    assert table.consumers() == {}
    delete_consumer(table, "job")  # missing is fine


def test_renewal_round_renews_the_lease_and_refreshes_the_consumer_file(table):
    """One round of the renewal thread's loop, driven here (no waiting on a clock)."""
    import threading
    import weakref

    from snaplake.subscription import _renew_loop

    sub = table.subscribe("job", stop_when_idle=True)
    next(sub).ack()
    table.file_io.delete(table.paths.consumer_path("job"))  # as consumer expiry would
    before = sub._lease.current().expires_ms
    stop = threading.Event()
    calls = []

    class Probe:
        def touch(self) -> None:
            sub._touch()
            calls.append(1)
            stop.set()

    probe = Probe()
    _renew_loop(sub._lease, threading.Lock(), stop, [], 0.0, weakref.WeakMethod(probe.touch))
    assert calls == [1]
    assert table.consumers() == {"job": 2}  # rewritten with the acknowledged position
    assert sub._lease.current().expires_ms >= before
    sub.close()
