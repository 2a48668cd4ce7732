"""S3 with default options, as a new user configures it: the AWS chain decides.

Every other S3 test passes ``s3.max-attempts`` and keys in the options, so none
covered the default path, where boto3 1.44 (a fresh install) removed
``Session.get_config_variable`` and opening an ``s3://`` catalog crashed with
``AttributeError``. These tests run against the boto3/botocore installed in the
project venv (the newest the ``s3`` extra allows) and a real SeaweedFS, which
checks signatures, so a credential resolved from the wrong place fails the
test. The environment is isolated per test: no ``AWS_*`` variable of the
caller, and config/credentials files that exist only in ``tmp_path``.

The retry budget is observed on the wire: moto behind the fault proxy answers
503 to one key, and the proxy counts the attempts.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from tests.helpers import write_and_commit
from tests.integration.s3.conftest import SCHEMA
from tests.s3_servers import FaultRule, S3Endpoint, fault_proxy

import snaplake
from snaplake.errors import StorageAccessError
from snaplake.store.io.s3.file_io import S3FileIO

pytestmark = [pytest.mark.integration, pytest.mark.s3]

ROWS = pa.table({"id": [1, 2, 3], "user": ["a", None, "c"]}, schema=SCHEMA)


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Forget the caller's AWS settings; point the config and credentials files at tmp_path."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))


def _round_trip(catalog: snaplake.FileSystemCatalog) -> None:
    """The README quick start on S3: create, write, commit, read back through pyarrow's S3."""
    catalog.create_database("db", ignore_if_exists=True)
    table = catalog.create_table("db.t", schema=SCHEMA)
    result = write_and_commit(table, ROWS, commit_user="u")
    assert result.snapshot_id == 1
    assert catalog.get_table("db.t").to_arrow().sort_by("id").equals(ROWS)


def _max_attempts(catalog: snaplake.FileSystemCatalog) -> int:
    file_io = catalog.file_io
    assert isinstance(file_io, S3FileIO)
    return int(file_io._s3().meta.config.retries["total_max_attempts"])


def test_readme_example_with_credentials_from_the_environment(
    seaweed: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's S3 example verbatim (endpoint and path style only), keys in AWS_* vars."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_access_key)
    bucket = seaweed.new_bucket("defaults")
    catalog = snaplake.FileSystemCatalog(
        f"s3://{bucket}/warehouse",
        options={"s3.endpoint": seaweed.url, "s3.path-style-access": "true"},
    )
    _round_trip(catalog)
    assert _max_attempts(catalog) == 5  # botocore standard mode's default
    file_io = catalog.file_io
    assert isinstance(file_io, S3FileIO)
    assert "env" in file_io._credential_source


def test_credentials_from_options_and_no_retry_option(seaweed: S3Endpoint) -> None:
    bucket = seaweed.new_bucket("defaults")
    catalog = snaplake.FileSystemCatalog(
        f"s3://{bucket}/wh",
        options={
            "s3.endpoint": seaweed.url,
            "s3.access-key-id": seaweed.access_key_id,
            "s3.secret-access-key": seaweed.secret_access_key,
        },
    )
    _round_trip(catalog)
    assert _max_attempts(catalog) == 5


def test_everything_from_a_profile_in_the_aws_files(
    seaweed: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No catalog option at all: endpoint, region, retries and keys come from AWS_PROFILE."""
    (tmp_path / "aws-config").write_text(
        "[profile lake]\n"
        f"region = {seaweed.region}\n"
        f"endpoint_url = {seaweed.url}\n"
        "max_attempts = 4\n"
        "s3 =\n    addressing_style = path\n"
    )
    (tmp_path / "aws-credentials").write_text(
        "[lake]\n"
        f"aws_access_key_id = {seaweed.access_key_id}\n"
        f"aws_secret_access_key = {seaweed.secret_access_key}\n"
    )
    monkeypatch.setenv("AWS_PROFILE", "lake")
    bucket = seaweed.new_bucket("defaults")
    catalog = snaplake.FileSystemCatalog(f"s3://{bucket}/wh")
    _round_trip(catalog)
    assert _max_attempts(catalog) == 4
    file_io = catalog.file_io
    assert isinstance(file_io, S3FileIO)
    assert "shared-credentials-file" in file_io._credential_source


def test_wrong_profile_keys_are_an_access_error(
    seaweed: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The profile really is what signs: a wrong secret there is refused by the server."""
    (tmp_path / "aws-credentials").write_text(
        f"[lake]\naws_access_key_id = {seaweed.access_key_id}\n"
        "aws_secret_access_key = not-the-secret-0123456789abcdef\n"
    )
    monkeypatch.setenv("AWS_PROFILE", "lake")
    bucket = seaweed.new_bucket("defaults")
    catalog = snaplake.FileSystemCatalog(f"s3://{bucket}/wh", options={"s3.endpoint": seaweed.url})
    with pytest.raises(StorageAccessError):
        catalog.create_database("db")


def test_no_credentials_anywhere_is_an_access_error(seaweed: S3Endpoint) -> None:
    bucket = seaweed.new_bucket("defaults")
    catalog = snaplake.FileSystemCatalog(f"s3://{bucket}/wh", options={"s3.endpoint": seaweed.url})
    with pytest.raises(StorageAccessError, match="credentials"):
        catalog.create_database("db")


@pytest.mark.parametrize(
    ("env", "profile", "expected"),
    [({"AWS_MAX_ATTEMPTS": "3"}, None, 3), ({}, 2, 2)],
    ids=["AWS_MAX_ATTEMPTS", "profile"],
)
def test_retry_budget_on_the_wire(
    moto: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    env: dict[str, str],
    profile: int | None,
    expected: int,
) -> None:
    """A key answering 503 is tried exactly as often as the chain says, then fails typed."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto.secret_access_key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if profile is not None:
        (tmp_path / "aws-config").write_text(f"[default]\nmax_attempts = {profile}\n")
    bucket = moto.new_bucket("retries")
    with fault_proxy(moto) as (proxy, endpoint):
        proxy.add_rule(
            FaultRule(
                matches=lambda m, t, h: m == "GET" and "flaky" in t,
                status=503,
                code="SlowDown",
                times=None,
            )
        )
        file_io = S3FileIO({"s3.endpoint": endpoint.url, "s3.path-style-access": "true"})
        with pytest.raises(OSError):  # noqa: PT011 - the type is the translated 5xx
            file_io.read_bytes(f"s3://{bucket}/flaky")
        assert proxy.count("GET", "flaky") == expected
