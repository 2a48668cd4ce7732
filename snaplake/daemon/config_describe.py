"""The effective daemon configuration rendered back as TOML (``--check-config``).

:func:`describe_config` prints every setting with its default filled in, in
the syntax :mod:`snaplake.daemon.config` reads, so that its output parses to
the same configuration; :func:`format_duration` and :func:`format_size`
render values in Paimon's syntax (also for
:func:`snaplake.daemon.discovery.describe_tables`).
"""

from __future__ import annotations

from datetime import timedelta

from snaplake.daemon.config import TASK_OPTIONS, DaemonConfig, Task
from snaplake.daemon.config_section import is_secret_option, without_params
from snaplake.options import CoreOptions
from snaplake.options.registry import TARGET_FILE_SIZE

__all__ = ["describe_config", "format_duration", "format_size"]


def format_size(n: int) -> str:
    """Render bytes with the largest unit dividing them (``"128 mb"``), else as a bare number."""
    for unit, size in (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return str(n)


def format_duration(value: timedelta) -> str:
    """Render a duration in Paimon's syntax with the largest unit dividing it (``"5 min"``)."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s" if seconds >= 1 else f"{int(seconds * 1000)} ms"


def describe_config(config: DaemonConfig) -> str:
    """Render the effective settings as TOML, with every default filled in.

    Credentials in warehouse options (keys mentioning key, secret, token,
    password or credential) are shown as ``"<hidden>"``. Paimon defaults that
    depend on the table (``target-file-size``) are a comment giving both
    values; ``--check-config`` adds each table's effective values
    (:func:`snaplake.daemon.discovery.describe_tables`).
    """
    d = config.daemon
    lines = [
        f"# effective configuration of {config.source}",
        f'log_level = "{config.log_level}"',
        "",
        "[daemon]",
        f'id = "{d.daemon_id}"',
        f"workers = {d.workers}",
        f'discovery_interval = "{format_duration(d.discovery_interval)}"',
        f'lease_ttl = "{format_duration(d.lease_ttl)}"',
        f'lease_renew_interval = "{format_duration(d.lease_renew_interval)}"',
        f'shutdown_grace = "{format_duration(d.shutdown_grace)}"',
        f"metadata_cache_records = {d.metadata_cache_records}",
        f"polars = {'true' if d.polars else 'false'}",
        f"job_nice = {d.job_nice}",
        "",
        "[metrics]",
        f'listen = "{d.metrics_host}:{d.metrics_port}"',
    ]
    for w in config.warehouses:
        opts = ", ".join(
            f'"{k}" = "{"<hidden>" if is_secret_option(k) else v}"'
            for k, v in sorted(w.options.items())
        )
        lines += [
            "",
            "[[warehouse]]",
            f'uri = "{w.uri}"',
            "tables = [" + ", ".join(f'"{t}"' for t in w.tables) + "]",
            "exclude = [" + ", ".join(f'"{t}"' for t in w.exclude) + "]",
            "options = {" + (f" {opts} " if opts else "") + "}",
        ]
    effective = CoreOptions(config.default_options)
    for task in Task:
        t = config.tasks[task]
        lines += [
            "",
            f"[tasks.{task.value}]",
            f"enabled = {'true' if t.enabled else 'false'}",
            f'interval = "{format_duration(t.interval)}"',
        ]
        if task is Task.WATCH:
            lines.append(f'files_interval = "{format_duration(d.files_interval)}"')
        if task is Task.COMPACT:
            lines.append(f"max_files_per_bucket = {d.compact_max_files}")
            lines.append(f'engine = "{d.compact_engine}"')
            if d.spark_remote is not None:
                lines.append(f'spark.remote = "{without_params(d.spark_remote)}"')
                lines.append(f'spark.min-input-bytes = "{format_size(d.spark_min_input_bytes)}"')
        if task is Task.ORPHAN_CLEAN:
            lines.append(f'older_than = "{format_duration(d.orphan_older_than)}"')
            lines.append(f"dry_run = {'true' if d.orphan_dry_run else 'false'}")
        for option in TASK_OPTIONS[task]:
            origin = "daemon default" if option.key in config.default_options else "Paimon default"
            value = config.default_options.get(option.key)
            if value is None and option is TARGET_FILE_SIZE:
                # Paimon's default depends on the table (CoreOptions.targetFileSize(hasPrimaryKey));
                # a comment, so that feeding this output back sets no daemon default.
                lines.append(
                    f'# "{option.key}": Paimon default, {format_size(256 << 20)} for append tables '
                    f"and {format_size(128 << 20)} for primary-key tables; table options win"
                )
                continue
            if value is None:
                typed = effective.get(option)
                value = format_duration(typed) if isinstance(typed, timedelta) else str(typed)
            lines.append(f'"{option.key}" = "{value}"  # {origin}; table options win')
    return "\n".join(lines) + "\n"
