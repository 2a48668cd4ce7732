"""A row-at-a-time reference model of Paimon's merge engines (tests only).

A direct transcription of the Java merge functions (``DeduplicateMergeFunction``,
``FirstRowMergeFunction``, ``PartialUpdateMergeFunction``, ``AggregateMergeFunction``
with the ``Field*Agg`` classes) wrapped in ``ReducerMergeFunctionWrapper``: one
version passes through unchanged, several are folded in merge order. It is
deliberately simple and slow; snaplake's vectorised merge is checked against it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
Row = dict[str, Any]
Version = tuple[int, Row]  # (kind, values)


class ModelError(Exception):
    """The Java merge function would throw."""


def is_retract(kind: int) -> bool:
    return kind in (UPDATE_BEFORE, DELETE)


def _blank(v: Any) -> bool:
    return v is None or str(v).strip(" \t\n\x0b\f\r\x1c\x1d\x1e\x1f") == ""


@dataclass
class _Agg:
    func: str
    ignore_retract: bool = False
    delimiter: str = ","
    bits: int = 64  # integer width for overflow checks; 0 = float
    float32: bool = False
    initialized: bool = False

    def reset(self) -> None:
        self.initialized = False

    def _check(self, v: Any) -> Any:
        if self.float32 and isinstance(v, float):
            return float(np.float32(v))
        if (
            self.bits
            and isinstance(v, int)
            and not -(2 ** (self.bits - 1)) <= v < 2 ** (self.bits - 1)
        ):
            raise ModelError("overflow")
        return v

    def agg(self, acc: Any, v: Any) -> Any:
        f = self.func
        if f in ("primary_key", "last_value"):
            return v
        if f == "last_non_null_value":
            return acc if v is None else v
        if f == "first_value":
            if not self.initialized:
                self.initialized = True
                return v
            return acc
        if f == "first_non_null_value":
            if not self.initialized and v is not None:
                self.initialized = True
                return v
            return acc
        if acc is None or v is None:
            if f == "listagg":
                return acc if _blank(v) else v
            return v if acc is None else acc
        if f == "sum":
            return self._check(acc + v)
        if f == "product":
            return self._check(acc * v)
        if f == "max":
            return v if _java_lt(acc, v) else acc
        if f == "min":
            return v if _java_lt(v, acc) else acc
        if f == "bool_and":
            return acc and v
        if f == "bool_or":
            return acc or v
        if f == "listagg":
            return acc if _blank(v) else f"{acc}{self.delimiter}{v}"
        raise AssertionError(f)

    def retract(self, acc: Any, v: Any) -> Any:
        if self.ignore_retract:
            return acc
        f = self.func
        if f == "primary_key":
            return v
        if f == "last_value":
            return None
        if f == "last_non_null_value":
            return None if v is not None else acc
        if f == "sum":
            if acc is None or v is None:
                return self._check(-v) if acc is None and v is not None else acc
            return self._check(acc - v)
        if f == "product":
            if acc is None or v is None:
                return acc
            if self.bits:
                if v == 0:
                    raise ModelError("division by zero")
                q = abs(acc) // abs(v)
                return q if (acc < 0) == (v < 0) else -q
            with np.errstate(divide="ignore", invalid="ignore"):  # Java: IEEE, never throws
                return self._check(float(np.float64(acc) / np.float64(v)))
        raise ModelError(f"{f} cannot retract")


def _java_lt(a: Any, b: Any) -> bool:
    if isinstance(a, float):

        def key(x: float) -> tuple[int, float, float]:
            return (1, 0.0, 0.0) if math.isnan(x) else (0, x, math.copysign(1.0, x))

        return key(a) < key(b)
    return bool(a < b)


@dataclass
class MergeModel:
    """The merge engine of one table.

    Attributes:
        engine: ``deduplicate``, ``first-row``, ``partial-update`` or ``aggregation``.
        columns: Value columns in order.
        ignore_delete: ``ignore-delete``.
        remove_record_on_delete: ``partial-update.remove-record-on-delete``.
        functions: Aggregation: column -> function.
        ignore_retract: Aggregation: columns with ``ignore-retract``.
        int_bits: Aggregation: column -> integer width (0 = not an integer).
    """

    engine: str
    columns: Sequence[str]
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    functions: Mapping[str, str] = field(default_factory=dict)
    ignore_retract: frozenset[str] = frozenset()
    int_bits: Mapping[str, int] = field(default_factory=dict)
    float32: frozenset[str] = frozenset()
    delimiters: Mapping[str, str] = field(default_factory=dict)

    def fold(self, versions: Sequence[Version]) -> Version | None:
        """Fold the versions of one key, in merge order (Reducer wrapper semantics)."""
        if not versions:
            return None
        if len(versions) == 1:
            return versions[0]
        folded: Version | None = getattr(self, "_" + self.engine.replace("-", "_"))(versions)
        return folded

    def _deduplicate(self, versions: Sequence[Version]) -> Version | None:
        latest = None
        for kind, row in versions:
            if self.ignore_delete and is_retract(kind):
                continue
            latest = (kind, row)
        return latest

    def _first_row(self, versions: Sequence[Version]) -> Version | None:
        first = None
        for kind, row in versions:
            if is_retract(kind):
                if self.ignore_delete:
                    continue
                raise ModelError("first-row retract")
            if first is None:
                first = (kind, row)
        return first

    def _partial_update(self, versions: Sequence[Version]) -> Version | None:
        row: Row = dict.fromkeys(self.columns)
        filled = meet_insert = False
        current_delete = False
        for kind, values in versions:
            current_delete = False
            if is_retract(kind):
                if not filled:
                    row = {c: values.get(c) for c in self.columns}
                    filled = True
                if self.ignore_delete:
                    continue
                if self.remove_record_on_delete:
                    if kind == DELETE:
                        current_delete = True
                        row = {c: values.get(c) for c in self.columns}
                    continue
                raise ModelError("partial-update retract")
            for c in self.columns:
                if values.get(c) is not None:
                    row[c] = values[c]
            meet_insert = filled = True
        return (DELETE if current_delete or not meet_insert else INSERT), row

    def _aggregation(self, versions: Sequence[Version]) -> Version | None:
        aggs = {
            c: _Agg(
                self.functions.get(c, "last_non_null_value"),
                ignore_retract=c in self.ignore_retract,
                delimiter=self.delimiters.get(c, ","),
                bits=self.int_bits.get(c, 0),
                float32=c in self.float32,
            )
            for c in self.columns
        }
        row: Row = dict.fromkeys(self.columns)
        for kind, values in versions:
            for c in self.columns:
                a = aggs[c]
                row[c] = (
                    a.retract(row[c], values.get(c))
                    if is_retract(kind)
                    else a.agg(row[c], values.get(c))
                )
        return INSERT, row


def visible(version: Version | None) -> Row | None:
    """The row a reader returns for a folded key (``DropDeleteReader``), or None."""
    if version is None or is_retract(version[0]):
        return None
    return version[1]
