"""The daemon's TOML configuration: parsing, validation and the effective settings.

A file looks like this (every key is optional except ``[[warehouse]]``)::

    log_level = "INFO"

    [daemon]
    id = "maint-a"                  # default: <hostname>-<pid>
    workers = 2                     # threads running jobs (default 2: one per core here)
    discovery_interval = "1 min"    # re-list "db.*" / "*" table patterns
    lease_ttl = "60 s"              # a crashed daemon's tables are taken over after this
    lease_renew_interval = "20 s"
    shutdown_grace = "8 s"          # wait this long for running jobs on SIGTERM
    metadata_cache_records = 10000  # decoded manifest entries kept in memory
    polars = false                  # polars readers: faster, about 60 MiB more RSS
    job_nice = 10                   # CPU niceness of job threads (0-19; 0 = as the process)

    [metrics]
    listen = "127.0.0.1:9464"

    [[warehouse]]
    uri = "/data/warehouse"         # or s3://bucket/prefix
    tables = ["sales.orders", "logs.*"]   # "db.table", "db.*" or "*"
    exclude = ["logs.tmp_*"]
    options = { "s3.endpoint" = "http://127.0.0.1:8333" }   # catalog options; never logged

    [tasks.watch]
    interval = "5 s"
    files_interval = "1 min"        # how often the live data files are counted

    [tasks.manifest_merge]
    interval = "1 min"
    "manifest.merge-min-count" = 30

    [tasks.compact]
    interval = "5 min"
    max_files_per_bucket = 500      # inputs rewritten per (partition, bucket) and commit
    "compaction.min.file-num" = 5
    engine = "spark"                # default "in-process"; "spark" delegates large ones:
    spark.remote = "sc://spark-connect:15002"   # a Spark Connect server
    spark.min-input-bytes = "1 gb"  # compactions (primary-key tables: buckets) with less
                                    # input stay in process

    [tasks.expire_snapshots]
    interval = "1 min"
    "snapshot.num-retained.min" = 10
    "snapshot.time-retained" = "1 h"

    [tasks.orphan_clean]
    interval = "1 d"
    older_than = "1 d"
    dry_run = false

    [tasks.check]                   # off by default: reads every live data file
    enabled = true
    interval = "7 d"

    [tasks.expire_partitions]       # tables setting partition.expiration-time; each table
    interval = "1 min"              # is checked at most every partition.expiration-check-interval
    [tasks.auto_tag]                # tags by the table's tag.automatic-creation
    interval = "1 min"

    [tasks.expire_tags]             # tagTimeRetained, tag.num-retained-max
    interval = "5 min"

    [tasks.expire_consumers]        # consumer.expiration-time
    interval = "10 min"

Durations use Paimon's syntax (``"30 s"``, ``"1 min"``, ``"1 h"``, ``"1 d"``).
Keys spelled like Paimon table options (``"manifest.merge-min-count"``) are
**defaults**: a table's own options win over them.

Each TOML table is read by :class:`~snaplake.daemon.config_section.ConfigSection`;
:func:`snaplake.daemon.config_describe.describe_config` renders the result back
as TOML. This module does no I/O besides reading the file and imports neither
apscheduler nor prometheus_client.
"""

from __future__ import annotations

import os
import re
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from snaplake.daemon.config_section import (
    ConfigSection,
    config_error,
    option_text,
    without_params,
)
from snaplake.errors import InvalidOptionError
from snaplake.options import ConfigOption, CoreOptions, parse_duration
from snaplake.options.registry import (
    COMPACTION_MIN_FILE_NUM,
    COMPACTION_SMALL_FILE_RATIO,
    MANIFEST_FULL_COMPACTION_SIZE,
    MANIFEST_MERGE_MIN_COUNT,
    MANIFEST_TARGET_FILE_SIZE,
    SNAPSHOT_EXPIRE_LIMIT,
    SNAPSHOT_NUM_RETAINED_MAX,
    SNAPSHOT_NUM_RETAINED_MIN,
    SNAPSHOT_TIME_RETAINED,
    TARGET_FILE_SIZE,
)

__all__ = [
    "DEFAULT_LISTEN",
    "TASK_OPTIONS",
    "DaemonConfig",
    "DaemonSettings",
    "Task",
    "TaskSettings",
    "WarehouseConfig",
    "load_config",
    "parse_config",
]

