"""Paimon's batch read options: the snapshot, changes or files a read selects.

``select_by_options`` turns a table's (or a read's) ``scan.mode``,
``scan.snapshot-id``, ``scan.timestamp-millis``, ``scan.tag-name``,
``scan.file-creation-time-millis``, ``scan.creation-time-millis`` and
``incremental-between*`` options into a :class:`ReadSelection`;
``snaplake.table_scan.TableScan`` and ``Table.new_scan`` read what it names.

Where Paimon versions differ, the newer behaviour is implemented and the
docstring says so (Java Paimon 0.9 is the reference reader of the tests).

Source: Paimon ``AbstractDataTableScan.createStartingScanner`` (batch),
``CoreOptions.startupMode``, ``IncrementalDeltaStartingScanner``,
``IncrementalDiffStartingScanner``, ``FileCreationTimeStartingScanner``,
``TimeTravelUtil.earlierThanTimeMills``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from snaplake.errors import InvalidOptionError, SnapshotNotFoundError, TagNotFoundError
from snaplake.options.config_option import parse_bool
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.read.scan import Split
from snaplake.store.snapshot_manager import SnapshotManager
from snaplake.store.tags import TagManager

__all__ = [
    "READ_OPTION_KEYS",
    "ReadSelection",
    "created_since",
    "file_creation_epoch_millis",
    "resolve_snapshot",
    "select_by_options",
]

READ_OPTION_KEYS = frozenset({
    "scan.mode", "scan.snapshot-id", "scan.timestamp-millis", "scan.timestamp", "scan.tag-name",
    "scan.file-creation-time-millis", "scan.creation-time-millis",
    "incremental-between", "incremental-between-timestamp", "incremental-between-scan-mode",
    "incremental-between-tag-to-snapshot",
})  # fmt: skip
"""The Paimon read options a batch read honours (table options or read-time ``options=``)."""

_PAIMON_SCAN_MODES = frozenset({
    "default", "latest-full", "full", "latest", "latest-delta", "compacted-full",
    "from-timestamp", "from-file-creation-time", "from-creation-timestamp", "from-snapshot",
    "from-snapshot-full", "incremental",
})  # fmt: skip

_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{0,9}))?)?"
)
"""Paimon's ``DateTimeUtils`` timestamp text: ``yyyy-M-d[ H:m:s[.fraction]]`` (1 or 2 digits)."""

_BETWEEN = "incremental-between"
_SCAN_MODE = "incremental-between-scan-mode"
_TAG_TO_SNAPSHOT = "incremental-between-tag-to-snapshot"


@dataclass(frozen=True, slots=True)
class ReadSelection:
    """What a batch read's options select (:func:`select_by_options`).

    Attributes:
        snapshot: The snapshot to read (``changes``: ``None``; ``None`` without
            ``changes``: the table has no snapshot, the read has no rows).
        tag: The tag it was found through, if any.
        changes: ``(start, end, mode)``: the changes of snapshots
            ``start..end`` (inclusive) in ``mode``, instead of a snapshot.
        empty: The read returns no rows (Paimon's ``EmptyResultStartingScanner``).
        created_since: Only the files of ``snapshot`` created at or after this
            time (epoch milliseconds) are read (Paimon's
            ``FileCreationTimeStartingScanner``; :func:`created_since`).
        diff: ``(before, after)``: the ``diff`` of these two snapshots (two
            tags' snapshots, which may have expired), instead of a snapshot.
    """

    snapshot: Snapshot | None = None
    tag: str | None = None
    changes: tuple[int, int, str] | None = None
    empty: bool = False
    created_since: int | None = None
    diff: tuple[Snapshot, Snapshot] | None = None


def resolve_snapshot(
    snapshots: SnapshotManager, identifier: str, snapshot_id: int | None, as_of: datetime | None
) -> Snapshot | None:
    """The snapshot a read names: ``snapshot_id``, the newest at or before ``as_of``, or the latest.

    Raises:
        ValueError: both given, or a naive ``as_of``.
        SnapshotNotFoundError: the snapshot is not retained (``identifier`` names the table).
    """
    if snapshot_id is not None and as_of is not None:
        raise ValueError("pass snapshot_id or as_of, not both")
    if snapshot_id is not None:
        return snapshots.snapshot(snapshot_id)
    if as_of is None:
        return snapshots.latest_snapshot()
    if as_of.tzinfo is None:
        raise ValueError("as_of must be timezone-aware (e.g. datetime.now(UTC))")
    snap = snapshots.earlier_or_equal_time_millis(int(as_of.timestamp() * 1000))
    if snap is None:
        raise SnapshotNotFoundError(
            f"no retained snapshot of {identifier} was committed at or before "
            f"{as_of.isoformat()}; the earliest retained is {snapshots.earliest_snapshot_id()}",
            snapshot_id=None,
        )
    return snap


