"""SchemaChange: the changes ``catalog.alter_table`` applies, built with its static methods.

A list of changes turns schema N into schema N+1 (:mod:`snaplake.commit.schema_alter`
applies them by Paimon's rules and writes the new schema file).

Source: Paimon / pypaimon ``SchemaChange`` (the same kinds and factory names),
``SchemaChange.Move``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, TypeAlias

import pyarrow as pa

from snaplake.store.format.types import DataType, data_type_from_arrow, parse_type

__all__ = [
    "AddColumn",
    "DropColumn",
    "Move",
    "MoveType",
    "RemoveOption",
    "RenameColumn",
    "SchemaChange",
    "SetOption",
    "TypeLike",
    "UpdateColumnComment",
    "UpdateColumnNullability",
    "UpdateColumnPosition",
    "UpdateColumnType",
    "UpdateComment",
]

TypeLike: TypeAlias = pa.DataType | DataType | str
"""A column type: an Arrow type (nullable), a Paimon :class:`DataType`, or
Paimon's SQL spelling (``"VARCHAR(20)"``, ``"DECIMAL(12, 2)"``, ``"BIGINT"``)."""


def _to_data_type(t: TypeLike) -> DataType:
    if isinstance(t, DataType):
        return t
    if isinstance(t, str):
        return parse_type(t)
    if isinstance(t, pa.DataType):
        return data_type_from_arrow(t, nullable=True)
    raise TypeError(
        f"a column type must be a pyarrow type, a Paimon type string or DataType: {t!r}"
    )


class MoveType(StrEnum):
    """Where :class:`Move` puts a column."""

    FIRST = "FIRST"
    AFTER = "AFTER"
    BEFORE = "BEFORE"
    LAST = "LAST"


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """A column position: first, last, or after/before ``reference_field_name``."""

    field_name: str
    type: MoveType
    reference_field_name: str | None = None


class SchemaChange:
    """One change of a table schema; build them with the static methods.

    Example::

        catalog.alter_table(
            "db.flights",
            [
                SchemaChange.add_column("delay_reason", pa.string(), comment="why"),
                SchemaChange.rename_column("dest", "destination"),
                SchemaChange.update_column_type("flight", pa.int64()),
                SchemaChange.set_option("snapshot.num-retained.min", "20"),
            ],
        )

    Source: Paimon / pypaimon ``SchemaChange`` (the same kinds and factory names).
    """

    kind: ClassVar[str] = ""

    @staticmethod
    def set_option(key: str, value: str) -> SetOption:
        """Set table option ``key`` to ``value`` (Paimon's key and value syntax)."""
        return SetOption(key=key, value=str(value))

    @staticmethod
    def remove_option(key: str) -> RemoveOption:
        """Remove table option ``key`` (it falls back to its default)."""
        return RemoveOption(key=key)

    @staticmethod
    def update_comment(comment: str | None) -> UpdateComment:
        """Set (or with ``None`` clear) the table comment."""
        return UpdateComment(comment=comment)

    @staticmethod
    def add_column(
        name: str,
        data_type: TypeLike,
        *,
        comment: str | None = None,
        after: str | None = None,
        first: bool = False,
    ) -> AddColumn:
        """Add a nullable column.

        It goes last (before the partition columns when the table option
        ``add-column-before-partition`` is true), first with ``first=True``,
        or after column ``after``.

        Raises:
            ValueError: both ``first`` and ``after``.
            UnsupportedTypeError: a type with no Paimon equivalent.
        """
        if first and after is not None:
            raise ValueError("pass first=True or after='column', not both")
        move = None
        if first:
            move = Move(field_name=name, type=MoveType.FIRST)
        elif after is not None:
            move = Move(field_name=name, type=MoveType.AFTER, reference_field_name=after)
        return AddColumn(
            field_name=name, data_type=_to_data_type(data_type), comment=comment, move=move
        )

    @staticmethod
    def rename_column(name: str, new_name: str) -> RenameColumn:
        """Rename a column; it keeps its field id, so old files read under the new name."""
        return RenameColumn(field_name=name, new_name=new_name)

    @staticmethod
    def drop_column(name: str) -> DropColumn:
        """Drop a column; old files keep it on disk but it is never read again."""
        return DropColumn(field_name=name)

    @staticmethod
    def update_column_type(name: str, data_type: TypeLike) -> UpdateColumnType:
        """Widen a column's type (see :data:`snaplake.store.format.type_casts.WIDENINGS`).

        The column keeps its nullability; change that with
        :meth:`update_column_nullability`.
        """
        return UpdateColumnType(field_name=name, new_type=_to_data_type(data_type))

    @staticmethod
    def update_column_nullability(name: str, nullable: bool) -> UpdateColumnNullability:  # noqa: FBT001 - the issue's public signature
        """Make a column nullable (``True``) or NOT NULL (``False``)."""
        return UpdateColumnNullability(field_name=name, nullable=nullable)

    @staticmethod
    def update_column_comment(name: str, comment: str | None) -> UpdateColumnComment:
        """Set (or with ``None`` clear) a column's comment."""
        return UpdateColumnComment(field_name=name, comment=comment)

    @staticmethod
    def update_column_position(
        name: str, *, first: bool = False, last: bool = False, after: str | None = None,
        before: str | None = None,
    ) -> UpdateColumnPosition:  # fmt: skip
        """Move a column: ``first``, ``last``, ``after="col"`` or ``before="col"`` (exactly one).

        Raises:
            ValueError: not exactly one position.
        """
        given = [first, last, after is not None, before is not None]
        if sum(given) != 1:
            raise ValueError("pass exactly one of first=True, last=True, after=..., before=...")
        if first:
            move = Move(field_name=name, type=MoveType.FIRST)
        elif last:
            move = Move(field_name=name, type=MoveType.LAST)
        elif after is not None:
            move = Move(field_name=name, type=MoveType.AFTER, reference_field_name=after)
        else:
            move = Move(field_name=name, type=MoveType.BEFORE, reference_field_name=before)
        return UpdateColumnPosition(move=move)


@dataclass(frozen=True, slots=True, kw_only=True)
class SetOption(SchemaChange):
    """Set a table option."""

    key: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveOption(SchemaChange):
    """Remove a table option."""

    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateComment(SchemaChange):
    """Set the table comment."""

    comment: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AddColumn(SchemaChange):
    """Add a column (``move`` = where; ``None`` = last)."""

    field_name: str
    data_type: DataType
    comment: str | None = None
    move: Move | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameColumn(SchemaChange):
    """Rename a column (same field id)."""

    field_name: str
    new_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DropColumn(SchemaChange):
    """Drop a column."""

    field_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateColumnType(SchemaChange):
    """Widen a column's type, keeping its nullability."""

    field_name: str
    new_type: DataType


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateColumnNullability(SchemaChange):
    """Change whether a column accepts NULL."""

    field_name: str
    nullable: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateColumnComment(SchemaChange):
    """Set a column's comment."""

    field_name: str
    comment: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateColumnPosition(SchemaChange):
    """Move a column."""

    move: Move
