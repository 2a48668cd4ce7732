"""Scratch objects of the conditional-write probe left by a crash: ignored, then cleaned.

S3FileIO probes each bucket once by creating ``<dir>/.snaplake-probe-<uuid>`` twice and
deleting it; a process killed in between leaves the object behind. Readers must not
trip over it, and orphan clean deletes it once it is older than the grace period.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from tests.helpers import write_and_commit
from tests.integration.s3.conftest import SCHEMA

from snaplake.compaction.orphan_clean import OrphanFilesClean

pytestmark = [pytest.mark.integration, pytest.mark.s3]


def test_orphan_clean_deletes_old_probe_objects_and_readers_ignore_them(warehouse):
    table = warehouse.catalog().create_table("db.t", schema=SCHEMA)
    write_and_commit(
        table,
        pa.table({"id": [1, 2, 3], "user": ["a", "b", "c"]}, schema=SCHEMA),
        commit_user="u",
        commit_identifier=1,
    )
    prefix = "wh/db.db/t"
    assert not [k for k in warehouse.list_keys() if ".snaplake-probe-" in k]
    # What a crash mid-probe leaves, wherever the first create-only write went.
    dirs = ("manifest", "snapshot", "schema")
    left = [f"{prefix}/{d}/.snaplake-probe-{n}" for n, d in enumerate(dirs)]
    client = warehouse.endpoint.client()
    for key in left:
        client.put_object(Bucket=warehouse.bucket, Key=key, Body=b"probe-1")

    # Readers and the committer ignore them.
    reopened = warehouse.catalog().get_table("db.t")
    assert [s.id for s in reopened.snapshots()] == [1]
    assert reopened.to_arrow().num_rows == 3
    write = reopened.new_write(commit_user="u")
    write.write_arrow(pa.table({"id": [4], "user": ["d"]}, schema=SCHEMA))
    assert reopened.new_commit(commit_user="u").commit(write.prepare_commit()).snapshot_id == 2

    def clean(now: datetime) -> OrphanFilesClean:
        return OrphanFilesClean(
            file_io=reopened.file_io,
            paths=reopened.paths,
            snapshot_manager=reopened.snapshot_manager,
            now=now,
        )

    # Young probes are kept (a probe in flight is never touched) ...
    assert not [p for p in clean(datetime.now(UTC)).plan().orphan_files if ".snaplake-probe-" in p]
    # ... old ones are orphans, and only they: the table's own files stay.
    result = clean(datetime.now(UTC) + timedelta(days=2)).execute()
    assert sorted(result.orphan_files) == sorted(f"s3://{warehouse.bucket}/{k}" for k in left)
    assert not [k for k in warehouse.list_keys() if ".snaplake-probe-" in k]
    assert warehouse.catalog().get_table("db.t").to_arrow().num_rows == 4
