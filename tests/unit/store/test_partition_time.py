"""partition.timestamp-formatter / -pattern: the Java DateTimeFormatter subset, round trips."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snaplake.errors import InvalidOptionError
from snaplake.options.partition_time import (
    PartitionTimeExtractor,
    TimestampFormatter,
    check_timestamp_pattern,
)

# (Java pattern, strftime equivalent, the fields it keeps)
PATTERNS = [
    ("yyyyMMdd", "%Y%m%d", "day"),
    ("yyyy-MM-dd", "%Y-%m-%d", "day"),
    ("yyyy-MM-dd HH", "%Y-%m-%d %H", "hour"),
    ("yyyyMMddHHmmss", "%Y%m%d%H%M%S", "second"),
    ("dd/MM/yyyy HH:mm", "%d/%m/%Y %H:%M", "minute"),
    ("yyyy-MM-dd'T'HH:mm:ss", "%Y-%m-%dT%H:%M:%S", "second"),
    ("dd MMM yyyy", "%d %b %Y", "day"),
]
_KEEP = {
    "day": {"hour": 0, "minute": 0, "second": 0, "microsecond": 0},
    "hour": {"minute": 0, "second": 0, "microsecond": 0},
    "minute": {"second": 0, "microsecond": 0},
    "second": {"microsecond": 0},
}
TIMES = st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31))


@pytest.mark.parametrize(("java", "fmt", "keep"), PATTERNS)
@given(at=TIMES)
def test_a_formatted_time_parses_back(java, fmt, keep, at):
    expected = at.replace(**_KEEP[keep])
    assert TimestampFormatter.parse(java).to_datetime(expected.strftime(fmt)) == expected


@given(at=TIMES)
def test_the_default_parser_reads_one_or_two_digit_fields(at):
    extractor = PartitionTimeExtractor(None, None)
    loose = f"{at.year}-{at.month}-{at.day} {at.hour}:{at.minute}:{at.second}"
    assert extractor.extract(["dt"], [loose]) == at.replace(microsecond=0)
    assert extractor.extract(["dt"], [at.strftime("%Y-%m-%d")]) == at.replace(
        hour=0, minute=0, second=0, microsecond=0
    )


@pytest.mark.parametrize("text", ["2024-02-30", "2024-13-01", "x2024-01-01", "2024-01-01 ", ""])
def test_impossible_or_partial_values_give_no_time(text):
    assert PartitionTimeExtractor(None, None).extract(["dt"], [text]) is None
    assert (
        PartitionTimeExtractor(None, TimestampFormatter.parse("yyyy-MM-dd")).extract(["dt"], [text])
        is None
    )


@pytest.mark.parametrize(
    "bad", ["yyyy-MM", "HH:mm", "yyyy-MM-dd E", "yyyy-MM-dd'T", "yyyyMMddT", "yyyy-MM-dd-dd"]
)
def test_unusable_formatters_are_refused(bad):
    with pytest.raises(ValueError, match=r"letter|quote|full date|twice"):
        TimestampFormatter.parse(bad)


def test_patterns_substitute_keys_in_order_and_name_only_partition_keys():
    extractor = PartitionTimeExtractor("$dt $hour:00:00", None)
    assert extractor.extract(["dt", "hour"], ["2024-01-05", "7"]) == datetime(2024, 1, 5, 7)
    assert extractor.extract(["dt", "hour"], ["2024-01-05", None]) is None
    check_timestamp_pattern("$dt $hour:00:00", ["dt", "hour"])
    with pytest.raises(InvalidOptionError, match=r"\$day"):
        check_timestamp_pattern("$day", ["dt"])
