"""On S3, a failure after ``snapshot-N`` was put never destroys the published snapshot (18.1).

SeaweedFS behind the fault proxy: the conditional PUT of ``snapshot-2`` lands and then its
answer is lost (a 500), an unexpected error or an interrupt follows the PUT, the ``LATEST``
hint's PUT fails, or a commit listener is interrupted. Each time every object the retained
snapshots reference is still there, reads work, a replay is a duplicate and the next commit
lands.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from tests.helpers import referenced_files, write_and_commit
from tests.integration.s3.conftest import SCHEMA, S3Warehouse
from tests.s3_servers import FaultRule, fault_proxy

from snaplake.commit.result import add_commit_listener, remove_commit_listener
from snaplake.store.io.s3.file_io import S3FileIO

pytestmark = [pytest.mark.integration, pytest.mark.s3]

STEPS = [
    "answer-lost",
    "error-after-put",
    "interrupt-after-put",
    "exit-after-put",
    "hint-fails",
    "listener-interrupt",
]


def _data(start: int, n: int = 4) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "user": ["u"] * n}, schema=SCHEMA)


def _is_put_of(name: str):
    return lambda method, target, headers: method == "PUT" and target.split("?")[0].endswith(name)


@pytest.mark.parametrize("step", STEPS)
def test_failure_after_the_snapshot_put_keeps_it(warehouse: S3Warehouse, monkeypatch, step):
    with fault_proxy(warehouse.endpoint) as (proxy, endpoint):
        options = {**warehouse.options, **endpoint.options(**{"s3.max-attempts": "1"})}
        catalog = S3Warehouse(
            endpoint=endpoint, bucket=warehouse.bucket, uri=warehouse.uri, options=options
        ).catalog()
        table = catalog.create_table("db.t", schema=SCHEMA)
        write_and_commit(table, _data(0), commit_user="u", commit_identifier=1)
        snapshot_2 = table.paths.snapshot_path(2)
        hits: list[str] = []
        if step == "answer-lost":
            rule = proxy.add_rule(
                FaultRule(_is_put_of("snapshot-2"), 500, "InternalError", forward_first=True)
            )
        elif step == "hint-fails":
            rule = proxy.add_rule(FaultRule(_is_put_of("LATEST"), 500, "InternalError", times=None))
        elif step == "listener-interrupt":

            def listener(event):
                if not hits:
                    hits.append(step)
                    raise KeyboardInterrupt

            add_commit_listener(listener)
        else:
            errors: dict[str, Callable[[], BaseException]] = {
                "error-after-put": lambda: RuntimeError("injected after the put"),
                "interrupt-after-put": KeyboardInterrupt,
                "exit-after-put": lambda: SystemExit(3),
            }
            error = errors[step]
            real = S3FileIO.write_if_absent

            def write_if_absent(self, path, data):
                real(self, path, data)
                if path == snapshot_2 and not hits:
                    hits.append(step)
                    raise error()

            monkeypatch.setattr(S3FileIO, "write_if_absent", write_if_absent)
        write = table.new_write(commit_user="u")
        write.write_arrow(_data(100))
        messages = write.prepare_commit()
        interrupted = None
        try:
            result = table.new_commit(commit_user="u").commit(messages, commit_identifier=2)
        except (KeyboardInterrupt, SystemExit) as exc:
            interrupted = exc
        finally:
            if step == "listener-interrupt":
                remove_commit_listener(listener)
        if step in ("answer-lost", "hint-fails"):
            assert rule.hits >= 1, "the fault was not reached"
        else:
            assert hits == [step], "the fault was not reached"
        if step.startswith(("interrupt", "exit", "listener")):
            assert interrupted is not None
        else:
            assert interrupted is None and result.snapshot_id == 2
        proxy.clear()
        latest = table.latest_snapshot()
        assert latest is not None and latest.id == 2
        for path in referenced_files(table):
            assert table.file_io.exists(path), f"{path} is referenced but was deleted"
        assert sorted(table.to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 100, 101, 102, 103]
        replay = table.new_commit(commit_user="u").commit(messages, commit_identifier=2)
        assert replay.was_duplicate and replay.snapshot_id == 2
        assert (
            write_and_commit(table, _data(200), commit_user="u", commit_identifier=3).snapshot_id
            == 3
        )
        assert table.to_arrow().num_rows == 12
