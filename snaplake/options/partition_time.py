"""The time of a partition: ``partition.timestamp-pattern`` and ``partition.timestamp-formatter``.

A partition's values become one timestamp string, then a zone-less
(``LocalDateTime``-like, naive) :class:`~datetime.datetime`:

* ``partition.timestamp-pattern`` unset: the string is the first partition
  value; set (``"$dt $hour:00:00"``): each ``$<partition key>`` in it is
  replaced by that key's value, in the order of the partition keys;
* ``partition.timestamp-formatter`` unset: the string is parsed as
  ``yyyy-M-d[ H:m:s[.fraction]]`` (one or two digit fields), else as a date
  at midnight; set: it is a Java ``DateTimeFormatter`` pattern
  (``yyyyMMdd``, ``yyyy-MM-dd HH``), parsed as a date-time, else as a date at
  midnight. The pattern letters ``y``/``u`` (year), ``M``/``L`` (month,
  ``MMM``/``MMMM`` as English names), ``d``, ``H``, ``m``, ``s`` and ``S``
  (fraction) are supported, with quoted literals (``'T'``); any other letter
  raises ``ValueError`` when the option is parsed, as do a formatter without
  year, month and day (it could never name a date) and an unterminated quote.

A value that does not parse gives ``None`` (Paimon logs a warning and never
expires such a partition).

Source: Paimon ``PartitionTimeExtractor`` (``extract``, ``toLocalDateTime``,
``toLocalDateTimeDefault``) and Java ``DateTimeFormatter.ofPattern``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from snaplake.errors import InvalidOptionError

__all__ = [
    "PartitionExpireConfig",
    "PartitionTimeExtractor",
    "TimestampFormatter",
    "check_expiration_interval",
    "check_timestamp_pattern",
]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_FULL_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_SUPPORTED = frozenset("yuMLdHmsS")
_DEFAULT = re.compile(
    r"(?P<y>\d{1,10})-(?P<M>\d{1,2})-(?P<d>\d{1,2})"
    r"(?: (?P<H>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2})(?:\.(?P<S>\d{1,9}))?)?"
)
_PLACEHOLDER = re.compile(r"\$\w+")


def _field_regex(letter: str, count: int) -> tuple[str, str]:
    """(group name, regex) of a run of ``count`` pattern letters ``letter``."""
    if letter in "yu":
        if count == 2:
            return "yy", r"\d{2}"
        return "y", rf"\d{{{count},10}}" if count >= 4 else r"\d{1,10}"
    if letter in "ML":
        if count == 3:
            return "MMM", "|".join(_MONTHS)
        if count >= 4:
            return "MMMM", "|".join(_FULL_MONTHS)
        return "M", r"\d{2}" if count == 2 else r"\d{1,2}"
    if letter == "S":
        return "S", rf"\d{{{count}}}"
    if count > 2:
        raise ValueError(f"too many pattern letters {letter * count!r}")
    return letter, r"\d{2}" if count == 2 else r"\d{1,2}"


@dataclass(frozen=True, slots=True)
class TimestampFormatter:
    """A compiled ``partition.timestamp-formatter`` (a Java ``DateTimeFormatter`` pattern).

    Attributes:
        pattern: The option's text.
        regex: The whole-string matcher, one named group per field.
    """

    pattern: str
    regex: re.Pattern[str]

    @classmethod
    def parse(cls, pattern: str) -> TimestampFormatter:
        """Compile ``pattern``.

        Raises:
            ValueError: an unknown or unsupported pattern letter, a field
                given twice, an unterminated quote, or no year, month or day.
        """
        out: list[str] = []
        seen: set[str] = set()
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if c == "'":
                end = pattern.find("'", i + 1)
                if end < 0:
                    raise ValueError(f"unterminated quote in {pattern!r}")
                out.append(re.escape(pattern[i + 1 : end] or "'"))
                i = end + 1
            elif c.isascii() and c.isalpha():
                j = i
                while j < len(pattern) and pattern[j] == c:
                    j += 1
                if c not in _SUPPORTED:
                    raise ValueError(
                        f"pattern letter {c!r} of {pattern!r} is not supported (snaplake "
                        "parses y, u, M, L, d, H, m, s and S; quote literal letters: 'T')"
                    )
                name, rx = _field_regex(c, j - i)
                field_name = {"yy": "y", "MMM": "M", "MMMM": "M"}.get(name, name)
                if field_name in seen:
                    raise ValueError(f"field {c!r} appears twice in {pattern!r}")
                seen.add(field_name)
                out.append(f"(?P<{name}>{rx})")
                i = j
            else:
                out.append(re.escape(c))
                i += 1
        if not {"y", "M", "d"} <= seen:
            raise ValueError(
                f"{pattern!r} names no full date (year, month and day), so no partition "
                "time could be read with it"
            )
        return cls(pattern=pattern, regex=re.compile("".join(out), re.IGNORECASE))

    def to_datetime(self, text: str) -> datetime | None:
        """Parse ``text`` whole; ``None`` when it does not match or names no valid time."""
        m = self.regex.fullmatch(text)
        return None if m is None else _build(m.groupdict())


def _build(groups: dict[str, str | None]) -> datetime | None:
    """The datetime of matched fields (missing time fields are 0, as Java resolves them)."""
    try:
        if groups.get("yy") is not None:
            year = 2000 + int(groups["yy"] or 0)
        else:
            year = int(groups["y"] or 0)
        if groups.get("MMM") is not None:
            month = _MONTHS.index((groups["MMM"] or "").lower()) + 1
        elif groups.get("MMMM") is not None:
            month = _FULL_MONTHS.index((groups["MMMM"] or "").lower()) + 1
        else:
            month = int(groups["M"] or 0)
        fraction = groups.get("S") or ""
        micros = int((fraction + "000000")[:6]) if fraction else 0
        return datetime(  # noqa: DTZ001 - a zone-less LocalDateTime, as Paimon's
            year, month, int(groups["d"] or 0), int(groups.get("H") or 0),
            int(groups.get("m") or 0), int(groups.get("s") or 0), micros,
        )  # fmt: skip
    except ValueError:  # month 13, day 31 of a short month, year 0
        return None


def check_timestamp_pattern(pattern: str, partition_keys: Sequence[str]) -> None:
    """Require every ``$name`` of ``partition.timestamp-pattern`` to be a partition key.

    Raises:
        InvalidOptionError: the pattern names something that is not a
            partition key (or the table has none).

    Source: snaplake's own check (Paimon leaves ``$name`` in the string, and no
    partition ever parses).
    """
    rest = pattern
    for key in partition_keys:
        rest = rest.replace(f"${key}", "")
    unknown = _PLACEHOLDER.search(rest)
    if unknown is not None:
        raise InvalidOptionError(
            f"option 'partition.timestamp-pattern' = {pattern!r} names {unknown.group()!r}, "
            f"which is not a partition key {list(partition_keys)}; use $<partition key>",
            key="partition.timestamp-pattern",
            value=pattern,
        )


def check_expiration_interval(expiration_time: timedelta | None, check_interval: timedelta) -> None:
    """Require ``partition.expiration-time`` to be no shorter than the daemon's check interval.

    The daemon looks for expired partitions at most every
    ``partition.expiration-check-interval``: a retention shorter than that
    keeps a partition for up to the interval instead, so the pair is refused.

    Args:
        expiration_time: ``partition.expiration-time`` (``None``: unset, nothing to check).
        check_interval: ``partition.expiration-check-interval`` (Paimon's default 1 h).

    Raises:
        InvalidOptionError: ``expiration_time`` is shorter than ``check_interval``
            (key ``partition.expiration-time``).

    Source: snaplake's own check (Paimon accepts the pair and expires late).
    """
    if expiration_time is None or expiration_time >= check_interval:
        return
    raise InvalidOptionError(
        f"option 'partition.expiration-time' ({expiration_time}) is shorter than "
        f"'partition.expiration-check-interval' ({check_interval}): partitions would live up "
        "to the check interval; lower the check interval or lengthen the expiration time",
        key="partition.expiration-time",
        value=str(expiration_time),
    )


@dataclass(frozen=True, slots=True)
class PartitionTimeExtractor:
    """Reads the time of a partition from its values.

    Attributes:
        pattern: ``partition.timestamp-pattern`` (``None``: the first value).
        formatter: ``partition.timestamp-formatter`` compiled (``None``: the
            default ``yyyy-M-d[ H:m:s[.f]]`` / ``yyyy-M-d``).

    Source: Paimon ``PartitionTimeExtractor``.
    """

    pattern: str | None
    formatter: TimestampFormatter | None

    def timestamp_string(self, keys: Sequence[str], values: Sequence[str]) -> str:
        """The string the formatter parses: the first value, or the pattern filled in."""
        if self.pattern is None:
            return values[0]
        text = self.pattern
        for key, value in zip(keys, values, strict=True):
            text = text.replace(f"${key}", value)
        return text

    def extract(self, keys: Sequence[str], values: Sequence[str | None]) -> datetime | None:
        """The zone-less time of a partition; ``None`` when it cannot be read.

        Args:
            keys: The partition keys, in order.
            values: Each key's value as Java prints the internal value
                (``None`` for null: such a partition has no time).
        """
        if not values or any(v is None for v in values):
            return None
        text = self.timestamp_string(keys, [v for v in values if v is not None])
        if self.formatter is not None:
            return self.formatter.to_datetime(text)
        m = _DEFAULT.fullmatch(text)
        return None if m is None else _build(m.groupdict())


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionExpireConfig:
    """The ``partition.expiration-*`` options of a table that sets ``partition.expiration-time``.

    Attributes:
        expiration_time: A partition older than this expires.
        check_interval: The daemon checks the table at most this often.
        strategy: ``values-time`` or ``update-time``.
        max_num: Partitions dropped per check at most.
        batch_size: Partitions dropped per snapshot (``None``: all in one).
        extractor: Reads a partition's time (``values-time``).

    Source: Paimon ``CoreOptions`` (``partitionExpireTime``,
    ``partitionExpireCheckInterval``, ``partitionExpireStrategy``,
    ``partitionExpireMaxNum``, ``partitionExpireBatchSize``).
    """

    expiration_time: timedelta
    check_interval: timedelta
    strategy: str
    max_num: int
    batch_size: int | None
    extractor: PartitionTimeExtractor
