"""Field aggregators of the ``aggregation`` merge engine, one column at a time, vectorised.

Each function folds the versions of every key group (rows of a sorted chunk,
retractions marked) into one value per group, exactly as Paimon's
``FieldAggregator`` applies ``agg`` and ``retract`` in merge order:

* order-independent folds (decimal sums, min/max of non-float types,
  ``bool_and``/``bool_or``, ``listagg``) use Arrow's grouped aggregation;
* value picks (``last_value``, ``last_non_null_value``, ``first_value``,
  ``first_non_null_value``, the primary-key columns) are per-group row
  indices;
* order-dependent numeric folds (integer and float ``sum``/``product`` with
  Java's overflow checks, float32 rounding and truncating division, float
  ``min``/``max`` with ``Double.compare``) step through the groups' rows by
  rank (:meth:`Groups.rank_rows`): step k folds every group's k-th row with
  one NumPy operation.

Only ``product`` over DECIMAL columns folds Python ``Decimal`` objects.

Source: Paimon ``mergetree/compact/aggregate/Field*Agg.java``,
``FieldIgnoreRetractAgg`` and ``FieldAggregatorFactory``.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import MergeFunctionError
from snaplake.mergetree.groups import Groups, float_sort_key, take_or_null
from snaplake.store.format.primary_key import PRIMARY_KEY_FUNCTION, RETRACTABLE_FUNCTIONS
from snaplake.store.format.types import DataType, TypeRoot

__all__ = ["aggregate_column"]

_INT_BOUNDS: Final = {
    TypeRoot.TINYINT: (-(2**7), 2**7 - 1),
    TypeRoot.SMALLINT: (-(2**15), 2**15 - 1),
    TypeRoot.INT: (-(2**31), 2**31 - 1),
    TypeRoot.BIGINT: (-(2**63), 2**63 - 1),
}
_FLOATS: Final = frozenset({TypeRoot.FLOAT, TypeRoot.DOUBLE})
_BLANK: Final = (
    r"^[\t\n\x0b\f\r\x1c-\x1f \x{1680}\x{2000}-\x{2006}\x{2008}-\x{200a}"
    r"\x{2028}\x{2029}\x{205f}\x{3000}]*$"
)
"""Java's ``StringUtils.isBlank`` (``Character.isWhitespace``) as an RE2 pattern."""


def _combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _valid(arr: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)


@dataclass(frozen=True, slots=True, kw_only=True)
class _FoldRows:
    """The rows an order-dependent fold steps through, with their per-row masks.

    Attributes:
        groups: Key groups of the chunk.
        keep: Rows the fold takes (``ignore-retract`` drops retractions here).
        ret: Rows that retract (``-U``/``-D``) instead of adding.
        valid: Rows whose value is not null.
        name: Column name (messages).
    """

    groups: Groups
    keep: npt.NDArray[np.bool_]
    ret: npt.NDArray[np.bool_]
    valid: npt.NDArray[np.bool_]
    name: str


def _grouped(
    groups: Groups, values: pa.Array, func: str, options: pc.FunctionOptions | None = None
) -> pa.Array:
    """One Arrow grouped aggregate per group (every group appears; order kept)."""
    table = pa.table({"g": pa.array(groups.gid), "v": values})
    spec = ("v", func, options) if options is not None else ("v", func)
    result = table.group_by("g", use_threads=False).aggregate([spec])
    return _combined(result.column(f"v_{func}"))


