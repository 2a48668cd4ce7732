"""Automatic tags, tag retention and consumer expiry against a model, on a fixed clock.

Snapshots are committed for real, then their ``timeMillis`` / ``watermark``
are rewritten to chosen instants (the clock of the table), so no test
depends on the wall clock. The machine zone is what Paimon's process-time
extractor uses; the tests run with ``TZ`` as the process has it and compute
the expected names in the same zone.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from tests.helpers import sorted_ids
from tests.unit.compaction.conftest import append

from snaplake.errors import InvalidOptionError, UnsupportedTableError
from snaplake.options import CoreOptions, Operation, OptionStatus
from snaplake.options.registry import lookup_option
from snaplake.options.tag_options import TagOptions, TagPeriodHandler, local_time
from snaplake.store.consumers import ConsumerManager
from snaplake.store.format.schema_change import SchemaChange
from snaplake.table import Table

T0 = datetime(2026, 11, 26, 0, 0, tzinfo=UTC)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def retime(table: Table, times: dict[int, datetime], *, watermarks: dict[int, int] | None = None):
    """Rewrite snapshot files so snapshot ``sid`` was committed at ``times[sid]``."""
    for sid, when in times.items():
        snap = table.snapshot(sid)
        mark = (watermarks or {}).get(sid, snap.watermark)
        new = dataclasses.replace(snap, time_millis=ms(when), watermark=mark)
        table.file_io.write_bytes(table.paths.snapshot_path(sid), new.to_bytes(), overwrite=True)


def commits(table: Table, times: list[datetime]) -> None:
    """One append per instant; snapshot ``i + 1`` carries ``times[i]``."""
    for i, _ in enumerate(times):
        append(table, i * 10, 10)
    retime(table, {i + 1: t for i, t in enumerate(times)})


def model_tags(times: list[datetime], period: timedelta, delay: timedelta, fmt) -> dict[str, int]:
    """Paimon's rule, written independently: {tag name: snapshot id} from no tags at all."""
    out: dict[str, int] = {}
    next_tag = None
    epoch = datetime(1970, 1, 1)
    for sid, t in enumerate(times, start=1):
        local = local_time(ms(t))
        if next_tag is not None and local - delay < next_tag + period:
            continue
        floor = epoch + ((local - epoch) // period) * period
        this = floor - period
        out.setdefault(fmt(this), sid)
        next_tag = this + period
    return out


def hourly(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H")


# ------------------------------------------------------------------ naming
@pytest.mark.parametrize(
    ("kind", "formatter", "expected"),
    [
        ("daily", "with_dashes", "2026-11-26"),
        ("daily", "without_dashes", "20261126"),
        ("hourly", "with_dashes", "2026-11-26 13"),
        ("hourly", "without_dashes", "20261126 13"),
        ("hourly", "without_dashes_and_spaces", "2026112613"),
        ("two-hours", "without_dashes", "2026-11-26 13"),
    ],
)
def test_tag_names_are_paimons(kind, formatter, expected):
    period = {"daily": timedelta(days=1), "hourly": timedelta(hours=1)}.get(
        kind, timedelta(hours=2)
    )
    handler = TagPeriodHandler(period, kind, formatter)
    when = datetime(2026, 11, 26, 13)
    assert handler.time_to_tag(when) == expected
    assert handler.tag_to_time(expected) == (when if kind != "daily" else datetime(2026, 11, 26))
    assert not handler.is_auto_tag("release-1")


def test_the_previous_period_is_tagged_and_periods_align_to_the_epoch():
    two = TagPeriodHandler(timedelta(hours=2), "two-hours", "with_dashes")
    assert two.normalize_to_previous_tag(datetime(2026, 11, 26, 13, 5)) == datetime(
        2026, 11, 26, 10
    )
    daily = TagPeriodHandler(timedelta(days=1), "daily", "with_dashes")
    assert daily.tag_to_time("2026-11-26 13") == datetime(2026, 11, 26)


# ----------------------------------------------------------- process-time
def test_process_time_tags_follow_the_model(make_table):
    table = make_table({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly"})
    times = [T0 + timedelta(minutes=m) for m in (5, 50, 70, 130, 135, 300, 301, 420)]
    commits(table, times)
    created = table.create_tag_automatically(now=T0 + timedelta(hours=8))
    expected = model_tags(times, timedelta(hours=1), timedelta(0), hourly)
    assert {t.name: t.snapshot_id for t in created} == expected
    assert {t.name: t.snapshot_id for t in table.list_tags()} == expected
    assert table.create_tag_automatically(now=T0 + timedelta(hours=9)) == []  # idempotent
    # a later commit continues after the newest automatic tag, skipping empty periods
    append(table, 100, 10)
    retime(table, {9: T0 + timedelta(hours=11, minutes=1)})
    more = table.create_tag_automatically(now=T0 + timedelta(hours=12))
    assert [t.name for t in more] == [hourly(local_time(ms(T0 + timedelta(hours=10))))]
    assert more[0].snapshot_id == 9
    first = min(table.list_tags(), key=lambda t: t.snapshot_id)
    assert sorted_ids(table.to_arrow(tag=first.name)) == list(range(10))


def test_delay_holds_a_tag_back_until_the_period_end_plus_delay(make_table):
    table = make_table({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly",
                        "tag.creation-delay": "10 min"})  # fmt: skip
    times = [T0 + timedelta(minutes=m) for m in (5, 65, 125, 131)]
    commits(table, times)
    names = {t.name: t.snapshot_id for t in table.create_tag_automatically(now=T0)}
    # snapshot 1 tags the hour before it; 01:05 - 10 min is before 00:00 + 2 h: no tag;
    # 02:05 - 10 min is not: it tags 01:00 (the hour before its own; 00:00 stays untagged)
    expected = model_tags(times, timedelta(hours=1), timedelta(minutes=10), hourly)
    assert names == expected
    assert sorted(expected.values()) == [1, 3]


def test_automatic_completion_tags_missing_periods_one_snapshot_at_a_time(make_table):
    table = make_table({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly",
                        "tag.automatic-completion": "true"})  # fmt: skip
    commits(table, [T0 + timedelta(minutes=5), T0 + timedelta(hours=5), T0 + timedelta(hours=6)])
    names = [t.name for t in table.create_tag_automatically(now=T0)]
    base = local_time(ms(T0))
    assert names == [
        hourly(base - timedelta(hours=1)),
        hourly(base),
        hourly(base + timedelta(hours=1)),
    ]


def test_daily_tags_and_formatter(make_table):
    table = make_table({"tag.automatic-creation": "process-time",
                        "tag.period-formatter": "without_dashes"})  # fmt: skip
    commits(table, [T0 + timedelta(hours=h) for h in (1, 20, 30, 80)])
    names = {t.name for t in table.create_tag_automatically(now=T0)}
    expected = model_tags(
        [T0 + timedelta(hours=h) for h in (1, 20, 30, 80)], timedelta(days=1), timedelta(0),
        lambda t: t.strftime("%Y%m%d"),
    )  # fmt: skip
    assert names == set(expected)


# -------------------------------------------------------------- watermark
def test_watermark_mode_uses_the_snapshot_watermark_and_skips_snapshots_without(make_table):
    table = make_table({"tag.automatic-creation": "watermark", "tag.creation-period": "hourly",
                        "sink.watermark-time-zone": "+02:00"})  # fmt: skip
    for i in range(3):
        append(table, i * 10, 10)
    marks = {1: -(2**63), 2: ms(T0 + timedelta(minutes=30)), 3: ms(T0 + timedelta(hours=2))}
    retime(table, dict.fromkeys((1, 2, 3), T0), watermarks=marks)
    created = table.create_tag_automatically(now=T0)
    # watermark in +02:00: 02:30 local -> tag "01"; 04:00 -> 03 >= 02 + 1 h -> tag "03"
    assert [(t.name, t.snapshot_id) for t in created] == [
        ("2026-11-26 01", 2), ("2026-11-26 03", 3),
    ]  # fmt: skip


# ------------------------------------------------------------------ batch
def test_batch_mode_tags_each_batch_commit_replacing_the_days_tag(make_table):
    table = make_table({"tag.automatic-creation": "batch", "tag.num-retained-max": "2"})
    commits(table, [T0 + timedelta(hours=1)])
    day = local_time(ms(T0 + timedelta(hours=1))).date().isoformat()
    assert [(t.name, t.snapshot_id) for t in table.create_tag_automatically(now=T0)] == [
        (f"batch-write-{day}", 1)
    ]
    assert table.create_tag_automatically(now=T0) == []  # nothing new committed
    append(table, 50, 5)
    retime(table, {2: T0 + timedelta(hours=2)})
    assert [t.snapshot_id for t in table.create_tag_automatically(now=T0)] == [2]
    assert [t.name for t in table.list_tags()] == [f"batch-write-{day}"]
    table.create_tag("manual-a", snapshot_id=1)
    table.create_tag("manual-b", snapshot_id=1)
    append(table, 60, 5)
    retime(table, {3: T0 + timedelta(days=1, hours=1)})
    table.create_tag_automatically(now=T0)
    # batch mode counts every tag: the two oldest (on snapshot 1) go
    assert {t.snapshot_id for t in table.list_tags()} == {2, 3}


def test_batch_customized_name(make_table):
    table = make_table({"tag.automatic-creation": "batch", "tag.batch.customized-name": "nightly"})
    append(table, 0, 5)
    assert [t.name for t in table.create_tag_automatically(now=T0)] == ["nightly"]


# --------------------------------------------------------------- retention
def test_num_retained_max_deletes_the_oldest_automatic_tags_only(make_table):
    table = make_table({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly",
                        "tag.num-retained-max": "2"})  # fmt: skip
    table_times = [T0 + timedelta(hours=h, minutes=1) for h in range(6)]
    commits(table, table_times)
    table.create_tag("release", snapshot_id=1)
    table.create_tag_automatically(now=T0)
    names = {t.name: t.snapshot_id for t in table.list_tags()}
    assert names.pop("release") == 1
    assert sorted(names.values()) == [5, 6]
    assert table.expire_tags(now=T0) == []


def test_default_time_retained_is_written_as_java_writes_it_and_expires(make_table):
    table = make_table({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly",
                        "tag.default-time-retained": "2 h"})  # fmt: skip
    commits(table, [T0 + timedelta(minutes=1), T0 + timedelta(hours=1, minutes=1)])
    now = T0 + timedelta(hours=3, seconds=7, milliseconds=250)
    created = table.create_tag_automatically(now=now)
    assert len(created) == 2
    raw = orjson.loads(table.file_io.read_bytes(created[0].path))
    local = local_time(ms(now))
    assert raw["tagCreateTime"] == [local.year, local.month, local.day, local.hour, local.minute,
                                    7, 250_000_000]  # fmt: skip
    assert raw["tagTimeRetained"] == 7200.0
    assert raw["id"] == created[0].snapshot_id and "timeMillis" in raw
    assert created[0].time_retained == timedelta(hours=2)
    assert table.expire_tags(now=now + timedelta(hours=2)) == []  # not after: Java isAfter
    assert sorted(table.expire_tags(now=now + timedelta(hours=2, seconds=1))) == sorted(
        t.name for t in created
    )
    assert table.list_tags() == []


def test_per_tag_retention_of_a_manual_tag_expires_and_tags_without_stay(make_table):
    table = make_table()
    append(table, 0, 5)
    table.create_tag("short", time_retained=timedelta(minutes=5))
    table.create_tag("forever")
    info = {t.name: t for t in table.list_tags()}
    assert info["forever"].time_retained is None and info["short"].create_time is not None
    later = datetime.now(UTC) + timedelta(minutes=6)
    assert table.expire_tags(now=later) == ["short"]
    assert [t.name for t in table.list_tags()] == ["forever"]
    assert sorted_ids(table.to_arrow(tag="forever")) == list(range(5))


def test_a_table_without_tag_options_is_left_alone(make_table):
    table = make_table()
    commits(table, [T0, T0 + timedelta(days=3)])
    assert table.create_tag_automatically(now=T0) == []
    assert table.expire_tags(now=T0 + timedelta(days=999)) == []
    assert table.expire_consumers(now=T0 + timedelta(days=999)) == []


# ---------------------------------------------------------------- consumers
def test_consumers_idle_longer_than_the_expiration_time_are_deleted(make_table):
    table = make_table({"consumer.expiration-time": "1 h"})
    append(table, 0, 5)
    table.set_consumer("busy", next_snapshot=1)
    table.set_consumer("idle", next_snapshot=1)
    path = table.paths.consumer_path("idle")
    old = ms(T0) / 1000
    os.utime(path, (old, old))
    busy = os.stat(table.paths.consumer_path("busy")).st_mtime
    now = datetime.fromtimestamp(busy, tz=UTC)
    assert table.expire_consumers(now=now + timedelta(minutes=59)) == ["idle"]
    assert ConsumerManager(table.file_io, table.paths).consumers() == {"busy": 1}
    assert table.expire_consumers(now=now + timedelta(minutes=61)) == ["busy"]


def test_a_naive_now_is_refused(make_table):
    table = make_table()
    with pytest.raises(ValueError, match="timezone-aware"):
        table.expire_tags(now=datetime(2026, 1, 1))


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"tag.automatic-creation": "process-time", "tag.creation-period": "weekly"},
         "tag.creation-period"),
        ({"tag.automatic-creation": "sometimes"}, "tag.automatic-creation"),
        ({"tag.automatic-creation": "process-time", "tag.creation-delay": "soon"},
         "tag.creation-delay"),
        ({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly",
          "tag.creation-delay": "1 h"}, "tag.creation-delay"),
        ({"tag.default-time-retained": "2 fortnights"}, "tag.default-time-retained"),
        ({"tag.default-time-retained": "0 s"}, "tag.default-time-retained"),
        ({"tag.num-retained-max": "0"}, "tag.num-retained-max"),
        ({"tag.period-formatter": "slashes"}, "tag.period-formatter"),
        ({"sink.watermark-time-zone": "Mars/Olympus"}, "sink.watermark-time-zone"),
        ({"consumer.expiration-time": "forever"}, "consumer.expiration-time"),
    ],
)  # fmt: skip
def test_bad_tag_options_are_refused_at_create_and_alter_time(make_table, catalog, options, key):
    with pytest.raises(InvalidOptionError) as err:
        make_table(options)
    assert err.value.key == key
    assert not catalog.table_exists("db.t0")
    table = make_table()
    with pytest.raises(InvalidOptionError):
        catalog.alter_table(
            table.identifier, [SchemaChange.set_option(k, v) for k, v in options.items()]
        )
    assert table.schema_manager.latest().id == 0


