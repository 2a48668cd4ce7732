"""table.subscribe: one batch per snapshot with rows, progress only on ack, resumption, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pyarrow as pa
import pytest

import snaplake
from snaplake.errors import (
    AckOrderError,
    InvalidNameError,
    InvalidOptionError,
    SnapshotNotFoundError,
    UnsupportedTableError,
)
from snaplake.store.consumers import ConsumerManager

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
COLUMNS = ["id", "v", "_row_kind", "_snapshot_id"]


def _rows(first: int, n: int = 3) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def catalog(tmp_path):
    return snaplake.FileSystemCatalog(str(tmp_path / "wh"))


@pytest.fixture
def table(catalog):
    """``db.t``, an append table with snapshots 1..3 (ids 0-2, 10-12, 20-22)."""
    t = catalog.create_table("db.t", schema=SCHEMA)
    for k in range(3):
        t.write(_rows(10 * k))
    return t


def _file(table, consumer_id):
    path = table.paths.consumer_path(consumer_id)
    return orjson.loads(table.file_io.read_bytes(path))


def _ids(batch):
    out = batch.reader.read_all()
    assert out.column_names == COLUMNS
    assert set(out.column("_snapshot_id").to_pylist()) == {batch.snapshot_id}
    assert set(out.column("_row_kind").to_pylist()) == {"+I"}
    return sorted(out.column("id").to_pylist())


def test_one_batch_per_snapshot_and_the_file_moves_only_on_ack(table):
    with table.subscribe("job-a", start="earliest", stop_when_idle=True) as sub:
        seen = []
        for batch in sub:
            # created at the start, unchanged until the ack
            assert _file(table, "job-a") == {"nextSnapshot": batch.snapshot_id}
            seen.append((batch.snapshot_id, batch.commit_kind, _ids(batch)))
            batch.ack()
            assert _file(table, "job-a") == {"nextSnapshot": batch.snapshot_id + 1}
    assert seen == [(1, "APPEND", [0, 1, 2]), (2, "APPEND", [10, 11, 12]),
                    (3, "APPEND", [20, 21, 22])]  # fmt: skip
    assert table.consumers() == {"job-a": 4}
    # Caught up: a new subscription delivers nothing until the next commit.
    with table.subscribe("job-a", stop_when_idle=True) as again:
        assert list(again) == []
    table.write(_rows(30))
    with table.subscribe("job-a", stop_when_idle=True) as again:
        batches = list(again)
        assert [(b.snapshot_id, _ids(b)) for b in batches] == [(4, [30, 31, 32])]
        batches[0].ack()
    assert table.consumers() == {"job-a": 5}


def test_unacknowledged_snapshot_is_delivered_again(table):
    with table.subscribe("job-a", stop_when_idle=True) as sub:
        first = next(sub)
        first.ack()
        second = next(sub)
        assert second.snapshot_id == 2
        # "crash": no ack for snapshot 2
    assert table.consumers() == {"job-a": 2}
    with table.subscribe("job-a", start="latest", stop_when_idle=True) as sub:  # start ignored
        assert [b.snapshot_id for b in sub] == [2, 3]


def test_start_positions_of_a_new_consumer(table):
    with table.subscribe("late", start="latest", stop_when_idle=True) as sub:
        assert list(sub) == []
    assert table.consumers()["late"] == 4  # created: a crash now does not skip snapshot 4
    with table.subscribe("from2", start=2, stop_when_idle=True) as sub:
        assert [b.snapshot_id for b in sub] == [2, 3]
    t2 = table.snapshot(2).time_millis
    at = datetime.fromtimestamp(t2 / 1000, tz=UTC)
    with table.subscribe("since", start=at, stop_when_idle=True) as sub:
        assert next(sub).snapshot_id <= 2
    future = datetime.now(UTC) + timedelta(days=1)
    with table.subscribe("future", start=future, stop_when_idle=True) as sub:
        assert list(sub) == []
    assert table.consumers()["future"] == 4


def test_several_outstanding_batches_are_acknowledged_in_order(table):
    with table.subscribe("job", stop_when_idle=True) as sub:
        b1, b2, b3 = list(sub)
        with pytest.raises(AckOrderError) as err:
            b2.ack()
        assert err.value.snapshot_id == 2
        assert table.consumers() == {"job": 1}  # nothing written
        b1.ack()
        with pytest.raises(AckOrderError):
            b1.ack()
        b2.ack()
        b3.ack()
    assert table.consumers() == {"job": 4}


def test_ack_after_close_is_refused(table):
    sub = table.subscribe("job", stop_when_idle=True)
    batch = next(sub)
    sub.close()
    sub.close()  # idempotent
    with pytest.raises(AckOrderError, match="closed"):
        batch.ack()
    assert table.consumers() == {"job": 1}
    assert list(sub) == []


COMPACTING = {"compaction.min.file-num": "2"}


def test_compaction_snapshots_give_no_batch_and_the_consumer_moves_past_them(catalog):
    t = catalog.create_table("db.c", schema=SCHEMA, options=COMPACTING)
    t.write(_rows(0))
    t.write(_rows(10))
    t.compact()  # snapshot 3: COMPACT
    t.write(_rows(20))
    t.compact()  # snapshot 5: COMPACT, the newest
    assert [s.commit_kind.value for s in t.snapshots()] == [
        "APPEND", "APPEND", "COMPACT", "APPEND", "COMPACT"]  # fmt: skip
    with t.subscribe("job", stop_when_idle=True) as sub:
        got = []
        for batch in sub:
            got.append(batch.snapshot_id)
            batch.ack()
    assert got == [1, 2, 4]
    # Every batch acknowledged: the trailing COMPACT snapshot is passed too.
    assert t.consumers() == {"job": 6}


def test_trailing_empty_snapshots_are_not_passed_while_a_batch_is_unacknowledged(catalog):
    t = catalog.create_table("db.c", schema=SCHEMA, options=COMPACTING)
    t.write(_rows(0))
    t.write(_rows(10))
    t.compact()
    with t.subscribe("job", stop_when_idle=True) as sub:
        batches = list(sub)
        assert [b.snapshot_id for b in batches] == [1, 2]
        assert t.consumers() == {"job": 1}
        batches[0].ack()
        assert t.consumers() == {"job": 2}
        batches[1].ack()
        assert t.consumers() == {"job": 3}
    with t.subscribe("job", stop_when_idle=True) as sub:
        assert list(sub) == []
    assert t.consumers() == {"job": 4}


def test_consumers_do_not_affect_each_other(table):
    with (
        table.subscribe("a", stop_when_idle=True) as a,
        table.subscribe("b", stop_when_idle=True) as b,
    ):
        for batch in a:
            batch.ack()
        first_b = next(b)
        assert first_b.snapshot_id == 1
        first_b.ack()
    assert table.consumers() == {"a": 4, "b": 2}
    with table.subscribe("b", stop_when_idle=True) as b:
        assert [x.snapshot_id for x in b] == [2, 3]


def test_projection_and_filter(table):
    with table.subscribe("p", stop_when_idle=True, columns=["id"], filter=("id", ">=", 11)) as sub:
        out = {}
        for batch in sub:
            data = batch.reader.read_all()
            assert data.column_names == ["id", "_row_kind", "_snapshot_id"]
            out[batch.snapshot_id] = data.column("id").to_pylist()
            batch.ack()
    assert {k: v for k, v in out.items() if v} == {2: [11, 12], 3: [20, 21, 22]}


def test_subscriber_snapshot_survives_expiry_with_tiny_retention(catalog):
    t = catalog.create_table(
        "db.e", schema=SCHEMA,
        options={"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                 "snapshot.time-retained": "1 ms"},
    )  # fmt: skip
    t.write(_rows(0))
    with t.subscribe("slow", stop_when_idle=True) as sub:
        next(sub).ack()  # nextSnapshot 2
        for k in range(1, 5):
            t.write(_rows(10 * k))
        t.expire_snapshots()
        assert t.snapshot_manager.earliest_snapshot_id() == 2
        got = []
        for batch in sub:
            got.append((batch.snapshot_id, _ids(batch)))
            batch.ack()
    assert [g[0] for g in got] == [2, 3, 4, 5]
    t.expire_snapshots()
    assert t.snapshot_manager.earliest_snapshot_id() == 5  # max retained 1, consumer at 6


def test_paimon_sees_only_consumer_files_in_consumer_dir(table):
    with table.subscribe("job-a", stop_when_idle=True) as sub:
        for batch in sub:
            batch.ack()
    names = sorted(s.path.rsplit("/", 1)[-1] for s in table.file_io.list_files(
        f"{table.root}/consumer"))  # fmt: skip
    assert names == ["consumer-job-a"]
    assert _file(table, "job-a") == {"nextSnapshot": 4}
    lease_files = [s.path for s in table.file_io.list_files(f"{table.root}/.snaplake")]
    assert lease_files and all("/.snaplake/subscription-job-a-" in p for p in lease_files)


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "..", ".", "a b", "é", "x\n"])
def test_invalid_consumer_id_is_refused_before_anything_is_written(table, bad):
    with pytest.raises(InvalidNameError) as err:
        table.subscribe(bad)
    assert err.value.kind == "consumer id"
    assert not (table.file_io.exists(f"{table.root}/consumer"))
    assert not (table.file_io.exists(f"{table.root}/.snaplake"))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"mode": "sideways"}, InvalidOptionError),
        ({"start": "first"}, InvalidOptionError),
        ({"start": True}, InvalidOptionError),
        ({"start": 2.5}, InvalidOptionError),
        ({"start": datetime(2024, 1, 1)}, ValueError),  # naive
        ({"poll_interval": timedelta(0)}, InvalidOptionError),
        ({"lease_ttl": timedelta(seconds=-1)}, InvalidOptionError),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(table, kwargs, error):
    with pytest.raises(error):
        table.subscribe("job", **kwargs)
    assert not (table.file_io.exists(f"{table.root}/consumer"))
    assert not (table.file_io.exists(f"{table.root}/.snaplake"))


@pytest.mark.parametrize("start", [4, 99, 0])
def test_start_outside_the_retained_snapshots_is_refused(table, start):
    with pytest.raises(SnapshotNotFoundError) as err:
        table.subscribe("job", start=start)
    assert err.value.snapshot_id == start
    assert table.consumers() == {}
    # the lease was released: the id is free
    with table.subscribe("job", stop_when_idle=True) as sub:
        assert len(list(sub)) == 3


def test_changelog_mode_without_producer_fails_while_iterating(table):
    sub = table.subscribe("job", mode="changelog", stop_when_idle=True)
    with sub, pytest.raises(UnsupportedTableError):
        next(sub)


def test_expired_next_snapshot_raises_naming_the_earliest(catalog):
    t = catalog.create_table(
        "db.x", schema=SCHEMA,
        options={"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                 "snapshot.time-retained": "1 ms", "consumer.changelog-only": "true"},
    )  # fmt: skip
    for k in range(3):
        t.write(_rows(10 * k))
    ConsumerManager(t.file_io, t.paths).set_consumer("old", next_snapshot=1)
    t.expire_snapshots()  # consumer.changelog-only: consumers do not pin
    assert t.snapshot_manager.earliest_snapshot_id() == 3
    sub = t.subscribe("old", stop_when_idle=True)
    with sub, pytest.raises(SnapshotNotFoundError, match="earliest retained snapshot is 3"):
        next(sub)


def test_empty_table_earliest_starts_at_the_first_snapshot(catalog):
    t = catalog.create_table("db.empty", schema=SCHEMA)
    with t.subscribe("job", stop_when_idle=True) as sub:
        assert list(sub) == []
    assert t.consumers() == {"job": 1}
    t.write(_rows(0))
    with t.subscribe("job", stop_when_idle=True) as sub:
        assert [b.snapshot_id for b in sub] == [1]


def test_polling_delivers_a_snapshot_committed_while_waiting(table):
    """Without stop_when_idle the iteration waits; a commit made meanwhile is delivered."""
    import threading

    with table.subscribe("poll", start="latest", poll_interval=timedelta(milliseconds=5)) as sub:
        done = threading.Event()

        def writer() -> None:
            table.write(_rows(40))
            done.set()

        threading.Thread(target=writer).start()
        batch = next(sub)
        assert done.wait(60)
        assert (batch.snapshot_id, _ids(batch)) == (4, [40, 41, 42])
        batch.ack()


PK_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def test_primary_key_mirror_through_the_lookup_changelog(catalog):
    """Replaying each batch's rows with their kinds into a primary-key table gives the source."""
    opts = {"bucket": "1", "changelog-producer": "lookup"}
    source = catalog.create_table("db.pk", schema=PK_SCHEMA, primary_keys=["id"], options=opts)
    mirror = catalog.create_table("db.pk_mirror", schema=PK_SCHEMA, primary_keys=["id"],
                                  options={"bucket": "1"})  # fmt: skip
    source.write(pa.table({"id": [1, 2, 3], "v": ["a", "a", "a"]}, schema=PK_SCHEMA))
    source.write(pa.table({"id": [2, 4], "v": ["b", "b"]}, schema=PK_SCHEMA))
    source.write(pa.table({"id": [1], "v": [None]}, schema=PK_SCHEMA), row_kinds=["-D"])
    source.compact(full=True)
    kinds = set()
    with source.subscribe("mirror", stop_when_idle=True) as sub:
        for batch in sub:
            data = batch.reader.read_all()
            kinds |= set(data.column("_row_kind").to_pylist())
            mirror.write(
                data.select(["id", "v"]), row_kinds=data.column("_row_kind").to_pylist(),
                commit_user="mirror", commit_identifier=batch.snapshot_id,
            )  # fmt: skip
            batch.ack()
    assert {"+I", "-U", "+U", "-D"} <= kinds
    assert mirror.to_arrow().sort_by("id").equals(source.to_arrow().sort_by("id"))
    assert source.consumers() == {"mirror": source.snapshot_manager.latest_snapshot_id() + 1}