def aggregate_column(
    func: str,
    column: pa.Array | pa.ChunkedArray,
    dtype: DataType,
    groups: Groups,
    retract: npt.NDArray[np.bool_],
    *,
    ignore_retract: bool,
    delimiter: str = ",",
    name: str = "",
) -> pa.Array:
    """Fold one column of every group of a sorted chunk; one value per group.

    Args:
        func: The column's function (``sum``, ..., or ``primary_key``).
        column: The column's values, in merge order.
        dtype: The column's Paimon type.
        groups: Key groups of the chunk (each with at least two rows).
        retract: True for rows of kind ``-U``/``-D``.
        ignore_retract: ``fields.<f>.ignore-retract``: retractions leave the
            accumulator unchanged.
        delimiter: ``listagg`` delimiter.
        name: Column name (messages).

    Returns:
        An array of ``len(groups)`` values of the column's Arrow type.

    Raises:
        MergeFunctionError: a retraction reaches a function that cannot
            retract, an integer sum/product overflows, or an integer
            retraction divides by zero.
    """
    arr = _combined(column)
    if func not in RETRACTABLE_FUNCTIONS and not ignore_retract and retract.any():
        raise MergeFunctionError(
            f"aggregate function {func!r} of column {name!r} does not support retraction "
            f"(-U/-D rows); set 'fields.{name}.ignore-retract' = 'true' to ignore them"
        )
    ret = retract if func != PRIMARY_KEY_FUNCTION else np.zeros_like(retract)
    if ignore_retract and func != PRIMARY_KEY_FUNCTION:
        # FieldIgnoreRetractAgg: a retraction changes nothing.
        keep = ~retract
        ret = np.zeros_like(retract)
    else:
        keep = np.ones_like(retract)
    valid = _valid(arr)
    if func == PRIMARY_KEY_FUNCTION:
        return take_or_null(arr, groups.ends - 1)
    if func == "last_value":
        idx = groups.last_where(keep)
        return take_or_null(arr, np.where((idx >= 0) & ~ret[np.maximum(idx, 0)], idx, -1))
    if func == "last_non_null_value":
        idx = groups.last_where(keep & valid)
        return take_or_null(arr, np.where((idx >= 0) & ~ret[np.maximum(idx, 0)], idx, -1))
    if func == "first_value":
        return take_or_null(arr, groups.first_where(keep & ~ret))
    if func == "first_non_null_value":
        return take_or_null(arr, groups.first_where(keep & ~ret & valid))
    if func in ("bool_and", "bool_or"):
        masked = pc.if_else(pa.array(keep & ~ret), arr, pa.nulls(len(arr), arr.type))
        agg = "all" if func == "bool_and" else "any"
        return _grouped(groups, masked, agg, pc.ScalarAggregateOptions(min_count=1))
    if func == "listagg":
        return _listagg(arr, groups, keep & ~ret & valid, delimiter)
    fold = _FoldRows(groups=groups, keep=keep, ret=ret, valid=valid, name=name)
    if func in ("min", "max"):
        if dtype.root in _FLOATS or dtype.root in _INT_BOUNDS:
            return _fold_numeric(func, arr, dtype, fold)
        masked = pc.if_else(pa.array(keep & ~ret), arr, pa.nulls(len(arr), arr.type))
        return _grouped(groups, masked, func, pc.ScalarAggregateOptions(min_count=1))
    if func in ("sum", "product"):
        if dtype.root is TypeRoot.DECIMAL:
            return _decimal_fold(func, arr, fold)
        return _fold_numeric(func, arr, dtype, fold)
    raise MergeFunctionError(f"unknown aggregate function {func!r} for column {name!r}")


def _listagg(
    arr: pa.Array, groups: Groups, eligible: npt.NDArray[np.bool_], delimiter: str
) -> pa.Array:
    """``FieldListaggAgg`` (not distinct): non-blank values joined in merge order."""
    blank = pc.fill_null(pc.match_substring_regex(arr.cast(pa.string()), _BLANK), fill_value=True)
    take = eligible & ~np.asarray(blank.to_numpy(zero_copy_only=False), dtype=np.bool_)
    if not take.any():
        return pa.nulls(len(groups), type=arr.type)
    rows = np.flatnonzero(take)
    table = pa.table({"g": pa.array(groups.gid[rows]), "v": arr.take(pa.array(rows))})
    listed = table.group_by("g", use_threads=False).aggregate([("v", "list")])
    joined = pc.binary_join(listed.column("v_list"), delimiter)
    out_idx = np.full(len(groups), -1, dtype=np.int64)
    out_idx[np.asarray(listed.column("g").to_numpy(), dtype=np.int64)] = np.arange(listed.num_rows)
    return take_or_null(_combined(joined).cast(arr.type), out_idx)


def _decimal_fold(func: str, arr: pa.Array, fold: _FoldRows) -> pa.Array:
    """DECIMAL ``sum`` (exact, Arrow) and ``product`` (Python ``Decimal``, rank by rank).

    Java builds each result with ``Decimal.fromBigDecimal(value, p, s)``, which
    rounds half-up to the scale and gives null when the precision overflows.
    """
    groups, keep, ret, valid, name = fold.groups, fold.keep, fold.ret, fold.valid, fold.name
    dtype = arr.type
    if func == "sum":
        contrib = pc.if_else(pa.array(ret), pc.negate(arr), arr)
        contrib = pc.if_else(pa.array(keep), contrib, pa.nulls(len(arr), dtype))
        total = _grouped(groups, contrib, "sum", pc.ScalarAggregateOptions(min_count=1))
        return _fit_decimals(total.to_pylist(), dtype)
    values = arr.to_pylist()
    acc: list[Any] = [None] * len(groups)
    ctx = decimal.Context(prec=200)
    for active, rows in groups.rank_rows():
        for g, r in zip(active.tolist(), rows.tolist(), strict=True):
            if not keep[r] or not valid[r]:
                continue
            a, v = acc[g], values[r]
            if ret[r]:
                if a is not None:
                    if v == 0:
                        raise MergeFunctionError(f"product retraction of {name!r} divides by 0")
                    acc[g] = _fit_decimal(ctx.divide(a, v), dtype)
            else:
                acc[g] = v if a is None else _fit_decimal(ctx.multiply(a, v), dtype)
    return pa.array(acc, type=dtype)


