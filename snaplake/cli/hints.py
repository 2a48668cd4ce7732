"""Error messages of the ``snaplake`` command: library errors with hints that name commands.

The library's messages end with hints for Python callers
(``create it with catalog.create_table``); on the command line the same
error should point at a command (``snaplake create-table ...``). Each
known error keeps the library's statement of what is wrong (the text
before its first ``"; "``) and gets a command-line hint instead.
"""

from __future__ import annotations

from snaplake.errors import (
    DatabaseNotFoundError,
    SnapshotNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TagNotFoundError,
)

__all__ = ["cli_message"]


def _statement(exc: BaseException) -> str:
    """The library message without its trailing hint, on one line."""
    return " ".join(str(exc).split("; ")[0].split())


def cli_message(exc: BaseException, *, table: str | None) -> str | None:
    """Return the command-line message for ``exc``, or ``None`` to print the library's.

    Args:
        exc: What a command raised.
        table: The ``db.table`` the command opened, if any (used in hints).
    """
    name = table or "DB.TABLE"
    if isinstance(exc, TableNotFoundError):
        database = exc.identifier.partition(".")[0] if "." in exc.identifier else "DB"
        return (
            f"{_statement(exc)}; 'snaplake tables {database}' lists the tables, "
            f"'snaplake create-table {exc.identifier} --from-parquet FILE' creates it"
        )
    if isinstance(exc, DatabaseNotFoundError):
        return (
            f"{_statement(exc)}; 'snaplake databases' lists the databases "
            f"('snaplake create-table {exc.database}.TABLE --from-parquet FILE' creates one)"
        )
    if isinstance(exc, TableAlreadyExistsError):
        return f"{_statement(exc)}; 'snaplake write {name} FILES' writes into it"
    if isinstance(exc, SnapshotNotFoundError):
        return (
            f"{_statement(exc)}; 'snaplake snapshots {name}' lists the retained snapshots, "
            f"'snaplake tag list {name}' the tags"
        )
    if isinstance(exc, TagNotFoundError):
        return f"{_statement(exc)}; 'snaplake tag list {name}' lists the tags"
    return None
