"""S3FileIO beyond the shared contract: error mapping, conditional-write safety, pickling.

moto answers fast (it does not check credentials); SeaweedFS checks
signatures, so credential errors are tested there. :class:`FaultProxy`
simulates what neither server does on its own: dropping ``If-None-Match``,
409 ``ConditionalRequestConflict``, 5xx after the write landed, expired
tokens, access denied.
"""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from tests.s3_servers import FaultProxy, FaultRule, S3Endpoint, free_port, is_conditional_put

from snaplake.errors import (
    FileAlreadyExistsError,
    InvalidOptionError,
    StorageAccessError,
    StorageError,
    UnsafeStorageError,
)
from snaplake.store.format.file_format import DataFileSpec, file_format
from snaplake.store.io.file_io import resolve_file_io
from snaplake.store.io.s3.file_io import S3FileIO

pytestmark = pytest.mark.s3

SECRET = "SECRET-never-shown-4242"
TOKEN = "TOKEN-never-shown-9191"


def _spec(compression: str) -> DataFileSpec:
    return DataFileSpec(format=file_format("parquet"), compression=compression, zstd_level=1)


def _chain_text(exc: BaseException) -> str:
    """Return the messages of ``exc`` and every exception it was raised from."""
    parts = []
    seen: BaseException | None = exc
    while seen is not None:
        parts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def _keys(endpoint: S3Endpoint, bucket: str) -> list[str]:
    listed = endpoint.client().list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listed.get("Contents", ()))


@pytest.fixture
def proxy(moto_s3: S3Endpoint) -> Iterator[tuple[FaultProxy, S3Endpoint]]:
    """A fault proxy in front of the session's moto server."""
    fault = FaultProxy(upstream=moto_s3.url).start()
    yield fault, fault.endpoint(moto_s3)
    fault.stop()


@pytest.fixture
def seaweed_proxy(seaweed_s3: S3Endpoint) -> Iterator[tuple[FaultProxy, S3Endpoint]]:
    """A fault proxy in front of the session's SeaweedFS (it forwards signatures intact)."""
    fault = FaultProxy(upstream=seaweed_s3.url).start()
    yield fault, fault.endpoint(seaweed_s3)
    fault.stop()


# -- options, repr, pickling ------------------------------------------------------------


def test_resolve_file_io_picks_s3_for_s3_uris(moto_s3: S3Endpoint) -> None:
    fio, root = resolve_file_io("s3a://bucket/wh/", moto_s3.options())
    assert isinstance(fio, S3FileIO)
    assert root == "s3://bucket/wh"


def test_unknown_s3_option_and_bad_values_are_rejected() -> None:
    with pytest.raises(InvalidOptionError) as info:
        S3FileIO({"s3.endpoitn": "http://x"})
    assert info.value.key == "s3.endpoitn"
    with pytest.raises(InvalidOptionError):
        S3FileIO({"s3.max-attempts": "zero"})
    with pytest.raises(InvalidOptionError):
        S3FileIO({"s3.multipart.part-size-bytes": "1024"})
    with pytest.raises(InvalidOptionError):
        S3FileIO({"s3.access-key-id": "only-the-id"})
    # Paimon's spellings are accepted; non-s3 keys are not ours to judge.
    fio = S3FileIO({"s3.access-key": "id", "s3.secret-key": SECRET, "warehouse": "s3://b/w"})
    assert "s3.access-key-id" in repr(fio)


def test_repr_and_pickle_hide_nothing_but_show_no_secrets(moto_s3: S3Endpoint) -> None:
    fio = S3FileIO(moto_s3.options(**{"s3.secret-access-key": SECRET, "s3.session-token": TOKEN}))
    text = repr(fio)
    assert SECRET not in text
    assert TOKEN not in text
    assert moto_s3.url in text


