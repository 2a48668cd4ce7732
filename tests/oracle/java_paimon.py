"""Java Paimon 0.9 as a second, independent format oracle: it reads tables, we compare values.

pypaimon is a Python port and shares pyarrow with snaplake; Java Paimon is the
reference implementation (DESIGN.md §1: where they disagree, Java decides). No
Maven here, but the source distribution of ``pypaimon==0.2.0`` (the old py4j
release) ships Java Paimon 0.9.0 as ``deps/jars/paimon-python-java-bridge-0.9.0.jar``.
:func:`build` fetches it with pip (the ordinary package index and pip's cache),
keeps only that jar, and compiles ``tests/oracle/java/JavaPaimonReader.java``
against it plus pyspark's Hadoop client jars. ``make java-paimon`` runs it (part
of ``make test``); by hand: ``.venv/bin/python -m tests.oracle.java_paimon build``.

:class:`JavaPaimon` sends its reads to the reader in a JVM that serves the whole pytest
process (a fresh JVM costs ~1.5-3 s; several tables per request) and returns, per table,
the schema, the splits (partition, bucket, files) and the rows with their RowKind; values
come back losslessly encoded (see the Java file's header). :func:`java_values` encodes an
Arrow table the same way, so a test compares ``JavaRead.rows`` with what it wrote.

Paimon 0.9 limitations (bugs of that reader, not of the tables; checked by
``tests/integration/test_java_paimon_reads.py``):

- TIMESTAMP(9) (Parquet INT96) and BINARY(n) columns stored as Parquet
  FIXED_LEN_BYTE_ARRAY (pypaimon's files): not readable (snaplake refuses
  ``timestamp("ns")`` and stores BINARY(n) as BYTE_ARRAY, as Java does).
- A ROW value whose fields are all NULL reads back as a NULL ROW.
- Parquet with snappy compression needs pyspark's ``snappy-java`` jar on the
  class path (included).

Artifacts live in ``<repo>/.java-paimon/`` (git-ignored), or in
``$SNAPLAKE_JAVA_PAIMON_DIR`` (share one build between checkouts).
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import datetime as dt
import decimal
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tests.oracle._process import SharedDrivers

__all__ = [
    "JavaPaimon",
    "JavaPaimonError",
    "JavaRead",
    "JavaSplit",
    "build",
    "encode_value",
    "is_built",
    "java_paimon_dir",
    "java_values",
    "requires_java_paimon",
    "run_java",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCES = tuple(sorted((Path(__file__).resolve().parent / "java").glob("*.java")))
"""The reader and the writers of ``tests/oracle/java/``, compiled together by :func:`build`."""
DIR_ENV = "SNAPLAKE_JAVA_PAIMON_DIR"
PYPAIMON_SDIST = "pypaimon==0.2.0"
BRIDGE_JAR = "paimon-python-java-bridge-0.9.0.jar"
_HADOOP_JARS = ("hadoop-client-api-3.*.jar", "hadoop-client-runtime-3.*.jar", "snappy-java-*.jar")


def java_paimon_dir() -> Path:
    """Where the jar, the compiled reader and the class path file live."""
    override = os.environ.get(DIR_ENV)
    return Path(override) if override else REPO_ROOT / ".java-paimon"


def _classpath_file() -> Path:
    return java_paimon_dir() / "classpath.txt"


def is_built() -> bool:
    """Whether the reader is built (:func:`build`) where :func:`java_paimon_dir` points."""
    return _is_built()


def _is_built() -> bool:
    classes = java_paimon_dir() / "classes"
    return _classpath_file().exists() and all(
        (classes / f"{source.stem}.class").exists() for source in SOURCES
    )


requires_java_paimon = pytest.mark.skipif(
    not _is_built() and shutil.which("java") is None,
    reason="no JVM: Java Paimon checks need java 17 (make java-paimon builds the reader)",
)
"""Skip only where no JVM exists at all; a JVM without a built reader fails loudly."""


class JavaPaimonError(RuntimeError):
    """The JVM failed; the message carries the request and the JVM's stderr."""


