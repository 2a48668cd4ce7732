"""Credentials never reach a log line, even at DEBUG: a real CLI run and a real daemon on S3.

botocore logs every request's canonical form and headers at DEBUG (``Authorization:
... Credential=<key id>/...``, ``X-Amz-Security-Token``); the CLI's ``--log-level debug``
and the daemon's ``log_level = "DEBUG"`` must still log none of the access key id, the
secret or the session token.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from tests.daemon.procs import REPO, daemon_config, log_events, start_daemon_file, wait_for
from tests.helpers import create_table, write_and_commit
from tests.s3_servers import S3Endpoint, start_moto

import snaplake
from snaplake.store.io.s3.options import S3Settings

pytestmark = [pytest.mark.integration, pytest.mark.s3, pytest.mark.timeout(180)]

KEY_ID = "AKIASNAPLAKEKEYID7Q3Z"
SECRET = "SnaplakeSecretKey/4z9Wq+DoNotLog"
TOKEN = "SnaplakeSessionTokenFwoGZXIvYXdzEDoNotLog"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[S3Endpoint]:
    server = start_moto()  # moto accepts any credentials, a session token included
    yield server.endpoint
    server.stop()


def _options(endpoint: S3Endpoint) -> dict[str, str]:
    return {
        **endpoint.options(),
        "s3.access-key-id": KEY_ID,
        "s3.secret-access-key": SECRET,
        "s3.session-token": TOKEN,
    }


def _assert_no_credentials(text: str) -> None:
    assert text.strip()
    for line in text.splitlines():
        for secret in (KEY_ID, SECRET, TOKEN):
            assert secret not in line, f"credential in a log line: {line[:300]}"


def _warehouse(endpoint: S3Endpoint) -> tuple[str, dict[str, str]]:
    bucket = endpoint.new_bucket("creds")
    uri, options = f"s3://{bucket}/wh", _options(endpoint)
    table = create_table(snaplake.FileSystemCatalog(uri, options=options), schema=SCHEMA)
    for i in range(4):
        write_and_commit(
            table,
            pa.table({"id": [i], "v": [f"v{i}"]}, schema=SCHEMA),
            commit_user="seed",
            commit_identifier=i,
        )
    return uri, options


def test_settings_repr_hides_the_secret_and_the_token():
    settings = S3Settings.parse(
        {"s3.access-key-id": KEY_ID, "s3.secret-access-key": SECRET, "s3.session-token": TOKEN}
    )
    assert SECRET not in repr(settings)
    assert TOKEN not in repr(settings)
    assert settings.secret_access_key == SECRET  # still there for the client


def test_cli_debug_log_holds_no_credentials(moto_endpoint, tmp_path):
    uri, options = _warehouse(moto_endpoint)
    args = [arg for k, v in options.items() for arg in ("--option", f"{k}={v}")]
    result = subprocess.run(
        [sys.executable, "-c", "from snaplake.cli import main; main()", "--warehouse", uri,
         *args, "--log-level", "debug", "read", "db.t"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "v3" in result.stdout
    assert " DEBUG snaplake." in result.stderr
    _assert_no_credentials(result.stderr)
    _assert_no_credentials(result.stdout)


def test_daemon_debug_log_holds_no_credentials(moto_endpoint, tmp_path: Path):
    uri, options = _warehouse(moto_endpoint)
    opts = ", ".join(f'"{k}" = "{v}"' for k, v in options.items())
    text = daemon_config(Path("PLACEHOLDER"), daemon_id="creds", port=0, tables=("db.t",),
                         log_level="DEBUG")  # fmt: skip
    text = text.replace('uri = "PLACEHOLDER"', f'uri = "{uri}"\noptions = {{ {opts} }}')
    cfg = tmp_path / "snaplake.toml"
    cfg.write_text(text)
    daemon = start_daemon_file(cfg, tmp_path, "d")
    try:
        # Wait for real S3 work by the job threads: a watch, compaction or expiry run.
        wait_for(
            lambda: bool(log_events(daemon.text(), r"^(watch|compact|expire_snapshots) of db\.t")),
            timeout=60, what="a maintenance run on db.t",
        )  # fmt: skip
        code, _ = daemon.stop(signal.SIGTERM)
        assert code == 0, daemon.text()[-3000:]
    finally:
        daemon.stop(signal.SIGKILL)
    log = daemon.text()
    assert "now maintains db.t" in log
    assert " DEBUG snaplake." in log
    _assert_no_credentials(log)
