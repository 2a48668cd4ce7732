"""snaplake.spark.compact and remove_orphan_files on a Spark Connect session (a local server).

The server is its own JVM on 127.0.0.1 (``start_connect_server``); the units and the
listing/deletion tasks are pickled to it and run in its Python workers, while
planning and the commit run here, in the Connect client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.oracle import requires_paimon
from tests.spark import maintenance_checks as checks
from tests.spark.test_connect import connect  # noqa: F401 - the module's Connect session

from snaplake.spark._common import is_connect

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]


@requires_paimon
def test_compact_equals_table_compact(connect: Any, tmp_path: Path) -> None:  # noqa: F811
    assert is_connect(connect)
    checks.check_compact_equals_in_process(connect, tmp_path, full=False)


@requires_paimon
@pytest.mark.slow
def test_compact_while_a_writer_commits(connect: Any, tmp_path: Path) -> None:  # noqa: F811
    checks.check_compact_with_concurrent_writer(connect, tmp_path)


def test_remove_orphan_files_equals_table_remove_orphan_files(
    connect: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    checks.check_remove_orphan_files_equals_in_process(connect, tmp_path)


@pytest.mark.s3
def test_compact_on_s3_seaweedfs(connect: Any) -> None:  # noqa: F811
    from tests.s3_servers import start_seaweedfs

    server = start_seaweedfs()
    try:
        checks.check_compact_on_s3(connect, server.endpoint)
    finally:
        server.stop()
