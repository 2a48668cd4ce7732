"""Simple row predicates for pruning and filtering: ``=, !=, <, <=, >, >=, IN, IS NULL``.

A filter is an AND of :class:`Predicate` terms on single columns. Each term
can (a) say whether a file *may* hold matching rows given its min/max/null
stats, (b) test a partition value, and (c) become a pyarrow compute
expression that filters the rows read. Pruning is conservative: when a
comparison is impossible (missing stats, incomparable types) the file is kept.

Source: Paimon ``PredicateBuilder`` leaf functions (Equal, LessThan, In,
IsNull, ...) and their ``test(rowCount, min, max, nullCount)`` stats tests.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import SchemaMismatchError

__all__ = [
    "OPERATORS",
    "Predicate",
    "and_expression",
    "check_filter_types",
    "parse_filter",
    "resolve_projection",
]

OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null")
_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""The binary comparison operators, for values and for Arrow expressions alike."""
_ALIASES = {"==": "=", "<>": "!=", "is_null": "is null", "is_not_null": "is not null",
            "not_in": "not in", "isin": "in"}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Predicate:
    """One comparison of a column with literal value(s).

    Attributes:
        column: Column name.
        op: One of :data:`OPERATORS`.
        value: The literal (for ``in``/``not in`` a tuple of literals; unused
            for the null tests). Python values compare with the column's
            decoded values: int/float, str, bytes, bool, ``Decimal``,
            ``datetime.date``, ``datetime.datetime``.
    """

    column: str
    op: str
    value: Any = None

    def __post_init__(self) -> None:
        if self.op not in OPERATORS:
            raise ValueError(f"unknown operator {self.op!r}; use one of {', '.join(OPERATORS)}")
        if self.op in ("in", "not in") and not isinstance(self.value, tuple):
            object.__setattr__(self, "value", tuple(self.value))

    def test_value(self, v: Any) -> bool:
        """Evaluate the predicate on one value (SQL semantics: NULL compares false)."""
        op = self.op
        if op == "is null":
            return v is None
        if op == "is not null":
            return v is not None
        if v is None:
            return False
        try:
            compare = _COMPARISONS.get(op)
            if compare is not None:
                return bool(compare(v, self.value))
            if op == "in":
                return v in self.value
            return v not in self.value
        except TypeError:
            return True

    def may_match_stats(
        self, *, min_value: Any, max_value: Any, null_count: int | None, row_count: int
    ) -> bool:
        """Tell whether a file with these column stats may hold a matching row.

        Args:
            min_value: Column minimum (``None`` = unknown or all null).
            max_value: Column maximum (``None`` = unknown or all null).
            null_count: Nulls in the column (``None`` = unknown).
            row_count: Rows in the file.
        """
        op = self.op
        if op == "is null":
            return null_count is None or null_count > 0
        if op == "is not null":
            return null_count is None or null_count < row_count
        if null_count is not None and null_count >= row_count:
            return False  # all null: no comparison can be true
        if min_value is None or max_value is None:
            return True
        try:
            if op == "=":
                return bool(min_value <= self.value <= max_value)
            if op in ("<", "<="):
                return bool(_COMPARISONS[op](min_value, self.value))
            if op in (">", ">="):
                return bool(_COMPARISONS[op](max_value, self.value))
            if op == "in":
                return any(min_value <= v <= max_value for v in self.value if v is not None)
            if op == "!=":
                return not (min_value == max_value == self.value)
            return True  # not in
        except TypeError:
            return True

    def to_expression(self) -> pc.Expression:
        """Return the equivalent pyarrow compute expression."""
        f = pc.field(self.column)
        op = self.op
        if op == "is null":
            return f.is_null()
        if op == "is not null":
            return f.is_valid()
        if op == "in":
            return f.isin(list(self.value))
        if op == "not in":
            return ~f.isin(list(self.value)) & f.is_valid()
        expression: pc.Expression = _COMPARISONS[op](f, self.value)
        return expression


