"""Paimon data types: the value model, the schema JSON spelling, and the Arrow mapping.

This module owns three things:

* :class:`DataType` / :class:`DataField`, a small frozen value model of a
  Paimon type (root, length/precision/scale, nullability, children) that the
  BinaryRow codec, the stats and the bucket hash are driven by;
* the JSON form Paimon stores in ``schema/schema-<N>`` (atomic types as SQL
  strings such as ``"BIGINT NOT NULL"`` or ``"DECIMAL(10, 2)"``, nested types as
  objects ``{"type": "ARRAY", "element": ...}``), read by :func:`parse_type`
  and written by :meth:`DataType.to_json`;
* the mapping to and from Arrow (:func:`fields_from_arrow`,
  :func:`arrow_schema_from_fields`).

Arrow type each Paimon type reads back as (the same choice pypaimon makes;
``tests/unit/store/test_types.py`` checks it against vectors recorded from
pypaimon)::

    BOOLEAN                           pa.bool_()
    TINYINT / SMALLINT / INT / BIGINT pa.int8() / int16() / int32() / int64()
    FLOAT / DOUBLE                    pa.float32() / pa.float64()
    DECIMAL(p, s)                     pa.decimal128(p, s)
    CHAR(n) / VARCHAR(n) / STRING     pa.string()
    BINARY(n)                         pa.binary(n) (fixed_size_binary; pypaimon: pa.binary())
    VARBINARY(n) / BYTES              pa.binary()
    DATE                              pa.date32()
    TIME(p)                           pa.time32("ms")
    TIMESTAMP(p)                      pa.timestamp(u), u = s (p=0), ms (1-3), us (4-6), ns (7-9)
    TIMESTAMP(p) WITH LOCAL TIME ZONE the same unit, tz="UTC"
    ARRAY<T>                          pa.list_(pa.field("item", T, nullable=T.nullable))
    MAP<K, V>                         pa.map_(K, V) (key field not null)
    ROW<...>                          pa.struct(...)

Writing (Arrow to Paimon) accepts the canonical Arrow types above plus
``large_string``/``string_view`` (STRING), ``large_binary``/``binary_view``
(BYTES) and ``large_list``/``list_view`` (ARRAY). ``fixed_size_binary(n)``
is ``BINARY(n)`` both ways, so a table created from it reads back as it
(pypaimon maps it to ``BINARY(n)`` too, but reads ``BINARY(n)`` as
``pa.binary()``: snaplake keeps the length). Nanosecond timestamps are
refused: Paimon stores TIMESTAMP(7..9) in Parquet as INT96, which snaplake does
not write. Unsigned integers, dictionaries, durations and the other Arrow types
with no lossless Paimon counterpart raise :class:`UnsupportedTypeError` naming
the cast to apply.

This module imports nothing from snaplake except :mod:`snaplake.errors`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import pyarrow as pa

from snaplake.errors import UnsupportedTypeError

__all__ = [
    "MAX_DECIMAL_PRECISION",
    "MAX_LENGTH",
    "DataField",
    "DataType",
    "TypeRoot",
    "arrow_schema_from_fields",
    "data_type_from_arrow",
    "fields_from_arrow",
    "highest_field_id",
    "parse_field",
    "parse_fields",
    "parse_type",
    "reassign_field_ids",
    "to_arrow_field",
    "to_arrow_type",
    "variable_binary_schema",
    "variable_binary_type",
]

MAX_LENGTH = 2147483647
"""Length of ``STRING``/``BYTES`` (``VARCHAR``/``VARBINARY`` of Integer.MAX_VALUE)."""

MAX_DECIMAL_PRECISION = 38
"""Largest DECIMAL precision Paimon accepts."""

_MAX_COMPACT_DECIMAL_PRECISION = 18
_MAX_COMPACT_TIMESTAMP_PRECISION = 3


class TypeRoot(StrEnum):
    """The root of a Paimon type (``DataTypeRoot``), spelled as its SQL keyword."""

    BOOLEAN = "BOOLEAN"
    TINYINT = "TINYINT"
    SMALLINT = "SMALLINT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    CHAR = "CHAR"
    VARCHAR = "VARCHAR"
    BINARY = "BINARY"
    VARBINARY = "VARBINARY"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    TIMESTAMP_LTZ = "TIMESTAMP_LTZ"
    ARRAY = "ARRAY"
    MULTISET = "MULTISET"
    MAP = "MAP"
    ROW = "ROW"
    VARIANT = "VARIANT"
    BLOB = "BLOB"


_LENGTH_ROOTS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY})
_PRECISION_ROOTS = frozenset(
    {TypeRoot.DECIMAL, TypeRoot.TIME, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ}
)
_NESTED_ROOTS = frozenset({TypeRoot.ARRAY, TypeRoot.MULTISET, TypeRoot.MAP, TypeRoot.ROW})
_NUM_CHILDREN = {TypeRoot.ARRAY: 1, TypeRoot.MULTISET: 1, TypeRoot.MAP: 2}
_PRECISION_RANGE = {
    TypeRoot.DECIMAL: (1, MAX_DECIMAL_PRECISION),
    TypeRoot.TIME: (0, 9),
    TypeRoot.TIMESTAMP: (0, 9),
    TypeRoot.TIMESTAMP_LTZ: (0, 9),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DataField:
    """One named, id'd field of a ROW type or of a table schema.

    Attributes:
        id: Paimon field id; unique across the whole schema, nested fields included.
        name: Field name.
        type: Field type; its ``nullable`` is the field's nullability.
        description: Optional column comment (``"description"`` in JSON).
        default_value: Optional default value expression (``"defaultValue"``).

    Source:
        ``org.apache.paimon.types.DataField`` (``serializeJson``).
    """

    id: int
    name: str
    type: DataType
    description: str | None = None
    default_value: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """Return the field as Paimon writes it: ``{"id", "name", "type"[, ...]}``."""
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            out["description"] = self.description
        if self.default_value is not None:
            out["defaultValue"] = self.default_value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class DataType:
    """A Paimon data type.

    Attributes:
        root: The type root.
        nullable: False for ``... NOT NULL``.
        length: Byte/char length of CHAR, VARCHAR, BINARY, VARBINARY
            (:data:`MAX_LENGTH` for STRING/BYTES); None otherwise.
        precision: Digits of DECIMAL; fractional-second digits (0-9) of TIME,
            TIMESTAMP, TIMESTAMP_LTZ; None otherwise.
        scale: DECIMAL scale; None otherwise.
        children: Element type of ARRAY/MULTISET, (key, value) of MAP; empty otherwise.
        fields: Fields of ROW; empty otherwise.

    Raises:
        ValueError: (on construction) parameters inconsistent with ``root``.

    Source:
        ``org.apache.paimon.types.*Type`` (defaults, ranges, ``asSQLString``,
        ``serializeJson``).
    """

    root: TypeRoot
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    children: tuple[DataType, ...] = ()
    fields: tuple[DataField, ...] = ()

    def __post_init__(self) -> None:
        root = self.root
        if (self.length is not None) != (root in _LENGTH_ROOTS):
            raise ValueError(f"{root} length must be {'set' if root in _LENGTH_ROOTS else 'None'}")
        if self.length is not None and not 1 <= self.length <= MAX_LENGTH:
            raise ValueError(f"{root} length {self.length} is outside 1..{MAX_LENGTH}")
        if (self.precision is not None) != (root in _PRECISION_ROOTS):
            raise ValueError(f"{root} precision must be set exactly for {sorted(_PRECISION_ROOTS)}")
        if self.precision is not None:
            lo, hi = _PRECISION_RANGE[root]
            if not lo <= self.precision <= hi:
                raise ValueError(f"{root} precision {self.precision} is outside {lo}..{hi}")
        if (self.scale is not None) != (root is TypeRoot.DECIMAL):
            raise ValueError("scale is set exactly for DECIMAL")
        if self.scale is not None and not 0 <= self.scale <= (self.precision or 0):
            raise ValueError(f"DECIMAL scale {self.scale} is outside 0..{self.precision}")
        if len(self.children) != _NUM_CHILDREN.get(root, 0):
            raise ValueError(f"{root} takes {_NUM_CHILDREN.get(root, 0)} child types")
        if self.fields and root is not TypeRoot.ROW:
            raise ValueError("only ROW has fields")

    # -- accessors --------------------------------------------------------------
    @property
    def element(self) -> DataType:
        """Element type of an ARRAY or MULTISET."""
        if self.root not in (TypeRoot.ARRAY, TypeRoot.MULTISET):
            raise TypeError(f"{self.root} has no element type")
        return self.children[0]

    @property
    def key(self) -> DataType:
        """Key type of a MAP."""
        if self.root is not TypeRoot.MAP:
            raise TypeError(f"{self.root} has no key type")
        return self.children[0]

    @property
    def value(self) -> DataType:
        """Value type of a MAP."""
        if self.root is not TypeRoot.MAP:
            raise TypeError(f"{self.root} has no value type")
        return self.children[1]

    @property
    def is_nested(self) -> bool:
        """True for ARRAY, MULTISET, MAP and ROW."""
        return self.root in _NESTED_ROOTS

    @property
    def is_compact(self) -> bool:
        """True when BinaryRow stores the value entirely in its 8-byte fixed slot.

        DECIMAL is compact up to precision 18 (unscaled long), TIMESTAMP and
        TIMESTAMP_LTZ up to precision 3 (epoch millis); CHAR/VARCHAR/BINARY/
        VARBINARY depend on the value (up to 7 bytes inline) and count as
        not compact here, as do nested types.

        Source:
            ``BinaryRow.isInFixedLengthPart``, ``Decimal.isCompact``,
            ``Timestamp.isCompact``.
        """
        root = self.root
        if root is TypeRoot.DECIMAL:
            return (self.precision or 0) <= _MAX_COMPACT_DECIMAL_PRECISION
        if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
            return (self.precision or 0) <= _MAX_COMPACT_TIMESTAMP_PRECISION
        return root in _FIXED_ROOTS

    def with_nullable(self, *, nullable: bool) -> DataType:
        """Return this type with the given nullability (children unchanged)."""
        return self if nullable == self.nullable else replace(self, nullable=nullable)

    # -- serialisation ----------------------------------------------------------
    def sql(self) -> str:
        """Return Paimon's ``asSQLString`` spelling, e.g. ``"DECIMAL(10, 2) NOT NULL"``."""
        root = self.root
        if root is TypeRoot.VARCHAR:
            body = "STRING" if self.length == MAX_LENGTH else f"VARCHAR({self.length})"
        elif root is TypeRoot.VARBINARY:
            body = "BYTES" if self.length == MAX_LENGTH else f"VARBINARY({self.length})"
        elif root in (TypeRoot.CHAR, TypeRoot.BINARY):
            body = f"{root.value}({self.length})"
        elif root is TypeRoot.DECIMAL:
            body = f"DECIMAL({self.precision}, {self.scale})"
        elif root in (TypeRoot.TIME, TypeRoot.TIMESTAMP):
            body = f"{root.value}({self.precision})"
        elif root is TypeRoot.TIMESTAMP_LTZ:
            body = f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        elif root in (TypeRoot.ARRAY, TypeRoot.MULTISET):
            body = f"{root.value}<{self.children[0].sql()}>"
        elif root is TypeRoot.MAP:
            body = f"MAP<{self.children[0].sql()}, {self.children[1].sql()}>"
        elif root is TypeRoot.ROW:
            inner = ", ".join(f"`{f.name}` {f.type.sql()}" for f in self.fields)
            body = f"ROW<{inner}>"
        else:
            body = root.value
        return body if self.nullable else f"{body} NOT NULL"

    def to_json(self) -> str | dict[str, Any]:
        """Return the type as Paimon's ``DataType.serializeJson`` writes it.

        Atomic types are their SQL string; ARRAY/MULTISET are
        ``{"type": "ARRAY", "element": ...}``, MAP is
        ``{"type": "MAP", "key": ..., "value": ...}``, ROW is
        ``{"type": "ROW", "fields": [...]}``; ``" NOT NULL"`` is appended to
        the ``type`` string of a non-nullable nested type.
        """
        root = self.root
        if root not in _NESTED_ROOTS:
            return self.sql()
        head = root.value if self.nullable else f"{root.value} NOT NULL"
        if root in (TypeRoot.ARRAY, TypeRoot.MULTISET):
            return {"type": head, "element": self.children[0].to_json()}
        if root is TypeRoot.MAP:
            return {
                "type": head,
                "key": self.children[0].to_json(),
                "value": self.children[1].to_json(),
            }
        return {"type": head, "fields": [f.to_json_dict() for f in self.fields]}

    def __str__(self) -> str:
        return self.sql()