def test_tag_options_parse_together():
    opts = TagOptions.of(CoreOptions({"tag.automatic-creation": "WATERMARK",
                                      "tag.creation-period": "Two-Hours"}))  # fmt: skip
    assert opts.mode == "watermark" and opts.periods.period == timedelta(hours=2)
    assert opts.sets_any and not TagOptions.of(CoreOptions({})).sets_any


def test_two_hours_and_a_custom_period_duration(make_table):
    two = make_table({"tag.automatic-creation": "process-time", "tag.creation-period": "two-hours"})
    times = [T0 + timedelta(minutes=m) for m in (5, 125, 250, 370)]
    commits(two, times)
    got = {t.name: t.snapshot_id for t in two.create_tag_automatically(now=T0)}
    assert got == model_tags(times, timedelta(hours=2), timedelta(0), hourly)
    custom = make_table({"tag.automatic-creation": "process-time",
                         "tag.creation-period-duration": "30 min"})  # fmt: skip
    commits(custom, times)
    got = {t.name: t.snapshot_id for t in custom.create_tag_automatically(now=T0)}
    assert got == model_tags(times, timedelta(minutes=30), timedelta(0),
                             lambda t: t.strftime("%Y%m%d%H%M"))  # fmt: skip
    assert all(name.isdigit() for name in got)  # Paimon's names: digits only, accepted


