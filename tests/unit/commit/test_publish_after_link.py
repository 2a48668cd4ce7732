"""A failure after ``snapshot-N`` is linked never destroys the published snapshot (issue 18.1).

Each step that runs after the commit point (removing the temp name, the directory fsync, the
``LATEST`` hint, the commit listeners) is made to fail with an I/O error, an unexpected
exception, ``KeyboardInterrupt`` or ``SystemExit``, on a real local table. Whatever the step
and the error: the snapshot stays published with every file it references, reads work, the
next commit lands, and a replay of the same identifier is a duplicate.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

import pytest
from tests.helpers import create_table, referenced_files, rows, sorted_ids, write_and_commit

from snaplake.commit.result import add_commit_listener, remove_commit_listener
from snaplake.errors import CommitStateUnknownError, CorruptMetadataError, StorageError
from snaplake.store.io import local_file_io
from snaplake.store.io.memory_file_io import InMemoryFileIO

STEPS = ["unlink-temp", "directory-fsync", "latest-hint", "listener"]
ERRORS: dict[str, Callable[[], BaseException]] = {
    "eio": lambda: OSError(errno.EIO, "injected EIO"),
    "runtime": lambda: RuntimeError("injected"),
    "keyboard-interrupt": KeyboardInterrupt,
    "system-exit": lambda: SystemExit(3),
}


@pytest.fixture
def table(tmp_path):
    table = create_table(tmp_path / "wh", partition_keys=["month"])
    write_and_commit(table, rows(0, 6), commit_user="u", commit_identifier=1)
    return table


def _inject(monkeypatch, request, table, step: str, error) -> list[str]:
    """Make ``step`` fail once, after ``snapshot-2`` is linked; return the list of hits."""
    snapshot_2 = table.paths.snapshot_path(2)
    hits: list[str] = []

    def once() -> bool:
        if hits or not os.path.exists(snapshot_2):
            return False
        hits.append(step)
        return True

    if step == "unlink-temp":
        real_unlink = os.unlink

        def unlink(path, *a, **kw):
            if ".tmp" in str(path) and "snapshot" in str(path) and once():
                real_unlink(path, *a, **kw)
                raise error()
            return real_unlink(path, *a, **kw)

        monkeypatch.setattr(os, "unlink", unlink)
    elif step == "directory-fsync":
        real_sync = local_file_io._sync_path

        def sync(path, *, directory):
            if directory and path == os.path.dirname(snapshot_2) and once():
                raise error()
            return real_sync(path, directory=directory)

        monkeypatch.setattr(local_file_io, "_sync_path", sync)
    elif step == "latest-hint":
        real_hint = type(table.file_io).write_hint

        def write_hint(self, path, data):
            if once():
                raise error()
            return real_hint(self, path, data)

        monkeypatch.setattr(type(table.file_io), "write_hint", write_hint)
    else:

        def listener(event):
            if once():
                raise error()

        add_commit_listener(listener)
        request.addfinalizer(lambda: remove_commit_listener(listener))
    return hits


@pytest.mark.parametrize("error_name", list(ERRORS))
@pytest.mark.parametrize("step", STEPS)
def test_failure_after_the_link_keeps_the_published_snapshot(
    table, monkeypatch, request, step, error_name
):
    hits = _inject(monkeypatch, request, table, step, ERRORS[error_name])
    commit = table.new_commit(commit_user="u")
    write = table.new_write(commit_user="u")
    write.write_arrow(rows(100, 6))
    messages = write.prepare_commit()
    interrupted: BaseException | None = None
    try:
        result = commit.commit(messages, commit_identifier=2)
    except (KeyboardInterrupt, SystemExit) as exc:
        interrupted = exc
    assert hits == [step], "the fault was not reached"
    if error_name in ("keyboard-interrupt", "system-exit"):
        # An interrupt is not swallowed, but it leaves the table as a crash would.
        assert interrupted is not None
    else:
        assert interrupted is None, interrupted
        assert result.snapshot_id == 2 and not result.was_duplicate
    assert table.latest_snapshot().id == 2
    for path in referenced_files(table):
        assert os.path.exists(path), f"{path} is referenced by a snapshot but was deleted"
    assert sorted_ids(table.to_arrow()) == list(range(6)) + list(range(100, 106))
    # A replay of the identifier is a duplicate; the next commit lands.
    assert table.new_commit(commit_user="u").commit(messages, commit_identifier=2).was_duplicate
    write_and_commit(table, rows(200, 3), commit_user="u", commit_identifier=3)
    assert table.latest_snapshot().id == 3
    assert len(table.to_arrow()) == 15


def test_failure_before_the_link_publishes_nothing_and_cleans_up(table, monkeypatch):
    """An fsync failure of a referenced file is certain: nothing published, lists deleted."""
    real_sync = local_file_io._sync_path

    def sync(path, *, directory):
        if not directory and "manifest-list" in path:
            raise OSError(errno.EIO, "injected EIO")
        return real_sync(path, directory=directory)

    monkeypatch.setattr(local_file_io, "_sync_path", sync)
    manifests_before = sorted(os.listdir(table.paths.manifest_dir))
    with pytest.raises(OSError, match="injected EIO"):
        write_and_commit(table, rows(100, 6), commit_user="u", commit_identifier=2)
    monkeypatch.undo()
    assert table.latest_snapshot().id == 1
    assert sorted(os.listdir(table.paths.manifest_dir)) == manifests_before
    write_and_commit(table, rows(100, 6), commit_user="u", commit_identifier=2)
    assert table.latest_snapshot().id == 2


def test_latest_snapshot_with_missing_lists_is_corrupt_not_a_lost_race(table):
    """A latest snapshot whose manifest list is gone raises at once, naming the list."""
    snap = table.latest_snapshot()
    os.unlink(table.paths.manifest_path(snap.delta_manifest_list))
    with pytest.raises(CorruptMetadataError, match=snap.delta_manifest_list) as err:
        write_and_commit(table, rows(100, 6), commit_user="u", commit_identifier=2)
    assert err.value.path == table.paths.manifest_path(snap.delta_manifest_list)
    assert table.latest_snapshot().id == 1


def test_snapshot_whose_id_does_not_match_its_file_name_is_corrupt(table):
    """``snapshot-2`` holding id 1 would make every commit lose the race for id 2 forever."""
    path = table.paths.snapshot_path(1)
    with open(path, "rb") as f:
        data = f.read()
    with open(table.paths.snapshot_path(2), "wb") as f:
        f.write(data)
    with pytest.raises(CorruptMetadataError, match="snapshot-2") as err:
        write_and_commit(table, rows(100, 6), commit_user="u", commit_identifier=2)
    assert err.value.path == table.paths.snapshot_path(2)
    with pytest.raises(CorruptMetadataError, match="snapshot-2"):
        table.to_arrow()


@pytest.mark.parametrize("error_name", ["eio", "keyboard-interrupt"])
def test_compaction_interrupted_after_the_link_keeps_its_outputs(table, monkeypatch, error_name):
    """A COMPACT snapshot is kept whole too: the rewritten files it adds are not aborted."""
    for i in range(1, 6):
        write_and_commit(table, rows(i * 10, 3), commit_user="u", commit_identifier=i + 1)
    latest = table.latest_snapshot().id
    target = table.paths.snapshot_path(latest + 1)
    real_sync = local_file_io._sync_path
    hits: list[str] = []

    def sync(path, *, directory):
        if directory and os.path.exists(target) and not hits:
            hits.append(path)
            raise ERRORS[error_name]()
        return real_sync(path, directory=directory)

    monkeypatch.setattr(local_file_io, "_sync_path", sync)
    try:
        table.compact(full=True)
    except KeyboardInterrupt:
        assert error_name == "keyboard-interrupt"
    assert hits, "the fault was not reached"
    assert table.latest_snapshot().commit_kind.value == "COMPACT"
    for path in referenced_files(table):
        assert os.path.exists(path), f"{path} is referenced by a snapshot but was deleted"
    assert len(table.to_arrow()) == 6 + 15


def test_certain_error_after_an_uncertain_attempt_keeps_everything():
    """An uncertain publish, then an error that would be certain alone: the first may land."""
    table = create_table("memory://after-uncertain", partition_keys=["month"])
    fio = table.file_io
    assert isinstance(fio, InMemoryFileIO)
    fio.inject_fault(
        "write_if_absent", path_contains="snapshot-1",
        error=lambda p: StorageError("timeout", path=p, operation="write_if_absent"),
    )  # fmt: skip
    fio.inject_fault(
        "write_if_absent", path_contains="snapshot-1", nth=2,
        error=lambda p: OSError(errno.EIO, "injected EIO"),
    )  # fmt: skip
    write = table.new_write(commit_user="u")
    write.write_arrow(rows(0, 3))
    messages = write.prepare_commit()
    with pytest.raises(CommitStateUnknownError):
        table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    manifests = [s.path for s in fio.list_files(table.paths.manifest_dir)]
    assert len(manifests) == 3  # the delta manifest and both lists stay for a late landing
    assert table.new_commit(commit_user="u").commit(messages, commit_identifier=1).snapshot_id == 1
    assert table.to_arrow().num_rows == 3