_ARROW_OF_PRIMITIVE_ROOT: dict[TypeRoot, pa.DataType] = {
    TypeRoot.BOOLEAN: pa.bool_(),
    TypeRoot.TINYINT: pa.int8(),
    TypeRoot.SMALLINT: pa.int16(),
    TypeRoot.INT: pa.int32(),
    TypeRoot.BIGINT: pa.int64(),
    TypeRoot.FLOAT: pa.float32(),
    TypeRoot.DOUBLE: pa.float64(),
}
"""The Paimon roots that map one-to-one to an Arrow type, in both directions."""
_PRIMITIVE_ROOT_OF_ARROW: dict[pa.DataType, TypeRoot] = {
    a: r for r, a in _ARROW_OF_PRIMITIVE_ROOT.items()
}
_FIXED_ROOTS = frozenset(_ARROW_OF_PRIMITIVE_ROOT) | {TypeRoot.DATE, TypeRoot.TIME}


# ---------------------------------------------------------------------------
# Parsing the schema JSON
# ---------------------------------------------------------------------------

_NOT_NULL_RE = re.compile(r"\s+NOT\s+NULL\s*$")
_NULL_RE = re.compile(r"\s+NULL\s*$")
_ATOMIC_RE = re.compile(
    r"""^(?P<name>[A-Z_]+)
        (?:\s+PRECISION)?                                  # DOUBLE PRECISION
        \s*(?:\(\s*(?P<p1>\d+)\s*(?:,\s*(?P<p2>\d+)\s*)?\))?
        (?P<suffix>(?:\s+[A-Z]+)*)$""",
    re.VERBOSE,
)
_SIMPLE = {
    "BOOLEAN": TypeRoot.BOOLEAN,
    "TINYINT": TypeRoot.TINYINT,
    "SMALLINT": TypeRoot.SMALLINT,
    "INT": TypeRoot.INT,
    "INTEGER": TypeRoot.INT,
    "BIGINT": TypeRoot.BIGINT,
    "FLOAT": TypeRoot.FLOAT,
    "DOUBLE": TypeRoot.DOUBLE,
    "DATE": TypeRoot.DATE,
    "VARIANT": TypeRoot.VARIANT,
    "BLOB": TypeRoot.BLOB,
}