DEFAULT_LISTEN = "127.0.0.1:9464"
COMPACT_ENGINES = ("in-process", "spark")
DEFAULT_SPARK_MIN_INPUT_BYTES = 1 << 30
_CONNECT_URL = re.compile(r"sc://[^/:;\s]+(:\d{1,5})?(/.*)?")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_MAX_NICE = 19


class Task(StrEnum):
    """The daemon's jobs; the value is the ``[tasks.<name>]`` section and metrics label."""

    WATCH = "watch"
    MANIFEST_MERGE = "manifest_merge"
    COMPACT = "compact"
    EXPIRE_SNAPSHOTS = "expire_snapshots"
    ORPHAN_CLEAN = "orphan_clean"
    CHECK = "check"
    EXPIRE_PARTITIONS = "expire_partitions"
    AUTO_TAG = "auto_tag"
    EXPIRE_TAGS = "expire_tags"
    EXPIRE_CONSUMERS = "expire_consumers"


#: Paimon table options each task reads (defaults the daemon may set).
TASK_OPTIONS: Mapping[Task, tuple[ConfigOption[Any], ...]] = {
    Task.WATCH: (),
    Task.MANIFEST_MERGE: (
        MANIFEST_MERGE_MIN_COUNT, MANIFEST_TARGET_FILE_SIZE, MANIFEST_FULL_COMPACTION_SIZE,
    ),
    Task.COMPACT: (COMPACTION_MIN_FILE_NUM, COMPACTION_SMALL_FILE_RATIO, TARGET_FILE_SIZE),
    Task.EXPIRE_SNAPSHOTS: (
        SNAPSHOT_NUM_RETAINED_MIN, SNAPSHOT_NUM_RETAINED_MAX, SNAPSHOT_TIME_RETAINED,
        SNAPSHOT_EXPIRE_LIMIT,
    ),
    Task.ORPHAN_CLEAN: (),
    Task.CHECK: (),
    Task.EXPIRE_PARTITIONS: (),  # driven by each table's own partition.expiration-* options
    Task.AUTO_TAG: (),  # the table's own tag.* options only
    Task.EXPIRE_TAGS: (),
    Task.EXPIRE_CONSUMERS: (),
}  # fmt: skip

_DEFAULT_INTERVALS: Mapping[Task, timedelta] = {
    Task.WATCH: timedelta(seconds=5),
    Task.MANIFEST_MERGE: timedelta(minutes=1),
    Task.COMPACT: timedelta(minutes=5),
    Task.EXPIRE_SNAPSHOTS: timedelta(minutes=1),
    Task.ORPHAN_CLEAN: timedelta(days=1),
    Task.CHECK: timedelta(days=1),
    Task.EXPIRE_PARTITIONS: timedelta(minutes=1),
    Task.AUTO_TAG: timedelta(minutes=1),
    Task.EXPIRE_TAGS: timedelta(minutes=5),
    Task.EXPIRE_CONSUMERS: timedelta(minutes=10),
}

