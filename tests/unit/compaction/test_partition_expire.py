"""Partition expiration (``partition.expiration-*``, ``partition.timestamp-*``) on a fixed clock.

Each option against a model: the model computes, from the partition values (or
the files' creation times) and the injected ``now``, which partitions expire;
the table must then hold exactly the rows of the others.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import write_and_commit

from snaplake.catalog import FileSystemCatalog
from snaplake.compaction.partition_expire import PartitionExpire
from snaplake.errors import HashIndexConflictError, InvalidOptionError, UnsupportedTableError
from snaplake.store.format.schema_change import SchemaChange
from snaplake.store.format.snapshot import CommitKind

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string()),
        pa.field("hour", pa.string()),
        pa.field("v", pa.string()),
    ]
)
# A fixed clock: the zone-less local time the expiry compares with is NOW in this machine's zone.
NOW = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
LOCAL_NOW = NOW.astimezone().replace(tzinfo=None)


def _rows(dts: list[str], *, start: int = 0, hour: str = "00", per: int = 3) -> pa.Table:
    ids, days, hours = [], [], []
    for i, d in enumerate(dts):
        for j in range(per):
            ids.append(start + i * per + j)
            days.append(d)
            hours.append(hour)
    return pa.table(
        {"id": ids, "dt": days, "hour": hours, "v": [f"v{i}" for i in ids]}, schema=SCHEMA
    )


def _table(tmp_path: Path, options: dict[str, str], *, keys=("dt",), pk=(), name="db.t"):
    catalog = FileSystemCatalog(str(tmp_path / "wh"))
    return catalog.create_table(
        name, schema=SCHEMA, partition_keys=list(keys), primary_keys=list(pk), options=options
    )


def _live(table) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in table.to_arrow().to_pylist():
        out.setdefault(r["dt"], []).append(r["id"])
    return {k: sorted(v) for k, v in sorted(out.items(), key=lambda kv: str(kv[0]))}


DAYS = [(LOCAL_NOW - timedelta(days=n)).strftime("%Y-%m-%d") for n in range(12)]


@pytest.mark.parametrize("expiration", ["3 d", "7 d", "100 d", "1 h"])
def test_values_time_default_formatter_against_a_model(tmp_path, expiration):
    table = _table(tmp_path, {"partition.expiration-time": expiration})
    write_and_commit(table, _rows(DAYS))
    before = _live(table)
    ttl = {"3 d": timedelta(days=3), "7 d": timedelta(days=7), "100 d": timedelta(days=100),
           "1 h": timedelta(hours=1)}[expiration]  # fmt: skip
    cutoff = LOCAL_NOW - ttl
    model = sorted(d for d in before if cutoff > datetime.fromisoformat(d))
    plan = table.expire_partitions(dry_run=True, now=NOW)
    assert [p.spec["dt"] for p in plan.partitions] == model
    assert table.latest_snapshot().id == 1  # the dry run committed nothing
    result = table.expire_partitions(now=NOW)
    assert [p.spec["dt"] for p in result.partitions] == model
    assert result.expire_before == cutoff and result.strategy == "values-time"
    assert _live(table) == {d: ids for d, ids in before.items() if d not in model}
    if model:
        snap = table.latest_snapshot()
        assert snap.commit_kind == CommitKind.OVERWRITE and result.snapshot_ids == (snap.id,)
        assert result.files_deleted == len(model) and result.rows_deleted == 3 * len(model)
    else:
        assert result.snapshot_ids == () and table.latest_snapshot().id == 1
    # A second run at the same instant finds nothing more.
    assert table.expire_partitions(now=NOW).partitions == ()


def test_a_partition_exactly_at_the_cutoff_lives(tmp_path):
    table = _table(tmp_path, {"partition.expiration-time": "2 d"})
    at = (LOCAL_NOW - timedelta(days=2)).replace(hour=0, minute=0)
    write_and_commit(table, _rows([at.strftime("%Y-%m-%d")]))
    exact = datetime.combine(at.date(), datetime.min.time()) + timedelta(days=2)
    now = exact.astimezone(UTC) if exact.tzinfo else exact.astimezone()  # local zone-less -> aware
    assert table.expire_partitions(now=now).partitions == ()  # cutoff == partition time
    assert len(table.expire_partitions(now=now + timedelta(seconds=1)).partitions) == 1


@pytest.mark.parametrize(
    ("formatter", "fmt"),
    [("yyyyMMdd", "%Y%m%d"), ("yyyy/MM/dd", "%Y/%m/%d"), ("dd.MM.yyyy", "%d.%m.%Y")],
)
def test_values_time_with_a_formatter(tmp_path, formatter, fmt):
    table = _table(
        tmp_path,
        {"partition.expiration-time": "5 d", "partition.timestamp-formatter": formatter},
    )
    days = [(LOCAL_NOW - timedelta(days=n)).strftime(fmt) for n in range(9)]
    write_and_commit(table, _rows(days))
    cutoff = LOCAL_NOW - timedelta(days=5)
    model = sorted(d for d in days if cutoff > datetime.strptime(d, fmt))
    result = table.expire_partitions(now=NOW)
    assert sorted(p.spec["dt"] for p in result.partitions) == model
    assert sorted(_live(table)) == sorted(set(days) - set(model))


def test_values_time_with_a_pattern_over_two_keys(tmp_path):
    table = _table(
        tmp_path,
        {
            "partition.expiration-time": "30 h",
            "partition.timestamp-pattern": "$dt $hour:00:00",
            "partition.timestamp-formatter": "yyyyMMdd HH:mm:ss",
        },
        keys=("dt", "hour"),
    )
    base = LOCAL_NOW.replace(minute=0, second=0, microsecond=0)
    stamps = [base - timedelta(hours=h) for h in range(0, 60, 6)]
    for i, s in enumerate(stamps):
        write_and_commit(table, _rows([s.strftime("%Y%m%d")], start=100 * i, hour=s.strftime("%H")))
    cutoff = LOCAL_NOW - timedelta(hours=30)
    model = {(s.strftime("%Y%m%d"), s.strftime("%H")) for s in stamps if cutoff > s}
    result = table.expire_partitions(now=NOW)
    assert {(p.spec["dt"], p.spec["hour"]) for p in result.partitions} == model
    left = {(r["dt"], r["hour"]) for r in table.to_arrow().to_pylist()}
    assert left == {(s.strftime("%Y%m%d"), s.strftime("%H")) for s in stamps} - model


def test_unreadable_and_null_partitions_never_expire(tmp_path, caplog):
    table = _table(tmp_path, {"partition.expiration-time": "1 d"})
    write_and_commit(table, _rows(["not-a-date", "2001-01-01", "2001-13-45"]))
    write_and_commit(table, pa.table({"id": [99], "dt": [None], "hour": ["0"], "v": ["x"]},
                                     schema=SCHEMA))  # fmt: skip
    result = table.expire_partitions(now=NOW)
    assert [p.spec["dt"] for p in result.partitions] == ["2001-01-01"]
    assert sorted(_live(table), key=str) == sorted(["not-a-date", "2001-13-45", None], key=str)
    assert "never expires" in caplog.text


def test_update_time_uses_the_newest_file(tmp_path):
    table = _table(
        tmp_path,
        {"partition.expiration-time": "7 d", "partition.expiration-strategy": "update-time"},
    )
    write_and_commit(table, _rows(["a", "b", "c"]))  # values need not be dates
    files: dict[bytes, list[int | None]] = {}
    for split in table.new_scan().plan():
        for f in split.files:
            files.setdefault(split.partition, []).append(f.creation_time_ms)
    newest = max(t for ts in files.values() for t in ts if t is not None)
    written = datetime(1970, 1, 1) + timedelta(milliseconds=newest)
    # A clock just before written + 7 d keeps everything, just after drops everything.
    early = (written + timedelta(days=7) - timedelta(minutes=1)).astimezone()
    late = (written + timedelta(days=7) + timedelta(minutes=1)).astimezone()
    assert table.expire_partitions(now=early).partitions == ()
    result = table.expire_partitions(now=late)
    assert sorted(p.spec["dt"] for p in result.partitions) == ["a", "b", "c"]
    assert table.to_arrow().num_rows == 0


def test_max_num_drops_the_first_partitions_by_value(tmp_path):
    table = _table(
        tmp_path, {"partition.expiration-time": "1 d", "partition.expiration-max-num": "2"}
    )
    old = ["2020-01-03", "2020-01-01", "2020-01-02", "2019-12-31"]
    write_and_commit(table, _rows([*old, DAYS[0]]))
    first = table.expire_partitions(now=NOW)
    assert [p.spec["dt"] for p in first.partitions] == ["2019-12-31", "2020-01-01"]
    second = table.expire_partitions(now=NOW)
    assert [p.spec["dt"] for p in second.partitions] == ["2020-01-02", "2020-01-03"]
    assert list(_live(table)) == [DAYS[0]]


def test_batch_size_commits_one_snapshot_per_batch(tmp_path):
    table = _table(
        tmp_path,
        {"partition.expiration-time": "1 d", "partition.expiration-batch-size": "2"},
    )
    write_and_commit(table, _rows(["2020-01-01", "2020-01-02", "2020-01-03", DAYS[0]]))
    result = table.expire_partitions(now=NOW)
    assert result.partitions_expired == 3
    assert len(result.snapshot_ids) == 2
    assert [table.snapshot(i).commit_kind for i in result.snapshot_ids] == [
        CommitKind.OVERWRITE
    ] * 2
    assert list(_live(table)) == [DAYS[0]]


def test_tables_without_expiration_or_partitions_are_left_alone(tmp_path):
    plain = _table(tmp_path, {})
    write_and_commit(plain, _rows(["2000-01-01"]))
    assert plain.expire_partitions(now=NOW).strategy is None
    flat = _table(tmp_path, {"partition.expiration-time": "1 d"}, keys=(), name="db.flat")
    write_and_commit(flat, _rows(["2000-01-01"]))
    result = flat.expire_partitions(now=NOW)
    assert result.strategy is None and flat.to_arrow().num_rows == 3


def test_now_must_be_aware(tmp_path):
    table = _table(tmp_path, {"partition.expiration-time": "1 d"})
    with pytest.raises(ValueError, match="aware"):
        table.expire_partitions(now=datetime(2024, 1, 1))


# --- a writer at the same moment -------------------------------------------------------


def _race_after_first_plan(monkeypatch, action):
    """Run ``action`` once, right after the expiry planned (before its commit)."""
    real = PartitionExpire._plan
    calls = []

    def plan(self, now):
        out = real(self, now)
        calls.append(len(out[1]))
        if len(calls) == 1:
            action()
        return out

    monkeypatch.setattr(PartitionExpire, "_plan", plan)
    return calls


@pytest.mark.parametrize("strategy", ["values-time", "update-time"])
def test_a_writer_committing_before_the_drop_makes_it_plan_again(tmp_path, monkeypatch, strategy):
    table = _table(
        tmp_path,
        {"partition.expiration-time": "7 d", "partition.expiration-strategy": strategy},
    )
    with monkeypatch.context() as m:  # update-time: the first files were written 30 days ago
        month_ago = int((datetime.now(UTC) - timedelta(days=30)).timestamp() * 1000)
        m.setattr("snaplake.write.table_write.creation_time_now_ms", lambda: month_ago)
        write_and_commit(table, _rows(["2020-01-01", "2020-01-02"]))
    now = NOW if strategy == "values-time" else datetime.now(UTC)
    late = _rows(["2020-01-01"], start=1000)  # created now: young under update-time
    calls = _race_after_first_plan(
        monkeypatch, lambda: write_and_commit(table, late, commit_user="x")
    )
    result = table.expire_partitions(now=now)
    assert result.replans == 1 and len(calls) == 2
    live = _live(table)
    if strategy == "values-time":
        # Still old by its values: the second plan saw the late file and dropped it too (Paimon).
        assert [p.spec["dt"] for p in result.partitions] == ["2020-01-01", "2020-01-02"]
        assert result.rows_deleted == 6 + 3
        assert live == {}
    else:
        # 2020-01-01 is young again; 2020-01-02 (untouched) is still dropped by the second plan.
        assert [p.spec["dt"] for p in result.partitions] == ["2020-01-02"]
        assert live == {"2020-01-01": [0, 1, 2, 1000, 1001, 1002]}


def test_a_writer_committing_after_the_drop_brings_the_partition_back(tmp_path):
    table = _table(tmp_path, {"partition.expiration-time": "7 d"})
    write_and_commit(table, _rows(["2020-01-01", "2020-01-02"]))
    write = table.new_write(commit_user="late")  # opened before the drop
    write.write_arrow(_rows(["2020-01-01"], start=1000))
    result = table.expire_partitions(now=NOW)
    assert result.partitions_expired == 2 and result.replans == 0
    table.new_commit(commit_user="late").commit(write.prepare_commit())
    assert _live(table) == {"2020-01-01": [1000, 1001, 1002]}


# --- primary-key tables ----------------------------------------------------------------


@pytest.mark.parametrize("bucket", ["2", "-1", "-2"])
def test_primary_key_tables_in_each_bucket_mode(tmp_path, bucket):
    table = _table(
        tmp_path,
        {"partition.expiration-time": "7 d", "bucket": bucket},
        pk=("dt", "id"),
    )
    write_and_commit(table, _rows(["2020-01-01", DAYS[0]]))
    write_and_commit(table, _rows(["2020-01-01", DAYS[0]]))  # upserts: two levels-0 per bucket
    if bucket == "-2":
        table.compact()  # postpone: rows become readable once compaction assigns buckets
    result = table.expire_partitions(now=NOW)
    assert [p.spec["dt"] for p in result.partitions] == ["2020-01-01"]
    assert _live(table) == {DAYS[0]: [3, 4, 5]}
    if bucket == "-1":  # the partition's HASH index entries went with it
        from snaplake.store.read.index_scan import read_index_entries

        index = read_index_entries(table, table.latest_snapshot())
        types = table.schema().partition_types
        from snaplake.store.format.binary_row import decode_binary_row

        assert {decode_binary_row(e.partition, types)[0] for e in index} == {DAYS[0]}
    # The dropped partition can be written again and reads exactly the new rows.
    write_and_commit(table, _rows(["2020-01-01"], start=500))
    if bucket == "-2":
        table.compact()
    assert _live(table) == {"2020-01-01": [500, 501, 502], DAYS[0]: [3, 4, 5]}


# --- bad input: typed errors at create/alter, nothing written --------------------------


@pytest.mark.parametrize(
    ("options", "error", "key"),
    [
        ({"partition.timestamp-formatter": "yyyy-MM-dd E"}, InvalidOptionError, None),
        ({"partition.timestamp-formatter": "yyyyMM"}, InvalidOptionError, None),
        ({"partition.timestamp-formatter": "yyyy'MMdd"}, InvalidOptionError, None),
        ({"partition.timestamp-pattern": "$day 00:00:00"}, InvalidOptionError, None),
        ({"partition.expiration-time": "seven days"}, InvalidOptionError, None),
        ({"partition.expiration-check-interval": "often"}, InvalidOptionError, None),
        ({"partition.expiration-max-num": "0"}, InvalidOptionError, None),
        ({"partition.expiration-strategy": "file-time"}, UnsupportedTableError, None),
    ],
)
def test_bad_options_are_refused_at_create_and_alter(tmp_path, options, error, key):
    wh = tmp_path / "wh"
    catalog = FileSystemCatalog(str(wh))
    full = {"partition.expiration-time": "7 d", **options}
    with pytest.raises(error) as info:
        catalog.create_table("db.t", schema=SCHEMA, partition_keys=["dt"], options=full)
    assert getattr(info.value, "key", None) == next(iter(options))
    assert not wh.exists() or not any(wh.rglob("*"))
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["dt"])
    with pytest.raises(error):
        catalog.alter_table("db.t", [SchemaChange.set_option(k, v) for k, v in full.items()])
    assert table.schema_manager.list_schema_ids() == [0]


@pytest.mark.parametrize("bucket", ["2", "-1", "-2"])
def test_a_primary_key_writer_committing_after_the_drop(tmp_path, bucket):
    """Fixed and postpone buckets: the partition lives again. Dynamic buckets: the writer
    restored the partition's HASH index the drop deleted, so its commit fails with a typed
    conflict and publishes nothing (its rows were never acknowledged); a new writer lands."""
    table = _table(
        tmp_path, {"partition.expiration-time": "7 d", "bucket": bucket}, pk=("dt", "id")
    )
    write_and_commit(table, _rows(["2020-01-01", DAYS[0]]))
    write = table.new_write(commit_user="late")
    write.write_arrow(_rows(["2020-01-01"], start=1000))
    assert table.expire_partitions(now=NOW).partitions_expired == 1
    if bucket == "-1":
        with pytest.raises(HashIndexConflictError):
            table.new_commit(commit_user="late").commit(write.prepare_commit())
        assert _live(table) == {DAYS[0]: [3, 4, 5]}
        write_and_commit(table, _rows(["2020-01-01"], start=1000), commit_user="late")
    else:
        table.new_commit(commit_user="late").commit(write.prepare_commit())
        if bucket == "-2":
            table.compact()
    assert _live(table) == {"2020-01-01": [1000, 1001, 1002], DAYS[0]: [3, 4, 5]}


def test_integer_partitions_parse_as_their_decimal_string(tmp_path):
    """Paimon prints the internal value: an INT 20240105 reads with ``yyyyMMdd``."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("day", pa.int32())])
    table = FileSystemCatalog(str(tmp_path / "wh")).create_table(
        "db.i", schema=schema, partition_keys=["day"],
        options={"partition.expiration-time": "7 d", "partition.timestamp-formatter": "yyyyMMdd"},
    )  # fmt: skip
    days = [int((LOCAL_NOW - timedelta(days=n)).strftime("%Y%m%d")) for n in (0, 3, 8, 20)]
    write_and_commit(table, pa.table({"id": [1, 2, 3, 4], "day": days}, schema=schema))
    result = table.expire_partitions(now=NOW)
    assert [p.spec["day"] for p in result.partitions] == sorted(str(d) for d in days[2:])
    assert sorted(table.to_arrow().column("day").to_pylist()) == sorted(days[:2])
