"""ConsumerManager: readers' progress markers (``consumer/consumer-<id>``) that pin snapshots.

A consumer file records the next snapshot a streaming reader will read
(``{"nextSnapshot": N}``). Snapshot expiry never expires snapshot ``N`` or
later for the smallest such ``N``, so a slow reader never finds its next
snapshot gone.

Source: Paimon ``ConsumerManager`` and ``Consumer`` (file name, JSON key
``nextSnapshot``, ``minNextSnapshot``).
"""

from __future__ import annotations

import logging
import re

import orjson

from snaplake.errors import CorruptMetadataError, InvalidNameError
from snaplake.store.format.paths import TableFileManager, list_prefixed
from snaplake.store.io.file_io import FileStatus

__all__ = ["ConsumerManager"]

logger = logging.getLogger(__name__)

_PREFIX = "consumer-"
_VALID_ID = re.compile(r"[A-Za-z0-9_.\-]+")


class ConsumerManager(TableFileManager):
    """Read and write the consumer markers of one table."""

    def set_consumer(self, consumer_id: str, *, next_snapshot: int) -> None:
        """Record that ``consumer_id`` will read ``next_snapshot`` next.

        Args:
            consumer_id: Letters, digits, ``_``, ``.`` and ``-``.
            next_snapshot: A snapshot id ``>= 1``; expiry keeps it and every
                later snapshot.

        Raises:
            InvalidNameError: the id has another character (checked in full).
            ValueError: ``next_snapshot`` is below 1.

        Storage:
            Overwrites ``consumer/consumer-<id>`` (atomically).
        """
        if not _VALID_ID.fullmatch(consumer_id):
            raise InvalidNameError(
                f"invalid consumer id {consumer_id!r}: use letters, digits, '_', '.' and '-'",
                kind="consumer id",
                name=consumer_id,
            )
        if next_snapshot < 1:
            raise ValueError(f"next_snapshot must be >= 1, got {next_snapshot}")
        data = orjson.dumps({"nextSnapshot": int(next_snapshot)})
        self.file_io.write_bytes(self.paths.consumer_path(consumer_id), data, overwrite=True)
        logger.info("consumer %s now at snapshot %d", consumer_id, next_snapshot)

    def consumer(self, consumer_id: str) -> int | None:
        """Return the ``nextSnapshot`` of ``consumer_id``, or ``None`` if it has no marker.

        Raises:
            CorruptMetadataError: the marker is not ``{"nextSnapshot": <int>}``.
        """
        path = self.paths.consumer_path(consumer_id)
        try:
            data = self.file_io.read_bytes(path)
        except FileNotFoundError:
            return None
        try:
            return int(orjson.loads(data)["nextSnapshot"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CorruptMetadataError(
                f"{path} is not a Paimon consumer file ({exc}); fix or delete it", path=path
            ) from exc

    def delete_consumer(self, consumer_id: str) -> None:
        """Remove the marker of ``consumer_id`` (missing is fine).

        Storage:
            Deletes ``consumer/consumer-<id>``.
        """
        self.file_io.delete(self.paths.consumer_path(consumer_id))

    def consumers(self, *, modified_after_ms: int | None = None) -> dict[str, int]:
        """Return ``{consumer_id: nextSnapshot}`` for every marker.

        Args:
            modified_after_ms: Only markers modified at or after this epoch
                millisecond (``None`` = all).

        Raises:
            CorruptMetadataError: a marker cannot be decoded.
        """
        out: dict[str, int] = {}
        for cid, status in self._markers():
            if modified_after_ms is not None and status.modification_time_ms < modified_after_ms:
                continue
            value = self.consumer(cid)
            if value is not None:
                out[cid] = value
        return dict(sorted(out.items()))

    def _markers(self) -> list[tuple[str, FileStatus]]:
        return list_prefixed(self.file_io, self.paths.consumer_dir, _PREFIX)

    def min_next_snapshot(self, *, modified_after_ms: int | None = None) -> int | None:
        """Return the smallest ``nextSnapshot`` of the consumers, ``None`` without any.

        Args:
            modified_after_ms: Ignore markers last modified before this epoch
                millisecond (idle consumers, ``consumer.expiration-time``).
        """
        values = self.consumers(modified_after_ms=modified_after_ms).values()
        return min(values) if values else None

    def expire(self, *, modified_before_ms: int) -> list[str]:
        """Delete the markers of consumers idle since before ``modified_before_ms``.

        Returns:
            The removed consumer ids.

        Storage:
            Deletes ``consumer/consumer-<id>`` of each idle consumer.

        Source:
            Paimon ``ConsumerManager.expire`` (``consumer.expiration-time``).
        """
        idle = [cid for cid, st in self._markers() if st.modification_time_ms < modified_before_ms]
        for cid in idle:
            self.delete_consumer(cid)
        if idle:
            logger.info("removed idle consumer(s) %s", ", ".join(idle))
        return idle