def _pyspark_jars() -> list[Path]:
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    found: list[Path] = []
    for pattern in _HADOOP_JARS:
        matches = sorted(jars.glob(pattern))
        if not matches:
            raise JavaPaimonError(f"{pattern} not found in {jars}: install the 'spark' extra")
        found.append(matches[-1])
    return found


def build(*, force: bool = False) -> Path:
    """Fetch Java Paimon 0.9 and compile the reader and writers; return the artifact directory.

    Idempotent: does nothing when every class is built and newer than every source.

    Raises:
        JavaPaimonError: pip, tar or javac failed (their output in the message).
    """
    out = java_paimon_dir()
    classes = out / "classes"
    jar = out / BRIDGE_JAR
    if (
        not force
        and _is_built()
        and min((classes / f"{s.stem}.class").stat().st_mtime for s in SOURCES)
        >= max(s.stat().st_mtime for s in SOURCES)
    ):
        return out
    out.mkdir(parents=True, exist_ok=True)
    if not jar.exists():
        with tempfile.TemporaryDirectory(prefix="snaplake-pypaimon-sdist-") as tmp:
            _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                  "--no-binary", ":all:", PYPAIMON_SDIST, "-d", tmp])  # fmt: skip
            (sdist,) = Path(tmp).glob("pypaimon-0.2.0.tar*")
            with tarfile.open(sdist) as archive:
                member = next(m for m in archive.getmembers() if m.name.endswith(BRIDGE_JAR))
                source = archive.extractfile(member)
                if source is None:
                    raise JavaPaimonError(f"{BRIDGE_JAR} in {sdist.name} is not a file")
                with source, open(jar.with_suffix(".part"), "wb") as target:
                    shutil.copyfileobj(source, target)
            jar.with_suffix(".part").rename(jar)
    classpath = [jar, *_pyspark_jars()]
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir()
    javac = shutil.which("javac")
    if javac is None:
        raise JavaPaimonError("javac not found: install a JDK 17 (apt-get install openjdk-17-jdk)")
    _run([javac, "-d", str(classes), "-cp", os.pathsep.join(map(str, classpath)),
          *map(str, SOURCES)])  # fmt: skip
    _classpath_file().write_text(os.pathsep.join(str(p) for p in [*classpath, classes]))
    return out


def _run(cmd: Sequence[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        raise JavaPaimonError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-4000:]}")


