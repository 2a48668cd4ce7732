"""Fixtures for the storage tests: S3 servers and a FileIO on every backend."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.s3_servers import MotoServer, S3Endpoint, SeaweedServer, start_moto, start_seaweedfs

from snaplake.store.io.file_io import FileIO
from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.store.io.memory_file_io import InMemoryFileIO


@pytest.fixture(scope="session", autouse=True)
def _no_ec2_metadata() -> Iterator[None]:
    """Keep boto3 and the AWS C++ SDK from probing the EC2 metadata service."""
    saved = os.environ.get("AWS_EC2_METADATA_DISABLED")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    yield
    if saved is None:
        os.environ.pop("AWS_EC2_METADATA_DISABLED", None)
    else:
        os.environ["AWS_EC2_METADATA_DISABLED"] = saved


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Endpoint]:
    """A moto S3 server on 127.0.0.1 (does not check credentials)."""
    server: MotoServer = start_moto()
    yield server.endpoint
    server.stop()


@pytest.fixture(scope="session")
def seaweed_s3() -> Iterator[S3Endpoint]:
    """A SeaweedFS ``weed mini`` on 127.0.0.1 with credentials, stopped after the session."""
    server: SeaweedServer = start_seaweedfs()
    yield server.endpoint
    server.stop()


@pytest.fixture(
    params=[
        "local",
        "memory",
        pytest.param("moto", marks=pytest.mark.s3),
        pytest.param("seaweedfs", marks=pytest.mark.s3),
    ]
)
def file_io(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileIO, str]:
    """Return ``(file_io, root)`` with an empty root directory on each backend."""
    backend = request.param
    if backend == "local":
        return LocalFileIO(), str(tmp_path / "root")
    if backend == "memory":
        return InMemoryFileIO(), f"memory://{uuid.uuid4().hex}/root"
    from snaplake.store.io.s3.file_io import S3FileIO

    endpoint: S3Endpoint = request.getfixturevalue("moto_s3" if backend == "moto" else "seaweed_s3")
    bucket = endpoint.new_bucket()
    # The race test runs up to 400 requests at once: allow that many connections.
    options = endpoint.options(**{"s3.max-pool-connections": "400"})
    return S3FileIO(options), f"s3://{bucket}/root"