_OFF_BY_DEFAULT = frozenset({Task.CHECK})
"""Tasks that run only with ``enabled = true`` (the check reads every live data file)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSettings:
    """Schedule of one task.

    Attributes:
        task: Which task.
        enabled: Run it at all.
        interval: Time between the starts of two runs (per table).
    """

    task: Task
    enabled: bool
    interval: timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class WarehouseConfig:
    """One warehouse and the tables of it to maintain.

    Attributes:
        uri: Local path, ``file://`` or ``s3://bucket/prefix``.
        tables: Patterns: ``"db.table"`` (explicit), ``"db.*"`` (every table
            of a database), ``"*"`` (every table); shell-style wildcards.
        exclude: Patterns of tables to leave alone.
        options: Catalog options (``s3.*``); may hold credentials, so they are
            masked by :func:`~snaplake.daemon.config_describe.describe_config`
            and left out of ``repr``.
    """

    uri: str
    tables: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict, repr=False)

    def selects(self, identifier: str) -> bool:
        """Tell whether ``db.table`` matches a ``tables`` pattern and no ``exclude`` one."""
        return any(fnmatchcase(identifier, p) for p in self.tables) and not any(
            fnmatchcase(identifier, p) for p in self.exclude
        )

    @property
    def explicit_tables(self) -> tuple[str, ...]:
        """Patterns without wildcards (tables named one by one)."""
        return tuple(p for p in self.tables if not any(c in p for c in "*?["))


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSettings:
    """Process-wide settings (``[daemon]`` and ``[metrics]``).

    Attributes:
        daemon_id: Names this daemon in leases and logs.
        workers: Threads running jobs concurrently (default 2; each job holds its
            inputs in memory, so more threads mainly raise the peak RSS).
        discovery_interval: How often table patterns are re-listed.
        lease_ttl: A lease not renewed for this long may be taken over.
        lease_renew_interval: How often held leases are renewed (< ttl / 2).
        shutdown_grace: How long SIGTERM waits for running jobs before
            aborting them (the process exits; published state is never half
            written, unpublished files become orphans); 0 = abort at once.
        metrics_host: Address of the metrics/health HTTP server.
        metrics_port: Its port (0 = any free port).
        files_interval: Minimum time between two counts of a table's live
            data files by the watcher.
        orphan_older_than: Orphan clean deletes only unreferenced files older
            than this.
        orphan_dry_run: Orphan clean only reports.
        metadata_cache_records: Bound of the process-wide decoded-manifest
            cache (records, about 1 KiB each). The daemon reads every manifest
            ever written once; a small bound keeps its memory flat (misses
            only cost decoding).
        polars: Load polars for its readers (small-file compaction, very
            large manifests): faster, but about 60 MiB more RSS; without it
            the daemon reads with pyarrow and fastavro.
        job_nice: Niceness (0-19) the threads running maintenance jobs take
            on Linux (per thread; their helper threads inherit it), so that a
            compaction burst yields the CPU to writers on the same machine;
            leases, discovery, the watcher and the metrics server keep the
            process's priority. 0 leaves them at the process's priority.
        compact_max_files: Input files one compaction commit rewrites per
            (partition, bucket) at most; a job commits as many rounds as it
            needs, so memory is bounded by this, not by the backlog.
        compact_engine: ``"in-process"``, or ``"spark"``: compactions of at
            least ``spark_min_input_bytes`` run on the Spark Connect server
            ``spark_remote`` (see :mod:`snaplake.daemon.remote`).
        spark_remote: ``sc://host:port`` of that server (engine ``"spark"``).
        spark_min_input_bytes: Planned input bytes from which a compaction is
            delegated (primary-key tables: a bucket's LSM compaction; the
            smaller buckets of a delegated round are rewritten in process).
    """

    daemon_id: str
    workers: int = 2
    discovery_interval: timedelta = timedelta(minutes=1)
    lease_ttl: timedelta = timedelta(seconds=60)
    lease_renew_interval: timedelta = timedelta(seconds=20)
    shutdown_grace: timedelta = timedelta(seconds=8)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464
    files_interval: timedelta = timedelta(minutes=1)
    orphan_older_than: timedelta = timedelta(days=1)
    orphan_dry_run: bool = False
    metadata_cache_records: int = 10_000
    polars: bool = False
    job_nice: int = 10
    compact_max_files: int = 500
    compact_engine: str = "in-process"
    spark_remote: str | None = field(default=None, repr=False)
    spark_min_input_bytes: int = DEFAULT_SPARK_MIN_INPUT_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig:
    """A validated daemon configuration.

    Attributes:
        source: Where it was read from (for messages).
        log_level: ``DEBUG`` .. ``CRITICAL``.
        daemon: Process-wide settings.
        warehouses: What to maintain.
        tasks: Schedule per task.
        default_options: Paimon option defaults set in the ``[tasks.*]``
            sections; a table's own options win.
    """

    source: str
    log_level: str
    daemon: DaemonSettings
    warehouses: tuple[WarehouseConfig, ...]
    tasks: Mapping[Task, TaskSettings]
    default_options: Mapping[str, str]

    def effective_options(self, table_options: Mapping[str, str]) -> CoreOptions:
        """Return the options a table is maintained with: daemon defaults, then the table's own.

        Raises:
            InvalidOptionError: the table has an unparsable option value.
        """
        merged = dict(self.default_options)
        merged.update(table_options)
        return CoreOptions(merged)

    def enabled_tasks(self) -> tuple[Task, ...]:
        """Tasks that are enabled, in a fixed order."""
        return tuple(t for t in Task if self.tasks[t].enabled)


# --------------------------------------------------------------------- parsing
def _parse_listen(source: str, text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise config_error(
            source, "metrics.listen", text, "must be 'host:port', e.g. '127.0.0.1:9464'"
        )
    return host.strip("[]"), int(port_text)


def _parse_task(
    source: str, root: ConfigSection, task: Task, defaults: dict[str, str]
) -> tuple[TaskSettings, ConfigSection]:
    sec = root.sub(task.value)
    settings = TaskSettings(
        task=task,
        enabled=sec.boolean("enabled", default=task not in _OFF_BY_DEFAULT),
        interval=sec.duration("interval", _DEFAULT_INTERVALS[task]),
    )
    for option in TASK_OPTIONS[task]:
        value = sec.raw(option.key)
        if value is None:
            continue
        text = option_text(value)
        if text is None:
            raise config_error(source, sec.key(option.key), value, "must be a string or a number")
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and option.parse is parse_duration
        ):
            raise config_error(
                source, sec.key(option.key), value,
                "a bare number would be milliseconds; write the unit, e.g. '1 h'",
            )  # fmt: skip
        try:
            option.value_of(text)
        except ValueError as exc:
            raise config_error(
                source, sec.key(option.key), value, f"{exc} ({option.describe})"
            ) from None
        defaults[option.key] = text
    return settings, sec


def _parse_engine(source: str, sec: ConfigSection) -> tuple[str, str | None, int]:
    """``engine`` and the ``spark.*`` keys of ``[tasks.compact]``."""
    for name in sec.data:
        if name.startswith("spark."):  # a quoted "spark.remote" is one key, not a table
            raise config_error(
                source, sec.key(name), sec.data[name],
                f"unknown key; write it unquoted ({name} = ...)",
            )  # fmt: skip
    engine = sec.string("engine", "in-process")
    if engine not in COMPACT_ENGINES:
        raise config_error(
            source, sec.key("engine"), engine,
            f"must be one of {', '.join(repr(e) for e in COMPACT_ENGINES)}",
        )  # fmt: skip
    spark = sec.sub("spark")
    if engine != "spark":
        for name in spark.data:
            raise config_error(source, spark.key(name), spark.data[name], "needs engine = 'spark'")
        return engine, None, DEFAULT_SPARK_MIN_INPUT_BYTES
    remote = spark.string("remote", "")
    if not remote:
        reason = "is required with engine = 'spark' (Spark Connect's 'sc://host:port')"
        raise config_error(source, spark.key("remote"), None, reason)
    if not _CONNECT_URL.fullmatch(remote):
        raise config_error(
            source, spark.key("remote"), without_params(remote),
            "must be a Spark Connect address 'sc://host:port'",
        )  # fmt: skip
    min_input = spark.size("min-input-bytes", DEFAULT_SPARK_MIN_INPUT_BYTES)
    spark.finish()
    return engine, remote, min_input


def parse_config(data: Mapping[str, Any], *, source: str = "<config>") -> DaemonConfig:
    """Validate a parsed TOML document and return the effective configuration.

    Args:
        data: What ``tomllib.loads`` returned.
        source: Name of the file, for messages.

    Returns:
        The configuration with every default filled in.

    Raises:
        InvalidOptionError: a key is unknown, missing or has a bad value; the
            message names the dotted key and the reason (``.key`` holds the key).
    """
    root = ConfigSection(source, "", data)
    log_level = root.string("log_level", "INFO").upper()
    if log_level not in _LOG_LEVELS:
        raise config_error(
            source, "log_level", log_level, f"must be one of {', '.join(_LOG_LEVELS)}"
        )

    daemon_sec = root.sub("daemon")
    default_id = f"{socket.gethostname()}-{os.getpid()}"
    lease_ttl = daemon_sec.duration("lease_ttl", timedelta(seconds=60))
    renew = daemon_sec.duration("lease_renew_interval", lease_ttl / 3)
    if renew * 2 > lease_ttl:
        raise config_error(
            source, "daemon.lease_renew_interval", daemon_sec.data.get("lease_renew_interval"),
            f"must be at most half of daemon.lease_ttl ({lease_ttl.total_seconds():g} s) so a "
            "live daemon never lets its lease lapse",
        )  # fmt: skip
    daemon_id = daemon_sec.string("id", default_id)
    workers = daemon_sec.integer("workers", 2, minimum=1)
    discovery = daemon_sec.duration("discovery_interval", timedelta(minutes=1))
    grace = daemon_sec.duration("shutdown_grace", timedelta(seconds=8), positive=False)
    cache_records = daemon_sec.integer("metadata_cache_records", 10_000, minimum=0)
    polars = daemon_sec.boolean("polars", default=False)
    job_nice = daemon_sec.integer("job_nice", 10, minimum=0)
    if job_nice > _MAX_NICE:
        raise config_error(source, "daemon.job_nice", job_nice, f"must be at most {_MAX_NICE}")
    daemon_sec.finish()

    metrics_sec = root.sub("metrics")
    host, port = _parse_listen(source, metrics_sec.string("listen", DEFAULT_LISTEN))
    metrics_sec.finish()

    raw_warehouses = root.raw("warehouse")
    if raw_warehouses is None:
        raise config_error(
            source, "warehouse", None, "at least one [[warehouse]] section is required"
        )
    if not isinstance(raw_warehouses, list) or not raw_warehouses:
        raise config_error(
            source, "warehouse", raw_warehouses, "must be an array of tables [[warehouse]]"
        )
    warehouses = []
    for i, raw in enumerate(raw_warehouses):
        sec = ConfigSection(source, f"warehouse[{i}]", raw)
        uri = sec.string("uri", "")
        if not uri:
            raise config_error(source, sec.key("uri"), None, "is required")
        tables = sec.strings("tables", ("*",))
        for pattern in tables:
            if pattern != "*" and "." not in pattern:
                raise config_error(
                    source, sec.key("tables"), pattern,
                    "a pattern is 'db.table', 'db.*' or '*'",
                )  # fmt: skip
        exclude = sec.strings("exclude", ())
        opts_raw = sec.raw("options") or {}
        if not isinstance(opts_raw, Mapping):
            raise config_error(source, sec.key("options"), "<table>", "must be a table of strings")
        options: dict[str, str] = {}
        for k, v in opts_raw.items():
            text = option_text(v)
            if text is None:
                raise config_error(
                    source, f"{sec.key('options')}.{k}", v, "must be a string or number"
                )
            options[str(k)] = text
        sec.finish()
        warehouses.append(WarehouseConfig(uri=uri, tables=tables, exclude=exclude, options=options))

    tasks_sec = root.sub("tasks")
    defaults: dict[str, str] = {}
    tasks: dict[Task, TaskSettings] = {}
    task_secs: dict[Task, ConfigSection] = {}
    for task in Task:
        tasks[task], task_secs[task] = _parse_task(source, tasks_sec, task, defaults)
    files_interval = task_secs[Task.WATCH].duration("files_interval", timedelta(minutes=1))
    older_than = task_secs[Task.ORPHAN_CLEAN].duration("older_than", timedelta(days=1))
    orphan_dry_run = task_secs[Task.ORPHAN_CLEAN].boolean("dry_run", default=False)
    compact_max = task_secs[Task.COMPACT].integer("max_files_per_bucket", 500, minimum=2)
    engine, remote, min_input = _parse_engine(source, task_secs[Task.COMPACT])
    for sec in task_secs.values():
        sec.finish()
    tasks_sec.finish()
    root.finish()
    try:
        CoreOptions(defaults)
    except InvalidOptionError as exc:  # pragma: no cover - each key was parsed above
        raise config_error(source, f"tasks.*.{exc.key}", exc.value, str(exc)) from None

    return DaemonConfig(
        source=source,
        log_level=log_level,
        daemon=DaemonSettings(
            daemon_id=daemon_id,
            workers=workers,
            discovery_interval=discovery,
            lease_ttl=lease_ttl,
            lease_renew_interval=renew,
            shutdown_grace=grace,
            metrics_host=host,
            metrics_port=port,
            files_interval=files_interval,
            orphan_older_than=older_than,
            orphan_dry_run=orphan_dry_run,
            metadata_cache_records=cache_records,
            polars=polars,
            job_nice=job_nice,
            compact_max_files=compact_max,
            compact_engine=engine,
            spark_remote=remote,
            spark_min_input_bytes=min_input,
        ),
        warehouses=tuple(warehouses),
        tasks=tasks,
        default_options=defaults,
    )


def load_config(path: str) -> DaemonConfig:
    """Read and validate the TOML file at ``path``.

    Raises:
        FileNotFoundError: no such file.
        InvalidOptionError: the TOML does not parse, or a key is unknown or
            has a bad value (the message names the key and the reason).
    """
    with open(path, "rb") as f:
        raw = f.read()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidOptionError(f"{path}: not valid TOML: {exc}", key="<file>") from None
    return parse_config(data, source=path)