@pytest.mark.parametrize(
    "key",
    [
        "tag.automatic-creation", "tag.creation-period", "tag.creation-delay",
        "tag.period-formatter", "tag.creation-period-duration", "tag.num-retained-max",
        "tag.automatic-completion", "tag.batch.customized-name", "tag.default-time-retained",
        "sink.watermark-time-zone", "consumer.expiration-time",
    ],
)  # fmt: skip
def test_tag_and_consumer_options_are_honoured(key):
    """Each option has its test above; the registry (and the README table) says honoured."""
    option = lookup_option(key)
    assert option is not None and option.status is OptionStatus.HONOURED


def test_a_success_file_stays_refused_for_maintenance():
    option = lookup_option("tag.create-success-file")
    assert option is not None and option.status is OptionStatus.REFUSED
    assert option.refusal("true", Operation.MAINTENANCE) is not None
    assert option.refusal("false", Operation.MAINTENANCE) is None


def test_automatic_tags_with_a_success_file_are_refused_before_anything_is_written(make_table):
    table = make_table({"tag.automatic-creation": "batch"})
    append(table, 0, 5)
    latest = table.schema()
    data = {**latest.to_json_dict(), "id": latest.id + 1}
    data["options"] = {**latest.options, "tag.create-success-file": "true"}  # as Java may set it
    table.file_io.write_bytes(table.paths.schema_path(latest.id + 1), orjson.dumps(data))
    with pytest.raises(UnsupportedTableError) as err:
        table.create_tag_automatically(now=T0)
    assert err.value.key == "tag.create-success-file"
    assert table.list_tags() == []


def test_a_rollback_below_where_tagging_stopped_starts_over_from_the_tags(make_table):
    table = make_table({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly"})
    times = [T0 + timedelta(minutes=m) for m in (5, 70, 80, 90)]
    commits(table, times)
    table.create_tag_automatically(now=T0)  # tags on snapshots 1 and 2; 3 and 4 pass by
    assert sorted(t.snapshot_id for t in table.list_tags()) == [1, 2]
    table.rollback_to(2)  # the tags stay; snapshots 3 and 4 are written again
    append(table, 500, 5)
    append(table, 600, 5)
    later = [T0 + timedelta(minutes=135), T0 + timedelta(minutes=200)]
    retime(table, {3: later[0], 4: later[1]})
    table.create_tag_automatically(now=T0)
    got = {t.name: t.snapshot_id for t in table.list_tags()}
    assert got == model_tags([*times[:2], *later], timedelta(hours=1), timedelta(0), hourly)
    assert sorted(got.values()) == [1, 2, 3, 4]