def parse_filter(spec: Any) -> tuple[Predicate, ...]:
    """Normalise a user filter into an AND of predicates.

    Accepts ``None``, a :class:`Predicate`, a ``(column, op, value)`` /
    ``(column, "is null")`` tuple, a mapping ``{column: value}`` (equalities),
    or a list of any of these (combined with AND).

    Raises:
        ValueError: an element has another shape or an unknown operator.
    """
    if spec is None:
        return ()
    if isinstance(spec, Predicate):
        return (spec,)
    if isinstance(spec, Mapping):
        return tuple(
            Predicate(column=str(k), op="is null" if v is None else "=", value=v)
            for k, v in spec.items()
        )
    if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
        return (_from_tuple(spec),)
    if isinstance(spec, Iterable) and not isinstance(spec, str | bytes):
        out: list[Predicate] = []
        for item in spec:
            out.extend(parse_filter(item))
        return tuple(out)
    raise ValueError(
        f"cannot read filter {spec!r}; use ('col', '>', 5), a list of such tuples, "
        "or {'col': value}"
    )


def _from_tuple(spec: Sequence[Any]) -> Predicate:
    if len(spec) == 2:
        column, op = spec
        value = None
    elif len(spec) == 3:
        column, op, value = spec
    else:
        raise ValueError(f"filter tuple {spec!r} must be (column, op, value) or (column, op)")
    op = str(op).lower().strip()
    op = _ALIASES.get(op, op)
    return Predicate(column=str(column), op=op, value=value)


def check_filter_types(schema: pa.Schema, predicates: Sequence[Predicate]) -> None:
    """Refuse predicates whose literal cannot be compared with their column's type.

    Each predicate's expression is evaluated on an empty column of the
    column's type, so exactly the comparisons the read would attempt are
    checked (an ``int`` literal fits a ``double`` column; a ``str`` does not
    fit a ``BIGINT``), before any file is read.

    Args:
        schema: The table's Arrow schema; columns missing from it are left
            to the caller's unknown-column check.
        predicates: The filter.

    Raises:
        SchemaMismatchError: a literal's type does not fit its column.
    """
    for p in predicates:
        if p.op in ("is null", "is not null") or p.column not in schema.names:
            continue
        field = schema.field(p.column)
        empty = pa.table({p.column: pa.array([], type=field.type)})
        try:
            empty.filter(p.to_expression())
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid) as exc:
            values = p.value if p.op in ("in", "not in") else (p.value,)
            kinds = ", ".join(sorted({type(v).__name__ for v in values}))
            raise SchemaMismatchError(
                f"filter ({p.column!r}, {p.op!r}, {p.value!r}): a {kinds} value cannot be "
                f"compared with column {p.column!r} of type {field.type}; pass a value of "
                f"the column's type ({' '.join(str(exc).split())})"
            ) from None


def and_expression(predicates: Sequence[Predicate]) -> pc.Expression | None:
    """The AND of ``predicates`` as one pyarrow expression (``None`` when there are none)."""
    if not predicates:
        return None
    return reduce(lambda a, b: a & b, (p.to_expression() for p in predicates))


def resolve_projection(
    schema: pa.Schema, columns: Sequence[str] | None, predicates: Sequence[Predicate]
) -> tuple[list[str], list[str]]:
    """Check a read's columns and filter against ``schema`` before anything is read.

    Args:
        schema: The read schema (Arrow).
        columns: Columns to return (``None`` = all, in schema order).
        predicates: The filter.

    Returns:
        ``(names, needed)``: the result's columns in order, and those plus the
        filter's columns (each once, first mention first).

    Raises:
        SchemaMismatchError: a column is not in ``schema``, or a literal's
            type does not fit its column (:func:`check_filter_types`).
    """
    names = list(columns) if columns is not None else schema.names
    unknown = [c for c in [*names, *(p.column for p in predicates)] if c not in schema.names]
    if unknown:
        raise SchemaMismatchError(
            f"unknown column(s) {sorted(set(unknown))}; the table has {schema.names}"
        )
    check_filter_types(schema, predicates)
    return names, list(dict.fromkeys([*names, *(p.column for p in predicates)]))
