"""Read one column of an older data file in the read schema's type, nested fields by id.

A top-level column is matched to the read schema by its field id
(:mod:`snaplake.store.read.schema_evolution`); inside a ROW column the nested
fields carry ids too, and engines that change nested fields (pypaimon's
``SchemaChange.add_column(["address", "zip"], ...)``, nested renames, drops and
widenings) keep them. Arrow casts structs *by name*, which reads a renamed
nested field as NULL and a dropped-then-re-added one as its old values, so a
nested column whose fields changed is rebuilt here field by field, by id:

* a nested field the file lacks is NULL;
* a renamed nested field is taken from its old name;
* a widened nested field is cast (the widenings of
  :mod:`snaplake.store.format.type_casts`);
* ARRAY elements and MAP values are evolved the same way.

snaplake's own ``alter_table`` makes no nested changes (``update_column_type``
refuses any change of a ROW); this reads what other engines made.

Source: Paimon ``SchemaEvolutionUtil.createIndexCastMapping`` (nested ROW
fields mapped by id), ``NestedSchemaUtils``, ``CastExecutors`` (nested casts).
"""

from __future__ import annotations

import pyarrow as pa

from snaplake.store.format.type_casts import can_widen
from snaplake.store.format.types import DataType, TypeRoot, to_arrow_type

__all__ = ["can_evolve", "evolve_column", "same_layout"]

_NESTED = (TypeRoot.ROW, TypeRoot.ARRAY, TypeRoot.MAP)


def same_layout(file_type: DataType, read_type: DataType) -> bool:
    """Tell whether a column of ``file_type`` reads as ``read_type`` without any change.

    Equal types, ignoring the top-level nullability; nested field ids,
    names, order and nullability must all match.
    """
    return file_type.with_nullable(nullable=True) == read_type.with_nullable(nullable=True)


def _by_id(file_type: DataType, read_type: DataType) -> bool:
    """Both are the same nested kind whose fields changed (rebuild by id, not a cast)."""
    return file_type.root is read_type.root and read_type.root in _NESTED


def can_evolve(file_type: DataType, read_type: DataType) -> bool:
    """Tell whether every value of ``file_type`` reads exactly as ``read_type``.

    True when the types are equal (nullability aside), when ``file_type``
    widens to ``read_type``, or when both are ROW (ARRAY, MAP) whose fields
    shared by id (elements, values) evolve likewise; fields added since are
    NULL, fields dropped since are not read.
    """
    if same_layout(file_type, read_type):
        return True
    if file_type.root is TypeRoot.ROW and read_type.root is TypeRoot.ROW:
        old = {f.id: f.type for f in file_type.fields}
        return all(
            f.id not in old or can_evolve(old[f.id], f.type.with_nullable(nullable=True))
            for f in read_type.fields
        )
    if file_type.root is TypeRoot.ARRAY and read_type.root is TypeRoot.ARRAY:
        return can_evolve(file_type.children[0], read_type.children[0])
    if file_type.root is TypeRoot.MAP and read_type.root is TypeRoot.MAP:
        return same_layout(file_type.children[0], read_type.children[0]) and can_evolve(
            file_type.children[1], read_type.children[1]
        )
    return can_widen(file_type.with_nullable(nullable=True), read_type.with_nullable(nullable=True))


def evolve_column(
    column: pa.Array | pa.ChunkedArray, file_type: DataType, read_type: DataType
) -> pa.Array | pa.ChunkedArray:
    """Return ``column`` (values of ``file_type``) as values of ``read_type``.

    Raises:
        pyarrow.ArrowInvalid: a value does not fit the read type (only after
            a lossy type change made by another engine; the caller types it).
    """
    target = to_arrow_type(read_type)
    if same_layout(file_type, read_type) or not _by_id(file_type, read_type):
        return column if column.type == target else column.cast(target)
    if isinstance(column, pa.ChunkedArray):
        chunks = [_evolve_array(c, file_type, read_type) for c in column.chunks]
        return pa.chunked_array(chunks, type=target)
    return _evolve_array(column, file_type, read_type)


def _evolve_array(array: pa.Array, file_type: DataType, read_type: DataType) -> pa.Array:
    target = to_arrow_type(read_type)
    if same_layout(file_type, read_type) or not _by_id(file_type, read_type):
        return array if array.type == target else array.cast(target)
    if array.offset:  # a slice: rebuild from buffers starting at 0 (Arrow needs aligned masks)
        array = pa.concat_arrays([array])
    mask = array.is_null() if array.null_count else None
    if read_type.root is TypeRoot.ROW:
        assert isinstance(array, pa.StructArray)
        old = {f.id: (i, f.type) for i, f in enumerate(file_type.fields)}
        children: list[pa.Array] = []
        for f, arrow_field in zip(read_type.fields, target, strict=True):
            found = old.get(f.id)
            if found is None:
                children.append(pa.nulls(len(array), arrow_field.type))
            else:
                children.append(_evolve_array(array.field(found[0]), found[1], f.type))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if read_type.root is TypeRoot.ARRAY:
        assert isinstance(array, pa.ListArray)
        values = _evolve_array(array.values, file_type.children[0], read_type.children[0])
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=mask)
    assert isinstance(array, pa.MapArray)
    items = _evolve_array(array.items, file_type.children[1], read_type.children[1])
    return pa.MapArray.from_arrays(array.offsets, array.keys, items, type=target, mask=mask)