def _int_option(options: Mapping[str, str], key: str) -> int | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise InvalidOptionError(
            f"option {key!r} = {text!r} is not an integer", key=key, value=text
        ) from None


def _needed(options: Mapping[str, str], key: str, mode: str) -> int:
    """The integer option ``key`` that ``scan.mode = mode`` needs.

    Raises:
        InvalidOptionError: it is missing or not an integer.
    """
    value = _int_option(options, key)
    if value is None:
        raise InvalidOptionError(f"scan.mode = {mode} needs {key}", key="scan.mode", value=mode)
    return value


def _pair(options: Mapping[str, str], key: str) -> tuple[int, int]:
    text = options[key]
    parts = [p.strip() for p in text.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError(text)
        start, end = int(parts[0]), int(parts[1])
    except ValueError:
        raise InvalidOptionError(
            f"option {key!r} = {text!r} must be 'start,end' (start exclusive, end inclusive): "
            + ("two snapshot ids or two tag names" if key == _BETWEEN else "two integers"),
            key=key, value=text,
        ) from None  # fmt: skip
    if end < start:
        raise InvalidOptionError(
            f"{key} = {text!r}: the end is before the start", key=key, value=text
        )
    return start, end


def select_by_options(
    snapshots: SnapshotManager, tags: TagManager, identifier: str, options: Mapping[str, str]
) -> ReadSelection | None:
    """What Paimon's batch scan reads under ``options``; ``None``: the latest snapshot.

    ``scan.mode`` (``default`` derives it from the other options, as Paimon's
    ``CoreOptions.startupMode``): ``latest-full`` / ``full`` / ``latest`` the
    latest snapshot; ``latest-delta`` the delta of the latest snapshot;
    ``compacted-full`` the latest COMPACT snapshot (with
    ``changelog-producer = full-compaction`` or ``full-compaction.delta-commits``
    the latest full one), else the latest; ``from-timestamp`` the newest
    snapshot at or before ``scan.timestamp-millis`` (or ``scan.timestamp``, a
    local date-time); ``from-snapshot`` /
    ``from-snapshot-full`` snapshot ``scan.snapshot-id`` (or tag
    ``scan.tag-name``); ``from-file-creation-time`` the files of the latest
    snapshot created at or after ``scan.file-creation-time-millis``;
    ``from-creation-timestamp`` (Paimon after 0.9) see
    :func:`_from_creation_timestamp`; ``incremental`` the changes of
    ``incremental-between = 'a,b'`` (snapshots ``a+1..b``, or two tags: see
    :func:`_between_tags`) or of ``incremental-between-timestamp = 't1,t2'``
    (committed in ``(t1, t2]``), in ``incremental-between-scan-mode``.

    Raises:
        InvalidOptionError: a ``scan.mode`` Paimon does not define, an option
            the mode needs is missing, a value does not parse, or tags in the
            wrong order (see :func:`_between_tags`).
        SnapshotNotFoundError: the selected snapshot is not retained.
        TagNotFoundError: no such tag (``scan.tag-name``, ``incremental-between``).

    Source: Paimon ``AbstractDataTableScan.createStartingScanner`` (batch),
    ``CoreOptions.startupMode``, ``IncrementalDeltaStartingScanner.betweenTimestamps``.
    """
    mode = options.get("scan.mode", "default").strip().lower()
    if mode not in _PAIMON_SCAN_MODES:
        raise InvalidOptionError(
            f"scan.mode = {mode!r} is not a Paimon scan mode; use one of "
            f"{', '.join(sorted(_PAIMON_SCAN_MODES))}", key="scan.mode", value=mode,
        )  # fmt: skip
    snapshot_id = _int_option(options, "scan.snapshot-id")
    millis = _int_option(options, "scan.timestamp-millis")
    if millis is None and "scan.timestamp" in options:
        millis = _timestamp_millis(options["scan.timestamp"])
    tag = options.get("scan.tag-name")
    incremental = _BETWEEN in options or "incremental-between-timestamp" in options
    if mode == "default":
        if millis is not None:
            mode = "from-timestamp"
        elif snapshot_id is not None or tag is not None:
            mode = "from-snapshot"
        elif "scan.file-creation-time-millis" in options:
            mode = "from-file-creation-time"
        elif "scan.creation-time-millis" in options:
            mode = "from-creation-timestamp"
        elif incremental:
            mode = "incremental"
        else:
            return None
    if mode in ("latest-full", "full", "latest"):
        return None
    if mode == "from-file-creation-time":
        since = _needed(options, "scan.file-creation-time-millis", mode)
        return ReadSelection(snapshot=snapshots.latest_snapshot(), created_since=since)
    if mode == "from-creation-timestamp":
        return _from_creation_timestamp(
            snapshots, _needed(options, "scan.creation-time-millis", mode)
        )
    if mode == "latest-delta":
        latest = snapshots.latest_snapshot_id()
        if latest is None:
            return ReadSelection(empty=True)
        return ReadSelection(changes=(latest, latest, "delta"))
    if mode == "compacted-full":
        return ReadSelection(snapshot=_compacted(snapshots, options))
    if mode == "from-timestamp":
        if millis is None:
            raise InvalidOptionError(
                f"scan.mode = {mode} needs scan.timestamp-millis or scan.timestamp",
                key="scan.mode", value=mode,
            )  # fmt: skip
        at = datetime.fromtimestamp(millis / 1000, tz=UTC)
        return ReadSelection(snapshot=resolve_snapshot(snapshots, identifier, None, at))
    if mode in ("from-snapshot", "from-snapshot-full"):
        if snapshot_id is not None:
            return ReadSelection(snapshot=snapshots.snapshot(snapshot_id))
        if tag is not None and mode == "from-snapshot":
            return ReadSelection(snapshot=tags.get(tag), tag=tag)
        raise InvalidOptionError(
            f"scan.mode = {mode} needs scan.snapshot-id"
            + (" or scan.tag-name" if mode == "from-snapshot" else ""),
            key="scan.mode", value=mode,
        )  # fmt: skip
    return _incremental(snapshots, tags, options)


def _timestamp_millis(text: str) -> int:
    """``scan.timestamp`` (a local date-time, ``yyyy-M-d[ H:m:s[.fraction]]``) as epoch ms.

    Read in this machine's time zone and cut to milliseconds, as Paimon reads
    it in the JVM's default zone at precision 3.

    Raises:
        InvalidOptionError: the text is no such date-time.

    Source: Paimon ``DateTimeUtils.parseTimestampData(text, 3, TimeZone.getDefault())``.
    """
    match = _TIMESTAMP.fullmatch(text.strip())
    try:
        if match is None:
            raise ValueError(text)
        y, mo, d, h, mi, sec, fraction = match.groups()
        micros = int(((fraction or "") + "000")[:3]) * 1000
        local = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(sec or 0), micros)  # noqa: DTZ001 - a local wall-clock time, read in the local zone below
    except ValueError:
        raise InvalidOptionError(
            f"scan.timestamp = {text!r} is not a date-time 'yyyy-MM-dd[ HH:mm:ss[.SSS]]'",
            key="scan.timestamp", value=text,
        ) from None  # fmt: skip
    return (local.astimezone() - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def _from_creation_timestamp(snapshots: SnapshotManager, millis: int) -> ReadSelection:
    """``scan.mode = from-creation-timestamp`` (Paimon after 0.9; 0.9 has no such mode).

    The first snapshot committed at or after ``millis`` in full, when one
    follows a snapshot committed before it; otherwise (``millis`` at or before
    the earliest retained snapshot, or after the latest) the files of the
    latest snapshot created at or after ``millis``. No snapshot: no rows.

    Source: Paimon ``AbstractDataTableScan.createCreationTimestampStartingScanner``
    (batch: ``StaticFromSnapshotStartingScanner`` or ``FileCreationTimeStartingScanner``).
    """
    latest = snapshots.latest_snapshot()
    earliest = snapshots.earliest_snapshot_id()
    if latest is None or earliest is None:
        return ReadSelection()
    if snapshots.snapshot(earliest).time_millis < millis:
        before = snapshots.earlier_or_equal_time_millis(millis - 1)
        if before is not None and before.id < latest.id:
            return ReadSelection(snapshot=snapshots.snapshot(before.id + 1))
    return ReadSelection(snapshot=latest, created_since=millis)


def _compacted(snapshots: SnapshotManager, options: Mapping[str, str]) -> Snapshot | None:
    """The latest (full) COMPACT snapshot, else the latest (Paimon ``pickOrLatest``)."""
    full = options.get("changelog-producer", "").strip().lower() == "full-compaction"
    delta_commits = _int_option(options, "full-compaction.delta-commits")
    every = delta_commits if delta_commits is not None else (1 if full else None)
    latest = snapshots.latest_snapshot()
    earliest = snapshots.earliest_snapshot_id()
    if latest is None or earliest is None:
        return latest
    for sid in range(latest.id, earliest - 1, -1):
        snap = snapshots.snapshot(sid)
        if snap.commit_kind != CommitKind.COMPACT:
            continue
        ident = snap.commit_identifier
        if every is None or ident % every == 0 or ident == 2**63 - 1:
            return snap
    return latest


def _incremental(
    snapshots: SnapshotManager, tags: TagManager, options: Mapping[str, str]
) -> ReadSelection:
    """The change range of ``incremental-between`` / ``incremental-between-timestamp``."""
    mode = options.get(_SCAN_MODE, "auto").strip().lower()
    if mode not in ("auto", "delta", "changelog", "diff"):
        raise InvalidOptionError(
            f"{_SCAN_MODE} = {mode!r}; use auto, delta, changelog or diff",
            key=_SCAN_MODE, value=mode,
        )  # fmt: skip
    if _BETWEEN in options:
        between = _between_tags(tags, options, mode)
        if between is not None:
            return between
        start, end = _pair(options, _BETWEEN)
        if snapshots.earliest_snapshot_id() is None or start == end:
            return ReadSelection(empty=True)
        return ReadSelection(changes=(start + 1, end, mode))
    if "incremental-between-timestamp" not in options:
        raise InvalidOptionError(
            "scan.mode = incremental needs incremental-between or incremental-between-timestamp",
            key="scan.mode", value="incremental",
        )  # fmt: skip
    t1, t2 = _pair(options, "incremental-between-timestamp")
    earliest_id, latest = snapshots.earliest_snapshot_id(), snapshots.latest_snapshot()
    earliest = None if earliest_id is None else snapshots.snapshot(earliest_id)
    if earliest is None or latest is None or t1 == t2:
        return ReadSelection(empty=True)
    if t1 > latest.time_millis or t2 < earliest.time_millis:
        return ReadSelection(empty=True)
    first = snapshots.earlier_or_equal_time_millis(t1)
    start = earliest.id - 1 if first is None or earliest.time_millis > t1 else first.id
    last = snapshots.earlier_or_equal_time_millis(t2)
    end = latest.id if last is None else last.id
    if start == end:
        return ReadSelection(empty=True)
    return ReadSelection(changes=(start + 1, end, mode))


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _between_tags(tags: TagManager, options: Mapping[str, str], mode: str) -> ReadSelection | None:
    """``incremental-between = 'tag1,tag2'``; ``None``: the option names no tags (snapshot ids).

    Both names are looked up as tags first (a numeric tag name too), as newer
    Paimon does; when both exist the read is the ``diff`` of the tags'
    snapshots (Paimon's ``readIncrementalDiff``: a key or row new or changed
    at ``tag2``: ``+I``; gone: ``-D``, as snaplake's ``diff`` mode; every row
    has ``_snapshot_id`` = ``tag2``'s snapshot), whatever
    ``incremental-between-scan-mode`` says. With
    ``incremental-between-tag-to-snapshot = true`` it is the changes of the
    snapshots between the tags' snapshot ids, ``(id1, id2]``, in
    ``incremental-between-scan-mode`` (not ``diff``). The same snapshot on
    both tags: no rows. Java Paimon 0.9 also reads the diff (it refuses the
    same snapshot, has no ``incremental-between-tag-to-snapshot`` and reads
    numbers as snapshot ids first). The diff reads the tags' own snapshots,
    so it works after those snapshots expired. Deliberate difference:
    snaplake compares the buckets' merged views where Paimon merges only the
    files the two sides do not share (the rows differ only where a newer file
    rewrote a row with the same values).

    Raises:
        TagNotFoundError: a name that is no snapshot id is no tag either.
        InvalidOptionError: a tag and a snapshot id; ``tag2``'s snapshot before
            ``tag1``'s; ``diff`` with ``incremental-between-tag-to-snapshot``;
            that option not ``true`` / ``false``.

    Source: Paimon ``AbstractDataTableScan.createIncrementalStartingScanner``,
    ``IncrementalDiffStartingScanner.betweenTags`` (0.9: ``IncrementalTagStartingScanner``).
    """
    text = options[_BETWEEN]
    names = [p.strip() for p in text.split(",")]
    if len(names) != 2:
        return None
    found = [tags.try_get(n) for n in names]
    start, end = found
    if start is None or end is None:
        missing = [n for n, s in zip(names, found, strict=True) if s is None and not _is_int(n)]
        if missing:
            raise TagNotFoundError(
                f"{_BETWEEN} = {text!r}: {', '.join(map(repr, missing))} is neither a tag "
                f"nor a snapshot id; tags: {', '.join(tags.tag_names()) or 'none'}"
            )
        if len([n for n in names if _is_int(n)]) == 1:
            raise InvalidOptionError(
                f"{_BETWEEN} = {text!r} names one tag and one snapshot id; give two tags "
                "or two snapshot ids", key=_BETWEEN, value=text,
            )  # fmt: skip
        return None
    if end.id < start.id:
        raise InvalidOptionError(
            f"{_BETWEEN} = {text!r}: tag {names[1]!r} (snapshot {end.id}) is older than tag "
            f"{names[0]!r} (snapshot {start.id}); the end tag must not be older",
            key=_BETWEEN, value=text,
        )  # fmt: skip
    try:
        to_snapshot = parse_bool(options.get(_TAG_TO_SNAPSHOT, "false"))
    except ValueError:
        raise InvalidOptionError(
            f"{_TAG_TO_SNAPSHOT} = {options[_TAG_TO_SNAPSHOT]!r} is not true or false",
            key=_TAG_TO_SNAPSHOT, value=options[_TAG_TO_SNAPSHOT],
        ) from None  # fmt: skip
    if to_snapshot and mode == "diff":
        raise InvalidOptionError(
            f"{_TAG_TO_SNAPSHOT} = true reads the snapshots between two tags in auto, delta "
            f"or changelog mode, not diff (without it the tags are diffed)",
            key=_SCAN_MODE, value=mode,
        )  # fmt: skip
    if start.id == end.id:
        return ReadSelection(empty=True)
    if to_snapshot:
        return ReadSelection(changes=(start.id + 1, end.id, mode))
    return ReadSelection(diff=(start, end))


def file_creation_epoch_millis(creation_time_ms: int) -> int:
    """A data file's ``_CREATION_TIME`` (local wall-clock millis) as epoch milliseconds.

    The local time is read in this machine's time zone, as Java reads it in
    the JVM's default zone (Paimon ``DataFileMeta.creationTimeEpochMillis``).
    """
    utc = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=creation_time_ms)
    local = utc.replace(tzinfo=None)  # the wall-clock time, read as local below
    offset = local.astimezone().utcoffset() or timedelta()
    return creation_time_ms - int(offset.total_seconds() * 1000)