def _fit_decimal(value: decimal.Decimal | None, dtype: pa.Decimal128Type) -> Any:
    """``Decimal.fromBigDecimal``: round half-up to the scale; null if it needs more digits."""
    if value is None:
        return None
    ctx = decimal.Context(prec=200)
    q = value.quantize(decimal.Decimal(1).scaleb(-dtype.scale, context=ctx),
                       rounding=decimal.ROUND_HALF_UP, context=ctx)  # fmt: skip
    unscaled = abs(int(q.scaleb(dtype.scale, context=ctx)))
    return q if unscaled < 10**dtype.precision else None


def _fit_decimals(values: list[Any], dtype: pa.Decimal128Type) -> pa.Array:
    return pa.array([_fit_decimal(v, dtype) for v in values], type=dtype)


def _fold_numeric(func: str, arr: pa.Array, dtype: DataType, fold: _FoldRows) -> pa.Array:
    """Integer/float sum, product, min, max folded rank by rank, as Java does."""
    groups, keep, ret, valid, name = fold.groups, fold.keep, fold.ret, fold.valid, fold.name
    is_float = dtype.root in _FLOATS
    raw = np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False))
    values = raw if is_float else raw.astype(np.int64)
    order_key = (
        np.asarray(float_sort_key(arr).fill_null(0).to_numpy(zero_copy_only=False))
        if is_float and func in ("min", "max")
        else None
    )
    acc = np.zeros(len(groups), dtype=values.dtype)
    acc_key = np.zeros(len(groups), dtype=order_key.dtype) if order_key is not None else None
    acc_valid = np.zeros(len(groups), dtype=np.bool_)
    lo, hi = _INT_BOUNDS.get(dtype.root, (0, 0))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for active, rows in groups.rank_rows():
            use = keep[rows] & valid[rows]
            if not use.any():
                continue
            active, rows = active[use], rows[use]
            a, av, v, r = acc[active], acc_valid[active], values[rows], ret[rows]
            both = av & ~r
            if func == "sum":
                res = np.where(r, a - v, a + v)
                res = np.where(av, res, np.where(r, -v, v))
                if not is_float:
                    _check_overflow(res, a, v, r, av, lo, hi, name)
            elif func == "product":
                res = np.where(both, a * v, np.where(r, a, v))
                if not is_float:
                    _check_product(res, a, v, both, lo, hi, name)
                div = av & r
                if div.any():
                    res[div] = _divide(a[div], v[div], is_float=is_float, name=name)
            else:
                assert acc_key is not None or not is_float
                if is_float:
                    assert acc_key is not None
                    assert order_key is not None
                    ak, vk = acc_key[active], order_key[rows]
                    better = vk > ak if func == "max" else vk < ak
                    pick_v = ~av | better
                    acc_key[active] = np.where(pick_v, vk, ak)
                else:
                    better = v > a if func == "max" else v < a
                    pick_v = ~av | better
                res = np.where(pick_v, v, a)
            acc[active] = res.astype(acc.dtype, copy=False)
            # a retraction into a null accumulator with a null input leaves it null
            acc_valid[active] = av | ~r | (func == "sum")
    out = acc if is_float else acc.astype(raw.dtype)
    return pa.array(out, type=arr.type, mask=~acc_valid)


def _check_overflow(
    res: npt.NDArray[Any],
    a: npt.NDArray[Any],
    v: npt.NDArray[Any],
    r: npt.NDArray[np.bool_],
    av: npt.NDArray[np.bool_],
    lo: int,
    hi: int,
    name: str,
) -> None:
    if hi < 2**63 - 1:
        bad = (res < lo) | (res > hi)
    else:  # int64: two's complement overflow of a + v, a - v, -v
        add = ((a ^ res) & (v ^ res)) < 0
        sub = ((a ^ v) & (a ^ res)) < 0
        neg = v == np.iinfo(np.int64).min
        bad = np.where(av, np.where(r, sub, add), r & neg)
    if bad.any():
        raise MergeFunctionError(f"sum of column {name!r} overflows its integer type")


def _check_product(
    res: npt.NDArray[Any],
    a: npt.NDArray[Any],
    v: npt.NDArray[Any],
    both: npt.NDArray[np.bool_],
    lo: int,
    hi: int,
    name: str,
) -> None:
    if hi < 2**63 - 1:
        bad = both & ((res < lo) | (res > hi))
    else:
        approx = a.astype(np.float64) * v.astype(np.float64)
        bad = both & (np.abs(approx) >= 2.0**63) & ~((approx == -(2.0**63)) & (res < 0))
    if bad.any():
        raise MergeFunctionError(f"product of column {name!r} overflows its integer type")


def _divide(
    a: npt.NDArray[Any], v: npt.NDArray[Any], *, is_float: bool, name: str
) -> npt.NDArray[Any]:
    """Java division: IEEE for floats, truncation toward zero for integers."""
    if is_float:
        quotient: npt.NDArray[Any] = a / v
        return quotient
    if (v == 0).any():
        raise MergeFunctionError(f"product retraction of column {name!r} divides by zero")
    q: npt.NDArray[Any] = a // v
    adjusted: npt.NDArray[Any] = q + (((a % v) != 0) & ((a < 0) != (v < 0)))
    return adjusted
