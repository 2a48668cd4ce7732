"""Which column type changes a table may make: Paimon's implicit casts that lose nothing.

``alter_table`` lets a column's type change only along these widenings, so
every data file written before the change reads back exactly in the new
type (the reader casts the old column; value statistics stay valid); the
widenings are listed in :data:`WIDENINGS`.

Each is in Paimon's implicit casting rules (``DataTypeCasts``: a cast "without
losing information"). Paimon's rules go by type root only, so they also admit
casts that can lose (``BIGINT -> FLOAT``, ``DECIMAL(10, 2) -> DECIMAL(5, 2)``,
``TIMESTAMP -> DATE``, ``VARCHAR(10) -> VARCHAR(5)``); those are refused here,
as are targets Paimon's reader would pad (``CHAR(m)``, ``BINARY(m)``: blank
and zero padding), ``TIMESTAMP <-> TIMESTAMP_LTZ`` (converted through the
reader's local time zone) and TIMESTAMP precision above 6 (stored as INT96,
which snaplake does not write). Nullability may go from NOT NULL to NULL,
never back (as in ``DataTypeCasts.supportsCast`` without explicit casts).

Source: Paimon ``DataTypeCasts`` (implicit rules), ``CastExecutors``
(``castLiteralsWithEvolution``: which casts keep pushed-down filters exact),
``BinaryStringUtils.toCharacterString`` / ``toBinaryString`` (padding).
"""

from __future__ import annotations

from snaplake.store.format.types import MAX_LENGTH, DataType, TypeRoot

__all__ = ["WIDENINGS", "can_widen", "widening_refusal"]

WIDENINGS = """\
    TINYINT -> SMALLINT -> INT -> BIGINT           (any step up)
    TINYINT, SMALLINT -> FLOAT                     (exact in 24 mantissa bits)
    TINYINT, SMALLINT, INT -> DOUBLE               (exact in 53 mantissa bits)
    FLOAT -> DOUBLE
    integer -> DECIMAL(p, s) with p - s >= the integer's digits (3, 5, 10, 19)
    DECIMAL(p, s) -> DECIMAL(p', s') with s' >= s and p' - s' >= p - s
    CHAR(n), VARCHAR(n) -> VARCHAR(m), m >= n      (STRING is VARCHAR(2147483647))
    BINARY(n), VARBINARY(n) -> VARBINARY(m), m >= n (BYTES likewise)
    TIME(p) -> TIME(p'), p' >= p
    TIMESTAMP(p) -> TIMESTAMP(p'), p <= p' <= 6    (LTZ likewise, never across)
    ARRAY<T> -> ARRAY<T'>, MAP<K, V> -> MAP<K, V'>, MULTISET<T> -> MULTISET<T'>
                                                    where T -> T' and V -> V' widen
"""
"""The allowed column type changes, one per line (also used in error messages)."""

_INTEGER_DIGITS = {
    TypeRoot.TINYINT: 3,
    TypeRoot.SMALLINT: 5,
    TypeRoot.INT: 10,
    TypeRoot.BIGINT: 19,
}
_INTEGER_RANK = {TypeRoot.TINYINT: 1, TypeRoot.SMALLINT: 2, TypeRoot.INT: 3, TypeRoot.BIGINT: 4}
_EXACT_IN_FLOAT = frozenset({TypeRoot.TINYINT, TypeRoot.SMALLINT})
_EXACT_IN_DOUBLE = frozenset({TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.FLOAT})
_STRINGS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR})
_BINARIES = frozenset({TypeRoot.BINARY, TypeRoot.VARBINARY})
_MAX_WRITABLE_TIMESTAMP_PRECISION = 6


def _same(source: DataType, target: DataType) -> bool:
    """Equal ignoring the top-level nullability."""
    return source.with_nullable(nullable=True) == target.with_nullable(nullable=True)