def _parse_atomic(text: str) -> DataType:
    raw = text
    s = " ".join(text.strip().upper().split())
    nullable = True
    if _NOT_NULL_RE.search(" " + s):
        nullable = False
        s = _NOT_NULL_RE.sub("", " " + s).strip()
    elif _NULL_RE.search(" " + s):
        s = _NULL_RE.sub("", " " + s).strip()
    m = _ATOMIC_RE.match(s)
    if m is None:
        raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")
    name, suffix = m["name"], m["suffix"].strip()
    p1 = int(m["p1"]) if m["p1"] is not None else None
    p2 = int(m["p2"]) if m["p2"] is not None else None
    if "PRECISION" in s.split("(")[0] and name != "DOUBLE":
        raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")

    def _no_params() -> None:
        if p1 is not None or suffix:
            raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")

    try:
        if name in _SIMPLE:
            _no_params()
            return DataType(root=_SIMPLE[name], nullable=nullable)
        if name in ("STRING", "BYTES"):
            _no_params()
            root = TypeRoot.VARCHAR if name == "STRING" else TypeRoot.VARBINARY
            return DataType(root=root, nullable=nullable, length=MAX_LENGTH)
        if name in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            if p2 is not None or suffix:
                raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")
            return DataType(root=TypeRoot(name), nullable=nullable, length=1 if p1 is None else p1)
        if name in ("DECIMAL", "NUMERIC", "DEC"):
            if suffix:
                raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")
            precision = 10 if p1 is None else p1
            scale = 0 if p2 is None else p2
            return DataType(
                root=TypeRoot.DECIMAL, nullable=nullable, precision=precision, scale=scale
            )
        if name in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ"):
            if p2 is not None:
                raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")
            default = 0 if name == "TIME" else 6
            precision = default if p1 is None else p1
            if name == "TIMESTAMP_LTZ":
                if suffix:
                    raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")
                root = TypeRoot.TIMESTAMP_LTZ
            elif suffix in ("", "WITHOUT TIME ZONE"):
                root = TypeRoot(name)
            elif name == "TIMESTAMP" and suffix == "WITH LOCAL TIME ZONE":
                root = TypeRoot.TIMESTAMP_LTZ
            else:
                raise UnsupportedTypeError(f"cannot parse Paimon type {raw!r}")
            return DataType(root=root, nullable=nullable, precision=precision)
    except ValueError as exc:
        raise UnsupportedTypeError(f"invalid Paimon type {raw!r}: {exc}") from exc
    raise UnsupportedTypeError(f"unsupported Paimon type {raw!r}")


