"""How a list of SchemaChange turns schema N into schema N+1, by Paimon's rules.

``catalog.alter_table(identifier, [SchemaChange...])`` applies the changes in
order to the latest schema and writes ``schema/schema-<N+1>``
create-if-absent (:func:`commit_schema_changes`). Field ids are never
reused: an added column takes ``highestFieldId + 1`` (its nested fields the
ids after it), a renamed or retyped column keeps its id, a dropped column's
id stays retired. Readers map every data file to the current schema by id.

Rules (each refused with a :class:`SchemaChangeError` naming it; nothing is
written):

* partition keys and primary keys cannot be dropped, renamed or retyped;
  bucket-key columns cannot be dropped or retyped (the bucket hash of the
  key's bytes would change); renaming one renames it in ``bucket-key``;
* a column that an option names cannot be dropped (``sequence.field``,
  ``rowkind.field``, ``fields.<col>.*`` such as ``aggregate-function``;
  Paimon's ``validateFieldsPrefix`` / ``validateSequenceField``); renaming
  one renames it in ``sequence.field`` and ``fields.<col>.*`` keys, but
  ``rowkind.field`` (immutable, not renamed by Paimon) pins its column's name;
* options ``fields.<col>.*`` must name columns; on a primary-key table the
  new schema must pass table creation's primary-key checks (merge engine,
  aggregate functions fitting their column types, ``sequence.field`` /
  ``rowkind.field`` columns, reserved ``_KEY_`` / system names), and an
  option snaplake does not implement cannot be introduced by an alter;
* nested fields of a ROW column cannot be added, dropped, renamed or retyped
  (``update_column_type`` of a ROW, ARRAY or MAP changes only along the
  widenings; dotted names are not nested paths): snaplake reads nested
  changes other engines made, by nested field id;
* a type changes only along the lossless implicit casts of
  :mod:`snaplake.store.format.type_casts`; ``update_column_type`` keeps the
  column's nullability;
* an added column is nullable (Paimon refuses ``NOT NULL`` on any table);
* dropping a column refuses to leave no column outside the partition keys;
* NULL -> NOT NULL only with ``alter-column-null-to-not-null.disabled = false``
  and only on a table without snapshots (the old files cannot be checked);
  a primary key cannot become nullable;
* options: ``type`` never changes; Paimon's immutable options (``bucket-key``,
  ``merge-engine``, ``primary-key``, ``partition``, ...) and ``bucket`` change
  only while the table has no snapshot (snaplake does not rescale buckets);
  the new option set must parse and pass table creation's checks;
* comments that are Paimon column directives (``__BLOB_FIELD``, ...) are
  refused: snaplake stores no BLOB or VECTOR columns.

Source: Paimon ``SchemaManager.commitChanges`` / ``generateTableSchema``
(change semantics, ``add-column-before-partition``, ``applyMove``, rename of
option keys and values), ``SchemaManager.checkAlterTableOption`` /
``checkResetTableOption``, ``CoreOptions.IMMUTABLE_OPTIONS``,
``SchemaManager.applyRenameColumnsToOptions``,
``SchemaValidation.validateTableSchema`` (``validateFieldsPrefix``,
``validateSequenceField``, the rowkind field, ``validateMergeFunction``).
The publish retries lost races with the commit path's
:class:`~snaplake.commit.retry.RetryPolicy`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from snaplake.commit.retry import RetryPolicy
from snaplake.errors import (
    ColumnAlreadyExistsError,
    ColumnNotFoundError,
    InvalidOptionError,
    SchemaChangeError,
    SchemaConflictError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedTableError,
)
from snaplake.options import Operation
from snaplake.store.format.schema import SchemaManager, TableSchema, check_field_options
from snaplake.store.format.schema_change import (
    AddColumn,
    DropColumn,
    Move,
    MoveType,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnComment,
    UpdateColumnNullability,
    UpdateColumnPosition,
    UpdateColumnType,
    UpdateComment,
)
from snaplake.store.format.type_casts import widening_refusal
from snaplake.store.format.types import DataField, parse_field, reassign_field_ids
from snaplake.store.support import check_supported

__all__ = ["IMMUTABLE_OPTIONS", "apply_schema_changes", "commit_schema_changes"]

IMMUTABLE_OPTIONS = frozenset(
    {
        "type", "bucket-key", "bucket-function.type", "data-file.path-directory",
        "merge-engine", "sequence.snapshot-ordering", "aggregation.remove-record-on-delete",
        "partial-update.remove-record-on-delete",
        "partial-update.remove-record-on-sequence-group", "rowkind.field", "primary-key",
        "primary-key.nullable", "partition", "dynamic-bucket.initial-buckets",
        "force-lookup", "row-tracking.enabled", "data-evolution.enabled",
        "index-file-in-data-file-dir", "blob-field", "blob-descriptor-field",
        "blob-view-field", "pk-clustering-override",
    }
)  # fmt: skip
"""Options Paimon marks ``@Immutable``: they cannot change once the table has a snapshot."""

_REQUIRED_OPTIONS = ("bucket", "file.format")
_NULL_TO_NOT_NULL_DISABLED = "alter-column-null-to-not-null.disabled"
_ADD_COLUMN_BEFORE_PARTITION = "add-column-before-partition"
_DIRECTIVES = ("__BLOB_FIELD", "__BLOB_DESCRIPTOR_FIELD", "__BLOB_VIEW_FIELD", "__VECTOR_FIELD")
# Option keys "fields.<column>.<suffix>" renamed with their column (Paimon's list).
_FIELD_OPTION_SUFFIXES = (
    "aggregate-function", "ignore-retract", "distinct", "list-agg-delimiter",
    "map.storage-layout", "map.shared-shredding.max-columns",
    "map.shared-shredding.column-placement-policy",
)  # fmt: skip
# Option keys "fields.<columns>.<suffix>" whose key and value both hold column names.
_FIELD_GROUP_SUFFIXES = ("sequence-group", "nested-key")


class _Draft:
    """The schema being built from the old one, change by change."""

    def __init__(self, old: TableSchema, has_snapshots: Callable[[], bool]) -> None:
        self.old = old
        self.fields: list[DataField] = [parse_field(f) for f in old.fields]
        self.highest = old.highest_field_id
        self.options: dict[str, str] = dict(old.options)
        self.comment = old.comment
        self._has_snapshots = has_snapshots
        self._snapshots: bool | None = None
        self.renames: dict[str, str] = {}

    def has_snapshots(self) -> bool:
        if self._snapshots is None:
            self._snapshots = self._has_snapshots()
        return self._snapshots

    def index(self, name: str) -> int:
        for i, f in enumerate(self.fields):
            if f.name == name:
                return i
        self.refuse_nested_path(name)
        raise ColumnNotFoundError(
            f"column {name!r} does not exist; the table has {[f.name for f in self.fields]}",
            column=name,
        )

    def refuse_nested_path(self, name: str) -> None:
        """A dotted name whose head is a ROW/ARRAY/MAP column means a nested field: refused."""
        head = name.split(".", 1)[0]
        if "." in name and any(f.name == head and f.type.is_nested for f in self.fields):
            raise SchemaChangeError(
                f"{name!r} names a field nested in column {head!r}; snaplake does not change "
                "nested fields (it reads nested changes other engines made). Add a new "
                f"top-level column, or replace {head!r}: add the new ROW column, fill it, "
                "drop the old one",
                rule="nested-column",
            )

    def assert_absent(self, name: str) -> None:
        if any(f.name == name for f in self.fields):
            raise ColumnAlreadyExistsError(f"column {name!r} already exists", column=name)

    def key_roles(self, name: str) -> list[str]:
        roles = []
        if name in self.old.partition_keys:
            roles.append("partition key")
        if name in self.old.primary_keys:
            roles.append("primary key")
        return roles


def _refuse_keys(draft: _Draft, name: str, action: str) -> None:
    roles = draft.key_roles(name)
    if roles:
        raise SchemaChangeError(
            f"cannot {action} column {name!r}: it is a {' and '.join(roles)}; partition and "
            "primary keys are fixed when the table is created",
            rule=roles[0].replace(" ", "-"),
        )


def _option_uses(options: Mapping[str, str], name: str) -> list[str]:
    """Option keys whose key or value names column ``name``."""
    uses = []
    for key, value in options.items():
        if (key == "sequence.field" and name in _names(value)) or (
            key == "rowkind.field" and value.strip() == name
        ):
            uses.append(key)
        elif key.startswith("fields.") and key.count(".") >= 2:
            cols = key[len("fields.") :].rsplit(".", 1)[0]
            group = key.endswith((".sequence-group", ".nested-key"))
            if name in _names(cols) or (group and name in _names(value)):
                uses.append(key)
    return sorted(uses)


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _refuse_option_columns(draft: _Draft, name: str, action: str) -> None:
    if action == "drop":
        uses = _option_uses(draft.options, name)
    else:  # Paimon renames columns in sequence.field and fields.* keys, not in rowkind.field
        uses = ["rowkind.field"] if draft.options.get("rowkind.field", "").strip() == name else []
    if uses:
        raise SchemaChangeError(
            f"cannot {action} column {name!r}: option(s) {uses} name it; remove or change "
            "those options first (options that fix a table's layout cannot change once it "
            "has snapshots)",
            rule="option-column",
        )


def _check_supported(old: TableSchema, new: TableSchema) -> None:
    """Table creation's checks (``check_supported(CREATE)``), on the altered schema.

    Something snaplake does not implement (an option value, a primary-key
    feature) is refused only when this alter introduces it: a table that
    already had it stays alterable.
    """
    try:
        check_supported(new, Operation.CREATE)
    except UnsupportedTableError as exc:
        try:
            check_supported(old, Operation.CREATE)
        except UnsupportedTableError as before:
            if (before.key, before.feature) == (exc.key, exc.feature):
                return
        raise


def _refuse_directive(comment: str | None) -> None:
    if comment is not None and comment.strip().startswith(_DIRECTIVES):
        raise SchemaChangeError(
            f"comment {comment!r} is a Paimon column directive (BLOB/VECTOR columns), which "
            "snaplake does not support; use another comment",
            rule="column-directive",
        )


def _set_option(draft: _Draft, key: str, value: str | None) -> None:
    old_value = draft.options.get(key)
    if value is not None and old_value == value:
        return
    if key == "type":
        raise SchemaChangeError("option 'type' cannot change", rule="immutable-option")
    if key in IMMUTABLE_OPTIONS and draft.has_snapshots():
        raise SchemaChangeError(
            f"option {key!r} cannot change once the table has snapshots (Paimon marks it "
            "immutable); create a new table with the option and copy the data",
            rule="immutable-option",
        )
    if key == "bucket" and draft.has_snapshots():
        raise SchemaChangeError(
            "option 'bucket' cannot change on a table with snapshots: snaplake does not "
            "rescale buckets (Paimon needs an overwrite of every partition); create a new "
            "table with the new bucket count and copy the data",
            rule="bucket-rescale",
        )
    if value is None:
        draft.options.pop(key, None)
    else:
        draft.options[key] = value


def _insert(draft: _Draft, field: DataField, move: Move | None) -> None:
    fields = draft.fields
    if move is None or move.type is MoveType.LAST:
        index = len(fields)
        before_partition = draft.options.get(_ADD_COLUMN_BEFORE_PARTITION, "false")
        if move is None and before_partition.strip().lower() == "true":
            keys = set(draft.old.partition_keys)
            index = next((i for i, f in enumerate(fields) if f.name in keys), len(fields))
    elif move.type is MoveType.FIRST:
        index = 0
    else:
        ref = draft.index(move.reference_field_name or "")
        index = ref + 1 if move.type is MoveType.AFTER else ref
    fields.insert(index, field)


def _move(draft: _Draft, move: Move) -> None:
    """Paimon ``SchemaManager.applyMove``."""
    fields = draft.fields
    i = draft.index(move.field_name)
    if move.type in (MoveType.FIRST, MoveType.LAST):
        target = 0 if move.type is MoveType.FIRST else len(fields) - 1
        if target == i:
            raise SchemaChangeError(
                f"column {move.field_name!r} is already {move.type.value.lower()}",
                rule="move-itself",
            )
    else:
        ref = draft.index(move.reference_field_name or "")
        if ref == i:
            raise SchemaChangeError(
                f"cannot move column {move.field_name!r} relative to itself", rule="move-itself"
            )
        target = ref
        if move.type is MoveType.AFTER and i > ref:
            target += 1
        if move.type is MoveType.BEFORE and i < ref:
            target -= 1
        target = min(target, len(fields) - 1)
    fields.insert(target, fields.pop(i))


def _update_field(draft: _Draft, column: str, **changes: Any) -> DataField:
    i = draft.index(column)
    draft.fields[i] = replace(draft.fields[i], **changes)
    return draft.fields[i]


def _apply_one(draft: _Draft, change: SchemaChange) -> None:
    if isinstance(change, SetOption):
        _set_option(draft, change.key, change.value)
    elif isinstance(change, RemoveOption):
        if change.key in _REQUIRED_OPTIONS:
            raise SchemaChangeError(
                f"option {change.key!r} cannot be removed: every schema states it; set it instead",
                rule="required-option",
            )
        _set_option(draft, change.key, None)
    elif isinstance(change, UpdateComment):
        draft.comment = change.comment
    elif isinstance(change, AddColumn):
        if not change.data_type.nullable:
            raise SchemaChangeError(
                f"column {change.field_name!r} cannot be added as NOT NULL: rows written "
                "before would have no value (Paimon refuses it); add it nullable",
                rule="not-null",
            )
        _refuse_directive(change.comment)
        draft.refuse_nested_path(change.field_name)
        draft.assert_absent(change.field_name)
        field_id = draft.highest + 1
        dtype, draft.highest = reassign_field_ids(change.data_type, field_id)
        field = DataField(id=field_id, name=change.field_name, type=dtype,
                          description=change.comment)  # fmt: skip
        _insert(draft, field, change.move)
    elif isinstance(change, RenameColumn):
        _refuse_keys(draft, change.field_name, "rename")
        draft.index(change.field_name)
        _refuse_option_columns(draft, change.field_name, "rename")
        draft.assert_absent(change.new_name)
        _update_field(draft, change.field_name, name=change.new_name)
        draft.renames[change.field_name] = change.new_name
    elif isinstance(change, DropColumn):
        _refuse_keys(draft, change.field_name, "drop")
        if change.field_name in _bucket_keys(draft.options):
            raise SchemaChangeError(
                f"cannot drop column {change.field_name!r}: it is a bucket key "
                f"(bucket-key = {draft.options.get('bucket-key')!r})",
                rule="bucket-key",
            )
        index = draft.index(change.field_name)
        _refuse_option_columns(draft, change.field_name, "drop")
        del draft.fields[index]
        keys = set(draft.old.partition_keys)
        if all(f.name in keys for f in draft.fields):
            raise SchemaChangeError(
                f"cannot drop column {change.field_name!r}: it is the last column outside "
                "the partition keys; a table needs at least one value column",
                rule="last-value-column",
            )
    elif isinstance(change, UpdateColumnType):
        _refuse_keys(draft, change.field_name, "change the type of")
        if change.field_name in _bucket_keys(draft.options):
            raise SchemaChangeError(
                f"cannot change the type of column {change.field_name!r}: it is a bucket key "
                "and the bucket of every row hashes its bytes",
                rule="bucket-key",
            )
        old = draft.fields[draft.index(change.field_name)].type
        target = change.new_type.with_nullable(nullable=old.nullable)
        refusal = widening_refusal(old, target)
        if refusal is not None:
            raise SchemaChangeError(
                f"column {change.field_name!r}: {refusal}", rule="type-widening"
            )
        _update_field(draft, change.field_name, type=target)
    elif isinstance(change, UpdateColumnNullability):
        field = draft.fields[draft.index(change.field_name)]
        if change.nullable and change.field_name in draft.old.primary_keys:
            raise SchemaChangeError(
                f"primary key {change.field_name!r} cannot become nullable", rule="primary-key"
            )
        if field.type.nullable and not change.nullable:
            disabled = draft.options.get(_NULL_TO_NOT_NULL_DISABLED, "true").strip().lower()
            if disabled != "false":
                raise SchemaChangeError(
                    f"column {change.field_name!r} cannot change from NULL to NOT NULL "
                    f"(table option {_NULL_TO_NOT_NULL_DISABLED!r} = 'true', Paimon's default)",
                    rule="not-null",
                )
            if draft.has_snapshots():
                raise SchemaChangeError(
                    f"column {change.field_name!r} cannot become NOT NULL on a table with "
                    "snapshots: snaplake cannot prove the existing files hold no NULL",
                    rule="not-null",
                )
        _update_field(
            draft, change.field_name, type=field.type.with_nullable(nullable=change.nullable)
        )
    elif isinstance(change, UpdateColumnComment):
        _refuse_directive(change.comment)
        _update_field(draft, change.field_name, description=change.comment)
    elif isinstance(change, UpdateColumnPosition):
        _move(draft, change.move)
    else:
        raise TypeError(f"not a SchemaChange: {change!r}")


def _bucket_keys(options: Mapping[str, str]) -> list[str]:
    text = options.get("bucket-key") or ""
    return [k.strip() for k in text.split(",") if k.strip()]


def _rename_in_options(options: dict[str, str], renames: Mapping[str, str]) -> dict[str, str]:
    """Paimon ``applyRenameColumnsToOptions``: column names inside option keys and values."""
    if not renames:
        return options

    def names(text: str) -> str:
        return ",".join(renames.get(n, n) for n in text.split(","))

    out = dict(options)
    for key in ("bucket-key", "sequence.field"):
        if out.get(key, "").strip():
            out[key] = names(out[key])
    for old, new in renames.items():
        for suffix in _FIELD_OPTION_SUFFIXES:
            k = f"fields.{old}.{suffix}"
            if k in out:
                out[f"fields.{new}.{suffix}"] = out.pop(k)
    for key in list(options):
        for suffix in _FIELD_GROUP_SUFFIXES:
            if key.startswith("fields.") and key.endswith(f".{suffix}") and key in out:
                cols = key[len("fields.") : -len(suffix) - 1]
                value = out.pop(key)
                out[f"fields.{names(cols)}.{suffix}"] = names(value)
    return out


def apply_schema_changes(
    old: TableSchema,
    changes: Sequence[SchemaChange],
    *,
    has_snapshots: Callable[[], bool],
    time_millis: int | None = None,
) -> TableSchema:
    """Apply ``changes`` in order to ``old`` and return schema ``old.id + 1``.

    Args:
        old: The latest schema.
        changes: The changes, applied one after another (a later change sees
            the earlier ones: add then rename works).
        has_snapshots: Tells whether the table has a snapshot; called at most
            once, only when a rule depends on it.
        time_millis: Creation time of the new schema (default: now).

    Returns:
        The new schema; nothing is written.

    Raises:
        SchemaChangeError: a change breaks a rule (see the module docstring);
            ``ColumnNotFoundError`` / ``ColumnAlreadyExistsError`` for names.
        InvalidOptionError: an option value does not parse.
        UnsupportedTypeError: a type has no Paimon/Arrow equivalent.
        UnsupportedTableError: the change introduces something snaplake
            refuses at table creation (an option value, a primary-key feature).

    Source: Paimon ``SchemaManager.generateTableSchema``.
    """
    draft = _Draft(old, has_snapshots)
    for change in changes:
        _apply_one(draft, change)
    options = _rename_in_options(draft.options, draft.renames)
    new = TableSchema(
        id=old.id + 1,
        fields=tuple(f.to_json_dict() for f in draft.fields),
        highest_field_id=draft.highest,
        partition_keys=old.partition_keys,
        primary_keys=old.primary_keys,
        options=options,
        comment=draft.comment,
        time_millis=int(time.time() * 1000) if time_millis is None else time_millis,
    )
    try:  # the check create_table makes (in validate), first: its rule is option-column
        check_field_options(new.field_names, new.options)
    except InvalidOptionError as exc:
        raise SchemaChangeError(str(exc), rule="option-column") from exc
    try:
        new.validate()
        _check_supported(old, new)
    except SchemaMismatchError as exc:
        raise SchemaChangeError(str(exc), rule="table-schema") from exc
    new.arrow_schema  # noqa: B018 - every type must map to Arrow (UnsupportedTypeError)
    return new


def commit_schema_changes(
    manager: SchemaManager,
    changes: Sequence[SchemaChange],
    *,
    has_snapshots: Callable[[], bool],
    identifier: str,
    retry_policy: RetryPolicy | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
) -> TableSchema:
    """Write the changes as ``schema-<N+1>``; on a lost race re-apply them to the winner's.

    Two alters race for the same ``schema-<N+1>`` (create-if-absent: one
    wins). The loser waits as the commit path does (the
    :class:`~snaplake.commit.retry.RetryPolicy`), reads the winner's schema
    and applies its changes again: changes that still fit (two adds of
    different columns, an option and a rename) land as ``schema-<N+2>``;
    changes that clash raise :class:`SchemaConflictError` and nothing of
    them is written.

    Args:
        manager: The table's SchemaManager.
        changes: At least one change.
        has_snapshots: See :func:`apply_schema_changes`.
        identifier: ``db.table`` for messages.
        retry_policy: Backoff and bounds of the retries after lost races;
            ``None`` = the table's ``commit.*`` options (``commit.max-retries``,
            ``commit.timeout``, ``commit.min-retry-wait``,
            ``commit.max-retry-wait``) in the latest schema.
        clock: Monotonic seconds (for ``commit.timeout``; tests inject it).
        sleep: Sleeps seconds (tests inject one that does not).
        rng: Uniform [0, 1) numbers for the backoff jitter.

    Returns:
        The schema written.

    Raises:
        ValueError: no changes.
        TableNotFoundError: the table has no schema (dropped).
        SchemaChangeError: a rule refuses a change against the latest schema.
        SchemaConflictError: a concurrent alter won and the changes no longer apply.
        CommitRetriesExhaustedError: every attempt lost the race for the next
            schema file within the policy's retries and timeout; nothing of
            these changes was written, and running them again is safe.

    Storage:
        Creates one ``schema/schema-<N>`` file (create-if-absent; never overwritten).

    Source: Paimon ``SchemaManager.commitChanges`` (the retry loop).
    """
    if not changes:
        raise ValueError("alter_table needs at least one SchemaChange")
    first_id: int | None = None
    policy = retry_policy
    start = clock()
    attempts = 0
    while True:
        old = manager.latest()
        if old is None:
            raise TableNotFoundError(f"table {identifier} does not exist", identifier=identifier)
        try:
            new = apply_schema_changes(old, changes, has_snapshots=has_snapshots)
        except SchemaChangeError as exc:
            if first_id is None or first_id == old.id:
                raise
            raise SchemaConflictError(
                f"a concurrent alter of {identifier} wrote schema {old.id} first and these "
                f"changes no longer apply to it: {exc}",
                schema_id=old.id,
            ) from exc
        if first_id is None:
            first_id = old.id
        if policy is None:
            policy = RetryPolicy.from_options(old.core_options)
        attempts += 1
        try:
            return manager.create(new)
        except TableAlreadyExistsError:
            # Lost the race for schema-<N+1>: wait, then re-apply to the winner's schema.
            policy.wait_or_give_up(
                attempts=attempts, elapsed_s=clock() - start,
                lost=f"alter of {identifier} lost the race for a new schema",
                sleep=sleep, rng=rng,
            )  # fmt: skip
