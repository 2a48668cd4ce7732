"""Command-line value parsing: ``k=v`` pairs, column lists, durations and filter strings.

Filters are a small text syntax over the table's own predicates
(:class:`snaplake.store.read.predicate.Predicate`)::

    amount > 5 and city = 'Berlin'
    day in ('2024-01-01', '2024-01-02')
    note is not null

Literals are converted to the column's Arrow type (int, float, decimal,
bool, date, timestamp, string), so ``day >= 2024-01-01`` compares dates.
Every failure raises :class:`click.BadParameter` (exit code 2).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Iterable, Sequence
from typing import Any

import click
import pyarrow as pa

from snaplake.options import parse_duration
from snaplake.options.registry import lookup_option
from snaplake.store.read.predicate import Predicate

__all__ = [
    "parse_age",
    "parse_columns",
    "parse_filters",
    "parse_key_values",
    "parse_literal",
    "parse_partition_spec",
]

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"

_COMPARE = re.compile(r"^\s*([A-Za-z_][\w.$-]*)\s*(>=|<=|!=|<>|==|=|>|<)\s*(.+?)\s*$", re.DOTALL)
_IN = re.compile(r"^\s*([A-Za-z_][\w.$-]*)\s+(not\s+in|in)\s*\((.*)\)\s*$", re.I | re.DOTALL)
_NULL = re.compile(r"^\s*([A-Za-z_][\w.$-]*)\s+is\s+(not\s+)?null\s*$", re.I)
_AND = re.compile(r"\s+and\s+", re.I)
_OR = re.compile(r"\s+or\s+", re.I)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_OPTION_KEY = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")


def _looks_like_key(text: str) -> bool:
    """Tell whether an item without ``=`` is an option key, safe to echo (never a secret).

    True for a Paimon table option snaplake knows (``bucket``) or a
    lower-case dotted key (``s3.endpoint``); a bare value such as a
    password is not shown.
    """
    return bool(_OPTION_KEY.fullmatch(text)) and ("." in text or lookup_option(text) is not None)


def parse_key_values(pairs: Iterable[str], *, what: str) -> dict[str, str]:
    """Turn ``["k=v", ...]`` into a dict; later keys win.

    The value is never echoed in an error (catalog options carry secrets);
    an ``--option`` item without ``=`` is named only when it is an option
    key (``--option bucket``), since it may be a secret typed without its
    key; items of other options (``--rename-column``) are always named.

    Raises:
        click.BadParameter: an item has no ``=`` or an empty key.
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not key.strip():
            raise click.BadParameter(f"{what} must look like KEY=VALUE; the key is empty")
        if not sep:
            text = pair.strip()
            if what != "--option" or _looks_like_key(text):  # only --option holds secrets
                raise click.BadParameter(
                    f"{what} must look like KEY=VALUE; {text!r} has no value: write "
                    f"{what} {text}=VALUE"
                )
            raise click.BadParameter(
                f"{what} must look like KEY=VALUE; an item has no '=' (not shown: it may "
                "be a secret)"
            )
        out[key.strip()] = value
    return out


def parse_columns(text: str | None, *, schema: pa.Schema) -> list[str] | None:
    """Split ``"a,b"`` into column names, checking each exists in ``schema``.

    Raises:
        click.BadParameter: an empty list or an unknown column.
    """
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise click.BadParameter("give at least one column, e.g. --columns id,name")
    for name in names:
        _field(schema, name)
    return names


def parse_age(text: str) -> dt.timedelta:
    """Parse an age such as ``1d``, ``12h``, ``30 min`` (a unit is required).

    Raises:
        click.BadParameter: no unit, an unknown unit, or not a number.
    """
    if text.strip().isdigit():
        raise click.BadParameter(f"{text!r} has no unit; write e.g. 1d, 12h, 30min or 90s")
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(f"{exc}; write e.g. 1d, 12h, 30min or 90s") from None


def _field(schema: pa.Schema, name: str) -> pa.Field:
    index = schema.get_field_index(name)
    if index < 0:
        raise click.BadParameter(f"unknown column {name!r}; the table has {schema.names}")
    return schema.field(index)


def _unquote(text: str) -> tuple[str, bool]:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1], True
    return text, False