def test_pickle_round_trip_then_use_in_this_and_another_process(moto_s3: S3Endpoint) -> None:
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(moto_s3.options())
    fio.write_if_absent(f"s3://{bucket}/a", b"1")  # client created, bucket verified
    clone = pickle.loads(pickle.dumps(fio))
    assert clone == fio
    assert clone.read_bytes(f"s3://{bucket}/a") == b"1"
    clone.write_if_absent(f"s3://{bucket}/b", b"2")
    script = (
        "import pickle, sys\n"
        "fio = pickle.load(sys.stdin.buffer)\n"
        f"fio.write_if_absent('s3://{bucket}/c', fio.read_bytes('s3://{bucket}/b') + b'3')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps(fio),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert fio.read_bytes(f"s3://{bucket}/c") == b"23"


# -- error mapping ----------------------------------------------------------------------


def _every_operation(fio: S3FileIO, path: str) -> list[Callable[[], object]]:
    """One call per FileIO operation on ``path`` (listing its parent prefix)."""
    prefix = path.rsplit("/", 2)[0]
    return [
        lambda: fio.read_bytes(path),
        lambda: fio.file_status(path),
        lambda: fio.open_input(path),
        lambda: fio.exists(path),
        lambda: list(fio.list_files(prefix)),
        lambda: fio.write_if_absent(path, b"x"),
        lambda: fio.write_bytes(path, b"x", overwrite=True),
    ]


def test_missing_bucket_is_a_storage_error_naming_the_bucket(
    moto_s3: S3Endpoint, seaweed_s3: S3Endpoint
) -> None:
    for endpoint in (moto_s3, seaweed_s3):
        fio = S3FileIO(endpoint.options())
        path = "s3://no-such-bucket-snaplake/t/snapshot/snapshot-1"
        for call in _every_operation(fio, path):
            with pytest.raises(StorageError) as info:
                call()
            assert not isinstance(info.value, FileNotFoundError)
            assert "'no-such-bucket-snaplake' does not exist" in str(info.value)
            assert info.value.path.startswith("s3://no-such-bucket-snaplake/")


def test_bad_secret_is_an_access_error_and_writes_nothing(seaweed_s3: S3Endpoint) -> None:
    bucket = seaweed_s3.new_bucket()
    fio = S3FileIO(seaweed_s3.options(**{"s3.secret-access-key": SECRET}))
    path = f"s3://{bucket}/t/snapshot/snapshot-1"
    for call in (
        lambda: fio.write_if_absent(path, b"x"),
        lambda: fio.read_bytes(path),
        lambda: list(fio.list_files(f"s3://{bucket}/t")),
        lambda: fio.file_status(path),  # HEAD: a bare 403 without an error code
    ):
        with pytest.raises(StorageAccessError) as info:
            call()
        message = str(info.value)
        assert isinstance(info.value, PermissionError)
        assert f"bucket {bucket!r}" in message
        assert "SignatureDoesNotMatch" in message or "access denied (403)" in message
        assert "s3.secret-access-key" in message
        assert SECRET not in _chain_text(info.value)
    assert _keys(seaweed_s3, bucket) == []


def test_unknown_access_key_id_is_an_access_error(seaweed_s3: S3Endpoint) -> None:
    bucket = seaweed_s3.new_bucket()
    fio = S3FileIO(seaweed_s3.options(**{"s3.access-key-id": "nobody"}))
    with pytest.raises(StorageAccessError) as info:
        fio.read_bytes(f"s3://{bucket}/k")
    assert "InvalidAccessKeyId" in str(info.value)
    assert f"bucket {bucket!r}, key 'k'" in str(info.value)


def test_environment_credentials_are_used_when_options_have_none(
    seaweed_s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = seaweed_s3.new_bucket()
    options = seaweed_s3.options()
    del options["s3.access-key-id"], options["s3.secret-access-key"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed_s3.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed_s3.secret_access_key)
    S3FileIO(options).write_if_absent(f"s3://{bucket}/env", b"e")
    # Catalog options win over the environment.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert S3FileIO(seaweed_s3.options()).read_bytes(f"s3://{bucket}/env") == b"e"
    with pytest.raises(StorageAccessError) as info:
        S3FileIO(options).read_bytes(f"s3://{bucket}/env")
    assert "AWS credential chain (env)" in str(info.value)


def test_unreachable_endpoint_names_the_endpoint(moto_s3: S3Endpoint) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    fio = S3FileIO(moto_s3.options(**{"s3.endpoint": url, "s3.max-attempts": "1"}))
    started = time.monotonic()
    for call in (
        lambda: fio.read_bytes("s3://b/k"),
        lambda: fio.write_if_absent("s3://b/t/snapshot-1", b"x"),
        lambda: list(fio.list_files("s3://b/t")),
    ):
        with pytest.raises(StorageError) as info:
            call()
        assert f"cannot reach the S3 endpoint {url}" in str(info.value)
        assert "s3.endpoint" in str(info.value)
    assert time.monotonic() - started < 10


def test_access_denied_and_expired_token_become_access_errors(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options(**{"s3.session-token": TOKEN, "s3.max-attempts": "1"}))
    everything = lambda method, target, headers: True  # noqa: E731
    fault.add_rule(FaultRule(everything, 403, "AccessDenied", times=None))
    with pytest.raises(StorageAccessError) as denied:
        fio.read_bytes(f"s3://{bucket}/t/f")
    assert "access denied (AccessDenied)" in str(denied.value)
    assert "bucket policy" in str(denied.value)
    assert f"bucket {bucket!r}, key 't/f'" in str(denied.value)
    fault.clear()
    fault.add_rule(FaultRule(everything, 400, "ExpiredToken", times=None))
    with pytest.raises(StorageAccessError) as expired:
        fio.write_bytes(f"s3://{bucket}/t/f", b"x", overwrite=True)
    assert "expired (ExpiredToken)" in str(expired.value)
    assert "s3.session-token" in str(expired.value)
    assert TOKEN not in _chain_text(expired.value)


def test_no_secret_in_logs_repr_or_errors(
    moto_s3: S3Endpoint, seaweed_s3: S3Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="snaplake")
    bucket = seaweed_s3.new_bucket()
    good = S3FileIO(seaweed_s3.options(**{"s3.session-token": ""}))
    good.write_if_absent(f"s3://{bucket}/a", b"1")
    with pytest.raises(FileAlreadyExistsError):
        good.write_if_absent(f"s3://{bucket}/a", b"2")
    bad = S3FileIO(
        seaweed_s3.options(**{"s3.secret-access-key": SECRET, "s3.session-token": TOKEN})
    )
    with pytest.raises(StorageAccessError) as info:
        bad.write_if_absent(f"s3://{bucket}/b", b"x")
    moto = S3FileIO(moto_s3.options(**{"s3.secret-access-key": SECRET, "s3.session-token": TOKEN}))
    moto.arrow_filesystem()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "created S3 client" in logged
    for secret in (SECRET, TOKEN, seaweed_s3.secret_access_key):
        assert secret not in logged
        assert secret not in repr(bad) + repr(moto) + repr(good)
        assert secret not in _chain_text(info.value)


# -- conditional writes -----------------------------------------------------------------


def test_server_ignoring_if_none_match_is_refused_and_nothing_is_written(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    fault.strip_headers.add("if-none-match")
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options())
    with pytest.raises(UnsafeStorageError) as info:
        fio.write_if_absent(f"s3://{bucket}/t/snapshot/snapshot-1", b"x")
    assert "ignores If-None-Match" in str(info.value)
    assert "s3.allow-unsafe-create" in str(info.value)
    with pytest.raises(UnsafeStorageError):
        fio.write_bytes(f"s3://{bucket}/t/schema/schema-0", b"x")
    assert _keys(moto_s3, bucket) == []  # neither the target nor the probe's scratch key
    # Writes that are not create-only still work.
    fio.write_bytes(f"s3://{bucket}/t/snapshot/LATEST", b"1", overwrite=True)
    # Explicit opt-out: accepted, with the documented loss of atomicity.
    unsafe = S3FileIO(endpoint.options(**{"s3.allow-unsafe-create": "true"}))
    unsafe.write_if_absent(f"s3://{bucket}/t/snapshot/snapshot-1", b"x")
    assert _keys(moto_s3, bucket) == ["t/snapshot/LATEST", "t/snapshot/snapshot-1"]


def test_server_rejecting_if_none_match_is_refused(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    fault.add_rule(FaultRule(is_conditional_put, 501, "NotImplemented", times=None))
    bucket = moto_s3.new_bucket()
    with pytest.raises(UnsafeStorageError) as info:
        S3FileIO(endpoint.options()).write_if_absent(f"s3://{bucket}/t/s", b"x")
    assert "does not implement If-None-Match" in str(info.value)
    assert _keys(moto_s3, bucket) == []


def test_probe_runs_once_per_bucket(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options())
    fio.write_if_absent(f"s3://{bucket}/t/s1", b"1")
    assert fault.count("PUT") == 3  # two probe writes + the real one
    assert fault.count("DELETE", "/t/.snaplake-probe-") == 1
    fio.write_if_absent(f"s3://{bucket}/t/s2", b"2")
    fio.write_bytes(f"s3://{bucket}/t/s3", b"3")
    assert fault.count("PUT") == 5
    assert _keys(moto_s3, bucket) == ["t/s1", "t/s2", "t/s3"]


def test_first_write_new_verifies_the_bucket_with_its_own_file(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options())
    fio.write_new(f"s3://{bucket}/t/manifest/m1", b"manifest")
    # Created, then created again and refused with 412: no scratch probe.
    assert fault.requests == [("PUT", f"/{bucket}/t/manifest/m1")] * 2
    assert fio._verified_buckets == {bucket}
    assert fio.read_bytes(f"s3://{bucket}/t/manifest/m1") == b"manifest"
    fault.requests.clear()
    fio.write_new(f"s3://{bucket}/t/manifest/m2", b"2")
    fio.write_if_absent(f"s3://{bucket}/t/snapshot/snapshot-1", b"s")  # the commit point
    assert fault.count("PUT") == 2
    with pytest.raises(FileAlreadyExistsError):  # a reused name still fails
        fio.write_new(f"s3://{bucket}/t/manifest/m1", b"other")
    assert _keys(moto_s3, bucket) == ["t/manifest/m1", "t/manifest/m2", "t/snapshot/snapshot-1"]
    # The verdict travels with the pickled FileIO, like the scratch probe's.
    assert pickle.loads(pickle.dumps(fio))._verified_buckets == {bucket}


def test_write_new_on_a_server_ignoring_if_none_match_is_refused_and_leaves_nothing(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    fault.strip_headers.add("if-none-match")
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options())
    with pytest.raises(UnsafeStorageError) as info:
        fio.write_new(f"s3://{bucket}/t/manifest/m1", b"manifest")
    assert "ignores If-None-Match" in str(info.value)
    # The second PUT was taken, so the scratch probe decided; then the file was removed.
    assert fault.count("PUT", "/t/manifest/m1") == 2
    assert fault.count("DELETE", "/t/manifest/m1") == 1
    assert _keys(moto_s3, bucket) == []
    assert fio._verified_buckets == set()
    with pytest.raises(UnsafeStorageError):  # and again: nothing was remembered
        fio.write_new(f"s3://{bucket}/t/manifest/m2", b"2")
    assert _keys(moto_s3, bucket) == []


def test_write_new_on_a_server_rejecting_if_none_match_is_refused(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    fault.add_rule(FaultRule(is_conditional_put, 501, "NotImplemented", times=None))
    bucket = moto_s3.new_bucket()
    with pytest.raises(UnsafeStorageError) as info:
        S3FileIO(endpoint.options()).write_new(f"s3://{bucket}/t/manifest/m1", b"x")
    assert "does not implement If-None-Match" in str(info.value)
    assert _keys(moto_s3, bucket) == []


def test_write_new_falls_back_to_the_scratch_probe_when_the_second_put_is_not_a_412(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    puts: list[str] = []

    def second_put_of_m1(method: str, target: str, headers: dict[str, str]) -> bool:
        if is_conditional_put(method, target, headers) and target.endswith("/t/manifest/m1"):
            puts.append(target)
            return len(puts) > 1
        return False

    fault.add_rule(FaultRule(second_put_of_m1, 500, "InternalError", times=None))
    fio = S3FileIO(endpoint.options(**{"s3.max-attempts": "1"}))
    fio.write_new(f"s3://{bucket}/t/manifest/m1", b"manifest")
    assert fault.count("PUT", "/t/manifest/.snaplake-probe-") == 2  # settled by the probe
    assert fault.count("DELETE", "/t/manifest/.snaplake-probe-") == 1
    assert fio._verified_buckets == {bucket}
    assert _keys(moto_s3, bucket) == ["t/manifest/m1"]
    assert fio.read_bytes(f"s3://{bucket}/t/manifest/m1") == b"manifest"


def test_large_write_new_uses_the_scratch_probe(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    from snaplake.store.io.s3.conditional import RECREATE_PROBE_MAX_BYTES

    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options())
    big = b"x" * (RECREATE_PROBE_MAX_BYTES + 1)
    fio.write_new(f"s3://{bucket}/t/manifest/big", big)
    assert fault.count("PUT", "/t/manifest/big") == 1  # sent once, not twice
    assert fault.count("PUT", "/t/manifest/.snaplake-probe-") == 2
    assert fio._verified_buckets == {bucket}
    assert _keys(moto_s3, bucket) == ["t/manifest/big"]


def test_409_conditional_conflict_is_retried(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options(**{"s3.conflict.max-retries": "3"}))
    fio.write_if_absent(f"s3://{bucket}/warm", b"w")
    fault.add_rule(FaultRule(is_conditional_put, 409, "ConditionalRequestConflict", times=2))
    fio.write_if_absent(f"s3://{bucket}/t/s1", b"1")
    assert fio.read_bytes(f"s3://{bucket}/t/s1") == b"1"
    assert fault.count("PUT", "/t/s1") == 3
    fault.add_rule(FaultRule(is_conditional_put, 409, "ConditionalRequestConflict", times=None))
    with pytest.raises(StorageError) as info:
        fio.write_if_absent(f"s3://{bucket}/t/s2", b"2")
    assert not isinstance(info.value, FileAlreadyExistsError)
    assert "409 ConditionalRequestConflict" in str(info.value)
    assert fault.count("PUT", "/t/s2") == 4
    assert not fio.exists(f"s3://{bucket}/t/s2")


def test_write_output_is_one_put_without_the_probe(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options())
    assert fio.buffered_write_max_bytes == 8 * 1024 * 1024  # s3.multipart.part-size-bytes
    fio.write_output(f"s3://{bucket}/t/data-1.parquet", b"1")
    assert fault.requests == [("PUT", f"/{bucket}/t/data-1.parquet")]  # no probe
    with pytest.raises(FileAlreadyExistsError) as info:  # a reused name
        fio.write_output(f"s3://{bucket}/t/data-1.parquet", b"other")
    assert info.value.operation == "write"
    assert fio.read_bytes(f"s3://{bucket}/t/data-1.parquet") == b"1"


def test_small_data_file_is_one_request_and_a_large_one_streams(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from snaplake.write.table_write import write_data_file

    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options(**{"s3.multipart.part-size-bytes": str(5 * 1024 * 1024)}))
    small = pa.table({"x": list(range(1000))})
    path = f"s3://{bucket}/t/small.parquet"
    size = write_data_file(file_io=fio, path=path, data=small, spec=_spec("zstd"))
    assert len(fault.requests) == 1 and fault.count("PUT", "/t/small.parquet") == 1
    assert len(fio.read_bytes(path)) == size  # (HEAD via the proxy loses Content-Length)
    fault.requests.clear()
    large = pa.table({"x": pa.array(range(1_000_000), pa.int64())})  # 8 MB > 5 MiB
    path = f"s3://{bucket}/t/large.parquet"
    write_data_file(file_io=fio, path=path, data=large, spec=_spec("none"))
    assert fault.count("POST", "uploads") >= 1  # pyarrow's multipart upload
    assert pq.read_table(pa.BufferReader(fio.read_bytes(path))).equals(large)


@pytest.mark.parametrize("max_attempts", ["1", "3"])
def test_5xx_after_the_write_landed_is_resolved_by_reading_back(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint, max_attempts: str
) -> None:
    """With 3 attempts botocore resends and meets our own object (412); with 1 we read back."""
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options(**{"s3.max-attempts": max_attempts}))
    fio.write_if_absent(f"s3://{bucket}/warm", b"w")
    fault.add_rule(FaultRule(is_conditional_put, 500, "InternalError", forward_first=True))
    fio.write_if_absent(f"s3://{bucket}/t/snapshot-1", b"ours")
    assert fio.read_bytes(f"s3://{bucket}/t/snapshot-1") == b"ours"


def test_uncertain_outcome_with_another_winner_is_a_lost_race(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(endpoint.options(**{"s3.max-attempts": "1"}))
    fio.write_if_absent(f"s3://{bucket}/warm", b"w")
    # Our PUT is lost in a 503 while another writer's lands.
    other = moto_s3.client()
    rule = FaultRule(is_conditional_put, 503, "SlowDown")
    fault.add_rule(rule)
    other.put_object(Bucket=bucket, Key="t/snapshot-2", Body=b"theirs")
    with pytest.raises(FileAlreadyExistsError):
        fio.write_if_absent(f"s3://{bucket}/t/snapshot-2", b"ours")
    assert rule.hits == 1
    # A 5xx that did not land: read back finds nothing, the PUT is sent again.
    fault.add_rule(FaultRule(is_conditional_put, 500, "InternalError"))
    fio.write_if_absent(f"s3://{bucket}/t/snapshot-3", b"ours")
    assert fio.read_bytes(f"s3://{bucket}/t/snapshot-3") == b"ours"


def test_read_timeout_after_send_is_resolved_by_reading_back(
    proxy: tuple[FaultProxy, S3Endpoint], moto_s3: S3Endpoint
) -> None:
    fault, endpoint = proxy
    bucket = moto_s3.new_bucket()
    options = endpoint.options(**{"s3.max-attempts": "1", "s3.read-timeout-ms": "500"})
    fio = S3FileIO(options)
    fio.write_if_absent(f"s3://{bucket}/warm", b"w")
    fault.add_rule(FaultRule(is_conditional_put, 500, "Late", forward_first=True, delay_s=1.5))
    fio.write_if_absent(f"s3://{bucket}/t/snapshot-1", b"ours")
    assert fio.read_bytes(f"s3://{bucket}/t/snapshot-1") == b"ours"


# -- listing, deleting, streaming -------------------------------------------------------


def test_listing_paginates_and_deletes_batch_by_1000(
    seaweed_proxy: tuple[FaultProxy, S3Endpoint], seaweed_s3: S3Endpoint
) -> None:
    fault, endpoint = seaweed_proxy
    bucket = seaweed_s3.new_bucket()
    client = seaweed_s3.client()
    keys = [f"t/bucket-{i % 3}/data-{i:05d}.parquet" for i in range(1_234)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))
    fio = S3FileIO(endpoint.options())
    listed = list(fio.list_files(f"s3://{bucket}/t"))
    assert sorted(s.path for s in listed) == sorted(f"s3://{bucket}/{k}" for k in keys)
    assert fault.count("GET", "list-type=2") == 2  # 1,000 + 234
    assert fio.list_dirs(f"s3://{bucket}/t") == ["bucket-0", "bucket-1", "bucket-2"]
    fio.delete_many(f"s3://{bucket}/{k}" for k in keys[:1_100])
    assert fault.count("POST", "?delete") == 2  # 1,000 + 100
    fio.delete_dir(f"s3://{bucket}/t")
    assert fault.count("POST", "?delete") == 3
    assert _keys(seaweed_s3, bucket) == []


def test_open_output_aborts_on_error_and_leaves_nothing(moto_s3: S3Endpoint) -> None:
    bucket = moto_s3.new_bucket()
    fio = S3FileIO(moto_s3.options(**{"s3.multipart.part-size-bytes": str(5 * 1024 * 1024)}))
    path = f"s3://{bucket}/t/data-1.parquet"

    def write_then_fail() -> None:
        with fio.open_output(path) as out:
            out.write(b"x" * (11 * 1024 * 1024))  # two parts already uploaded
            raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError, match="writer failed"):
        write_then_fail()
    assert not fio.exists(path)
    uploads = moto_s3.client().list_multipart_uploads(Bucket=bucket)
    assert uploads.get("Uploads", []) == []


def test_arrow_filesystem_matches_the_client(seaweed_s3: S3Endpoint) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    bucket = seaweed_s3.new_bucket()
    fio = S3FileIO(seaweed_s3.options())
    arrow = fio.arrow_filesystem()
    assert arrow is not None  # pyarrow here is built with S3
    filesystem, prefix = arrow
    assert prefix == "s3://"
    table = pa.table({"x": list(range(1000))})
    pq.write_table(table, f"{bucket}/t/a.parquet", filesystem=filesystem)
    assert fio.file_status(f"s3://{bucket}/t/a.parquet").size_bytes > 0
    assert pq.read_table(f"{bucket}/t/a.parquet", filesystem=filesystem).equals(table)
    bad = S3FileIO(seaweed_s3.options(**{"s3.secret-access-key": SECRET}))
    bad_arrow = bad.arrow_filesystem()
    assert bad_arrow is not None
    bad_fs, _ = bad_arrow
    with pytest.raises(OSError, match="AWS Error"):
        pq.read_table(f"{bucket}/t/a.parquet", filesystem=bad_fs)


def test_boto3_range_reader_is_the_fallback_without_pyarrow_s3(
    moto_s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import random

    bucket = moto_s3.new_bucket()
    fio = S3FileIO(moto_s3.options())
    data = random.Random(1).randbytes(2 * 1024 * 1024 + 5)
    fio.write_bytes(f"s3://{bucket}/r", data)
    monkeypatch.setattr(fio, "arrow_filesystem", lambda: None)
    with fio.open_input(f"s3://{bucket}/r") as f:
        assert isinstance(f, io.BufferedReader)
        assert f.read(3) == data[:3]
        f.seek(-5, io.SEEK_END)
        assert f.read() == data[-5:]
        f.seek(1_500_000)
        assert f.read(1_000_000) == data[1_500_000:2_500_000]
        f.seek(10)
        assert f.read() == data[10:]
    with pytest.raises(FileNotFoundError):
        fio.open_input(f"s3://{bucket}/missing")
