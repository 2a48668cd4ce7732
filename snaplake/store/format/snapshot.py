"""Snapshot (Paimon snapshot JSON, version 3) and CommitKind.

A snapshot file ``snapshot/snapshot-<id>`` is the commit point of a table
version: it names the base and delta manifest lists whose entries, merged,
give the table's live data files.

Source: Paimon ``org.apache.paimon.Snapshot`` (field names, version 3,
``BATCH_COMMIT_IDENTIFIER = Long.MAX_VALUE``, NON_NULL inclusion of optional keys).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from snaplake.errors import CorruptMetadataError, UnsupportedFormatVersionError
from snaplake.store.format.json_codec import decode_json, encode_json

__all__ = [
    "BATCH_COMMIT_IDENTIFIER",
    "SNAPSHOT_VERSION",
    "TXN_PROPERTY_PREFIX",
    "CommitKind",
    "Snapshot",
]

SNAPSHOT_VERSION = 3
BATCH_COMMIT_IDENTIFIER = 9223372036854775807
TXN_PROPERTY_PREFIX = "snaplake.txn."

_INTEGER = re.compile(r"-?[0-9]+")


class CommitKind(StrEnum):
    """What a snapshot did; the value is Paimon's on-disk spelling."""

    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One table version, as stored in ``snapshot-<id>``.

    Attributes:
        id: Snapshot id, contiguous from 1.
        schema_id: Id of the ``schema-N`` file the data was written with.
        base_manifest_list: File name (in ``manifest/``) of the list of all
            manifests of the previous snapshot.
        delta_manifest_list: File name of the list of this commit's manifests.
        commit_user: Who committed; with ``commit_identifier`` the dedup key.
        commit_identifier: Increasing per user; ``BATCH_COMMIT_IDENTIFIER``
            for one-off batch commits.
        commit_kind: APPEND, COMPACT, OVERWRITE or ANALYZE.
        time_millis: Commit time, epoch milliseconds (UTC).
        total_record_count: Rows (ADD minus DELETE) live after this commit.
        delta_record_count: Rows added minus rows deleted by this commit.
        properties: String map; snaplake carries ``snaplake.txn.<user>`` keys
            (last identifier per commit user) forward in every commit.
    """

    version: int = SNAPSHOT_VERSION
    id: int
    schema_id: int
    base_manifest_list: str
    base_manifest_list_size: int | None = None
    delta_manifest_list: str
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    total_record_count: int | None = None
    delta_record_count: int | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: Mapping[str, str] | None = None
    next_row_id: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def txn_map(self) -> dict[str, int]:
        """Return ``{commit_user: last identifier}`` carried in ``properties``.

        Raises:
            ValueError: a ``snaplake.txn.*`` value is not an integer (a decoded
                snapshot file never has one: :meth:`from_json_dict` refuses it).
        """
        return _txn_map(self.properties or {})

    def to_json_dict(self) -> dict[str, Any]:
        """Return the Paimon JSON object (optional keys omitted when ``None``)."""
        out: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "schemaId": self.schema_id,
            "baseManifestList": self.base_manifest_list,
            "baseManifestListSize": self.base_manifest_list_size,
            "deltaManifestList": self.delta_manifest_list,
            "deltaManifestListSize": self.delta_manifest_list_size,
            "changelogManifestList": self.changelog_manifest_list,
            "changelogManifestListSize": self.changelog_manifest_list_size,
            "indexManifest": self.index_manifest,
            "commitUser": self.commit_user,
            "commitIdentifier": self.commit_identifier,
            "commitKind": self.commit_kind.value,
            "timeMillis": self.time_millis,
            "totalRecordCount": self.total_record_count,
            "deltaRecordCount": self.delta_record_count,
            "changelogRecordCount": self.changelog_record_count,
            "watermark": self.watermark,
            "statistics": self.statistics,
            "properties": dict(self.properties) if self.properties is not None else None,
            "nextRowId": self.next_row_id,
        }
        out = {k: v for k, v in out.items() if v is not None}
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any], *, path: str = "<memory>") -> Snapshot:
        """Build a Snapshot from its JSON object; unknown keys are kept in ``extra``.

        Raises:
            UnsupportedFormatVersionError: ``version`` is newer than 3.
            CorruptMetadataError: a required key is missing or mistyped, an
                optional number (``totalRecordCount``, a list size, ...) is not
                an integer, or a ``snaplake.txn.*`` property is not one
                (``.path`` names the file).
        """
        if not isinstance(data, Mapping):
            raise CorruptMetadataError(f"{path} does not hold a JSON object", path=path)
        version = data.get("version", 1)
        if not isinstance(version, int) or version > SNAPSHOT_VERSION:
            raise UnsupportedFormatVersionError(
                f"{path} has snapshot version {version}; this snaplake reads up to "
                f"{SNAPSHOT_VERSION} — upgrade snaplake",
                path=path,
                version=int(version) if isinstance(version, int) else -1,
            )
        try:
            kind = CommitKind(data["commitKind"])
            props = data.get("properties")
            if props is not None and not isinstance(props, Mapping):
                raise TypeError(f"properties must be an object, got {props!r}")
            properties = {str(k): str(v) for k, v in props.items()} if props is not None else None
            _txn_map(properties or {})
            extra = {k: v for k, v in data.items() if k not in _JSON_KEYS}
            return cls(
                version=version,
                id=int(data["id"]),
                schema_id=int(data["schemaId"]),
                base_manifest_list=str(data["baseManifestList"]),
                base_manifest_list_size=_optional_int(data, "baseManifestListSize"),
                delta_manifest_list=str(data["deltaManifestList"]),
                delta_manifest_list_size=_optional_int(data, "deltaManifestListSize"),
                changelog_manifest_list=data.get("changelogManifestList"),
                changelog_manifest_list_size=_optional_int(data, "changelogManifestListSize"),
                index_manifest=data.get("indexManifest"),
                commit_user=str(data["commitUser"]),
                commit_identifier=int(data["commitIdentifier"]),
                commit_kind=kind,
                time_millis=int(data["timeMillis"]),
                total_record_count=_optional_int(data, "totalRecordCount"),
                delta_record_count=_optional_int(data, "deltaRecordCount"),
                changelog_record_count=_optional_int(data, "changelogRecordCount"),
                watermark=_optional_int(data, "watermark"),
                statistics=data.get("statistics"),
                properties=properties,
                next_row_id=_optional_int(data, "nextRowId"),
                extra=extra,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptMetadataError(
                f"{path} is not a valid Paimon snapshot ({type(exc).__name__}: {exc})", path=path
            ) from exc

    def to_bytes(self) -> bytes:
        """Encode as the bytes of a ``snapshot-<id>`` file."""
        return encode_json(self.to_json_dict())

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> Snapshot:
        """Decode the bytes of ``path``; see :meth:`from_json_dict` for errors."""
        return cls.from_json_dict(decode_json(data, path=path), path=path)


def _optional_int(data: Mapping[str, Any], key: str) -> int | None:
    """``data[key]`` when it is an integer, ``None`` when absent or null.

    Raises:
        TypeError: any other value (a string, a float, a boolean).
    """
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{key} must be an integer, got {value!r}")
    return value


def _txn_map(properties: Mapping[str, str]) -> dict[str, int]:
    """``{commit_user: identifier}`` from the ``snaplake.txn.<user>`` properties.

    Raises:
        ValueError: a value is not a decimal integer (naming the key).
    """
    out: dict[str, int] = {}
    for key, value in properties.items():
        if key.startswith(TXN_PROPERTY_PREFIX):
            if _INTEGER.fullmatch(value) is None:
                raise ValueError(
                    f"property {key} = {value!r} is not an integer (the last commit identifier "
                    "of that commit user)"
                )
            out[key[len(TXN_PROPERTY_PREFIX) :]] = int(value)
    return out


_JSON_KEYS = frozenset(
    {
        "version", "id", "schemaId", "baseManifestList", "baseManifestListSize",
        "deltaManifestList", "deltaManifestListSize", "changelogManifestList",
        "changelogManifestListSize", "indexManifest", "commitUser", "commitIdentifier",
        "commitKind", "timeMillis", "totalRecordCount", "deltaRecordCount",
        "changelogRecordCount", "watermark", "statistics", "properties", "nextRowId",
    }
)  # fmt: skip
