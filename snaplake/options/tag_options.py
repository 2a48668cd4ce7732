"""TagOptions: the ``tag.*`` options read together, and Paimon's tag periods and names.

:class:`TagPeriodHandler` turns a time into the tag of the period before it
and back (``2026-11-26`` daily, ``2026-11-26 13`` hourly, ``20261126 13``
without dashes, ``202611261300`` for a ``tag.creation-period-duration``);
:class:`TagOptions` reads ``tag.automatic-creation`` and the options that go
with it and checks them together (a delay of at least one period is refused,
as Paimon refuses it), so :meth:`TableSchema.validate` refuses a bad
combination when a table is created or altered, before anything is written.

Times are naive local date-times, as Java's ``LocalDateTime``: process time
in the machine's zone, watermarks in ``sink.watermark-time-zone``.

Source: Paimon ``TagPeriodHandler`` (formatters, ``normalizeToPreviousTag``,
``isAutoTag``), ``TagTimeExtractor``, ``CoreOptions`` (``TagCreationMode``,
``TagCreationPeriod``, ``TagPeriodFormatter``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from snaplake.errors import InvalidOptionError
from snaplake.options.config_option import parse_zone
from snaplake.options.core_options import CoreOptions
from snaplake.options.registry import (
    SINK_WATERMARK_TIME_ZONE,
    TAG_AUTOMATIC_COMPLETION,
    TAG_AUTOMATIC_CREATION,
    TAG_BATCH_CUSTOMIZED_NAME,
    TAG_CREATION_DELAY,
    TAG_CREATION_PERIOD,
    TAG_CREATION_PERIOD_DURATION,
    TAG_DEFAULT_TIME_RETAINED,
    TAG_NUM_RETAINED_MAX,
    TAG_PERIOD_FORMATTER,
)

__all__ = ["WATERMARK_NONE", "TagOptions", "TagPeriodHandler", "batch_tag_name", "local_time"]

#: Java's ``Long.MIN_VALUE``: a snapshot watermark meaning "no watermark".
WATERMARK_NONE = -(2**63)
_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - Java LocalDateTime arithmetic, zone-free
_PERIODS = {"daily": timedelta(days=1), "hourly": timedelta(hours=1),
            "two-hours": timedelta(hours=2)}  # fmt: skip
_DAY = re.compile(r"(\d{1,10})-(\d{2})-(\d{2})")
_DAY_NO_DASH = re.compile(r"(\d{1,10})(\d{2})(\d{2})")
_HOUR = re.compile(r"(\d{1,10})-(\d{2})-(\d{2}) (\d{2})")
_HOUR_NO_DASH = re.compile(r"(\d{1,10})(\d{2})(\d{2}) (\d{2})")
_HOUR_NO_SPACE = re.compile(r"(\d{1,10})(\d{2})(\d{2})(\d{2})")
_MINUTE = re.compile(r"(\d{1,10})(\d{2})(\d{2})(\d{2})(\d{2})")


def local_time(epoch_ms: int, zone: tzinfo | None = None) -> datetime:
    """The naive local date-time of ``epoch_ms`` in ``zone`` (``None``: the machine's zone).

    Java ``Instant.ofEpochMilli(ms).atZone(zone).toLocalDateTime()``.
    """
    aware = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return (aware.astimezone(zone) if zone is not None else aware.astimezone()).replace(tzinfo=None)


def _lenient(groups: tuple[str, ...]) -> datetime:
    """Java's LENIENT resolver: month 13 rolls into the next year, day 32 into the next month."""
    year, month, day, *rest = (int(g) for g in groups)
    hour, minute = [*rest, 0, 0][:2]
    years, month0 = divmod(month - 1, 12)
    base = datetime(year + years, month0 + 1, 1)  # noqa: DTZ001 - LocalDateTime
    return base + timedelta(days=day - 1, hours=hour, minutes=minute)


@dataclass(frozen=True, slots=True)
class TagPeriodHandler:
    """The periods of automatic tags: their length and their names.

    Attributes:
        period: One period (1 day, 1 hour, 2 hours, or ``tag.creation-period-duration``).
        kind: ``daily``, ``hourly``, ``two-hours`` or ``duration``.
        formatter: ``with_dashes``, ``without_dashes`` or ``without_dashes_and_spaces``.

    Source: Paimon ``TagPeriodHandler`` and its Daily/Hourly/TwoHours/PeriodDuration handlers.
    """

    period: timedelta
    kind: str
    formatter: str

    def normalize_to_previous_tag(self, time: datetime) -> datetime:
        """The start of the period before the one ``time`` falls in (the tag a snapshot makes).

        Periods are aligned to the epoch (``time`` read as if it were UTC), as
        Paimon's ``Timestamp.fromLocalDateTime`` does.
        """
        ms = (time - _EPOCH) // timedelta(milliseconds=1)
        step = self.period // timedelta(milliseconds=1)
        return _EPOCH + timedelta(milliseconds=(ms // step) * step) - self.period

    def next_tag_time(self, time: datetime) -> datetime:
        """The period after the one starting at ``time``."""
        return time + self.period

    def time_to_tag(self, time: datetime) -> str:
        """The tag name of the period starting at ``time`` (e.g. ``2026-11-26 13``)."""
        y, mo, d, h = f"{time.year}", f"{time.month:02d}", f"{time.day:02d}", f"{time.hour:02d}"
        if self.kind == "duration":
            return f"{y}{mo}{d}{h}{time.minute:02d}"
        if self.kind == "daily":
            return f"{y}-{mo}-{d}" if self.formatter == "with_dashes" else f"{y}{mo}{d}"
        if self.kind == "two-hours" or self.formatter == "with_dashes":
            return f"{y}-{mo}-{d} {h}"
        return f"{y}{mo}{d} {h}" if self.formatter == "without_dashes" else f"{y}{mo}{d}{h}"

    def tag_to_time(self, name: str) -> datetime | None:
        """The period start a tag name stands for, ``None`` if it is not an automatic tag name.

        The daily handler reads the part before the first space (``2026-11-26 13``
        is a daily tag of 2026-11-26), as Paimon's does.
        """
        if self.kind == "daily":
            pattern = _DAY if self.formatter == "with_dashes" else _DAY_NO_DASH
            name = name.split(" ")[0]
        elif self.kind == "duration":
            pattern = _MINUTE
        elif self.kind == "two-hours" or self.formatter == "with_dashes":
            pattern = _HOUR
        else:
            pattern = _HOUR_NO_DASH if self.formatter == "without_dashes" else _HOUR_NO_SPACE
        match = pattern.fullmatch(name)
        if match is None:
            return None
        try:
            return _lenient(match.groups())
        except (ValueError, OverflowError):
            return None

    def is_auto_tag(self, name: str) -> bool:
        """Whether ``name`` parses as this handler's tag name (Paimon ``isAutoTag``)."""
        return self.tag_to_time(name) is not None


@dataclass(frozen=True, slots=True)
class TagOptions:
    """The ``tag.*`` options of a table, checked together.

    Attributes:
        mode: ``tag.automatic-creation``: ``none``, ``process-time``, ``watermark``, ``batch``.
        periods: The period handler (``tag.creation-period`` /
            ``tag.creation-period-duration``, ``tag.period-formatter``).
        delay: ``tag.creation-delay``.
        num_retained_max: ``tag.num-retained-max`` (``None`` = unbounded).
        default_time_retained: ``tag.default-time-retained`` written into new tags.
        automatic_completion: ``tag.automatic-completion``.
        batch_name: ``tag.batch.customized-name``.
        watermark_zone: ``sink.watermark-time-zone``.
    """

    mode: str
    periods: TagPeriodHandler
    delay: timedelta
    num_retained_max: int | None
    default_time_retained: timedelta | None
    automatic_completion: bool
    batch_name: str | None
    watermark_zone: tzinfo

    @classmethod
    def of(cls, options: CoreOptions) -> TagOptions:
        """Read and check the tag options.

        Raises:
            InvalidOptionError: ``tag.creation-delay`` is not shorter than one
                period, or ``tag.default-time-retained`` /
                ``tag.creation-period-duration`` is zero (Paimon's
                ``validateDelay`` and ``SchemaValidation``); the unparsable
                values were refused by :class:`CoreOptions` already.
        """
        duration = options.get(TAG_CREATION_PERIOD_DURATION)
        formatter = options.get(TAG_PERIOD_FORMATTER) or "with_dashes"
        if duration is not None:
            if duration < timedelta(minutes=1):
                raise InvalidOptionError(
                    f"tag.creation-period-duration = {duration} must be at least one minute "
                    "(tag names have minutes)",
                    key=TAG_CREATION_PERIOD_DURATION.key,
                    value=options.raw[TAG_CREATION_PERIOD_DURATION.key],
                )
            periods = TagPeriodHandler(duration, "duration", formatter)
        else:
            kind = options.get(TAG_CREATION_PERIOD) or "daily"
            periods = TagPeriodHandler(_PERIODS[kind], kind, formatter)
        delay = options.get(TAG_CREATION_DELAY) or timedelta(0)
        mode = options.get(TAG_AUTOMATIC_CREATION) or "none"
        if mode in ("process-time", "watermark") and delay >= periods.period:
            raise InvalidOptionError(
                f"tag.creation-delay ({delay}) must be shorter than one tag period "
                f"({periods.period}); Paimon refuses it",
                key=TAG_CREATION_DELAY.key,
                value=options.raw.get(TAG_CREATION_DELAY.key),
            )
        retained = options.get(TAG_DEFAULT_TIME_RETAINED)
        if retained is not None and retained <= timedelta(0):
            raise InvalidOptionError(
                "tag.default-time-retained must be positive (a tag would expire at once)",
                key=TAG_DEFAULT_TIME_RETAINED.key,
                value=options.raw.get(TAG_DEFAULT_TIME_RETAINED.key),
            )
        completion: bool | None = options.get(TAG_AUTOMATIC_COMPLETION)
        return cls(
            mode=mode,
            periods=periods,
            delay=delay,
            num_retained_max=options.get(TAG_NUM_RETAINED_MAX),
            default_time_retained=retained,
            automatic_completion=bool(completion),
            batch_name=options.get(TAG_BATCH_CUSTOMIZED_NAME),
            watermark_zone=parse_zone(options.get(SINK_WATERMARK_TIME_ZONE) or "UTC"),
        )

    @property
    def sets_any(self) -> bool:
        """Whether the table asks for automatic tags or tag retention at all."""
        return (
            self.mode != "none"
            or self.num_retained_max is not None
            or self.default_time_retained is not None
        )

    def tag_time(self, time_millis: int, watermark: int | None) -> datetime | None:
        """The time a snapshot counts for: its commit time or its watermark (``None``: none).

        Source: Paimon ``TagTimeExtractor`` (process time in the machine's
        zone; a missing or ``Long.MIN_VALUE`` watermark gives no time).
        """
        if self.mode == "watermark":
            if watermark is None or watermark == WATERMARK_NONE:
                return None
            return local_time(watermark, self.watermark_zone)
        return local_time(time_millis)


def batch_tag_name(options: TagOptions, time_millis: int) -> str:
    """The tag of ``tag.automatic-creation = batch``: the custom name, else ``batch-write-<date>``.

    Source: Paimon ``TagBatchCreation`` (``yyyy-MM-dd`` of the snapshot in the machine's zone).
    """
    if options.batch_name:
        return options.batch_name
    day: date = local_time(time_millis).date()
    return f"batch-write-{day.isoformat()}"
