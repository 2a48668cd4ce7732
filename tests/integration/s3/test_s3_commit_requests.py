"""The requests of an append commit on SeaweedFS, and that the cheaper paths stay correct.

A committer without local state (a new ``FileStoreCommit``, e.g. in a new process) reads
``LATEST``, ``snapshot-N`` (that read is also the check that the hint's file exists: no
``HeadObject`` of it first), probes ``snapshot-(N+1)`` and reads both manifest lists.
A new process (a fresh S3FileIO) checks once that the server honours ``If-None-Match``
with its first manifest, put twice (the second refused with 412), instead of a scratch
object written twice and deleted. Each request is seen in the log of a fault proxy
without faults; the tests below also pin the behaviour the removed requests guarded:
stale, dangling and missing ``LATEST`` hints, and exactly-once replays after a crash
between the snapshot and ``LATEST``.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Iterator

import pyarrow as pa
import pytest
from tests.helpers import create_table
from tests.integration.s3.conftest import SCHEMA, S3Warehouse
from tests.s3_servers import FaultProxy, fault_proxy

from snaplake.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.s3]

COLD = [
    "GET snapshot/LATEST",
    "GET snapshot/snapshot-{n}",
    "HEAD snapshot/snapshot-{next}",
    "PUT manifest/manifest-*",
    "GET manifest/manifest-list-*",
    "GET manifest/manifest-list-*",
    "PUT manifest/manifest-list-*",
    "PUT manifest/manifest-list-*",
    "PUT snapshot/snapshot-{next}",
    "PUT snapshot/LATEST",
]


@pytest.fixture
def proxied(warehouse: S3Warehouse) -> Iterator[tuple[FaultProxy, S3Warehouse]]:
    """``warehouse`` reached through a fault proxy that only logs requests."""
    with fault_proxy(warehouse.endpoint) as (proxy, endpoint):
        options = {**warehouse.options, "s3.endpoint": endpoint.url}
        yield proxy, dataclasses.replace(warehouse, options=options)


def _log(proxy: FaultProxy) -> list[str]:
    """The logged requests as ``METHOD <path below the table>``, manifest names as ``*``."""
    out = []
    for method, target in proxy.requests:
        rel = target.split("/db.db/t/", 1)[-1] if "/db.db/t/" in target else target
        rel = re.sub(r"manifest-list-[^/?]+", "manifest-list-*", rel)
        rel = re.sub(r"manifest-(?!list-)[^/?]+", "manifest-*", rel)
        out.append(f"{method} {rel}")
    return out


def _cold(n: int) -> list[str]:
    return [line.format(n=n, next=n + 1) for line in COLD]


def _messages(table: Table, ident: int, *, user: str = "u"):
    write = table.new_write(commit_user=user)
    write.write_arrow(pa.table({"id": [ident], "user": [user]}, schema=SCHEMA))
    return write.prepare_commit()


def _table_with_history(warehouse: S3Warehouse, commits: int) -> Table:
    table = create_table(warehouse.catalog(), schema=SCHEMA)
    committer = table.new_commit(commit_user="u")
    for ident in range(1, commits + 1):
        committer.commit(_messages(table, ident), commit_identifier=ident)
    return table


def _ids(warehouse: S3Warehouse) -> list[int]:
    """The table's ids, read directly (the proxy answers HEAD with Content-Length 0)."""
    return sorted(warehouse.catalog().get_table("db.t").to_arrow().column("id").to_pylist())


def _latest_id(table: Table) -> int:
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    return latest.id


def test_cold_commit_reads_the_latest_snapshot_with_one_get(
    proxied, warehouse: S3Warehouse
) -> None:
    proxy, through_proxy = proxied
    table = _table_with_history(through_proxy, 3)  # through the proxy: the bucket is verified
    messages = _messages(table, 4)
    cold = table.new_commit(commit_user="u")  # no local state: rebuilds from storage
    proxy.requests.clear()
    result = cold.commit(messages, commit_identifier=4)
    assert sorted(_log(proxy)) == sorted(_cold(3))  # 10 requests, no HEAD snapshot-3
    assert result.snapshot_id == 4 and not result.was_duplicate
    # The same committer now goes steady: probe snapshot-5, no reads.
    messages = _messages(table, 5)
    proxy.requests.clear()
    cold.commit(messages, commit_identifier=5)
    assert collections.Counter(m for m, _ in proxy.requests) == {"HEAD": 1, "PUT": 5}
    assert _ids(warehouse) == [1, 2, 3, 4, 5]


