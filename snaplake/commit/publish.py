"""Publishing one snapshot file create-if-absent, with the uncertain outcome resolved.

:func:`publish_snapshot` is the commit point of every commit: it creates
``snapshot-<id>`` through :meth:`FileIO.publish` (a local hard link of a
fsynced temp file, an S3 ``PutObject`` with ``If-None-Match: *``), making
durable first the files the snapshot references that were written for it.
A storage failure that leaves the outcome open is resolved by reading the
snapshot back; if that keeps failing, :class:`CommitStateUnknownError`
leaves everything in place.

Source: Paimon ``SnapshotCommit`` / ``RenamingSnapshotCommit`` (the publish;
snaplake never renames over an existence check).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection

from snaplake.errors import CommitStateUnknownError, FileAlreadyExistsError, StorageError
from snaplake.store.format.paths import PathFactory
from snaplake.store.format.snapshot import Snapshot
from snaplake.store.io.file_io import FileIO

__all__ = ["UNCERTAIN_READBACKS", "directories_of", "publish_snapshot"]

logger = logging.getLogger(__name__)

UNCERTAIN_READBACKS = 5
"""Publish attempts of one snapshot whose outcome storage left open, before giving up."""


def directories_of(root: str, files: Collection[str]) -> list[str]:
    """Directories whose entries make ``files`` reachable, up to the table ``root``, sorted."""
    root = root.rstrip("/")
    dirs: set[str] = set()
    for path in files:
        d = os.path.dirname(path)
        while d not in dirs:
            dirs.add(d)
            if d == root or not d.startswith(root + "/"):
                break
            d = os.path.dirname(d)
    return sorted(dirs)


def publish_snapshot(
    file_io: FileIO,
    paths: PathFactory,
    snapshot: Snapshot,
    *,
    durable: Collection[str],
    readback_wait_s: float,
    sleep: Callable[[float], None],
    table_name: str,
) -> bool:
    """Create ``snapshot-<id>``; True if ours landed, False if the race was lost.

    Args:
        file_io: Storage of the table.
        paths: The table's PathFactory.
        snapshot: The snapshot to publish.
        durable: Paths made durable (with their directories) before the
            snapshot becomes visible.
        readback_wait_s: Seconds to wait after an uncertain attempt.
        sleep: Sleeps seconds (tests inject one that does not).
        table_name: ``db.table`` for logs.

    Returns:
        True when ``snapshot-<id>`` holds exactly this snapshot (also when a
        step after the commit point failed: logged), False when another
        writer's snapshot took the id first.

    Raises:
        CommitStateUnknownError: repeated storage failures (or a failed
            read-back) left the outcome open; nothing may be cleaned up.
        OSError: the publish failed before the commit point (nothing landed).

    Storage:
        Writes ``snapshot/snapshot-<id>`` create-if-absent, at most
        :data:`UNCERTAIN_READBACKS` times; reads it back after an uncertain
        attempt.
    """
    path = paths.snapshot_path(snapshot.id)
    data = snapshot.to_bytes()
    directories = directories_of(paths.root, durable)
    last_error: StorageError | None = None
    for _ in range(UNCERTAIN_READBACKS):
        try:
            file_io.publish(path, data, files=durable, directories=directories)
            return True
        except FileAlreadyExistsError:
            if last_error is None:
                return False
            # An earlier uncertain attempt may have landed: compare content.
            return file_io.read_bytes(path) == data
        except StorageError as exc:
            last_error = exc
            logger.warning("publishing %s had an uncertain outcome; reading back", path,
                           exc_info=True)  # fmt: skip
            try:
                if file_io.exists(path):
                    return file_io.read_bytes(path) == data
            except OSError:
                logger.warning("read-back of %s failed", path, exc_info=True)
            sleep(readback_wait_s)
        except Exception as exc:
            # FileIO.publish raises these only before the commit point, except a
            # step after it (the temp name, the directory fsync): read back.
            if _landed_after(file_io, path, data, snapshot, exc, table_name):
                return True
            if last_error is not None and not file_io.exists(path):
                last_error = StorageError(str(exc), path=path, operation="publish")
                break  # an earlier uncertain attempt may still land: keep everything
            raise
    raise CommitStateUnknownError(
        f"publishing {path} failed without telling whether it "
        f"landed ({last_error}); check the table history for commit user "
        f"{snapshot.commit_user!r} identifier {snapshot.commit_identifier} before retrying "
        "(a retry with the same identifier is deduplicated)",
        commit_identifier=snapshot.commit_identifier,
        snapshot_id=snapshot.id,
    ) from last_error


def _landed_after(
    file_io: FileIO,
    path: str,
    data: bytes,
    snapshot: Snapshot,
    error: Exception,
    table_name: str,
) -> bool:
    """Whether ``snapshot`` landed although publishing it raised ``error``.

    Returns:
        True when ``path`` holds exactly ``data`` (the error came after
        the commit point: logged, the commit succeeded); False when
        ``path`` is absent or holds another writer's snapshot (nothing of
        ours was published: ``error`` stands).

    Raises:
        CommitStateUnknownError: ``path`` cannot be read back.
    """
    try:
        content = file_io.read_bytes(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise CommitStateUnknownError(
            f"publishing {path} failed ({error}) and reading it back failed ({exc}); "
            f"check the table history for commit user {snapshot.commit_user!r} identifier "
            f"{snapshot.commit_identifier} before retrying (a retry with the same "
            "identifier is deduplicated)",
            commit_identifier=snapshot.commit_identifier,
            snapshot_id=snapshot.id,
        ) from error
    if content != data:
        return False
    logger.warning(
        "snapshot %d of %s was published, then a later step failed (%r); the commit "
        "stands", snapshot.id, table_name, error, exc_info=error,
    )  # fmt: skip
    return True
