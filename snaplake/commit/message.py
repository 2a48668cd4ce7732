"""CommitMessage: what one writer task produced for one (partition, bucket).

Executors ship messages to the Spark driver, so they serialise to compact
bytes (orjson) and back, and are picklable.

Source: Paimon ``CommitMessageImpl`` with ``DataIncrement`` and
``CompactIncrement`` (field meaning kept; the byte form is snaplake's own
JSON, versioned by the ``"v"`` key).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from snaplake.store.format.data_file import (
    DataFileMeta,
    data_file_meta_from_json_dict,
    data_file_meta_to_json_dict,
)
from snaplake.store.format.index_file import (
    IndexFileMeta,
    index_file_from_json_dict,
    index_file_to_json_dict,
)

__all__ = ["CommitMessage", "CompactIncrement", "DataIncrement", "messages_to_bytes"]

_MESSAGE_VERSION = 2


def _files_to_json(files: Iterable[DataFileMeta]) -> list[dict[str, Any]]:
    return [data_file_meta_to_json_dict(f) for f in files]


def _files_from_json(items: Iterable[Mapping[str, Any]]) -> tuple[DataFileMeta, ...]:
    return tuple(data_file_meta_from_json_dict(i) for i in items)


def _index_to_json(files: Iterable[IndexFileMeta]) -> list[dict[str, Any]]:
    return [index_file_to_json_dict(f) for f in files]


def _index_from_json(items: Iterable[dict[str, Any]]) -> tuple[IndexFileMeta, ...]:
    return tuple(index_file_from_json_dict(i) for i in items)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataIncrement:
    """Files a write added or removed.

    Attributes:
        new_files: Data files to ADD.
        deleted_files: Data files to DELETE (row-level rewrites; conflict-checked).
        changelog_files: Changelog files (unused by append tables; kept for format parity).
        new_index_files: Index files to ADD to the APPEND snapshot's index manifest
            (e.g. a bucket's new HASH file; it replaces the bucket's old one).
        deleted_index_files: Index files to DELETE from it.
        kept_index_files: Index files the writer relied on and leaves in
            place (a dynamic-bucket writer's HASH file of a bucket it wrote
            known keys into): neither added nor deleted, only checked to be
            still live when the commit publishes (snaplake's own; Paimon has
            no such check).
        key_map_snapshot: The snapshot id (0 = the empty table) a
            cross-partition writer's key → (partition, bucket) map was exact
            at when it placed these rows; the commit is refused when another
            writer wrote one of its keys since
            (:func:`~snaplake.commit.key_conflict.check_key_races`;
            snaplake's own). ``None`` for every other writer.
    """

    new_files: tuple[DataFileMeta, ...] = ()
    deleted_files: tuple[DataFileMeta, ...] = ()
    changelog_files: tuple[DataFileMeta, ...] = ()
    new_index_files: tuple[IndexFileMeta, ...] = ()
    deleted_index_files: tuple[IndexFileMeta, ...] = ()
    kept_index_files: tuple[IndexFileMeta, ...] = ()
    key_map_snapshot: int | None = None

    def is_empty(self) -> bool:
        """True when the increment carries no file."""
        return not (
            self.new_files
            or self.deleted_files
            or self.changelog_files
            or self.new_index_files
            or self.deleted_index_files
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactIncrement:
    """Files a compaction replaced.

    Attributes:
        compact_before: Inputs to DELETE (conflict-checked: they must still be live).
        compact_after: Outputs to ADD.
        changelog_files: Changelog files (unused by append tables).
        new_index_files: Index files to ADD to the COMPACT snapshot's index manifest
            (e.g. a bucket's rewritten deletion-vectors file).
        deleted_index_files: Index files to DELETE from it.
    """

    compact_before: tuple[DataFileMeta, ...] = ()
    compact_after: tuple[DataFileMeta, ...] = ()
    changelog_files: tuple[DataFileMeta, ...] = ()
    new_index_files: tuple[IndexFileMeta, ...] = ()
    deleted_index_files: tuple[IndexFileMeta, ...] = ()

    def is_empty(self) -> bool:
        """True when the increment carries no file."""
        return not (
            self.compact_before
            or self.compact_after
            or self.changelog_files
            or self.new_index_files
            or self.deleted_index_files
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitMessage:
    """The output of one writer task for one partition and bucket.

    Attributes:
        partition: The partition as serialised BinaryRow bytes (12-byte empty
            row for an unpartitioned table).
        bucket: Bucket number (0 for bucket-unaware tables).
        total_buckets: The table's bucket count when written (``-1`` for
            bucket-unaware tables); a commit refuses a changed count.
        data_increment: Appended/deleted files.
        compact_increment: Compaction inputs/outputs.
    """

    partition: bytes
    bucket: int
    total_buckets: int
    data_increment: DataIncrement = field(default_factory=DataIncrement)
    compact_increment: CompactIncrement = field(default_factory=CompactIncrement)

    def is_empty(self) -> bool:
        """True when the message carries no file at all."""
        return self.data_increment.is_empty() and self.compact_increment.is_empty()

    def added_files(self) -> tuple[DataFileMeta, ...]:
        """Files this message ADDs (new files and compaction outputs)."""
        return self.data_increment.new_files + self.compact_increment.compact_after

    def deleted_files(self) -> tuple[DataFileMeta, ...]:
        """Files this message DELETEs (deleted files and compaction inputs)."""
        return self.data_increment.deleted_files + self.compact_increment.compact_before

    def added_index_files(self) -> tuple[IndexFileMeta, ...]:
        """Index files this message ADDs (the write's, then the compaction's).

        What an abort of uncommitted messages deletes along with their data files.
        """
        return self.data_increment.new_index_files + self.compact_increment.new_index_files

    def to_json_dict(self) -> dict[str, Any]:
        """Return the JSON transport object (bytes fields base64)."""
        di, ci = self.data_increment, self.compact_increment
        return {
            "v": _MESSAGE_VERSION,
            "partition": base64.b64encode(self.partition).decode("ascii"),
            "bucket": self.bucket,
            "totalBuckets": self.total_buckets,
            "newFiles": _files_to_json(di.new_files),
            "deletedFiles": _files_to_json(di.deleted_files),
            "changelogFiles": _files_to_json(di.changelog_files),
            "compactBefore": _files_to_json(ci.compact_before),
            "compactAfter": _files_to_json(ci.compact_after),
            "compactChangelog": _files_to_json(ci.changelog_files),
            "newIndexFiles": _index_to_json(di.new_index_files),
            "deletedIndexFiles": _index_to_json(di.deleted_index_files),
            "keptIndexFiles": _index_to_json(di.kept_index_files),
            "keyMapSnapshot": di.key_map_snapshot,
            "compactNewIndexFiles": _index_to_json(ci.new_index_files),
            "compactDeletedIndexFiles": _index_to_json(ci.deleted_index_files),
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> CommitMessage:
        """Rebuild a message from :meth:`to_json_dict` output.

        Raises:
            ValueError: unknown transport version or malformed content.
        """
        if data.get("v") != _MESSAGE_VERSION:
            raise ValueError(
                f"commit message transport version {data.get('v')!r} is not "
                f"{_MESSAGE_VERSION}; driver and executors must run the same snaplake"
            )
        return cls(
            partition=base64.b64decode(data["partition"]),
            bucket=int(data["bucket"]),
            total_buckets=int(data["totalBuckets"]),
            data_increment=DataIncrement(
                new_files=_files_from_json(data["newFiles"]),
                deleted_files=_files_from_json(data["deletedFiles"]),
                changelog_files=_files_from_json(data["changelogFiles"]),
                new_index_files=_index_from_json(data["newIndexFiles"]),
                deleted_index_files=_index_from_json(data["deletedIndexFiles"]),
                kept_index_files=_index_from_json(data.get("keptIndexFiles", ())),
                key_map_snapshot=data.get("keyMapSnapshot"),
            ),
            compact_increment=CompactIncrement(
                compact_before=_files_from_json(data["compactBefore"]),
                compact_after=_files_from_json(data["compactAfter"]),
                changelog_files=_files_from_json(data["compactChangelog"]),
                new_index_files=_index_from_json(data["compactNewIndexFiles"]),
                deleted_index_files=_index_from_json(data["compactDeletedIndexFiles"]),
            ),
        )

    def to_bytes(self) -> bytes:
        """Serialise to compact UTF-8 JSON bytes (what executors send to the driver)."""
        return orjson.dumps(self.to_json_dict())

    @classmethod
    def from_bytes(cls, data: bytes) -> CommitMessage:
        """Inverse of :meth:`to_bytes`.

        Raises:
            ValueError: not a serialised CommitMessage.
        """
        try:
            return cls.from_json_dict(orjson.loads(data))
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"not a serialised CommitMessage: {exc}") from exc


def messages_to_bytes(messages: Sequence[CommitMessage]) -> list[bytes]:
    """Serialise each message (convenience for shipping a list)."""
    return [m.to_bytes() for m in messages]