def parse_literal(text: str, arrow_type: pa.DataType, *, column: str) -> Any:
    """Convert a literal to the Python value of ``arrow_type`` (quotes optional for strings).

    Args:
        text: The literal as typed, possibly quoted.
        arrow_type: The column's Arrow type.
        column: Column name, for the error message.

    Raises:
        click.BadParameter: the literal does not parse as that type.
    """
    raw, quoted = _unquote(text)
    t = arrow_type
    try:
        if not quoted and raw.lower() == "null":
            raise click.BadParameter(f"use '{column} is null' rather than comparing with null")
        if pa.types.is_boolean(t):
            if raw.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return raw.lower() == "true"
        if pa.types.is_integer(t):
            return int(raw)
        if pa.types.is_floating(t):
            return float(raw)
        if pa.types.is_decimal(t):
            return decimal.Decimal(raw)
        if pa.types.is_date(t):
            return dt.date.fromisoformat(raw)
        if pa.types.is_timestamp(t):
            value = dt.datetime.fromisoformat(raw)
            if t.tz is not None and value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            if t.tz is None and value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return value
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return raw.encode("utf-8")
        if pa.types.is_fixed_size_binary(t):  # BINARY(n): exactly n bytes
            data = raw.encode("utf-8")
            if len(data) != t.byte_width:
                raise ValueError(f"BINARY({t.byte_width}) values have {t.byte_width} bytes")
            return data
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return raw
    except (ValueError, ArithmeticError) as exc:
        raise click.BadParameter(
            f"{text.strip()!r} is not a valid {t} value for column {column!r} ({exc})"
        ) from None
    raise click.BadParameter(f"column {column!r} has type {t}, which filters cannot compare")


def _split_list(body: str) -> list[str]:
    items, current, quote = [], [], ""
    for ch in body:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch == ",":
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return [i for i in (s.strip() for s in items) if i]


def _check_quotes(text: str) -> None:
    """Refuse a filter with a quote that is never closed (it would swallow the rest)."""
    quote, opened_at = "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote, opened_at = ch, i
    if quote:
        raise click.BadParameter(
            f"unbalanced {quote} in filter {text!r} (opened at character {opened_at + 1}); "
            f"close it, or quote a value holding {quote} with the other kind of quote"
        )


def _split_and(text: str) -> list[str]:
    """Split on ``and`` outside quotes."""
    parts, start, quote, i = [], 0, "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            match = _AND.match(text, i)
            if match:
                parts.append(text[start:i])
                start = i = match.end()
                continue
        i += 1
    parts.append(text[start:])
    return parts


def parse_filters(texts: Iterable[str], *, schema: pa.Schema) -> list[Predicate]:
    """Parse filter strings into predicates (all of them ANDed).

    Args:
        texts: Each a term or terms joined by ``and``: ``col OP literal``
            (``= == != <> < <= > >=``), ``col [not] in (a, b)``,
            ``col is [not] null``.
        schema: The table's Arrow schema (column names and literal types).

    Raises:
        click.BadParameter: unreadable term, unknown column, bad literal,
            a quote that is never closed.
    """
    out: list[Predicate] = []
    for text in texts:
        _check_quotes(text)
        for term in _split_and(text):
            if not term.strip():
                raise click.BadParameter(f"empty term in filter {text!r}")
            out.append(_parse_term(term, schema=schema))
    return out


def _parse_term(term: str, *, schema: pa.Schema) -> Predicate:
    if _OR.search(_QUOTED.sub("''", term)):
        raise click.BadParameter(
            f"{term.strip()!r}: filters combine terms with 'and' only; for alternatives of "
            "one column use 'col in (a, b)'"
        )
    match = _NULL.match(term)
    if match:
        _field(schema, match.group(1))
        op = "is not null" if match.group(2) else "is null"
        return Predicate(column=match.group(1), op=op)
    match = _IN.match(term)
    if match:
        field = _field(schema, match.group(1))
        values = tuple(
            parse_literal(item, field.type, column=field.name)
            for item in _split_list(match.group(3))
        )
        if not values:
            raise click.BadParameter(f"empty list in {term.strip()!r}")
        op = "not in" if match.group(2).lower().startswith("not") else "in"
        return Predicate(column=field.name, op=op, value=values)
    match = _COMPARE.match(term)
    if match:
        field = _field(schema, match.group(1))
        op = {"==": "=", "<>": "!="}.get(match.group(2), match.group(2))
        value = parse_literal(match.group(3), field.type, column=field.name)
        return Predicate(column=field.name, op=op, value=value)
    raise click.BadParameter(
        f'cannot read filter term {term.strip()!r}; use e.g. "amount > 5", '
        '"city = \'Berlin\'", "day in (1, 2)" or "note is null"'
    )


def parse_partition_spec(
    pairs: Iterable[str], *, schema: pa.Schema, partition_keys: Sequence[str]
) -> dict[str, Any]:
    """Turn ``["k=v", ...]`` into ``{partition_key: typed value}``.

    ``k=__DEFAULT_PARTITION__`` selects the null partition.

    Raises:
        click.BadParameter: not ``k=v``, or ``k`` is not a partition key, or a bad value.
    """
    keys = list(partition_keys)
    out: dict[str, Any] = {}
    for key, value in parse_key_values(pairs, what="--partition").items():
        if key not in keys:
            raise click.BadParameter(f"{key!r} is not a partition key; the table has {keys}")
        field = _field(schema, key)
        out[key] = (
            None
            if value == DEFAULT_PARTITION_NAME
            else parse_literal(value, field.type, column=key)
        )
    return out
