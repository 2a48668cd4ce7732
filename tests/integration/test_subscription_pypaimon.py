"""pypaimon 2.1.0 and snaplake share consumers: the same file, the same ids, no lease in sight."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pyarrow as pa
import pytest
from tests.oracle import paimon_python, requires_paimon

import snaplake

pytestmark = [pytest.mark.integration, requires_paimon]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])

PYPAIMON = textwrap.dedent(
    """
    import json, sys
    from pypaimon import CatalogFactory
    from pypaimon.consumer.consumer import Consumer
    from pypaimon.consumer.consumer_manager import ConsumerManager
    table = CatalogFactory.create({"warehouse": sys.argv[1]}).get_table("db.t")
    manager = ConsumerManager(table.file_io, table.table_path)
    before = manager.consumers()
    manager.reset_consumer("from-pypaimon", Consumer(next_snapshot=2))
    print(json.dumps({"before": before, "ids": sorted(manager.list_all_ids()),
                      "min": manager.min_next_snapshot()}))
    """
)


def test_pypaimon_reads_snaplake_consumers_and_snaplake_resumes_pypaimons(tmp_path):
    warehouse = str(tmp_path / "wh")
    table = snaplake.FileSystemCatalog(warehouse).create_table("db.t", schema=SCHEMA)
    for k in range(3):
        table.write(pa.table({"id": [k]}, schema=SCHEMA))
    with table.subscribe("job-a", stop_when_idle=True) as subscription:
        for batch in subscription:
            batch.ack()
        # while the lease is held: pypaimon lists consumers, never the lease
        out = subprocess.run([str(paimon_python()), "-c", PYPAIMON, warehouse],
                             capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    seen = json.loads(out.stdout)
    assert seen["before"] == {"job-a": 4}
    assert seen["ids"] == ["from-pypaimon", "job-a"]
    assert seen["min"] == 2
    # pypaimon's consumer resumes in snaplake from its nextSnapshot
    with table.subscribe("from-pypaimon", start="earliest", stop_when_idle=True) as subscription:
        assert [b.snapshot_id for b in subscription] == [2, 3]
