"""Suite-wide settings only: Hypothesis profiles and the environment isolation."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci", max_examples=150, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _no_cloud_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never let a test reach a cloud metadata endpoint."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
