"""Cross-partition key races: a commit writes no key another writer wrote since its key map.

A cross-partition writer (``bucket = -1``, primary key lacking a partition
key) places each key by its key → (partition, bucket) map, exact as of one
snapshot (``DataIncrement.key_map_snapshot``). Two writers whose maps
predate each other's commits can put one new key into two partitions, both
move a key, or one update a key in the bucket the other just moved it out
of: the table then holds the key twice. So a commit whose messages name a
key-map snapshot is refused when a snapshot committed since then by
another commit user that ADDed data files (``APPEND``/``OVERWRITE``; a
``COMPACT`` moves no key) wrote one of the keys this commit writes. Every
key counts, not only new or moved ones: an update of a key in its old
bucket races another writer's move of it, and two writers updating one key
in one bucket tie on sequence numbers. The writer of the refused commit
drops its map and sequence numbers (``abort``) and writes the same rows
again (:class:`~snaplake.errors.CrossPartitionConflictError` is
``retryable``).

Cost: nothing is read when no other user's APPEND/OVERWRITE landed since
the map's snapshot (the snapshot files since then only, usually none);
otherwise the key columns of this commit's new files and of the level-0
files those commits ADDed whose key range overlaps this commit's.

Source: snaplake's own rule (issue 20 item 2, in the spirit of
:func:`~snaplake.commit.index_conflict.check_hash_replacements`). Paimon
allows one writer job per cross-partition table (its docs: "only one job
writing" for ``KEY_DYNAMIC``) and does not check.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from snaplake.commit.duplicate import data_file_paths
from snaplake.commit.message import CommitMessage
from snaplake.errors import CrossPartitionConflictError
from snaplake.mergetree.kv import encode_keys, key_column
from snaplake.mergetree.read import read_kv_file
from snaplake.mergetree.sorted_run import KeyComparator
from snaplake.store.format.manifest import FileKind, ManifestEntry, read_manifest_file
from snaplake.store.format.manifest_list import read_manifest_list
from snaplake.store.format.schema import TableSchema
from snaplake.store.format.snapshot import CommitKind, Snapshot
from snaplake.store.table_storage import TableStorage

__all__ = ["check_key_races", "key_array", "last_exact_snapshot"]

_WRITES = (CommitKind.APPEND, CommitKind.OVERWRITE)


def key_array(table: pa.Table, key: Sequence[str]) -> pa.Array:
    """One comparable value per row identifying its primary key.

    One key column: the column itself. Several: their
    :func:`~snaplake.mergetree.kv.encode_keys` encoding (one binary value,
    equal exactly when the keys are).

    Raises:
        pyarrow.ArrowInvalid: a key column's type has no string form (never for
            Paimon's atomic key types).
    """
    if len(key) == 1:
        return table.column(key[0]).combine_chunks()
    return encode_keys(table, key)


def _foreign(snap: Snapshot, commit_user: str) -> bool:
    return snap.commit_kind in _WRITES and snap.commit_user != commit_user


def last_exact_snapshot(table: TableStorage, base: int, commit_user: str) -> int:
    """The latest snapshot id a key map exact at ``base`` is still exact at for ``commit_user``.

    Walks the snapshots after ``base``: ``commit_user``'s own commits (its
    map already holds what they wrote) and COMPACT snapshots keep the map
    exact; the first other user's APPEND/OVERWRITE (or an expired snapshot)
    stops the walk.

    Args:
        table: The table's storage.
        base: The snapshot id the map is exact at (0 = the empty table).
        commit_user: The writer's commit user.

    Storage: reads the snapshot files after ``base``.
    """
    manager = table.snapshot_manager
    latest = manager.latest_snapshot_id() or 0
    for sid in range(base + 1, latest + 1):
        snap = manager.try_snapshot(sid)
        if snap is None or _foreign(snap, commit_user):
            return sid - 1
    return max(base, latest)


def _delta_entries(table: TableStorage, snap: Snapshot) -> list[ManifestEntry]:
    file_io, paths = table.file_io, table.paths
    out: list[ManifestEntry] = []
    for m in read_manifest_list(file_io, paths.manifest_path(snap.delta_manifest_list)):
        out.extend(read_manifest_file(file_io, paths.manifest_path(m.file_name)))
    return out


def _read_keys(
    table: TableStorage, schema: TableSchema, entries: Sequence[ManifestEntry]
) -> pa.Array:
    """The primary keys (see :func:`key_array`) in the data files of ``entries``."""
    key = list(schema.trimmed_primary_keys)
    fields = {f.name: f for f in schema.arrow_schema}
    file_schema = pa.schema([pa.field(key_column(k), fields[k].type) for k in key])
    parts = [
        piece.rename_columns(key)
        for path in data_file_paths(table.paths, schema, entries)
        for piece in read_kv_file(table.file_io, path, file_schema)
    ]
    if not parts:
        return pa.array([], type=fields[key[0]].type if len(key) == 1 else pa.large_binary())
    return key_array(pa.concat_tables(parts), key)


def check_key_races(
    table: TableStorage,
    latest: Snapshot | None,
    *,
    messages: Sequence[CommitMessage],
    commit_user: str,
    schema: TableSchema,
) -> None:
    """Refuse a cross-partition commit that writes a key another writer wrote since its key map.

    Messages naming no ``key_map_snapshot`` (every other kind of writer) are
    not checked. The oldest snapshot named counts (a Spark commit's tasks
    may have bootstrapped at different snapshots).

    Args:
        table: The table's storage.
        latest: The snapshot the commit would publish on.
        messages: The commit's messages.
        commit_user: Who commits (its own snapshots are in its writers' maps).
        schema: The commit's schema (key columns and types).

    Raises:
        CrossPartitionConflictError: another user's APPEND/OVERWRITE after the
            key-map snapshot wrote one of this commit's keys, or such a
            snapshot (or a file it wrote) is gone, so its keys cannot be
            read; nothing was published, naming the snapshots.

    Storage: reads the snapshot files after the key-map snapshot; only when
    another user's write is among them, the delta manifests of those and
    the key columns of overlapping level-0 files (theirs and this commit's).
    """
    bases = [
        m.data_increment.key_map_snapshot
        for m in messages
        if m.data_increment.key_map_snapshot is not None
    ]
    if not bases or latest is None or latest.id <= min(bases):
        return
    base = min(bases)
    ours = [
        ManifestEntry(
            kind=FileKind.ADD, partition=m.partition, bucket=m.bucket,
            total_buckets=m.total_buckets, file=f,
        )
        for m in messages for f in m.data_increment.new_files
    ]  # fmt: skip
    if not ours:
        return
    manager = table.snapshot_manager
    racing: list[Snapshot] = []
    for sid in range(base + 1, latest.id + 1):
        snap = manager.try_snapshot(sid)
        if snap is None:
            raise CrossPartitionConflictError(
                f"snapshot {sid}, committed after the snapshot {base} this writer's key map "
                "was read at, has expired, so the keys it wrote cannot be checked; nothing was "
                "published: abort and write these rows again (the writer reads the map anew)",
                conflicting_snapshot_ids=[sid],
            )
        if _foreign(snap, commit_user):
            racing.append(snap)
    if not racing:
        return
    cmp = KeyComparator(schema.key_types)
    low = min(cmp.min_key(e.file) for e in ours)
    high = max(cmp.max_key(e.file) for e in ours)
    theirs: dict[int, list[ManifestEntry]] = {}
    for snap in racing:
        overlapping = [
            e
            for e in _delta_entries(table, snap)
            if e.kind == FileKind.ADD
            and e.file.level == 0
            and cmp.min_key(e.file) <= high
            and cmp.max_key(e.file) >= low
        ]
        if overlapping:
            theirs[snap.id] = overlapping
    if not theirs:
        return
    mine = _read_keys(table, schema, ours)
    hits: list[int] = []
    shared: list[object] = []
    for sid, entries in theirs.items():
        try:
            written = _read_keys(table, schema, entries)
        except FileNotFoundError as exc:  # e.g. a first-row lift's level-0 file, expired
            raise CrossPartitionConflictError(
                f"a file snapshot {sid} of another writer wrote is gone ({exc}), so its keys "
                f"cannot be checked against this commit's (key map of snapshot {base}); "
                "nothing was published: abort and write these rows again",
                conflicting_snapshot_ids=[sid],
            ) from exc
        both = pc.is_in(mine, value_set=written)
        if pc.any(both).as_py():
            hits.append(sid)
            shared.extend(mine.filter(both).to_pylist()[:5])
    if hits:
        raise CrossPartitionConflictError(
            f"snapshot(s) {hits} of other writers wrote key(s) this commit writes (e.g. "
            f"{shared[:5]!r}) after the snapshot {base} this writer's key map was read at, so "
            "the key could end up in two partitions; nothing was published: abort and write "
            "these rows again (the writer reads the key map anew)",
            conflicting_snapshot_ids=hits,
        )
