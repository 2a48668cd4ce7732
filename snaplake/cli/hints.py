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

__all__ = ["cli_message", "with_tag_hint"]


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
        if " --tag " in _statement(exc):  # with_tag_hint named the tag that holds it
            return _statement(exc)
        return (
            f"{_statement(exc)}; 'snaplake snapshots {name}' lists the retained snapshots, "
            f"'snaplake tag list {name}' the tags ('snaplake read {name} --tag NAME' reads "
            "a tagged version after its snapshot expired)"
        )
    if isinstance(exc, TagNotFoundError):
        return f"{_statement(exc)}; 'snaplake tag list {name}' lists the tags"
    return None


def with_tag_hint(
    exc: SnapshotNotFoundError, *, tag: str, command: str, table: str
) -> SnapshotNotFoundError:
    """Return ``exc`` restated for an expired snapshot that tag ``tag`` still holds.

    The new message names the command that reads the tagged version
    (``snaplake read db.t --tag v1``); :func:`cli_message` keeps it and adds
    the usual hint.

    Args:
        exc: The error of ``--snapshot N``.
        tag: A tag on snapshot ``N``.
        command: The command that failed (``read``, ``files``).
        table: The ``db.table`` it read.
    """
    return SnapshotNotFoundError(
        f"{_statement(exc)}, but tag {tag!r} holds it: 'snaplake {command} {table} "
        f"--tag {tag}' reads it",
        snapshot_id=exc.snapshot_id,
    )
