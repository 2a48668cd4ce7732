"""Properties of Paimon's tag periods and of the tag file's LocalDateTime codec."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from snaplake.options.tag_options import TagPeriodHandler
from snaplake.store.tags import _local_datetime, _local_datetime_json

HANDLERS = st.sampled_from(
    [
        TagPeriodHandler(timedelta(days=1), "daily", "with_dashes"),
        TagPeriodHandler(timedelta(days=1), "daily", "without_dashes"),
        TagPeriodHandler(timedelta(hours=1), "hourly", "with_dashes"),
        TagPeriodHandler(timedelta(hours=1), "hourly", "without_dashes"),
        TagPeriodHandler(timedelta(hours=1), "hourly", "without_dashes_and_spaces"),
        TagPeriodHandler(timedelta(hours=2), "two-hours", "with_dashes"),
        TagPeriodHandler(timedelta(minutes=30), "duration", "with_dashes"),
    ]
)
TIMES = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 1))


@given(HANDLERS, TIMES)
def test_a_snapshot_tags_the_period_before_its_own(handler, time):
    tag = handler.normalize_to_previous_tag(time)
    assert tag + handler.period <= time < tag + 2 * handler.period
    assert handler.normalize_to_previous_tag(tag + handler.period) == tag


@given(HANDLERS, TIMES)
def test_tag_names_round_trip_and_are_automatic(handler, time):
    tag = handler.normalize_to_previous_tag(time)
    name = handler.time_to_tag(tag)
    assert handler.is_auto_tag(name)
    assert handler.tag_to_time(name) == tag


@given(TIMES.map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)))
def test_local_date_times_round_trip_as_jackson_writes_them(time):
    encoded = _local_datetime_json(time)
    assert 5 <= len(encoded) <= 7
    assert _local_datetime(encoded) == time
