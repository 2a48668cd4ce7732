"""The FileIO contract, run on every backend: local, memory, moto and SeaweedFS."""

from __future__ import annotations

import io
import random
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from snaplake.errors import FileAlreadyExistsError
from snaplake.store.io.file_io import FileIO

FileIOAndRoot = tuple[FileIO, str]


def test_write_then_read_round_trips_bytes(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    fio.write_bytes(f"{root}/a/b.bin", b"\x00hello\xff")
    assert fio.read_bytes(f"{root}/a/b.bin") == b"\x00hello\xff"
    fio.write_bytes(f"{root}/empty", b"")
    assert fio.read_bytes(f"{root}/empty") == b""


def test_write_bytes_without_overwrite_refuses_existing(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    fio.write_bytes(f"{root}/f", b"one")
    with pytest.raises(FileAlreadyExistsError) as info:
        fio.write_bytes(f"{root}/f", b"two")
    assert info.value.path == f"{root}/f"
    assert isinstance(info.value, FileExistsError)
    assert fio.read_bytes(f"{root}/f") == b"one"


def test_overwrite_replaces_content(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    fio.write_bytes(f"{root}/LATEST", b"1")
    fio.write_bytes(f"{root}/LATEST", b"22", overwrite=True)
    assert fio.read_bytes(f"{root}/LATEST") == b"22"
    assert fio.file_status(f"{root}/LATEST").size_bytes == 2


def test_write_hint_creates_and_overwrites_longer_and_shorter(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    path = f"{root}/snapshot/LATEST"
    fio.write_if_absent(f"{root}/snapshot/snapshot-1", b"{}")  # the directory exists
    for value in (b"9", b"10", b"7", b"123"):
        fio.write_hint(path, value)
        assert fio.read_bytes(path) == value
        assert fio.file_status(path).size_bytes == len(value)


def test_write_if_absent_creates_once(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    path = f"{root}/snapshot/snapshot-1"
    fio.write_if_absent(path, b'{"id": 1}')
    with pytest.raises(FileAlreadyExistsError):
        fio.write_if_absent(path, b'{"id": 1, "other": true}')
    assert fio.read_bytes(path) == b'{"id": 1}'


def _races(
    fio: FileIO, paths: list[str], *, threads: int
) -> tuple[dict[str, list[int]], list[BaseException]]:
    """Run one race of ``threads`` create-only writers per path, all races at once.

    Each race has its own barrier, so its writers start together; the races
    overlap only to keep the wall time down (SeaweedFS answers a contended
    conditional PUT after up to ~3 s of server-side lock retries).
    Returns the winners per path and any unexpected errors.
    """
    winners: dict[str, list[int]] = {p: [] for p in paths}
    losers: dict[str, list[int]] = {p: [] for p in paths}
    errors: list[BaseException] = []

    def attempt(path: str, i: int, barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            fio.write_if_absent(path, b"writer-%d" % i)
            winners[path].append(i)
        except FileAlreadyExistsError:
            losers[path].append(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's assertion
            errors.append(exc)

    workers = []
    for path in paths:
        barrier = threading.Barrier(threads)
        workers += [
            threading.Thread(target=attempt, args=(path, i, barrier)) for i in range(threads)
        ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for path in paths:
        assert len(winners[path]) + len(losers[path]) == threads or errors
    return winners, errors


def test_write_if_absent_has_exactly_one_winner_among_8_threads(
    file_io: FileIOAndRoot, request: pytest.FixtureRequest
) -> None:
    fio, root = file_io
    rounds = 50 if request.node.callspec.params["file_io"] == "seaweedfs" else 10
    paths = [f"{root}/snapshot/snapshot-{n}" for n in range(1, rounds + 1)]
    winners, errors = _races(fio, paths, threads=8)
    assert errors == []
    for path in paths:
        assert len(winners[path]) == 1, f"{path}: winners {winners[path]}"
        assert fio.read_bytes(path) == b"writer-%d" % winners[path][0]


def test_missing_paths_raise_file_not_found(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    fio.write_bytes(f"{root}/present", b"x")  # the bucket/dir exists, the key does not
    missing = f"{root}/nope/missing"
    assert not fio.exists(missing)
    with pytest.raises(FileNotFoundError):
        fio.read_bytes(missing)
    with pytest.raises(FileNotFoundError):
        fio.open_input(missing)
    with pytest.raises(FileNotFoundError):
        fio.file_status(missing)
    with pytest.raises(FileNotFoundError):
        fio.delete(missing, missing_ok=False)
    fio.delete(missing)  # missing_ok=True by default


def test_list_files_is_recursive_and_bounded_by_directory(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    layout = {
        f"{root}/t/a": 1,
        f"{root}/t/d1/b": 22,
        f"{root}/t/d1/d2/c": 333,
        f"{root}/t2/sibling": 4,  # shares the string prefix "t", not the directory
    }
    for path, size in layout.items():
        fio.write_bytes(path, b"x" * size)
    found = {s.path: s.size_bytes for s in fio.list_files(f"{root}/t")}
    assert found == {p: s for p, s in layout.items() if "/t/" in p}
    assert {s.path for s in fio.list_files(f"{root}/t/d1")} == {
        f"{root}/t/d1/b",
        f"{root}/t/d1/d2/c",
    }
    assert {s.path for s in fio.list_files(f"{root}/t/")} == set(found)
    assert list(fio.list_files(f"{root}/absent")) == []


def test_list_dirs_returns_immediate_names(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    for path in ("t/snapshot/snapshot-1", "t/manifest/m", "t/dt=1/bucket-0/f", "t/file"):
        fio.write_bytes(f"{root}/{path}", b"x")
    assert fio.list_dirs(f"{root}/t") == ["dt=1", "manifest", "snapshot"]
    assert fio.list_dirs(f"{root}/t/dt=1") == ["bucket-0"]
    assert fio.list_dirs(f"{root}/absent") == []


def test_exists_sees_files_and_directories(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    fio.write_bytes(f"{root}/d/e/f", b"x")
    assert fio.exists(f"{root}/d/e/f")
    assert fio.exists(f"{root}/d/e")
    assert fio.exists(f"{root}/d")
    assert not fio.exists(f"{root}/d/e/g")
    assert not fio.exists(f"{root}/d/e/f/g")


def test_delete_delete_many_and_delete_dir(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    paths = [f"{root}/t/data/f{i}" for i in range(5)]
    for p in [*paths, f"{root}/t/meta/m", f"{root}/keep/k"]:
        fio.write_bytes(p, b"x")
    fio.delete(paths[0], missing_ok=False)
    assert not fio.exists(paths[0])
    fio.delete_many([*paths[1:3], f"{root}/t/data/never-existed"])
    assert sorted(s.path for s in fio.list_files(f"{root}/t/data")) == paths[3:]
    fio.delete_dir(f"{root}/t")
    assert list(fio.list_files(f"{root}/t")) == []
    assert not fio.exists(f"{root}/t")
    assert fio.read_bytes(f"{root}/keep/k") == b"x"
    fio.delete_dir(f"{root}/t")  # deleting an absent directory is fine


def test_file_status_reports_size_and_recent_mtime(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    before_ms = int(time.time() * 1000)
    fio.write_bytes(f"{root}/s", b"12345")
    status = fio.file_status(f"{root}/s")
    assert status.path == f"{root}/s"
    assert status.size_bytes == 5
    assert abs(status.modification_time_ms - before_ms) < 120_000
    [listed] = fio.list_files(root)
    assert listed.size_bytes == 5
    assert abs(listed.modification_time_ms - status.modification_time_ms) < 2_000


def test_open_input_supports_seek_and_ranged_reads(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    data = random.Random(7).randbytes(3 * 1024 * 1024 + 17)
    fio.write_bytes(f"{root}/r.bin", data)
    with fio.open_input(f"{root}/r.bin") as f:
        assert f.seekable()
        assert f.read(10) == data[:10]
        assert f.tell() == 10
        f.seek(2_000_000)
        assert f.read(1_500_000) == data[2_000_000:3_500_000]
        f.seek(-8, io.SEEK_END)
        assert f.read(8) == data[-8:]
        assert f.read(5) == b""
        f.seek(100)
        f.seek(50, io.SEEK_CUR)
        assert f.read(4) == data[150:154]
        f.seek(1_048_570)
        assert f.read() == data[1_048_570:]


def test_open_output_streams_a_20_mb_file(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    chunk = random.Random(3).randbytes(1024 * 1024)
    path = f"{root}/data/big.bin"
    with fio.open_output(path) as out:
        for i in range(20):
            out.write(bytes([i]) + chunk[1:])
    assert fio.file_status(path).size_bytes == 20 * 1024 * 1024
    got = fio.read_bytes(path)
    assert len(got) == 20 * 1024 * 1024
    for i in (0, 7, 16, 19):
        part = got[i * 1024 * 1024 : (i + 1) * 1024 * 1024]
        assert part == bytes([i]) + chunk[1:]


def test_open_output_refuses_an_existing_path(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    fio.write_bytes(f"{root}/data/f", b"old")
    with pytest.raises(FileExistsError), fio.open_output(f"{root}/data/f") as out:
        out.write(b"new")
    assert fio.read_bytes(f"{root}/data/f") == b"old"


def test_parquet_round_trip_through_streams(file_io: FileIOAndRoot) -> None:
    fio, root = file_io
    table = pa.table(
        {"id": pa.array(range(50_000), pa.int64()), "s": [str(i) for i in range(50_000)]}
    )
    path = f"{root}/data/part-0.parquet"
    with fio.open_output(path) as out:
        pq.write_table(table, out)
    with fio.open_input(path) as f:
        assert pq.read_table(f, columns=["s"]).column("s").to_pylist()[-1] == "49999"
    arrow = fio.arrow_filesystem()
    if arrow is not None:
        filesystem, prefix = arrow
        assert path.startswith(prefix)
        read = pq.read_table(path[len(prefix) :], filesystem=filesystem)
        assert read.equals(table)
