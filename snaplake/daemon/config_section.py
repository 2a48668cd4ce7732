"""Typed reading of the daemon's TOML tables, and the masking of secrets in messages.

:class:`ConfigSection` reads one TOML table (``[daemon]``, ``[[warehouse]]``,
``[tasks.compact]`` ...) key by key with a typed getter per value kind, and
refuses the keys nobody asked for. Every bad value becomes an
:class:`~snaplake.errors.InvalidOptionError` naming the dotted key and the
reason (:func:`config_error`); values of warehouse options that look like
credentials are never shown. :mod:`snaplake.daemon.config` builds the
configuration with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from snaplake.errors import InvalidOptionError
from snaplake.options import parse_duration, parse_memory_size

__all__ = [
    "SECRET_HINTS",
    "ConfigSection",
    "config_error",
    "is_secret_option",
    "option_text",
    "without_params",
]

#: Substrings of an option key (lower-cased) that mark its value as a credential.
SECRET_HINTS = ("secret", "password", "token", "credential", "key")


def is_secret_option(name: str) -> bool:
    """Tell whether an option key names a credential (it mentions a :data:`SECRET_HINTS` word)."""
    lowered = name.lower()
    return any(h in lowered for h in SECRET_HINTS)


def _is_secret(key: str) -> bool:
    """A dotted config key whose value is a credential: a secret-looking catalog option."""
    return is_secret_option(key) and "options" in key.lower()


def config_error(source: str, key: str, value: Any, reason: str) -> InvalidOptionError:
    """Build the error for a bad config value (returned, for the caller to raise).

    Args:
        source: The config file's name, first in the message.
        key: The dotted key (``daemon.workers``, ``warehouse[0].options.s3.secret-key``).
        value: The bad value; shown as ``<hidden>`` (and left out of ``.value``)
            when ``key`` is a secret-looking warehouse option.
        reason: What is wrong, in words.

    Returns:
        ``InvalidOptionError("<source>: <key> = <value>: <reason>")`` with ``.key``
        set to ``key``.
    """
    shown = "<hidden>" if _is_secret(key) else repr(value)
    return InvalidOptionError(
        f"{source}: {key} = {shown}: {reason}",
        key=key,
        value=None if _is_secret(key) else str(value),
    )


def option_text(value: Any) -> str | None:
    """Render a TOML scalar as the string of a Paimon option (``true``/``false`` for booleans).

    Returns:
        The text, or None when ``value`` is not a boolean, number or string.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


def without_params(remote: str) -> str:
    """A Spark Connect URL without its ``;key=value`` parameters (they may hold a token)."""
    base, sep, _ = remote.partition(";")
    return base + (";<hidden>" if sep else "")


class ConfigSection:
    """Reads typed keys of one TOML table and refuses unknown ones.

    Each getter marks its key as known and returns the default when the key is
    absent; :meth:`finish` then refuses any key no getter asked for.

    Args:
        source: The config file's name, for messages.
        prefix: The table's dotted key (``""`` for the document's root).
        data: The parsed TOML table.

    Raises:
        InvalidOptionError: ``data`` is not a table.
    """

    def __init__(self, source: str, prefix: str, data: Any) -> None:
        if not isinstance(data, Mapping):
            raise config_error(source, prefix or "<root>", data, "must be a table")
        self.source, self.prefix, self.data = source, prefix, data
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        """The dotted key of ``name`` in this table (for messages)."""
        return f"{self.prefix}.{name}" if self.prefix else name

    def raw(self, name: str) -> Any:
        """The value of ``name`` as parsed (None when absent); marks it as known."""
        self.used.add(name)
        return self.data.get(name)

    def string(self, name: str, default: str) -> str:
        """A non-empty string.

        Raises:
            InvalidOptionError: the value is not a string, or is empty.
        """
        value = self.raw(name)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise config_error(self.source, self.key(name), value, "must be a non-empty string")
        return value

    def integer(self, name: str, default: int, *, minimum: int) -> int:
        """An integer of at least ``minimum``.

        Raises:
            InvalidOptionError: the value is not an integer (booleans are not), or
                is below ``minimum``.
        """
        value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise config_error(
                self.source, self.key(name), value, f"must be an integer >= {minimum}"
            )
        return value

    def boolean(self, name: str, *, default: bool) -> bool:
        """A TOML boolean.

        Raises:
            InvalidOptionError: the value is not ``true`` or ``false``.
        """
        value = self.raw(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise config_error(self.source, self.key(name), value, "must be true or false")
        return value

    def duration(self, name: str, default: timedelta, *, positive: bool = True) -> timedelta:
        """A duration in Paimon's syntax (``"30 s"``, ``"5 min"``, ``"1 d"``).

        Raises:
            InvalidOptionError: the value is not a string, does not parse, or is
                not longer than zero while ``positive``.
        """
        value = self.raw(name)
        if value is None:
            return default
        if not isinstance(value, str):
            raise config_error(
                self.source, self.key(name), value,
                "must be a duration string with a unit, such as '30 s', '5 min' or '1 d'",
            )  # fmt: skip
        try:
            parsed = parse_duration(value)
        except ValueError as exc:
            raise config_error(self.source, self.key(name), value, str(exc)) from None
        if positive and parsed <= timedelta(0):
            raise config_error(self.source, self.key(name), value, "must be longer than zero")
        return parsed

    def strings(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        """A list of non-empty strings (a single string is a list of one).

        Raises:
            InvalidOptionError: the value is neither a string nor a list of
                non-empty strings.
        """
        value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise config_error(self.source, self.key(name), value, "must be a list of strings")
        return tuple(value)

    def size(self, name: str, default: int) -> int:
        """A size in bytes: an integer, or a string with a unit (``"512 mb"``).

        Raises:
            InvalidOptionError: the value is neither, or does not parse.
        """
        value = self.raw(name)
        if value is None:
            return default
        try:
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError("not a size")
            return parse_memory_size(str(value))
        except ValueError:
            raise config_error(
                self.source, self.key(name), value,
                "must be a size in bytes or with a unit, such as '512 mb' or '1 gb'",
            ) from None  # fmt: skip

    def sub(self, name: str) -> ConfigSection:
        """The nested table ``name`` (an empty one when absent).

        Raises:
            InvalidOptionError: the value is not a table.
        """
        value = self.raw(name)
        return ConfigSection(self.source, self.key(name), {} if value is None else value)

    def finish(self, extra_known: tuple[str, ...] = ()) -> None:
        """Refuse the keys no getter asked for (nor ``extra_known`` lists).

        Raises:
            InvalidOptionError: naming the first unknown key and the known ones.
        """
        unknown = sorted(set(self.data) - self.used - set(extra_known))
        if unknown:
            known = sorted(self.used | set(extra_known))
            raise config_error(
                self.source, self.key(unknown[0]), self.data[unknown[0]],
                f"unknown key; known keys here: {', '.join(known) or '(none)'}",
            )  # fmt: skip
