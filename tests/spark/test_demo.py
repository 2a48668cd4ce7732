"""`make demo` in CI: the shortened flights streaming job (20 files) runs and its checks pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.spark.conftest import REPO_ROOT, spark_env

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_demo_ci_variant_passes_its_checks(tmp_path: Path) -> None:
    """Stream, crash after a commit, restart, maintain, verify with snaplake and pypaimon."""
    cmd = [
        sys.executable, str(REPO_ROOT / "demo" / "flights_demo.py"),
        "--warehouse", str(tmp_path / "warehouse"),
        "--work-dir", str(tmp_path / "work"),
        "--files", "20", "--rate", "10", "--metrics-listen", "auto",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, env={**os.environ, **spark_env()}, capture_output=True, text=True, timeout=600
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-4000:]
    assert "all checks passed" in out
    assert "check killed batch replayed as a no-op: OK" in out
    assert "check rows read by pypaimon: OK (336776)" in out
    assert "check flight_status rows: OK (328521)" in out
    assert "check flight_status equals flights minus the cancelled (every column): OK" in out
    assert "check route_stats equals a pandas group-by: OK" in out
    assert "check pypaimon reads route_stats exactly: OK" in out
