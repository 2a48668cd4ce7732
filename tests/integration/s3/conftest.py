"""Fixtures for the S3 integration tests: one SeaweedFS per session, a fresh bucket per test.

SeaweedFS checks signatures and honours ``If-None-Match: *``, so the core's
concurrency, crash and interop tests run against it unchanged. moto (in this
process) sits behind the fault proxy where a test needs a server that drops
``If-None-Match``: SeaweedFS would reject the request once a signed header
is stripped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pytest
from tests.s3_servers import S3Endpoint, start_moto, start_seaweedfs

import snaplake

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("user", pa.string())])
OPTIONS_ENV = "SNAPLAKE_TEST_S3_OPTIONS"
"""Environment variable carrying the catalog options (with credentials) to writer processes."""


@dataclass(frozen=True)
class S3Warehouse:
    """A fresh bucket on the session's SeaweedFS and the options to reach it."""

    endpoint: S3Endpoint
    bucket: str
    uri: str
    options: dict[str, str]

    def catalog(self, **extra: str) -> snaplake.FileSystemCatalog:
        return snaplake.FileSystemCatalog(self.uri, options={**self.options, **extra})

    def subprocess_env(self) -> dict[str, str]:
        """This process's environment plus the options, for a writer subprocess (never logged)."""
        env = dict(os.environ)
        env[OPTIONS_ENV] = json.dumps(self.options)
        env["AWS_EC2_METADATA_DISABLED"] = "true"
        return env

    def list_keys(self, prefix: str = "") -> list[str]:
        """Every key of the bucket below ``prefix`` (setup client, not snaplake)."""
        out: list[str] = []
        pages = self.endpoint.client().get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=self.bucket, Prefix=prefix):
            out.extend(item["Key"] for item in page.get("Contents", ()))
        return sorted(out)


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
def seaweed() -> Iterator[S3Endpoint]:
    """One SeaweedFS ``weed mini`` for the whole session (stopped by pid afterwards)."""
    server = start_seaweedfs()
    yield server.endpoint
    server.stop()


@pytest.fixture(scope="session")
def moto() -> Iterator[S3Endpoint]:
    """A moto S3 server in this process (does not check signatures)."""
    server = start_moto()
    yield server.endpoint
    server.stop()


@pytest.fixture
def warehouse(seaweed: S3Endpoint) -> S3Warehouse:
    """A new, empty bucket with the warehouse at ``s3://<bucket>/wh``."""
    bucket = seaweed.new_bucket("it")
    # SeaweedFS may take ~3 s to answer a contended conditional PUT: generous read timeout.
    options = seaweed.options(**{"s3.read-timeout-ms": "30000", "s3.max-attempts": "5"})
    return S3Warehouse(endpoint=seaweed, bucket=bucket, uri=f"s3://{bucket}/wh", options=options)