def parse_type(type_json: str | Mapping[str, Any]) -> DataType:
    """Parse the ``"type"`` value of a Paimon schema field.

    Accepts every spelling Paimon's parser accepts for the types snaplake
    models: SQL strings (``"INT"``, ``"INTEGER NOT NULL"``, ``"STRING"``,
    ``"VARCHAR(10)"``, ``"DECIMAL(38, 4)"``, ``"TIMESTAMP(3) WITH LOCAL TIME
    ZONE"``, ``"TIMESTAMP_LTZ(6)"`` as pypaimon writes it, ...) and JSON
    objects for ARRAY, MULTISET, MAP and ROW (nested ROW fields keep their ids).

    Args:
        type_json: A JSON string or object from a schema file.

    Returns:
        The parsed type.

    Raises:
        UnsupportedTypeError: the text is not a Paimon type snaplake knows
            (including VECTOR, GEOMETRY, GEOGRAPHY and SQL-string nested types).

    Source:
        ``org.apache.paimon.types.DataTypeJsonParser`` (keywords, defaults:
        CHAR/VARCHAR/BINARY/VARBINARY length 1, DECIMAL(10, 0), TIME(0),
        TIMESTAMP(6)).
    """
    if isinstance(type_json, str):
        return _parse_atomic(type_json)
    try:
        head_obj = type_json.get("type")
    except AttributeError:  # neither a string nor an object
        head_obj = None
    if not isinstance(head_obj, str):
        raise UnsupportedTypeError(f"cannot parse Paimon type {type_json!r}")
    head = head_obj
    nullable = "NOT NULL" not in head
    try:
        if head.startswith(("ARRAY", "MULTISET")):
            root = TypeRoot.ARRAY if head.startswith("ARRAY") else TypeRoot.MULTISET
            return DataType(
                root=root, nullable=nullable, children=(parse_type(type_json["element"]),)
            )
        if head.startswith("MAP"):
            key = parse_type(type_json["key"])
            value = parse_type(type_json["value"])
            return DataType(root=TypeRoot.MAP, nullable=nullable, children=(key, value))
        if head.startswith("ROW"):
            fields = tuple(parse_field(f) for f in type_json["fields"])
            return DataType(root=TypeRoot.ROW, nullable=nullable, fields=fields)
    except (KeyError, TypeError) as exc:
        raise UnsupportedTypeError(f"cannot parse Paimon type {type_json!r}") from exc
    raise UnsupportedTypeError(f"unsupported Paimon type {type_json!r}")