def run_java(main_class: str, *args: str, tmp_dir: Path | None = None) -> None:
    """Run one of the writers of ``tests/oracle/java/`` (compiled by :func:`build`) in a JVM.

    ``tmp_dir`` becomes the JVM's ``java.io.tmpdir`` (Paimon's spill and lookup files).

    Raises:
        AssertionError: the program exited non-zero (its stderr in the message).
    """
    build()
    flags = [] if tmp_dir is None else [f"-Djava.io.tmpdir={tmp_dir}"]
    cp = _classpath_file().read_text().strip()
    proc = subprocess.run(
        ["java", *flags, "-cp", cp, main_class, *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"{main_class} {' '.join(args)}:\n{proc.stderr}"


@dataclasses.dataclass(frozen=True, slots=True)
class JavaSplit:
    """One DataSplit as Java planned it, with its rows.

    Attributes:
        partition: Partition values (encoded like row values).
        partition_bytes: Hex of the split's partition BinaryRow (as the manifest holds it).
        bucket: The split's bucket (as the manifest holds it).
        snapshot_id: The snapshot planned.
        files: Data file names (changelog file names for a streaming split
            of a ``changelog-producer = input`` table).
        streaming: Whether Java planned it as a streaming split (the changes
            of one snapshot, read without merging).
        rows: Row values (see :func:`java_values`).
        kinds: RowKind of each row (``"+I"``, ``"-U"``, ``"+U"``, ``"-D"``).
        row_partitions: Per row, the hex partition BinaryRow Java's writer would compute.
        row_buckets: Per row, the bucket Java's writer would compute (``None`` for
            dynamic-bucket tables, where it depends on an index).
    """

    partition: tuple[Any, ...]
    partition_bytes: str
    bucket: int
    snapshot_id: int
    files: tuple[str, ...]
    streaming: bool
    rows: tuple[tuple[Any, ...], ...]
    kinds: tuple[str, ...]
    row_partitions: tuple[str, ...]
    row_buckets: tuple[int | None, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class JavaRead:
    """What Java Paimon read from one table.

    Attributes:
        names: Column names; ``types``: their Paimon SQL types (``"BIGINT NOT NULL"``).
        partition_keys / primary_keys: From the table's schema.
        snapshot_id: The snapshot read (``None`` for a table without snapshots).
        splits: In plan order, each with its rows (values encoded as in
            :func:`java_values`) and their RowKinds (``"+I"``, ...).
    """

    names: tuple[str, ...]
    types: tuple[str, ...]
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    snapshot_id: int | None
    splits: tuple[JavaSplit, ...]

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        """Every row, in a fixed order (as :func:`java_values` sorts), for order-free comparison."""
        return sorted((r for s in self.splits for r in s.rows), key=_sort_key)

    @property
    def files(self) -> list[str]:
        """Every data file the plan read, sorted."""
        return sorted(f for s in self.splits for f in s.files)

    def changes(self) -> dict[int, list[tuple[str, tuple[Any, ...]]]]:
        """A stream read's rows per snapshot: ``{snapshot id: [(kind, row), ...]}``.

        Within a snapshot the rows keep Java's order (split by split); only
        snapshots that produced splits appear.
        """
        out: dict[int, list[tuple[str, tuple[Any, ...]]]] = {}
        for s in self.splits:
            out.setdefault(s.snapshot_id, []).extend(zip(s.kinds, s.rows, strict=True))
        return out

    def misplaced_rows(self) -> list[dict[str, Any]]:
        """Rows stored in a partition or bucket other than where Java's writer puts them.

        Compares each row's partition BinaryRow bytes and bucket, as Java's
        ``RowKeyExtractor`` computes them, with the split (manifest entry)
        holding it. Empty when the writer agrees with Java byte for byte.
        """
        out = []
        for s in self.splits:
            for row, part, bucket in zip(s.rows, s.row_partitions, s.row_buckets, strict=True):
                if part != s.partition_bytes or (bucket is not None and bucket != s.bucket):
                    out.append({"row": row, "stored": (s.partition_bytes, s.bucket),
                                "java": (part, bucket)})  # fmt: skip
        return out


def _sort_key(row: Sequence[Any]) -> str:
    """A total order over encoded rows of any types (equal rows, NaN included, sort alike)."""
    return repr(row)


class JavaPaimon:
    """Runs the Java reader (built by :func:`build`) on local tables."""

    def __init__(self, *, java: str | None = None, timeout_s: float = 600.0) -> None:
        self.java = java or shutil.which("java") or "java"
        self.timeout_s = timeout_s

    def read(
        self,
        table_path: str | Path,
        *,
        snapshot_id: int | None = None,
        options: dict[str, str] | None = None,
    ) -> JavaRead:
        """Read one table (the latest snapshot unless ``snapshot_id``) with a batch scan.

        ``options`` are Paimon dynamic options (``FileStoreTable.copy``).
        """
        return self._run_requests([self._request(table_path, snapshot_id, options, False)])[0]

    def stream(
        self,
        table_path: str | Path,
        *,
        from_snapshot: int | None = None,
        options: dict[str, str] | None = None,
    ) -> JavaRead:
        """Read a table as a streaming job would: Java's stream scan until the latest snapshot.

        Args:
            table_path: The table directory.
            from_snapshot: Start at this snapshot (``scan.mode = from-snapshot``:
                the changes of it and every later one; for a ``changelog-producer
                = input`` table, its changelog files). ``None``: Paimon's default
                start (the latest snapshot in full).
            options: Paimon dynamic options (``scan.mode``, ...), applied last.

        Returns:
            The splits of every plan, in order; :meth:`JavaRead.changes` groups
            their rows by snapshot.
        """
        return self._run_requests([self._request(table_path, from_snapshot, options, True)])[0]

    def read_many(self, tables: Sequence[tuple[str | Path, int | None]]) -> list[JavaRead]:
        """Read several ``(table path, snapshot id or None)`` in one JVM, in order.

        Raises:
            JavaPaimonError: the reader is not built, or Java failed on a table.
        """
        return self._run_requests([self._request(p, s, None, False) for p, s in tables])

    @staticmethod
    def _request(
        path: str | Path, snapshot: int | None, options: dict[str, str] | None, stream: bool
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"path": str(Path(path).resolve()), "snapshot": snapshot}
        if stream:
            request["stream"] = "true"
        request.update({f"option.{k}": str(v) for k, v in (options or {}).items()})
        return request

    def _run_requests(self, requests: Sequence[dict[str, Any]]) -> list[JavaRead]:
        if not _is_built():
            raise JavaPaimonError(
                f"the Java Paimon reader is not built in {java_paimon_dir()}: run "
                "`make java-paimon` (or .venv/bin/python -m tests.oracle.java_paimon build)"
            )
        with tempfile.TemporaryDirectory(prefix="snaplake-java-read-") as tmp:
            outputs = [Path(tmp) / f"out-{i}.jsonl" for i in range(len(requests))]
            request = [{**r, "out": str(out)} for r, out in zip(requests, outputs, strict=True)]
            (Path(tmp) / "request.json").write_text(json.dumps(request))
            cmd = [self.java, "-cp", _classpath_file().read_text().strip(), "JavaPaimonReader"]
            _jvms().call(cmd, f"{tmp}/request.json", op=[r["path"] for r in requests],
                         timeout_s=self.timeout_s)  # fmt: skip
            return [_parse(out.read_text()) for out in outputs]


_shared: SharedDrivers | None = None


def _jvms() -> SharedDrivers:
    """The reader JVMs of this process: one per command line, started on first use.

    Starting a JVM and loading Paimon's classes is most of a one-table read; a JVM serves
    every read of the pytest process (restarted after a death or a timeout) and ends with
    it (``atexit``: stdin closed, killed by its pid after 30 s). Each request still opens
    a fresh ``FileStoreTable``.
    """
    global _shared
    if _shared is None:
        _shared = SharedDrivers(cwd=REPO_ROOT, name="Java Paimon reader", error=JavaPaimonError)
        atexit.register(_shared.close)
    return _shared


def _parse(text: str) -> JavaRead:
    raws = [line for line in text.splitlines() if line]
    head = json.loads(raws[0])
    splits: list[JavaSplit] = []
    current: dict[str, Any] | None = None
    rows: list[tuple[Any, ...]] = []
    kinds: list[str] = []
    parts: list[str] = []
    buckets: list[int | None] = []

    def close() -> None:
        if current is not None:
            splits.append(
                JavaSplit(
                    partition=_freeze(current.get("partition", [])),
                    partition_bytes=str(current.get("partitionBytes", "")),
                    bucket=int(current.get("bucket", -1)),
                    snapshot_id=int(current.get("snapshotId", -1)),
                    files=tuple(current.get("files", ())),
                    streaming=bool(current.get("streaming", False)),
                    rows=tuple(rows),
                    kinds=tuple(kinds),
                    row_partitions=tuple(parts),
                    row_buckets=tuple(buckets),
                )
            )

    for raw in raws[1:]:
        line = json.loads(raw)
        if "split" in line:
            close()
            current, rows, kinds, parts, buckets = line["split"], [], [], [], []
        else:
            values = line["v"]
            # one "[" is the row's own list: no nested value to freeze, value by value
            rows.append(tuple(values) if raw.count("[") == 1 else tuple(map(_freeze, values)))
            kinds.append(line["k"])
            parts.append(line["p"])
            buckets.append(line.get("b"))
    close()
    snapshot = head["snapshotId"]
    return JavaRead(
        names=tuple(f["name"] for f in head["schema"]),
        types=tuple(f["type"] for f in head["schema"]),
        partition_keys=tuple(head["partitionKeys"]),
        primary_keys=tuple(head["primaryKeys"]),
        snapshot_id=None if snapshot is None else int(snapshot),
        splits=tuple(splits),
    )


def _freeze(value: Any) -> Any:
    """JSON lists as tuples, so rows are hashable and sortable the same way as java_values."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


# ---------------------------------------------------------------- Arrow -> Java's encoding


def _epoch_nanos(value: dt.datetime) -> int:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    delta = value - dt.datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def encode_value(value: Any, dtype: pa.DataType) -> Any:
    """One Arrow value in the reader's encoding (see JavaPaimonReader.java)."""
    if value is None:
        return None
    t = pa.types
    if t.is_floating(dtype):
        return float(value)  # float32 values widen exactly, as Java's (double) cast
    if t.is_decimal(dtype):
        assert isinstance(value, decimal.Decimal)
        return format(value, "f")
    if t.is_binary(dtype) or t.is_large_binary(dtype) or t.is_fixed_size_binary(dtype):
        return base64.b64encode(value).decode("ascii")
    if t.is_date32(dtype):
        return (value - dt.date(1970, 1, 1)).days
    if t.is_time32(dtype) or t.is_time64(dtype):
        return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + (
            value.microsecond // 1000
        )
    if t.is_timestamp(dtype):
        if isinstance(value, dt.datetime):
            return _epoch_nanos(value)
        return int(value.value)  # pandas.Timestamp for "ns"
    if t.is_map(dtype):
        return tuple(
            (encode_value(k, dtype.key_type), encode_value(v, dtype.item_type)) for k, v in value
        )
    if t.is_list(dtype) or t.is_large_list(dtype):
        return tuple(encode_value(v, dtype.value_type) for v in value)
    if t.is_struct(dtype):
        return tuple(encode_value(value[f.name], f.type) for f in dtype)
    return value


def java_values(table: pa.Table | pa.RecordBatch, *, sort: bool = True) -> list[tuple[Any, ...]]:
    """Encode ``table``'s rows as the Java reader does, sorted like :attr:`JavaRead.rows`.

    ``sort=False`` keeps the table's row order (to pair rows with their kinds).
    """
    columns = [_encode_column(table.column(i), field.type) for i, field in enumerate(table.schema)]
    rows = list(zip(*columns, strict=True)) if columns else []
    return sorted(rows, key=_sort_key) if sort else rows


_NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _encode_column(column: pa.Array | pa.ChunkedArray, dtype: pa.DataType) -> list[Any]:
    """:func:`encode_value` over a column; whole-column for the types that allow it."""
    t = pa.types
    if t.is_integer(dtype) or t.is_boolean(dtype) or t.is_floating(dtype):
        return list(column.to_pylist())  # floats widen exactly; the encoding is the value
    if t.is_string(dtype) or t.is_large_string(dtype):
        return list(column.to_pylist())
    if t.is_timestamp(dtype):  # the stored int64 counts from the epoch (UTC for tz types)
        counts = column.cast(pa.timestamp(dtype.unit)).cast(pa.int64())
        return list(pc.multiply_checked(counts, _NANOS_PER_UNIT[dtype.unit]).to_pylist())
    return [encode_value(v, dtype) for v in column.to_pylist()]


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: java_paimon.py build")
    print(f"Java Paimon reader built in {build()}")
