"""ConfigOption: one Paimon table option, its value syntax and what snaplake does with it.

An option is declared once (in :mod:`snaplake.options.registry`) with its
key, its support status and, when snaplake reads its value, a parser and a
default. The operations a caller may be about to do with a table
(:class:`Operation`) are the one vocabulary of refusals, used by the
registry and by :func:`snaplake.store.support.check_supported`.

Source: Paimon ``ConfigOption`` / ``CoreOptions`` (keys, defaults),
``MemorySize.parse`` and ``TimeUtils.parseDuration`` (value syntax).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, timedelta, timezone, tzinfo
from enum import StrEnum
from typing import Generic, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "ALL_OPERATIONS",
    "ConfigOption",
    "Operation",
    "OptionStatus",
    "parse_bool",
    "parse_duration",
    "parse_memory_size",
    "parse_zone",
]

T = TypeVar("T")

_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?")


class Operation(StrEnum):
    """What a caller is about to do with a table."""

    CREATE = "create"
    """``create_table`` and ``alter_table``: refused when any later operation would be refused."""
    READ = "read"
    """Planning and reading rows (``to_arrow``, Spark reads, the CLI's ``read``)."""
    WRITE = "write"
    """Writing data files (``TableWrite``, the Spark sink's executors)."""
    COMMIT = "commit"
    """Publishing a snapshot (``FileStoreCommit.commit``)."""
    MAINTENANCE = "maintenance"
    """Compaction, manifest merge, snapshot expiry, orphan clean, tags, rollback."""


ALL_OPERATIONS: frozenset[Operation] = frozenset(Operation)
"""Every :class:`Operation`."""


class OptionStatus(StrEnum):
    """How snaplake treats one option (see :mod:`snaplake.options.registry`)."""

    HONOURED = "honoured"
    REFUSED = "refused"
    PRIMARY_KEY = "primary-key"
    DEPENDENT = "dependent"
    LAYOUT = "layout"
    ENGINE = "engine-specific"


_SIZE_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}  # fmt: skip

_TIME_UNITS_MS = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "": 1000, "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}  # fmt: skip

_NUMBER_UNIT = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory_size(text: str) -> int:
    """Parse Paimon's memory-size syntax (``"8 mb"``, ``"128mb"``, ``"1024"``) into bytes.

    Raises:
        ValueError: not a non-negative integer followed by a known unit.

    Source: Paimon ``MemorySize.parse`` (units are powers of 1024).
    """
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"{text!r} is not a memory size such as '8 mb' or '1024'")
    return int(match.group(1)) * _SIZE_UNITS[unit]


def parse_duration(text: str) -> timedelta:
    """Parse Paimon's duration syntax (``"1 h"``, ``"10 ms"``, ``"30 min"``, ``"5"`` = ms).

    A bare number is milliseconds, as in Paimon.

    Raises:
        ValueError: not a non-negative integer followed by a known unit.

    Source: Paimon ``TimeUtils.parseDuration``.
    """
    match = _NUMBER_UNIT.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as '1 h', '10 s' or '500 ms'")
    unit = match.group(2).lower()
    factor = 1 if unit == "" else _TIME_UNITS_MS.get(unit)
    if factor is None:
        raise ValueError(f"{text!r} has an unknown time unit {unit!r}")
    return timedelta(milliseconds=int(match.group(1)) * factor)


def parse_bool(text: str) -> bool:
    """Parse ``true`` / ``false`` (any case, surrounding blanks ignored).

    Raises:
        ValueError: any other text.
    """
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{text!r} is not 'true' or 'false'")
    return lowered == "true"


def parse_zone(text: str) -> tzinfo:
    """Parse a Java ``ZoneId`` text: a region (``Asia/Shanghai``), ``UTC``/``Z``, or ``+08:00``.

    Raises:
        ValueError: no such zone.

    Source: Java ``ZoneId.of`` (region ids and fixed offsets; ``UTC+8`` forms not accepted).
    """
    name = text.strip()
    if name in ("Z", "UTC", "GMT", "UT"):
        return UTC
    match = _OFFSET.fullmatch(name)
    if match is not None:
        sign = -1 if match.group(1) == "-" else 1
        hours, minutes = int(match.group(2)), int(match.group(3) or 0)
        if hours > 18 or minutes > 59:
            raise ValueError(f"{text!r} is not an offset within +-18:00")
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"{text!r} is not a time zone id such as 'UTC' or 'Asia/Shanghai'"
        ) from None


def accepts_any(_value: str) -> bool:
    """The ``accepts`` of an option whose every value is fine."""
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigOption(Generic[T]):
    """One Paimon table option: its key, what snaplake does with it and, if read, its syntax.

    Attributes:
        key: The option key as written in the schema file; ``#`` stands for
            any text (``fields.#.sequence-group``), a family's key ends with
            ``.*`` (``orc.*``).
        status: See :class:`OptionStatus`.
        note: One line for the README: what snaplake does, or why it refuses.
        parse: Turns the stored string into the typed value (raises
            ``ValueError``); ``None``: snaplake never reads the value.
        default: The typed value when the key is absent (``None`` = no default).
        doc: One line for error messages and ``--help`` texts (default: ``note``).
        accepts: The values that are fine; any other value is refused for
            ``refused_for`` (``honoured`` options may also refuse some values,
            e.g. ``file.format = lance``).
        accepted: Human-readable form of ``accepts`` (README, error messages).
        refused_for: Operations refused when the value is not accepted; on
            every table, or with status ``primary-key`` on primary-key tables
            only (Paimon ignores those options on append tables).
        feature: What a refused value would turn on, for the error message
            (default: ``note``).
    """

    key: str
    status: OptionStatus
    note: str
    parse: Callable[[str], T] | None = None
    default: T | None = None
    doc: str = ""
    accepts: Callable[[str], bool] = accepts_any
    accepted: str = "any"
    refused_for: frozenset[Operation] = frozenset()
    feature: str = ""

    def refusal(self, value: str, operation: Operation) -> str | None:
        """Return why ``value`` makes snaplake refuse ``operation``, or ``None``.

        The reason names the feature and the accepted values; whether it
        applies to the table (status ``primary-key``: primary-key tables only)
        is the caller's question.
        """
        if operation not in self.refused_for or self.accepts(value):
            return None
        return f"{self.feature or self.note} (snaplake accepts: {self.accepted})"

    def value_of(self, text: str) -> T:
        """Return the typed value of ``text`` as stored in a schema.

        Raises:
            ValueError: ``text`` is not in the option's value syntax.
            TypeError: snaplake never reads this option (it has no parser).
        """
        if self.parse is None:
            raise TypeError(f"option {self.key!r} is not read by snaplake (no parser)")
        return self.parse(text)

    @property
    def describe(self) -> str:
        """``doc``, else ``note``: one line for messages."""
        return self.doc or self.note