def parse_field(field_json: Mapping[str, Any]) -> DataField:
    """Parse one ``{"id", "name", "type"[, "description", "defaultValue"]}`` object.

    Raises:
        UnsupportedTypeError: the object or its type cannot be parsed.

    Source:
        ``DataTypeJsonParser.parseDataField``.
    """
    try:
        return DataField(
            id=int(field_json["id"]),
            name=str(field_json["name"]),
            type=parse_type(field_json["type"]),
            description=field_json.get("description"),
            default_value=field_json.get("defaultValue"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, UnsupportedTypeError):
            raise
        raise UnsupportedTypeError(f"cannot parse Paimon field {field_json!r}") from exc


def parse_fields(fields_json: Sequence[Mapping[str, Any]]) -> tuple[DataField, ...]:
    """Parse the ``fields`` list of a schema file (see :func:`parse_field`)."""
    return tuple(parse_field(f) for f in fields_json)


def _walk_fields(fields: Sequence[DataField]) -> Iterator[DataField]:
    for f in fields:
        yield f
        yield from _walk_type(f.type)


def _walk_type(t: DataType) -> Iterator[DataField]:
    for c in t.children:
        yield from _walk_type(c)
    yield from _walk_fields(t.fields)


def highest_field_id(fields: Sequence[DataField]) -> int:
    """Return the largest field id among ``fields`` and all nested ROW fields (-1 if none).

    Source:
        ``RowType.currentHighestFieldId``.
    """
    return max((f.id for f in _walk_fields(fields)), default=-1)


# ---------------------------------------------------------------------------
# Arrow -> Paimon
# ---------------------------------------------------------------------------

_INT_HINT = "cast to the next wider signed type (uint8->int16, uint16->int32, uint32->int64)"
_UNSIGNED_HINT = {
    8: "cast to pa.int16()",
    16: "cast to pa.int32()",
    32: "cast to pa.int64()",
    64: "cast to pa.int64() if the values fit, else to pa.decimal128(20, 0)",
}


def _refuse(pa_type: pa.DataType, hint: str) -> UnsupportedTypeError:
    return UnsupportedTypeError(f"Arrow type {pa_type} cannot be stored in Paimon; {hint}")


def data_type_from_arrow(pa_type: pa.DataType, *, nullable: bool = True) -> DataType:
    """Map an Arrow type to the Paimon type snaplake stores it as.

    Nested ROW fields get placeholder ids (0, 1, ...); :func:`fields_from_arrow`
    assigns the real ones.

    Args:
        pa_type: The Arrow type.
        nullable: The nullability of the Arrow field holding it.

    Returns:
        The Paimon type (see the module docstring for the table).

    Raises:
        UnsupportedTypeError: no lossless Paimon counterpart; the message says
            which cast to apply first.

    Source:
        pypaimon ``PyarrowFieldParser.to_paimon_type``, except that
        ``large_binary`` maps to BYTES (pypaimon: BLOB), nanosecond timestamps
        are refused, and time32("ms") maps to TIME(3); ``fixed_size_binary(n)``
        maps to BINARY(n) as in pypaimon.
    """
    t = pa.types
    simple: DataType | None = None
    primitive = _PRIMITIVE_ROOT_OF_ARROW.get(pa_type)
    if primitive is not None:
        simple = DataType(root=primitive)
    elif t.is_string(pa_type) or t.is_large_string(pa_type) or t.is_string_view(pa_type):
        simple = DataType(root=TypeRoot.VARCHAR, length=MAX_LENGTH)
    elif t.is_binary(pa_type) or t.is_large_binary(pa_type) or t.is_binary_view(pa_type):
        simple = DataType(root=TypeRoot.VARBINARY, length=MAX_LENGTH)
    elif t.is_fixed_size_binary(pa_type) and pa_type.byte_width >= 1:
        simple = DataType(root=TypeRoot.BINARY, length=pa_type.byte_width)
    elif t.is_date32(pa_type):
        simple = DataType(root=TypeRoot.DATE)
    elif t.is_decimal128(pa_type):
        simple = DataType(root=TypeRoot.DECIMAL, precision=pa_type.precision, scale=pa_type.scale)
    elif t.is_timestamp(pa_type):
        unit_precision = {"s": 0, "ms": 3, "us": 6}
        if pa_type.unit not in unit_precision:
            raise _refuse(
                pa_type,
                "cast to pa.timestamp('us'"
                + (f", tz={pa_type.tz!r}" if pa_type.tz else "")
                + ") (Paimon TIMESTAMP(9) lives in Parquet INT96, which snaplake does not write)",
            )
        root = TypeRoot.TIMESTAMP if pa_type.tz is None else TypeRoot.TIMESTAMP_LTZ
        simple = DataType(root=root, precision=unit_precision[pa_type.unit])
    elif t.is_time32(pa_type) and pa_type.unit == "ms":
        simple = DataType(root=TypeRoot.TIME, precision=3)
    if simple is not None:
        return simple.with_nullable(nullable=nullable)

    if t.is_list(pa_type) or t.is_large_list(pa_type) or t.is_list_view(pa_type):
        vf = pa_type.value_field
        element = data_type_from_arrow(vf.type, nullable=vf.nullable)
        return DataType(root=TypeRoot.ARRAY, nullable=nullable, children=(element,))
    if t.is_map(pa_type):
        if pa_type.keys_sorted:
            raise _refuse(pa_type, "cast to a map type with keys_sorted=False")
        key = data_type_from_arrow(pa_type.key_field.type, nullable=False)
        item = pa_type.item_field
        value = data_type_from_arrow(item.type, nullable=item.nullable)
        return DataType(root=TypeRoot.MAP, nullable=nullable, children=(key, value))
    if t.is_struct(pa_type):
        fields = tuple(
            DataField(id=i, name=f.name, type=data_type_from_arrow(f.type, nullable=f.nullable))
            for i, f in enumerate(pa_type)
        )
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise _refuse(pa_type, "rename the duplicated struct field names")
        return DataType(root=TypeRoot.ROW, nullable=nullable, fields=fields)

    if t.is_unsigned_integer(pa_type):
        raise _refuse(pa_type, _UNSIGNED_HINT.get(pa_type.bit_width, _INT_HINT))
    if t.is_dictionary(pa_type):
        raise _refuse(pa_type, f"decode it first (cast to {pa_type.value_type})")
    if t.is_float16(pa_type):
        raise _refuse(pa_type, "cast to pa.float32()")
    if t.is_decimal(pa_type):
        hint = (
            "cast to pa.decimal128(p, s) with p <= 38"
            if pa_type.precision <= MAX_DECIMAL_PRECISION
            else "Paimon decimals hold at most 38 digits; cast to pa.float64() or pa.string()"
        )
        raise _refuse(pa_type, hint)
    if t.is_date64(pa_type):
        raise _refuse(pa_type, "cast to pa.date32()")
    if t.is_time(pa_type):
        raise _refuse(pa_type, "cast to pa.time32('ms')")
    if t.is_duration(pa_type) or t.is_interval(pa_type):
        raise _refuse(pa_type, "cast to pa.int64() (a count of the unit)")
    if t.is_fixed_size_binary(pa_type):  # byte width 0: Paimon's BINARY holds >= 1 byte
        raise _refuse(pa_type, "cast to pa.binary()")
    if t.is_fixed_size_list(pa_type):
        raise _refuse(pa_type, "cast to pa.list_(value_type)")
    if t.is_null(pa_type):
        raise _refuse(pa_type, "cast the all-null column to the intended type")
    raise _refuse(pa_type, "cast to one of the supported types (see snaplake.store.format.types)")


def _assign_ids(t: DataType, counter: list[int]) -> DataType:
    """Re-number nested ROW fields depth-first, a field's children before the field."""
    if t.root is TypeRoot.ROW:
        new_fields = []
        for f in t.fields:
            child = _assign_ids(f.type, counter)
            counter[0] += 1
            new_fields.append(replace(f, id=counter[0], type=child))
        return replace(t, fields=tuple(new_fields))
    if t.children:
        return replace(t, children=tuple(_assign_ids(c, counter) for c in t.children))
    return t


def reassign_field_ids(t: DataType, highest_field_id: int) -> tuple[DataType, int]:
    """Give the nested ROW fields of ``t`` new ids after ``highest_field_id``.

    Ids run on from ``highest_field_id + 1``, depth-first, a field's
    children before the field (as at table creation).

    Returns:
        ``(t with new nested ids, the new highest field id)``.

    Source:
        ``org.apache.paimon.types.ReassignFieldId.reassign``.
    """
    counter = [highest_field_id]
    return _assign_ids(t, counter), counter[0]


def fields_from_arrow(schema: pa.Schema) -> tuple[list[dict[str, Any]], int]:
    """Build the ``fields`` list of a Paimon schema file from an Arrow schema.

    Top-level fields take ids 0, 1, 2, ... in order; each field's nested ROW
    fields are numbered from the same running counter right after it, the
    children of a nested field before the field itself, as Paimon's
    ``Schema.Builder.column`` + ``ReassignFieldId`` do. A field's Arrow
    ``description`` metadata, if any, becomes its Paimon description.

    Args:
        schema: Arrow schema of the table; any number of fields; names must be unique.

    Returns:
        ``(fields, highest_field_id)``: JSON-ready field objects and the
        largest id handed out (-1 for an empty schema).

    Raises:
        UnsupportedTypeError: a column type has no lossless Paimon counterpart,
            or two columns share a name. The message names the column and the
            cast to apply.

    Source:
        ``org.apache.paimon.schema.Schema.Builder.column``,
        ``org.apache.paimon.types.ReassignFieldId``; type spelling from
        ``DataType.serializeJson``.
    """
    names = list(schema.names)
    if len(set(names)) != len(names):
        raise UnsupportedTypeError(f"duplicate column names in {names}")
    counter = [-1]
    out: list[dict[str, Any]] = []
    for pa_field in schema:
        try:
            dtype = data_type_from_arrow(pa_field.type, nullable=pa_field.nullable)
        except UnsupportedTypeError as exc:
            raise UnsupportedTypeError(f"column {pa_field.name!r}: {exc}") from exc
        counter[0] += 1
        top_id = counter[0]
        dtype = _assign_ids(dtype, counter)
        description = None
        if pa_field.metadata and b"description" in pa_field.metadata:
            description = pa_field.metadata[b"description"].decode("utf-8")
        field = DataField(id=top_id, name=pa_field.name, type=dtype, description=description)
        out.append(field.to_json_dict())
    return out, counter[0]


# ---------------------------------------------------------------------------
# Paimon -> Arrow
# ---------------------------------------------------------------------------


def _timestamp_unit(precision: int) -> str:
    if precision == 0:
        return "s"
    if precision <= 3:
        return "ms"
    if precision <= 6:
        return "us"
    return "ns"


def to_arrow_type(dtype: DataType) -> pa.DataType:
    """Return the Arrow type a Paimon type reads back as (table in the module docstring).

    Raises:
        UnsupportedTypeError: MULTISET, VARIANT and BLOB have no Arrow mapping in snaplake.

    Source:
        pypaimon ``PyarrowFieldParser.from_paimon_type``, except that BINARY(n)
        reads as ``pa.binary(n)`` (pypaimon: ``pa.binary()``), the inverse of
        :func:`data_type_from_arrow`.
    """
    root = dtype.root
    simple = {
        **_ARROW_OF_PRIMITIVE_ROOT,
        TypeRoot.CHAR: pa.string(),
        TypeRoot.VARCHAR: pa.string(),
        TypeRoot.VARBINARY: pa.binary(),
        TypeRoot.DATE: pa.date32(),
        TypeRoot.TIME: pa.time32("ms"),
    }
    if root in simple:
        return simple[root]
    if root is TypeRoot.BINARY:
        return pa.binary(dtype.length or 1)
    if root is TypeRoot.DECIMAL:
        return pa.decimal128(dtype.precision or 10, dtype.scale or 0)
    if root is TypeRoot.TIMESTAMP:
        return pa.timestamp(_timestamp_unit(dtype.precision or 0))
    if root is TypeRoot.TIMESTAMP_LTZ:
        return pa.timestamp(_timestamp_unit(dtype.precision or 0), tz="UTC")
    if root is TypeRoot.ARRAY:
        el = dtype.children[0]
        return pa.list_(pa.field("item", to_arrow_type(el), nullable=el.nullable))
    if root is TypeRoot.MAP:
        key, value = dtype.children
        return pa.map_(
            pa.field("key", to_arrow_type(key), nullable=False),
            pa.field("value", to_arrow_type(value), nullable=value.nullable),
        )
    if root is TypeRoot.ROW:
        return pa.struct([to_arrow_field(f) for f in dtype.fields])
    raise UnsupportedTypeError(f"Paimon type {dtype.sql()} has no Arrow mapping in snaplake")


def to_arrow_field(field: DataField) -> pa.Field:
    """Return the Arrow field for a Paimon field (nullability and description kept).

    Raises:
        UnsupportedTypeError: see :func:`to_arrow_type`.
    """
    metadata = {b"description": field.description.encode()} if field.description else None
    return pa.field(
        field.name, to_arrow_type(field.type), nullable=field.type.nullable, metadata=metadata
    )


def variable_binary_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every ``fixed_size_binary(n)`` (BINARY(n)), nested ones too, as ``binary``.

    The form BINARY(n) takes where fixed-size binary is not wanted: Parquet
    data files (Java Paimon writes BYTE_ARRAY) and Spark (``BinaryType``);
    the values are the same bytes, and a cast back to the table's type
    restores the fixed size.
    """
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(variable_binary_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(variable_binary_type(t.key_type)),
            t.item_field.with_type(variable_binary_type(t.item_type)),
        )
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(variable_binary_type(f.type)) for f in t])
    return t


def variable_binary_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with :func:`variable_binary_type` applied to every field."""
    return pa.schema([f.with_type(variable_binary_type(f.type)) for f in schema])


def arrow_schema_from_fields(fields: Sequence[Mapping[str, Any] | DataField]) -> pa.Schema:
    """Build the Arrow schema data files are read and written with.

    The inverse of :func:`fields_from_arrow`: for every Arrow schema ``s`` it
    accepts, ``arrow_schema_from_fields(fields_from_arrow(s)[0])`` equals ``s``
    after canonicalisation (large/view string, binary and list types become
    their plain forms, any timestamp time zone becomes ``"UTC"``, list item
    fields are named ``"item"``), nullability included.

    Args:
        fields: The ``fields`` list of a schema file (JSON objects) or parsed
            :class:`DataField` values.

    Returns:
        The Arrow schema, one field per Paimon field, in order.

    Raises:
        UnsupportedTypeError: a field type cannot be parsed or has no Arrow mapping.

    Source:
        pypaimon ``PyarrowFieldParser.from_paimon_schema``.
    """
    parsed = [f if isinstance(f, DataField) else parse_field(f) for f in fields]
    return pa.schema([to_arrow_field(f) for f in parsed])
