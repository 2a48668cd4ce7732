"""The key/value layout of primary-key data files, as Arrow tables.

A key/value table has, in order: one ``_KEY_<k>`` column per trimmed
primary-key column, ``_SEQUENCE_NUMBER`` (int64, not null), ``_VALUE_KIND``
(int8, not null: the RowKind byte) and the table's columns (the value; key
columns repeated). Readers may project the value part; the key, sequence and
kind columns are always present while rows are merged.

Source: Paimon ``KeyValue.schema`` / ``createKeyValueFields``, ``SpecialFields``
(``KEY_FIELD_PREFIX``, ``SEQUENCE_NUMBER``, ``VALUE_KIND``) and ``RowKind``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from snaplake.errors import SchemaMismatchError

__all__ = [
    "KEY_FIELD_PREFIX",
    "SEQUENCE_NUMBER",
    "VALUE_KIND",
    "RowKind",
    "encode_keys",
    "is_retract",
    "key_column",
    "kv_schema",
    "parse_row_kinds",
    "system_columns",
    "to_key_value",
]

KEY_FIELD_PREFIX: Final = "_KEY_"
SEQUENCE_NUMBER: Final = "_SEQUENCE_NUMBER"
VALUE_KIND: Final = "_VALUE_KIND"


class RowKind(IntEnum):
    """The kind of a row, stored as ``_VALUE_KIND`` (Paimon ``RowKind`` byte values)."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def short_string(self) -> str:
        """``+I``, ``-U``, ``+U`` or ``-D``."""
        return _SHORT[self]

    @property
    def is_retract(self) -> bool:
        """True for ``-U`` and ``-D`` (Paimon ``RowKind.isRetract``)."""
        return self in (RowKind.UPDATE_BEFORE, RowKind.DELETE)


_SHORT = {
    RowKind.INSERT: "+I",
    RowKind.UPDATE_BEFORE: "-U",
    RowKind.UPDATE_AFTER: "+U",
    RowKind.DELETE: "-D",
}
_FROM_SHORT = {v: k for k, v in _SHORT.items()}


def key_column(name: str) -> str:
    """The data-file column holding primary-key column ``name`` (``_KEY_<name>``)."""
    return KEY_FIELD_PREFIX + name


def system_columns(key_names: Sequence[str]) -> list[str]:
    """``_KEY_<k>...``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND`` in file order."""
    return [key_column(k) for k in key_names] + [SEQUENCE_NUMBER, VALUE_KIND]


def kv_schema(value_schema: pa.Schema, key_names: Sequence[str]) -> pa.Schema:
    """The Arrow schema of a key/value data file.

    Args:
        value_schema: The table's Arrow schema (or a projection of it that
            holds the key columns).
        key_names: Trimmed primary-key columns, in primary-key order.

    Raises:
        SchemaMismatchError: a key column is missing from ``value_schema``.
    """
    global _last_kv_schema
    key = tuple(key_names)
    last = _last_kv_schema  # one read: writer threads may replace it meanwhile
    if last is not None and last[1] == key and last[0].equals(value_schema, check_metadata=True):
        return last[2]
    fields = []
    for k in key_names:
        if k not in value_schema.names:
            raise SchemaMismatchError(f"key column {k!r} is not in {value_schema.names}")
        f = value_schema.field(k)
        fields.append(pa.field(key_column(k), f.type, nullable=f.nullable))
    fields.append(pa.field(SEQUENCE_NUMBER, pa.int64(), nullable=False))
    fields.append(pa.field(VALUE_KIND, pa.int8(), nullable=False))
    schema = pa.schema(fields + list(value_schema))
    _last_kv_schema = (value_schema, key, schema)
    return schema


_last_kv_schema: tuple[pa.Schema, tuple[str, ...], pa.Schema] | None = None
"""The last (value schema, key names, key/value schema): a writer builds one per bucket and
file, always the same (an equality check is far cheaper than building it)."""