def _widens_root(source: DataType, target: DataType) -> bool:
    s, t = source.root, target.root
    if s in _INTEGER_RANK and t in _INTEGER_RANK:
        return _INTEGER_RANK[s] <= _INTEGER_RANK[t]
    if t is TypeRoot.FLOAT:
        return s in _EXACT_IN_FLOAT
    if t is TypeRoot.DOUBLE:
        return s in _EXACT_IN_DOUBLE
    if t is TypeRoot.DECIMAL:
        integer_digits = (target.precision or 0) - (target.scale or 0)
        if s in _INTEGER_DIGITS:
            return integer_digits >= _INTEGER_DIGITS[s]
        if s is TypeRoot.DECIMAL:
            s_scale = source.scale or 0
            return (target.scale or 0) >= s_scale and integer_digits >= (
                source.precision or 0
            ) - s_scale
        return False
    if t is TypeRoot.VARCHAR:
        return s in _STRINGS and (target.length or MAX_LENGTH) >= (source.length or MAX_LENGTH)
    if t is TypeRoot.VARBINARY:
        return s in _BINARIES and (target.length or MAX_LENGTH) >= (source.length or MAX_LENGTH)
    if t is TypeRoot.TIME:
        return s is TypeRoot.TIME and (target.precision or 0) >= (source.precision or 0)
    if t in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return (
            s is t
            and (source.precision or 0) <= (target.precision or 0)
            and (target.precision or 0) <= _MAX_WRITABLE_TIMESTAMP_PRECISION
        )
    if t in (TypeRoot.ARRAY, TypeRoot.MULTISET) and s is t:
        return can_widen(source.children[0], target.children[0])
    if t is TypeRoot.MAP and s is t:
        return source.children[0] == target.children[0] and can_widen(
            source.children[1], target.children[1]
        )
    return False


def can_widen(source: DataType, target: DataType) -> bool:
    """Tell whether values of ``source`` read back exactly as ``target``.

    True for the identity (nullability aside) and for every widening in the
    module table; also where ``target`` only drops a NOT NULL. False when
    ``target`` is NOT NULL but ``source`` is nullable.

    Source: Paimon ``DataTypeCasts.supportsCast(source, target, false)``,
    narrowed to the lossless casts.
    """
    if source.nullable and not target.nullable:
        return False
    if _same(source, target):
        return True
    return _widens_root(source, target)


def widening_refusal(source: DataType, target: DataType) -> str | None:
    """Return why ``source -> target`` is not an allowed type change, ``None`` if it is.

    The text says what to do instead (a wider target, or a new column).
    """
    if can_widen(source, target.with_nullable(nullable=source.nullable)):
        return None
    t = target.root
    if t in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ) and (target.precision or 0) > 6:
        return (
            f"{source} cannot become {target}: TIMESTAMP precision above 6 is stored as INT96, "
            "which snaplake does not write; use precision 6 at most"
        )
    if t in (TypeRoot.CHAR, TypeRoot.BINARY):
        return (
            f"{source} cannot become {target}: readers pad old values to the fixed length; "
            f"use {'VARCHAR' if t is TypeRoot.CHAR else 'VARBINARY'}(n) instead"
        )
    return (
        f"{source} cannot become {target} without losing information; {source} "
        f"{_widens_to(source)}. To change it anyway, add a column of the new type, fill it "
        "and drop this one"
    )


def _widens_to(source: DataType) -> str:
    """What ``source`` may become, in one short phrase (its line of :data:`WIDENINGS`)."""
    s = source.root
    if s in _INTEGER_DIGITS:
        wider = [r.value for r, rank in _INTEGER_RANK.items() if rank > _INTEGER_RANK[s]]
        wider += ["FLOAT"] if s in _EXACT_IN_FLOAT else []
        wider += ["DOUBLE"] if s in _EXACT_IN_DOUBLE else []
        wider.append(f"DECIMAL(p, s) with p - s >= {_INTEGER_DIGITS[s]}")
        return "widens only to " + " or ".join(filter(None, (", ".join(wider[:-1]), wider[-1])))
    phrases = {
        TypeRoot.FLOAT: "widens only to DOUBLE",
        TypeRoot.DECIMAL: "widens only to DECIMAL(p', s') with s' >= s and p' - s' >= p - s",
        TypeRoot.CHAR: "widens only to VARCHAR(m) or STRING with m >= its length",
        TypeRoot.VARCHAR: "widens only to VARCHAR(m) or STRING with m >= its length",
        TypeRoot.BINARY: "widens only to VARBINARY(m) or BYTES with m >= its length",
        TypeRoot.VARBINARY: "widens only to VARBINARY(m) or BYTES with m >= its length",
        TypeRoot.TIME: "widens only to TIME(p') with p' >= p",
        TypeRoot.TIMESTAMP: "widens only to TIMESTAMP(p') with p <= p' <= 6",
        TypeRoot.TIMESTAMP_LTZ: "widens only to TIMESTAMP_LTZ(p') with p <= p' <= 6",
        TypeRoot.ARRAY: "changes only by widening its element type",
        TypeRoot.MULTISET: "changes only by widening its element type",
        TypeRoot.MAP: "changes only by widening its value type",
    }
    return phrases.get(s, "has no wider type")
