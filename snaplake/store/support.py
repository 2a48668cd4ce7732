"""What snaplake can do with a table: the one place that refuses unsupported tables.

Every entry point that reads, writes, commits to or maintains a table (the
``Table`` facade, ``TableWrite``, ``FileStoreCommit``, each maintenance job,
hence Spark, the daemon and the CLI too) calls :func:`check_supported` first,
once per operation, before any file is read or written (``FileStore.check_supported``
is the same door for callers holding a table's store). It is the only door:
no caller runs the primary-key rules or the option refusals on its own. A
table that uses a feature snaplake does not implement is refused with
:class:`~snaplake.errors.UnsupportedTableError` instead of being read or
written as if the feature were absent, which would return superseded rows or
leave a table other engines cannot read.

Refused today:

* primary-key tables that break Paimon's rules or use what snaplake's merge
  tree does not implement (``TableSchema.check_primary_key_table``: dynamic or
  postponed buckets, levels or changelog files in a format or codec snaplake
  cannot write, and the options the registry declares ``primary-key`` with
  refused values: changelog producers, sequence groups,
  ...; ``docs/primary-key-tables.md`` §1);
* BINARY / VARBINARY partition keys: creating such a table, and writing,
  committing or maintaining one another engine created (Java names their
  directories by object identity, so no writer can spell a partition's
  directory again); reading one works;
* Paimon options whose value snaplake does not honour, for the operations
  they affect (each option's status and refused values are declared once in
  :mod:`snaplake.options.registry`);
* data files snaplake cannot write in the table's ``file.format`` (a
  compression that format lacks, Avro columns Java refuses): creating,
  writing and compacting; reading files of every format works.

Source: Paimon ``SchemaValidation`` (the create-time checks) and the option
semantics of ``CoreOptions``.
"""

from __future__ import annotations

from snaplake.errors import InvalidOptionError, UnsupportedTableError
from snaplake.options import Operation
from snaplake.options.registry import lookup_option, option_refusal
from snaplake.store.format.file_format import DataFileSpec
from snaplake.store.format.schema import SchemaManager, TableSchema
from snaplake.store.format.types import TypeRoot

__all__ = ["check_latest_supported", "check_supported"]


_BINARY_ROOTS = frozenset({TypeRoot.BINARY, TypeRoot.VARBINARY})


def check_supported(schema: TableSchema, operation: Operation) -> None:
    """Refuse ``operation`` on a table whose schema uses something snaplake cannot handle.

    Args:
        schema: The table's latest schema (its options hold for every
            operation, reads of older snapshots included, as in Paimon).
        operation: What the caller is about to do.

    Raises:
        UnsupportedTableError: a primary-key table snaplake cannot handle for
            ``operation`` (see ``TableSchema.check_primary_key_table``: its
            rules and the registry's ``primary-key`` refusals); or it has a
            BINARY/VARBINARY partition key and ``operation`` is not a read; or
            an option is set to a value snaplake does not honour for
            ``operation``. Nothing has been read or written.
        SchemaMismatchError, InvalidOptionError: a primary-key table breaks
            Paimon's rules (a key that is no column, an unknown merge engine, ...).
        InvalidOptionError: a ``deletion-vectors.*`` option has a value that
            does not parse (``deletion-vectors.bitmap64 = maybe``).

    Source:
        Paimon ``SchemaValidation.validateTableSchema`` for what a valid table
        is; the refusals are snaplake's own.
    """
    schema.check_primary_key_table(operation)  # the merge-tree rules (no-op on append tables)
    if operation is not Operation.READ:
        binary = [
            k
            for k, t in zip(schema.partition_keys, schema.partition_types, strict=True)
            if t.root in _BINARY_ROOTS
        ]
        if binary:
            raise UnsupportedTableError(
                f"partition key(s) {binary} are BINARY/VARBINARY: Paimon's Java writers name "
                "such partition directories by object identity, so no writer can find a "
                f"partition's directory again; snaplake reads such tables but refuses to "
                f"{operation.value} them (partition by a STRING column instead)",
                feature="BINARY partition key",
                operation=operation.value,
            )
    for key, value in schema.options.items():
        reason = option_refusal(key, value, operation)
        if reason is not None:
            raise UnsupportedTableError(
                f"option {key!r} = {value!r}: {reason}; snaplake refuses to "
                f"{operation.value} this table",
                feature=f"option {key!r} = {value!r}",
                operation=operation.value,
                key=key,
            )
    _check_deletion_vector_options(schema)
    if operation in (Operation.CREATE, Operation.WRITE, Operation.MAINTENANCE):
        spec = DataFileSpec.from_options(schema.core_options)
        reason = spec.refusal(schema.value_types)
        if reason is not None:
            raise UnsupportedTableError(
                f"new {spec.format.name} data files with file.compression = "
                f"{spec.compression!r}: {reason}; snaplake refuses to {operation.value} this "
                "table (change file.format or file.compression)",
                feature=f"{spec.format.name} data files",
                operation=operation.value,
                key="file.format",
            )


def _check_deletion_vector_options(schema: TableSchema) -> None:
    """Parse the ``deletion-vectors.*`` options snaplake reads (InvalidOptionError if bad).

    They decide which rows a read returns, so a bad value stops every operation.
    """
    for key, value in schema.options.items():
        option = lookup_option(key) if key.startswith("deletion-vectors.") else None
        if option is None or option.parse is None:
            continue
        try:
            option.value_of(value)
        except ValueError as exc:
            raise InvalidOptionError(
                f"option {key!r} = {value!r} is invalid: {exc}; fix it in the table options "
                f"({option.describe})",
                key=key,
                value=value,
            ) from exc


def check_latest_supported(schema_manager: SchemaManager, operation: Operation) -> None:
    """:func:`check_supported` on the table's latest schema (nothing to check without one).

    Raises:
        UnsupportedTableError: see :func:`check_supported`.
        CorruptMetadataError: the latest schema file cannot be decoded.
    """
    schema = schema_manager.latest()
    if schema is not None:
        check_supported(schema, operation)