def parse_row_kinds(
    kinds: pa.Array | pa.ChunkedArray | Sequence[object], num_rows: int
) -> npt.NDArray[np.int8]:
    """Turn row kinds given by a user into ``_VALUE_KIND`` bytes.

    Args:
        kinds: One kind per row: strings ``'+I' '-U' '+U' '-D'`` or integers
            0..3 (any Arrow integer or string type, or a Python sequence).
        num_rows: Rows the kinds must describe.

    Returns:
        An int8 NumPy array of ``num_rows`` values in 0..3.

    Raises:
        SchemaMismatchError: a different length, a null, or an unknown kind.
    """
    arr = kinds if isinstance(kinds, pa.Array | pa.ChunkedArray) else pa.array(kinds)
    if len(arr) != num_rows:
        raise SchemaMismatchError(f"{len(arr)} row kinds for {num_rows} rows; pass one per row")
    if arr.null_count:
        raise SchemaMismatchError(
            "row kinds contain nulls; every row needs '+I', '-U', '+U' or '-D'"
        )
    if pa.types.is_integer(arr.type):
        values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)
        bad = (values < 0) | (values > 3)
        if bad.any():
            raise SchemaMismatchError(
                f"unknown row kind {int(values[bad][0])}; use 0 (+I), 1 (-U), 2 (+U) or 3 (-D)"
            )
        return values.astype(np.int8)
    if (
        pa.types.is_string(arr.type)
        or pa.types.is_large_string(arr.type)
        or (pa.types.is_string_view(arr.type))
    ):
        text = arr.cast(pa.string())
        codes = pc.index_in(text, value_set=pa.array(list(_FROM_SHORT)))
        if codes.null_count:
            unknown = pc.filter(text, pc.is_null(codes))[0].as_py()
            raise SchemaMismatchError(f"unknown row kind {unknown!r}; use '+I', '-U', '+U' or '-D'")
        lookup = np.array([int(k) for k in _FROM_SHORT.values()], dtype=np.int8)
        return lookup[np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int64)]
    raise SchemaMismatchError(f"row kinds must be strings or integers, got {arr.type}")


def is_retract(
    kinds: pa.Array | pa.ChunkedArray | npt.NDArray[np.int8],
) -> npt.NDArray[np.bool_]:
    """True where ``_VALUE_KIND`` is ``-U`` (1) or ``-D`` (3); one bool per row.

    Source: Paimon ``RowKind.isRetract``.
    """
    if isinstance(kinds, np.ndarray):
        values = kinds
    else:
        values = np.asarray(kinds.to_numpy(zero_copy_only=False), dtype=np.int8)
    out: npt.NDArray[np.bool_] = (values == RowKind.UPDATE_BEFORE) | (values == RowKind.DELETE)
    return out


def to_key_value(
    values: pa.Table,
    key_names: Sequence[str],
    sequence: npt.NDArray[np.int64],
    kinds: npt.NDArray[np.int8],
) -> pa.Table:
    """Wrap rows of the table schema into the key/value layout (unsorted).

    Args:
        values: Rows with the table's columns.
        key_names: Trimmed primary-key columns.
        sequence: One sequence number per row.
        kinds: One RowKind byte per row.

    Returns:
        A table with :func:`kv_schema` columns; no copy of ``values``' buffers.
    """
    schema = kv_schema(values.schema, key_names)
    columns = [values.column(k) for k in key_names]
    columns.append(pa.array(sequence, type=pa.int64()))
    columns.append(pa.array(kinds, type=pa.int8()))
    columns.extend(values.columns)
    return pa.Table.from_arrays(columns, schema=schema)


_SEPARATOR: Final = pa.scalar(b":", pa.large_binary())


def encode_keys(table: pa.Table, names: Sequence[str]) -> pa.Array:
    """One binary value per row of ``table`` that is equal exactly when its keys are.

    Each key column is rendered as text (binary columns as they are) and the
    parts joined with ``:``; every part that is not an integer is prefixed
    with its byte length, so no two different keys give the same bytes. Nulls
    give null (a null key matches nothing).

    Args:
        table: Holds the columns ``names``.
        names: The key columns, in key order.

    Returns:
        A ``large_binary`` array, one value per row.

    Raises:
        pyarrow.ArrowInvalid: a key column's type has no string form (never for
            Paimon's atomic key types).

    Source: snaplake's own vectorised stand-in for comparing Paimon's
    serialised key rows (``BinaryRow`` equality), which
    :func:`~snaplake.store.format.binary_row.encode_binary_rows` builds row by
    row in Python.
    """
    parts: list[Any] = []
    for name in names:
        column = table.column(name)
        kind = column.type
        if pa.types.is_integer(kind):
            parts.append(pc.cast(pc.cast(column, pa.large_string()), pa.large_binary()))
            continue
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            text = pc.cast(column, pa.large_binary())
        elif pa.types.is_fixed_size_binary(kind):
            text = pc.cast(pc.cast(column, pa.binary()), pa.large_binary())
        else:
            text = pc.cast(pc.cast(column, pa.large_string()), pa.large_binary())
        length = pc.cast(pc.cast(pc.binary_length(text), pa.large_string()), pa.large_binary())
        parts += [length, text]
    if len(parts) == 1:
        return parts[0].combine_chunks() if isinstance(parts[0], pa.ChunkedArray) else parts[0]
    joined = pc.binary_join_element_wise(*parts, _SEPARATOR)
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined
