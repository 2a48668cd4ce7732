"""The gap the spec surfaced, on the real implementation: retrying an unknown outcome late.

A commit whose publish outcome stayed unknown (``CommitStateUnknownError``) keeps its data
files, unreferenced. Once orphan clean's grace has passed, a clean deletes them; the caller's
retry with the same identifier and messages must then not publish a snapshot naming missing
files (spec/commit.qnt ``RETRY_VERIFIES_FILES``, broken variant ``retryTrustsFiles``).
Shared by the local test (tests/spec/) and the SeaweedFS one (tests/integration/s3/).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from snaplake.errors import CommitFilesMissingError, CommitStateUnknownError, StorageError


@contextmanager
def publish_times_out(table: Any) -> Iterator[None]:
    """Every publish of ``table``'s FileIO fails before the commit point with a timeout."""
    real = table.file_io.publish

    def failing(path: str, *_a: Any, **_k: Any) -> None:
        raise StorageError("injected timeout", path=path, operation="publish")

    table.file_io.publish = failing
    try:
        yield
    finally:
        table.file_io.publish = real


def data_paths(table: Any, messages: Any) -> list[str]:
    """Full paths of the data files ``messages`` add."""
    schema = table.schema()
    return [
        table.paths.data_file_path(schema.partition_path_of(m.partition), m.bucket, f.file_name)
        for m in messages
        for f in m.data_increment.new_files
    ]


def _messages(table: Any, batch: pa.Table) -> list[Any]:
    write = table.new_write(commit_user="u")
    write.write_arrow(batch)
    return list(write.prepare_commit())


def check_retry_after_orphan_clean_is_refused(table: Any, batch: pa.Table) -> None:
    """Unknown outcome, clean past the grace, retry: ``CommitFilesMissingError``, nothing lands."""
    messages = _messages(table, batch)
    paths = data_paths(table, messages)
    with publish_times_out(table), pytest.raises(CommitStateUnknownError):
        table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert table.latest_snapshot() is None
    assert all(table.file_io.exists(p) for p in paths)  # kept: the snapshot might exist
    table.remove_orphan_files(older_than=datetime.now(UTC), dry_run=False)  # grace passed
    assert not any(table.file_io.exists(p) for p in paths)
    # The caller's retry (a new committer of the same process): refused before writing.
    with pytest.raises(CommitFilesMissingError) as err:
        table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert sorted(err.value.paths) == sorted(paths)
    assert table.latest_snapshot() is None
    # Writing the rows again is the way out; the identifier is still free.
    result = table.new_commit(commit_user="u").commit(_messages(table, batch), commit_identifier=1)
    assert (result.snapshot_id, result.was_duplicate) == (1, False)
    assert table.to_arrow().num_rows == batch.num_rows


def check_retry_within_grace_lands(table: Any, batch: pa.Table) -> None:
    """Unknown outcome, retry before any clean: the files are checked, found, published once."""
    messages = _messages(table, batch)
    with publish_times_out(table), pytest.raises(CommitStateUnknownError):
        table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    result = table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert (result.snapshot_id, result.was_duplicate) == (1, False)
    again = table.new_commit(commit_user="u").commit(messages, commit_identifier=1)
    assert (again.snapshot_id, again.was_duplicate) == (1, True)
    assert table.to_arrow().num_rows == batch.num_rows
    assert all(table.file_io.exists(p) for p in data_paths(table, messages))
