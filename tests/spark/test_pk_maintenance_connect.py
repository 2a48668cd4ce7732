"""snaplake.spark.compact on primary-key tables over Spark Connect (a local server).

The bucket units run in the server's Python workers; planning and the commit run
here, in the Connect client, as in the daemon's delegation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.oracle import requires_paimon
from tests.oracle.java_paimon import requires_java_paimon
from tests.spark import pk_maintenance_checks as checks
from tests.spark.test_connect import connect  # noqa: F401 - the module's Connect session

from snaplake.spark._common import is_connect

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]


@requires_paimon
@requires_java_paimon
@pytest.mark.parametrize("full", [False, True])
def test_compact_equals_table_compact(connect: Any, tmp_path: Path, full: bool) -> None:  # noqa: F811
    assert is_connect(connect)
    checks.check_compact_equals_in_process(connect, tmp_path, full=full)


@requires_paimon
@requires_java_paimon
@pytest.mark.slow
def test_compact_while_a_writer_upserts(connect: Any, tmp_path: Path) -> None:  # noqa: F811
    checks.check_compact_with_concurrent_upserts(connect, tmp_path)


@pytest.mark.s3
def test_compact_on_s3_seaweedfs(connect: Any) -> None:  # noqa: F811
    from tests.s3_servers import start_seaweedfs

    server = start_seaweedfs()
    try:
        checks.check_compact_on_s3(connect, server.endpoint)
    finally:
        server.stop()
