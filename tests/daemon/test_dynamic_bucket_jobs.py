"""The daemon's compact, expire, orphan-clean and check jobs on a dynamic-bucket table.

Each job keeps the HASH index files and index manifests its retained snapshots
reference and deletes the rest; afterwards the rows equal the model, every key
is in one bucket whose HASH file holds its hash, and a new writer's upserts
still land in the key's bucket. The daemon process itself runs on a dynamic
table in tests/integration/test_pk_writer_daemon.py.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tests.dynamic_helpers import assert_one_bucket_per_key
from tests.dynamic_maintenance_helpers import (
    age_all,
    assert_index_exactly_referenced,
    dynamic_table,
    index_on_disk,
    model,
)
from tests.pk_helpers import make_rows, sorted_rows, to_table

from snaplake.daemon.jobs import check_job, compact_job, expire_snapshots_job, orphan_clean_job
from snaplake.options import CoreOptions


def test_daemon_jobs_keep_the_hash_index_of_a_dynamic_table(tmp_path: Path) -> None:
    table = dynamic_table(str(tmp_path))
    options = CoreOptions(table.options)
    batches = [make_rows((i * 13) % 50, 20, seed=i) for i in range(6)]
    for batch in batches:  # a new writer per commit: each restores the index
        table.write(to_table(batch))

    def check(*written: list[dict[str, object]]) -> None:
        assert sorted_rows(table.to_arrow()) == model(*written)
        assert assert_one_bucket_per_key(table) > 3

    check(*batches)
    compacted = compact_job(table, options=options)
    assert compacted.acted and compacted.files_compacted > 0
    check(*batches)
    expired = expire_snapshots_job(table, options=options)
    assert expired.acted and expired.snapshots_expired > 0
    assert_index_exactly_referenced(table)  # replaced HASH files and manifests deleted
    check(*batches)
    # A writer that died after prepare_commit left data and HASH files behind.
    crashed = table.new_write(commit_user="crashed")
    crashed.write_arrow(to_table(make_rows(200, 12, seed=9)))
    crashed.prepare_commit()
    stray = index_on_disk(table)[1]
    assert_one_bucket_per_key(table)
    age_all(table, 3 * 86400)
    cleaned = orphan_clean_job(table, older_than=timedelta(hours=1))
    assert cleaned.acted and cleaned.files_deleted.get("data", 0) > 0
    assert index_on_disk(table)[1] < stray
    assert_index_exactly_referenced(table)
    check(*batches)
    checked = check_job(table).check
    assert checked.files_checked > 0 and not checked.mismatches
    more = make_rows(0, 60, seed=10)
    table.write(to_table(more))
    check(*batches, more)
    assert compact_job(table, options=options).acted
    check(*batches, more)
