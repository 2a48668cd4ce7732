"""Every Paimon table option and what snaplake does with it: honoured, refused or engine-specific.

Principle: an option that changes what a Paimon engine writes, reads, keeps
or deletes is either honoured by snaplake or refused, for the operations it
affects, before anything is read or written. The statuses:

* ``honoured``: snaplake implements it (see the note; a test proves each);
* ``refused``: any value other than the accepted ones (usually Paimon's
  default) is refused for the listed operations with
  :class:`~snaplake.errors.UnsupportedTableError`;
* ``primary-key``: matters only to primary-key tables, which are refused as
  a whole until primary-key support lands; Paimon ignores it on append tables;
* ``engine-specific``: tunes another engine's runtime (parallelism, memory,
  caches, spilling, Flink/Spark scheduling, lookup joins, streaming source
  behaviour, catalog integration, callbacks that engine runs) and has no
  effect on the files of the table or on what a batch reader of the table
  returns. Accepted and ignored.

Keys not listed (options of other engines' connectors, format passthroughs
such as ``parquet.*``) are kept in the schema untouched.

Source: Paimon ``CoreOptions`` (keys, defaults, meaning), read at apache/paimon
``5dacde5`` (2026-08).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ALL_OPERATIONS",
    "OptionStatus",
    "OptionSupport",
    "iter_option_support",
    "option_refusal",
    "option_support",
]


class OptionStatus(StrEnum):
    """How snaplake treats one option (see the module docstring)."""

    HONOURED = "honoured"
    REFUSED = "refused"
    PRIMARY_KEY = "primary-key"
    ENGINE = "engine-specific"


ALL_OPERATIONS = frozenset({"create", "read", "write", "commit", "maintenance"})
"""The operation names of :class:`snaplake.store.format.support.Operation`."""

_CHANGES = frozenset({"create", "write", "commit", "maintenance"})


def _any(_value: str) -> bool:
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionSupport:
    """snaplake's treatment of one Paimon option.

    Attributes:
        key: The option key.
        status: See :class:`OptionStatus`.
        note: One line: what snaplake does, or why it refuses.
        accepts: The values that are fine; any other value is refused for
            ``refused_for`` (``honoured`` options may also refuse some values,
            e.g. ``file.format = lance``).
        accepted: Human-readable form of ``accepts`` for the README.
        refused_for: Operations refused when the value is not accepted.
    """

    key: str
    status: OptionStatus
    note: str
    accepts: Callable[[str], bool] = _any
    accepted: str = "any"
    refused_for: frozenset[str] = ALL_OPERATIONS


def _is(*values: str) -> Callable[[str], bool]:
    allowed = frozenset(v.lower() for v in values)
    return lambda value: value.strip().lower() in allowed


def _honoured(
    key: str, note: str, *values: str, refused_for: frozenset[str] = ALL_OPERATIONS
) -> OptionSupport:
    if values:
        return OptionSupport(
            key=key,
            status=OptionStatus.HONOURED,
            note=note,
            accepts=_is(*values),
            accepted=" / ".join(values),
            refused_for=refused_for | {"create"},
        )
    return OptionSupport(key=key, status=OptionStatus.HONOURED, note=note)


def _refused(
    key: str, note: str, *values: str, refused_for: frozenset[str] = ALL_OPERATIONS
) -> OptionSupport:
    return OptionSupport(
        key=key,
        status=OptionStatus.REFUSED,
        note=note,
        accepts=_is(*values) if values else (lambda v: not v.strip()),
        accepted=" / ".join(values) if values else "unset",
        refused_for=refused_for | {"create"},
    )


def _pk(key: str, note: str = "primary-key tables only") -> OptionSupport:
    return OptionSupport(key=key, status=OptionStatus.PRIMARY_KEY, note=note)


def _engine(key: str, note: str) -> OptionSupport:
    return OptionSupport(key=key, status=OptionStatus.ENGINE, note=note)


_OPTIONS: tuple[OptionSupport, ...] = (
    _honoured(
        "file.format",
        "format of new data files; files are read by their extension, so tables whose "
        "format changed read whole",
        "parquet",
        "orc",
        "avro",
        refused_for=_CHANGES,
    ),
    _honoured(
        "manifest.compression",
        "Avro codec of new manifests and manifest lists; any codec is read; lz4 is never "
        "written (Java's Avro has no lz4 codec and pypaimon refuses it)",
        "zstd",
        "zstandard",
        "snappy",
        "deflate",
        "bzip2",
        "xz",
        "null",
        "none",
        "uncompressed",
        refused_for=_CHANGES,
    ),
    # primary-key tables ----------------------------------------------------------------
    _pk("merge-engine"),
    _pk("sequence.field"),
    _pk("changelog-producer"),
)

_BY_KEY: dict[str, OptionSupport] = {o.key: o for o in _OPTIONS}


def option_support(key: str) -> OptionSupport | None:
    """Return snaplake's treatment of option ``key`` (``None`` = not a Paimon core option)."""
    return _BY_KEY.get(key)


def iter_option_support() -> Iterator[OptionSupport]:
    """Yield every listed option, in the order of the table (for docs and tests)."""
    return iter(_OPTIONS)


def option_refusal(key: str, value: str, operation: str) -> str | None:
    """Return why ``key = value`` makes snaplake refuse ``operation``, or ``None``.

    Args:
        key: An option key of the table schema.
        value: Its value as stored.
        operation: ``create``, ``read``, ``write``, ``commit`` or ``maintenance``.

    Returns:
        A reason to put in the error message, or ``None`` when the operation
        may go ahead (honoured, engine-specific, primary-key-only and unknown
        options never refuse).
    """
    support = _BY_KEY.get(key)
    if support is None or operation not in support.refused_for or support.accepts(value):
        return None
    return f"{support.note} (snaplake accepts: {support.accepted})"
