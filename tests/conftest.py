"""Suite-wide settings and fixtures: Hypothesis profiles, environment isolation, ``catalog``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci", max_examples=150, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session", autouse=True)
def _shared_pypaimon_driver() -> Iterator[None]:
    """One pypaimon driver process answers the oracle calls of the run (``shared_driver``)."""
    from tests.oracle import shared_driver

    with shared_driver():
        yield


@pytest.fixture(autouse=True)
def _no_cloud_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never let a test reach a cloud metadata endpoint."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A FileSystemCatalog over a fresh warehouse: ``tmp_path / "wh"`` on local disk.

    Parametrize it indirectly to run a module on both file systems:
    ``pytest.mark.parametrize("catalog", ["local", "memory"], indirect=True)``
    (``"memory"``: pyarrow's in-process ``memory://`` file system).
    """
    import snaplake

    where = getattr(request, "param", "local")
    if where == "memory":
        return snaplake.FileSystemCatalog(f"memory://{tmp_path.name}")
    assert where == "local", where
    return snaplake.FileSystemCatalog(str(tmp_path / "wh"))
