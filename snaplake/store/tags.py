"""TagManager: named, long-lived references to snapshots (``tag/tag-<name>``).

A tag file holds the tagged snapshot's JSON, exactly as ``snapshot-<id>``
does, so the tagged version stays readable after the snapshot itself has
been expired: snapshot expiry keeps every manifest, data file, index manifest
and index file a tag reaches, and orphan clean counts them as referenced.

Source: Paimon ``TagManager`` (layout ``tag/tag-<name>``, the content is the
snapshot JSON; a tag with a retention adds ``tagCreateTime``, a local
date-time as Jackson writes Java's ``LocalDateTime`` (``[y, mo, d, h, mi, s,
ns]``, trailing zero seconds/nanos left out), and ``tagTimeRetained``, a
``Duration`` as decimal seconds; without a retention neither is written, so
older readers read our tags) and ``Tag.trimToSnapshot``. Deliberate
difference: deleting a tag removes only the tag file; files that only the
tag kept alive become orphans and are removed by orphan clean (Paimon
deletes them at once).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from snaplake.errors import (
    CorruptMetadataError,
    FileAlreadyExistsError,
    InvalidNameError,
    TagNotFoundError,
)
from snaplake.store.format.paths import TableFileManager, list_prefixed
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.snapshot_manager import read_snapshot_file

__all__ = ["TagInfo", "TagManager"]

logger = logging.getLogger(__name__)

_TAG_PREFIX = "tag-"
_CREATE_TIME = "tagCreateTime"
_TIME_RETAINED = "tagTimeRetained"
_VALID_NAME = re.compile(r"[^/\\\s][^/\\\x00-\x1f\x7f]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class TagInfo:
    """One tag, as listed by :meth:`TagManager.list_tags`.

    Attributes:
        name: The tag name (file ``tag/tag-<name>``).
        snapshot_id: Id of the tagged snapshot.
        time_millis: Commit time of the tagged snapshot, epoch milliseconds.
        commit_kind: Kind of the tagged snapshot's commit (``APPEND`` ...).
        record_count: Rows live in the tagged snapshot, if recorded.
        path: Full path of the tag file.
        create_time: ``tagCreateTime``: when the tag was created, a naive local
            date-time as Java writes it (``None``: a tag without retention).
        time_retained: ``tagTimeRetained``: how long the tag lives after
            ``create_time`` (``None``: forever).
    """

    name: str
    snapshot_id: int
    time_millis: int
    commit_kind: str
    record_count: int | None
    path: str
    create_time: datetime | None = None
    time_retained: timedelta | None = None


def _check_name(name: str, *, allow_digits: bool = False) -> str:
    """Return ``name`` if it can name a tag file (the whole name is checked).

    Raises:
        InvalidNameError: blank, surrounding spaces, a slash or backslash, a
            control character (a newline), or only digits (unless ``allow_digits``).
    """
    digits = name.isdigit() and not allow_digits
    if not name or name.strip() != name or not _VALID_NAME.fullmatch(name) or digits:
        raise InvalidNameError(
            f"invalid tag name {name!r}: use a non-blank name without '/', '\\', control "
            "characters or surrounding spaces that is not only digits (digits look like "
            "snapshot ids)",
            kind="tag",
            name=name,
        )
    return name


class TagManager(TableFileManager):
    """Create, read, list and delete the tags of one table."""

    def tag_exists(self, name: str) -> bool:
        """Tell whether ``tag/tag-<name>`` exists."""
        return self.file_io.exists(self.paths.tag_path(name))

    def create_tag(
        self,
        name: str,
        *,
        snapshot: Snapshot,
        time_retained: timedelta | None = None,
        create_time: datetime | None = None,
        allow_digits: bool = False,
    ) -> TagInfo:
        """Tag ``snapshot`` as ``name``.

        Args:
            name: Non-blank, no ``/``; not made of digits only.
            snapshot: The snapshot to pin (read it from the table first).
            time_retained: Retention written into the tag (``tagTimeRetained``);
                ``None`` writes a plain snapshot JSON.
            create_time: ``tagCreateTime``, a naive local date-time (default:
                now); written only with ``time_retained``.
            allow_digits: Accept a name of digits only: Paimon's automatic tag
                names without dashes (``20261126``); Paimon 0.9 accepts them.

        Returns:
            The new tag.

        Raises:
            ValueError: the name is invalid.
            FileAlreadyExistsError: a tag of that name exists (tags are never
                silently moved; delete it first).

        Storage:
            Creates ``tag/tag-<name>`` with a create-only write (two
            concurrent creators cannot both win).

        Source:
            Paimon ``TagManager.createTag``.
        """
        _check_name(name, allow_digits=allow_digits)
        path = self.paths.tag_path(name)
        tagged = _trim(snapshot)
        if time_retained is not None:
            created = create_time or datetime.now().astimezone().replace(tzinfo=None)
            retention = {
                _CREATE_TIME: _local_datetime_json(created),
                _TIME_RETAINED: time_retained.total_seconds(),
            }
            tagged = dataclasses.replace(tagged, extra={**tagged.extra, **retention})
        try:
            self.file_io.write_if_absent(path, tagged.to_bytes())
        except FileAlreadyExistsError as exc:
            raise FileAlreadyExistsError(
                f"tag {name!r} already exists; delete it first to move it",
                path=path,
                operation="create_tag",
            ) from exc
        logger.info("created tag %s on snapshot %d", name, snapshot.id)
        return self._info(name, tagged)

    def try_get(self, name: str) -> Snapshot | None:
        """Return the tagged snapshot, or ``None`` if no such tag exists.

        Raises:
            CorruptMetadataError: the tag file is not a valid snapshot JSON.
        """
        snap = read_snapshot_file(self.file_io, self.paths.tag_path(name))
        return None if snap is None else _trim(snap)

    def get(self, name: str) -> Snapshot:
        """Return the snapshot tagged ``name``.

        Raises:
            TagNotFoundError: no such tag.
            CorruptMetadataError: the tag file cannot be decoded.
        """
        snap = self.try_get(name)
        if snap is None:
            known = ", ".join(t.name for t in self.list_tags()) or "none"
            raise TagNotFoundError(f"tag {name!r} does not exist (tags: {known})")
        return snap

    def delete_tag(self, name: str) -> None:
        """Delete tag ``name``.

        Raises:
            TagNotFoundError: no such tag.

        Storage:
            Deletes ``tag/tag-<name>`` only; files that nothing else references
            become orphans for :class:`~snaplake.compaction.orphan_clean.OrphanFilesClean`.
        """
        path = self.paths.tag_path(name)
        if not self.file_io.exists(path):
            raise TagNotFoundError(f"tag {name!r} does not exist")
        self.file_io.delete(path)
        logger.info("deleted tag %s", name)

    def tag_names(self) -> list[str]:
        """Return the names of all tags, sorted."""
        return sorted(
            name for name, _ in list_prefixed(self.file_io, self.paths.tag_dir, _TAG_PREFIX)
        )

    def tags(self) -> dict[str, Snapshot]:
        """Return ``{name: tagged snapshot}`` for every tag (deleted-meanwhile tags skipped).

        Raises:
            CorruptMetadataError: a tag file cannot be decoded.
        """
        out: dict[str, Snapshot] = {}
        for name in self.tag_names():
            snap = self.try_get(name)
            if snap is not None:
                out[name] = snap
        return out

    def list_tags(self) -> list[TagInfo]:
        """Return every tag with its retention, ordered by snapshot id then name.

        Raises:
            CorruptMetadataError: a tag file cannot be decoded.
        """
        infos = []
        for name in self.tag_names():
            snap = read_snapshot_file(self.file_io, self.paths.tag_path(name))
            if snap is not None:
                infos.append(self._info(name, snap))
        return sorted(infos, key=lambda t: (t.snapshot_id, t.name))

    def tagged_snapshots(self) -> list[Snapshot]:
        """Return the distinct tagged snapshots, ascending by id."""
        by_id = {s.id: s for s in self.tags().values()}
        return [by_id[k] for k in sorted(by_id)]

    def _info(self, name: str, snap: Snapshot) -> TagInfo:
        """The :class:`TagInfo` of a tag file's content (retention read from its extra keys)."""
        path = self.paths.tag_path(name)
        created, retained = snap.extra.get(_CREATE_TIME), snap.extra.get(_TIME_RETAINED)
        try:
            create_time = None if created is None else _local_datetime(created)
            time_retained = None if retained is None else timedelta(seconds=float(retained))
        except (TypeError, ValueError, OverflowError) as exc:
            raise CorruptMetadataError(
                f"{path}: tagCreateTime {created!r} / tagTimeRetained {retained!r} are not a "
                f"Java LocalDateTime / Duration ({exc}); fix or delete the tag",
                path=path,
            ) from exc
        return TagInfo(
            name=name,
            snapshot_id=snap.id,
            time_millis=snap.time_millis,
            commit_kind=snap.commit_kind.value,
            record_count=snap.total_record_count,
            path=path,
            create_time=create_time,
            time_retained=time_retained,
        )