def created_since(splits: Sequence[Split], millis: int) -> list[Split]:
    """``splits`` cut to the files created at or after ``millis`` (epoch ms); empty ones dropped.

    A file without a recorded creation time is left out. Each kept split's
    deletion-vector index files are cut to its kept files.

    Source: Paimon ``FileCreationTimeStartingScanner`` (its manifest entry filter
    ``creationTimeEpochMillis() >= startupMillis``).
    """
    out: list[Split] = []
    for split in splits:
        keep = [
            i for i, f in enumerate(split.files)
            if f.creation_time_ms is not None
            and file_creation_epoch_millis(f.creation_time_ms) >= millis
        ]  # fmt: skip
        if len(keep) == len(split.files):
            out.append(split)
            continue
        if not keep:
            continue
        files = tuple(split.files[i] for i in keep)
        names = {f.file_name for f in files}
        vectors = []
        for meta, path in zip(split.deletion_files, split.deletion_paths, strict=True):
            ranges = tuple(r for r in meta.dv_ranges or () if r.data_file_name in names)
            if ranges:
                vectors.append((replace(meta, dv_ranges=ranges), path))
        out.append(replace(
            split, files=files, paths=tuple(split.paths[i] for i in keep),
            deletion_files=tuple(m for m, _ in vectors),
            deletion_paths=tuple(p for _, p in vectors),
        ))  # fmt: skip
    return out