def test_latest_snapshot_follows_stale_dangling_and_missing_hints(proxied) -> None:
    proxy, warehouse = proxied
    table = _table_with_history(warehouse, 3)
    sm, hint = table.snapshot_manager, table.paths.latest_hint_path
    client = warehouse.endpoint.client()
    snapshot_key = table.paths.snapshot_path(1).split(f"{warehouse.bucket}/", 1)[1]

    proxy.requests.clear()
    assert _latest_id(table) == 3  # current hint: LATEST, snapshot-3, HEAD snapshot-4
    assert _log(proxy) == [
        "GET snapshot/LATEST",
        "GET snapshot/snapshot-3",
        "HEAD snapshot/snapshot-4",
    ]

    table.file_io.write_bytes(hint, b"1", overwrite=True)  # stale: walk forward
    # The file at a stale hint is read but only decoded if it is the newest.
    client.put_object(Bucket=warehouse.bucket, Key=snapshot_key, Body=b"not a snapshot")
    proxy.requests.clear()
    assert _latest_id(table) == 3
    assert _log(proxy) == [
        "GET snapshot/LATEST",
        "GET snapshot/snapshot-1",
        "HEAD snapshot/snapshot-2",
        "HEAD snapshot/snapshot-3",
        "HEAD snapshot/snapshot-4",
        "GET snapshot/snapshot-3",
    ]

    table.file_io.write_bytes(hint, b"9", overwrite=True)  # dangling: list instead
    proxy.requests.clear()
    assert _latest_id(table) == 3
    log = _log(proxy)
    assert log[:2] == ["GET snapshot/LATEST", "GET snapshot/snapshot-9"]
    assert "list-type=2" in log[2] and log[3:] == ["GET snapshot/snapshot-3"]

    for broken in (b"garbage", None):  # unreadable or missing: list
        if broken is None:
            table.file_io.delete(hint)
        else:
            table.file_io.write_bytes(hint, broken, overwrite=True)
        assert _latest_id(table) == 3
        assert sm.latest_snapshot_id() == 3

    empty = warehouse.catalog().create_table("db.empty", schema=SCHEMA)
    assert empty.snapshot_manager.latest_snapshot() is None


def test_cold_replay_after_a_crash_before_latest_is_a_duplicate(warehouse: S3Warehouse) -> None:
    """The commit landed as snapshot-3 but LATEST still says 2: the replay must dedup."""
    table = _table_with_history(warehouse, 3)
    table.file_io.write_bytes(table.paths.latest_hint_path, b"2", overwrite=True)
    replay = table.new_commit(commit_user="u").commit(_messages(table, 3), commit_identifier=3)
    assert replay.was_duplicate and replay.snapshot_id == 3
    assert [s.id for s in table.snapshots()] == [1, 2, 3]
    nxt = table.new_commit(commit_user="u").commit(_messages(table, 4), commit_identifier=4)
    assert nxt.snapshot_id == 4 and not nxt.was_duplicate
    assert _ids(warehouse) == [1, 2, 3, 4]


def test_new_process_checks_conditional_writes_with_its_first_manifest(
    proxied, warehouse: S3Warehouse
) -> None:
    proxy, through_proxy = proxied
    _table_with_history(warehouse, 2)  # built directly, not through the proxy
    table = through_proxy.catalog().get_table("db.t")  # a fresh S3FileIO: bucket unverified
    messages = _messages(table, 3)  # the data file (write_output) needs no verification
    committer = table.new_commit(commit_user="u")
    proxy.requests.clear()
    assert committer.commit(messages, commit_identifier=3).snapshot_id == 3
    log = _log(proxy)
    assert sorted(log) == sorted([*_cold(2), "PUT manifest/manifest-*"])  # 11 requests
    manifest_puts = [t for m, t in proxy.requests if m == "PUT" and "/manifest/manifest-" in t]
    assert manifest_puts[0] == manifest_puts[1]  # the same new manifest, twice
    assert not [t for _, t in proxy.requests if ".snaplake-probe-" in t]
    assert table.file_io._verified_buckets == {warehouse.bucket}
    assert not [k for k in warehouse.list_keys() if ".snaplake-probe-" in k]
    # Verified: the next create-only writes go out once, and the table is intact.
    messages = _messages(table, 4)
    proxy.requests.clear()
    committer.commit(messages, commit_identifier=4)
    assert collections.Counter(m for m, _ in proxy.requests) == {"HEAD": 1, "PUT": 5}
    assert _ids(warehouse) == [1, 2, 3, 4]