def _trim(snap: Snapshot) -> Snapshot:
    """The snapshot without a tag's own keys (Paimon ``Tag.trimToSnapshot``)."""
    if _CREATE_TIME not in snap.extra and _TIME_RETAINED not in snap.extra:
        return snap
    extra = {k: v for k, v in snap.extra.items() if k not in (_CREATE_TIME, _TIME_RETAINED)}
    return dataclasses.replace(snap, extra=extra)


def _local_datetime_json(value: datetime) -> list[int]:
    """Jackson's array form of a Java ``LocalDateTime`` (seconds and nanos only when set)."""
    out = [value.year, value.month, value.day, value.hour, value.minute]
    if value.second or value.microsecond:
        out.append(value.second)
        if value.microsecond:
            out.append(value.microsecond * 1000)
    return out


def _local_datetime(value: Any) -> datetime:
    """Read a ``LocalDateTime`` as Jackson writes it: an array, or an ISO-8601 string."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=None)
    if not isinstance(value, list) or not 5 <= len(value) <= 7:
        raise ValueError("expected [year, month, day, hour, minute(, second(, nano))]")
    y, mo, d, h, mi, sec, nano = [*value, 0, 0][:7]
    return datetime(y, mo, d, h, mi, sec, nano // 1000)  # noqa: DTZ001 - Java LocalDateTime
