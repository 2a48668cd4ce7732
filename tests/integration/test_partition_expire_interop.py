"""Partition expiry of tables pypaimon 2.1.0 writes: pypaimon and Java Paimon 0.9 see them gone.

pypaimon writes day partitions (old and recent) while snaplake expires partitions
on a fixed clock; after each drop pypaimon and Java read exactly the rows of
the live partitions, and pypaimon writing into an expired partition again
brings it back for every reader.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import assert_java_rows, assert_same_rows, write_and_commit
from tests.oracle import PaimonOracle, requires_paimon
from tests.oracle.java_paimon import JavaPaimon, requires_java_paimon

from snaplake.catalog import FileSystemCatalog
from snaplake.store.format.decoded_cache import metadata_cache
from snaplake.store.format.snapshot import CommitKind

pytestmark = [pytest.mark.integration, requires_paimon, requires_java_paimon]

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string()),
     pa.field("v", pa.string())]
)  # fmt: skip
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def _day(days_ago: int) -> str:
    return (NOW.astimezone() - timedelta(days=days_ago)).strftime("%Y%m%d")


def _rows(start: int, days: list[int], per: int = 4) -> pa.Table:
    ids = list(range(start, start + per * len(days)))
    dts = [_day(d) for d in days for _ in range(per)]
    return pa.table({"id": ids, "dt": dts, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def _sorted(t: pa.Table) -> pa.Table:
    return t.select(["id", "dt", "v"]).sort_by("id")


def _check(oracle: PaimonOracle, table, name: str, expected: pa.Table) -> None:
    metadata_cache.clear()
    assert_same_rows(table.to_arrow(), expected)
    assert_same_rows(oracle.read(name), expected)
    assert_java_rows(JavaPaimon().read(Path(table.root)).rows, _sorted(expected), context=name)


@pytest.mark.parametrize("primary_keys", [(), ("dt", "id")], ids=["append", "primary-key"])
def test_pypaimon_writes_while_snaplake_expires_partitions(tmp_path, primary_keys):
    wh = tmp_path / "wh"
    oracle = PaimonOracle(wh)
    options = {
        "partition.expiration-time": "7 d",
        "partition.timestamp-formatter": "yyyyMMdd",
        **({"bucket": "2"} if primary_keys else {}),
    }
    oracle.create_table(
        "db.t", SCHEMA, partition_keys=["dt"], primary_keys=list(primary_keys), options=options
    )
    first = _rows(0, [30, 20, 10, 3, 1])
    oracle.write("db.t", first, commits=2)
    table = FileSystemCatalog(str(wh)).get_table("db.t")
    result = table.expire_partitions(now=NOW)
    assert [p.spec["dt"] for p in result.partitions] == [_day(30), _day(20), _day(10)]
    latest = table.latest_snapshot()
    assert latest is not None and latest.commit_kind == CommitKind.OVERWRITE
    live = first.filter(pa.compute.is_in(first["dt"], pa.array([_day(3), _day(1)])))
    _check(oracle, table, "db.t", live)

    # pypaimon keeps writing: new days, and a late row into an expired partition.
    more = _rows(100, [0, 20])
    oracle.write("db.t", more)
    expected = pa.concat_tables([live, more])
    _check(oracle, table, "db.t", expected)
    # snaplake appends too, then the next check drops the expired partition again.
    write_and_commit(table, _rows(200, [2]))
    second = table.expire_partitions(now=NOW)
    assert [p.spec["dt"] for p in second.partitions] == [_day(20)]
    expected = pa.concat_tables([live, more, _rows(200, [2])])
    expected = expected.filter(pa.compute.not_equal(expected["dt"], _day(20)))
    _check(oracle, table, "db.t", expected)
