"""Which configured tables exist: a warehouse's selected tables and the names that match nothing.

Used by the daemon's discovery job (every ``discovery_interval``) and by
``--check-config``. A ``tables`` entry of a ``[[warehouse]]`` is **missing**
when the thing it names literally does not exist:

- ``"db.table"`` (no wildcard): that table does not exist (or is not selected
  because an ``exclude`` pattern matches it: then it is not missing);
- ``"db.*"``, ``"db.t?"`` (a literal database): database ``db`` does not exist;
- ``"*"``, ``"d*.t"`` (a wildcard database): the warehouse holds no database
  at all (a wrong ``uri``, or a warehouse nobody has written to yet).

A pattern that matches no table of an existing database is not missing: the
tables may be created later, and the daemon picks them up at the next
discovery. This module imports neither apscheduler nor prometheus_client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from snaplake.catalog import FileSystemCatalog
from snaplake.daemon.config import TASK_OPTIONS, DaemonConfig, WarehouseConfig
from snaplake.daemon.config_describe import format_duration, format_size
from snaplake.errors import DatabaseNotFoundError
from snaplake.filestore import FileStore
from snaplake.options import ConfigOption, CoreOptions
from snaplake.options.registry import TARGET_FILE_SIZE

__all__ = ["WarehouseListing", "describe_tables", "list_warehouse", "missing_reason"]

_WILDCARDS = "*?["


def _has_wildcard(text: str) -> bool:
    return any(c in text for c in _WILDCARDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class WarehouseListing:
    """What one listing of a warehouse found.

    Attributes:
        index: Position of the ``[[warehouse]]`` section (0-based).
        found: ``db.table`` of every existing table the patterns select, sorted.
        missing: The ``tables`` entries that name nothing (see the module
            docstring), in configuration order.
        has_databases: Whether the warehouse holds at least one database.
    """

    index: int
    found: tuple[str, ...]
    missing: tuple[str, ...]
    has_databases: bool


def list_warehouse(wh: WarehouseConfig, *, index: int) -> WarehouseListing:
    """List the tables of ``wh`` its patterns select, and the patterns that name nothing.

    Args:
        wh: The warehouse and its ``tables`` / ``exclude`` patterns.
        index: Its position in the configuration (carried into the result).

    Returns:
        The selected existing tables and the missing entries.

    Raises:
        OSError: the warehouse cannot be listed (storage error, no access).
        DatabaseNotFoundError: a database vanished while it was listed.

    Storage: lists the warehouse's databases; with only explicit names, one
    schema listing per name whose database exists; otherwise the tables of
    every database.
    """
    catalog = FileSystemCatalog(wh.uri, options=wh.options)
    databases = set(catalog.list_databases())
    patterns = tuple(dict.fromkeys(wh.tables))
    explicit = tuple(dict.fromkeys(wh.explicit_tables))
    if set(patterns) == set(explicit):
        found = [
            t
            for t in explicit
            if wh.selects(t) and t.partition(".")[0] in databases and catalog.table_exists(t)
        ]
    else:
        found = []
        for db in sorted(databases):
            found.extend(
                identifier
                for name in catalog.list_tables(db)
                if wh.selects(identifier := f"{db}.{name}")
            )
    found_set = set(found)
    missing = []
    for pattern in patterns:
        database = pattern.partition(".")[0]
        if pattern in explicit:
            gone = wh.selects(pattern) and pattern not in found_set
        elif not _has_wildcard(database):
            gone = database not in databases
        else:
            gone = not databases
        if gone:
            missing.append(pattern)
    return WarehouseListing(
        index=index,
        found=tuple(sorted(found_set)),
        missing=tuple(missing),
        has_databases=bool(databases),
    )


def missing_reason(pattern: str) -> str:
    """Say what does not exist for the missing ``tables`` entry ``pattern``."""
    database = pattern.partition(".")[0]
    if not _has_wildcard(pattern):
        return f"table {pattern} does not exist"
    if not _has_wildcard(database):
        return f"database {database} of pattern {pattern} does not exist"
    return f"pattern {pattern}: the warehouse holds no database"


def _origin_and_value(
    option: ConfigOption[Any],
    *,
    table_options: Mapping[str, str],
    defaults: Mapping[str, str],
    effective: CoreOptions,
    store: FileStore,
) -> tuple[str, str]:
    if option.key in table_options:
        return "table option", table_options[option.key]
    if option.key in defaults:
        return "daemon default", defaults[option.key]
    if option is TARGET_FILE_SIZE:
        size = store.target_file_size(effective)
        return f"Paimon default for {store.kind} tables", format_size(size)
    typed = effective.get(option)
    if isinstance(typed, timedelta):
        return "Paimon default", format_duration(typed)
    if option.parse is TARGET_FILE_SIZE.parse and isinstance(typed, int):
        return "Paimon default", format_size(typed)
    return "Paimon default", str(typed)


def describe_tables(config: DaemonConfig) -> str:
    """Render, as TOML comments, every configured table found now with its effective options.

    For each table the patterns select: its kind (append or primary-key), and
    for each Paimon option a task reads, the value the daemon maintains it
    with and where it comes from (table option, daemon default, Paimon
    default: ``target-file-size`` defaults to 128 mb for primary-key tables
    and 256 mb for append tables). Then each missing ``tables`` entry, and
    each warehouse that could not be listed (with the error class and message).

    Storage: lists every warehouse and reads each selected table's latest schema.
    """
    lines = ["", "# tables found now (effective options: table option > daemon default > Paimon)"]
    for index, wh in enumerate(config.warehouses):
        try:
            listing = list_warehouse(wh, index=index)
        except (OSError, DatabaseNotFoundError) as exc:
            lines.append(
                f"# warehouse[{index}]: could not list tables: {type(exc).__name__}: {exc}"
            )
            continue
        catalog = FileSystemCatalog(wh.uri, options=wh.options)
        for identifier in listing.found:
            table = catalog.get_table(identifier)
            store = table.file_store()
            own = dict(table.options)
            effective = config.effective_options(own)
            lines.append(f"# warehouse[{index}] {identifier} ({store.kind} table):")
            seen: set[str] = set()
            for task in config.enabled_tasks():
                for option in TASK_OPTIONS[task]:
                    if option.key in seen:
                        continue
                    seen.add(option.key)
                    origin, value = _origin_and_value(
                        option, table_options=own, defaults=config.default_options,
                        effective=effective, store=store,
                    )  # fmt: skip
                    lines.append(f'#   "{option.key}" = "{value}"  # {origin}')
        for pattern in listing.missing:
            lines.append(f"# warehouse[{index}] MISSING {pattern}: {missing_reason(pattern)}")
        if not listing.found and not listing.missing:
            lines.append(f"# warehouse[{index}]: no table matches {list(wh.tables)} yet")
    return "\n".join(lines) + "\n"
