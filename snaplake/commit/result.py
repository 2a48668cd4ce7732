"""CommitResult and the commit listener hook (how metrics learn about commits).

The core never imports a metrics library: ``snaplake.metrics`` registers a
listener here and turns :class:`CommitEvent` objects into Prometheus samples.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from snaplake.store.format.snapshot import CommitKind

__all__ = [
    "CommitEvent",
    "CommitOutcome",
    "CommitResult",
    "add_commit_listener",
    "notify_commit_listeners",
    "remove_commit_listener",
]

logger = logging.getLogger(__name__)


class CommitOutcome(StrEnum):
    """How a commit call ended (bounded label values for metrics)."""

    SUCCESS = "success"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    EXHAUSTED = "exhausted"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitResult:
    """What ``FileStoreCommit.commit`` did.

    Attributes:
        snapshot_id: The new snapshot, or, when ``was_duplicate``, the
            snapshot that holds the commit's identifier (``None`` when it is
            no longer retained); ``None`` also when nothing was committed
            because the messages were empty and the table has no snapshot.
        kind: The commit kind.
        attempts: Publish attempts made (1 = no lost race).
        duration_s: Wall time of the whole call, seconds.
        files_added: Data files ADDed.
        files_deleted: Data files DELETEd.
        records_added: Rows added minus rows deleted.
        was_duplicate: The (commit_user, commit_identifier) counts as committed
            already (the user committed it or a higher identifier); nothing
            was published and the messages' unreferenced data files were deleted.
    """

    snapshot_id: int | None
    kind: CommitKind
    attempts: int
    duration_s: float
    files_added: int
    files_deleted: int
    records_added: int
    was_duplicate: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitEvent:
    """Sent to listeners after every commit call, successful or not.

    Attributes:
        table: The table's name (``db.table``) — a bounded label.
        kind: Commit kind.
        outcome: How the call ended.
        attempts: Attempts made.
        duration_s: Wall time, seconds.
        result: The result on success/duplicate, else ``None``.
    """

    table: str
    kind: CommitKind
    outcome: CommitOutcome
    attempts: int
    duration_s: float
    result: CommitResult | None


_listeners: list[Callable[[CommitEvent], None]] = []
_lock = threading.Lock()


def add_commit_listener(listener: Callable[[CommitEvent], None]) -> None:
    """Call ``listener(event)`` after every commit in this process."""
    with _lock:
        _listeners.append(listener)


def remove_commit_listener(listener: Callable[[CommitEvent], None]) -> None:
    """Stop calling ``listener``; unknown listeners are ignored."""
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def notify_commit_listeners(event: CommitEvent) -> None:
    """Deliver ``event``; a failing listener is logged and never fails the commit."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            logger.warning("commit listener %r failed", listener, exc_info=True)
