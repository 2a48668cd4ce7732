"""Daemon TOML configuration: defaults, validation errors naming the key, --check-config."""

from __future__ import annotations

import tomllib
from datetime import timedelta

import pytest

from snaplake.daemon.config import Task, load_config, parse_config
from snaplake.daemon.config_describe import describe_config
from snaplake.daemon.main import main
from snaplake.errors import InvalidOptionError

MINIMAL = {"warehouse": [{"uri": "/tmp/wh"}]}


def test_minimal_config_fills_every_default():
    cfg = parse_config(MINIMAL)
    assert cfg.log_level == "INFO"
    assert (cfg.daemon.metrics_host, cfg.daemon.metrics_port) == ("127.0.0.1", 9464)
    assert cfg.warehouses[0].tables == ("*",)
    assert cfg.tasks[Task.ORPHAN_CLEAN].interval == timedelta(days=1)
    assert cfg.daemon.orphan_older_than == timedelta(days=1)
    assert all(cfg.tasks[t].enabled for t in Task if t is not Task.CHECK)
    assert not cfg.tasks[Task.CHECK].enabled  # reads every data file: only when asked
    assert cfg.default_options == {}
    # Paimon defaults apply when neither the daemon nor the table sets a key.
    assert cfg.effective_options({}).manifest_merge_min_count == 30
    # Memory: no polars, a bounded cache, compaction commits of at most 500 files per bucket.
    assert (cfg.daemon.polars, cfg.daemon.metadata_cache_records) == (False, 10_000)
    assert cfg.daemon.compact_max_files == 500
    assert cfg.daemon.job_nice == 10  # job threads yield the CPU to writers


def test_memory_settings():
    cfg = parse_config({**MINIMAL, "daemon": {"polars": True, "job_nice": 0},
                        "tasks": {"compact": {"max_files_per_bucket": 40}}})  # fmt: skip
    assert cfg.daemon.polars
    assert cfg.daemon.compact_max_files == 40
    assert cfg.daemon.job_nice == 0
    text = describe_config(cfg)
    assert "polars = true" in text
    assert "job_nice = 0" in text
    assert "max_files_per_bucket = 40" in text


def test_table_options_win_over_daemon_defaults():
    cfg = parse_config(
        {**MINIMAL, "tasks": {"manifest_merge": {"manifest.merge-min-count": 5},
                              "expire_snapshots": {"snapshot.time-retained": "10 s"}}}
    )  # fmt: skip
    assert cfg.default_options == {
        "manifest.merge-min-count": "5",
        "snapshot.time-retained": "10 s",
    }
    assert cfg.effective_options({}).manifest_merge_min_count == 5
    table_wins = cfg.effective_options({"manifest.merge-min-count": "12"})
    assert table_wins.manifest_merge_min_count == 12
    assert table_wins.snapshot_time_retained == timedelta(seconds=10)


def test_selectors():
    cfg = parse_config(
        {
            "warehouse": [
                {"uri": "/w", "tables": ["sales.orders", "logs.*"], "exclude": ["logs.tmp*"]}
            ]
        }
    )
    wh = cfg.warehouses[0]
    assert wh.selects("sales.orders")
    assert wh.selects("logs.web")
    assert not wh.selects("sales.other")
    assert not wh.selects("logs.tmp_1")
    assert wh.explicit_tables == ("sales.orders",)


@pytest.mark.parametrize(
    ("doc", "key", "reason"),
    [
        ({}, "warehouse", "required"),
        ({**MINIMAL, "bogus": 1}, "bogus", "unknown key"),
        ({**MINIMAL, "log_level": "LOUD"}, "log_level", "must be one of"),
        ({**MINIMAL, "metrics": {"listen": "9464"}}, "metrics.listen", "host:port"),
        ({**MINIMAL, "metrics": {"listen": "127.0.0.1:99999"}}, "metrics.listen", "host:port"),
        ({**MINIMAL, "tasks": {"compact": {"interval": "soon"}}}, "tasks.compact.interval",
         "duration"),
        ({**MINIMAL, "tasks": {"compact": {"interval": 5}}}, "tasks.compact.interval", "unit"),
        ({**MINIMAL, "tasks": {"compact": {"interval": "0 s"}}}, "tasks.compact.interval",
         "longer"),
        ({**MINIMAL, "tasks": {"compact": {"manifest.merge-min-count": 3}}},
         "tasks.compact.manifest.merge-min-count", "unknown key"),
        ({**MINIMAL, "tasks": {"manifest_merge": {"manifest.merge-min-count": "many"}}},
         "tasks.manifest_merge.manifest.merge-min-count", "invalid literal"),
        ({**MINIMAL, "tasks": {"expire_snapshots": {"snapshot.time-retained": 3600}}},
         "tasks.expire_snapshots.snapshot.time-retained", "milliseconds"),
        ({**MINIMAL, "tasks": {"cleanup": {}}}, "tasks.cleanup", "unknown key"),
        ({**MINIMAL, "daemon": {"workers": 0}}, "daemon.workers", ">= 1"),
        ({**MINIMAL, "daemon": {"polars": "yes"}}, "daemon.polars", "true or false"),
        ({**MINIMAL, "daemon": {"job_nice": -5}}, "daemon.job_nice", ">= 0"),
        ({**MINIMAL, "daemon": {"job_nice": 20}}, "daemon.job_nice", "at most 19"),
        ({**MINIMAL, "tasks": {"compact": {"max_files_per_bucket": 1}}},
         "tasks.compact.max_files_per_bucket", ">= 2"),
        ({**MINIMAL, "daemon": {"lease_ttl": "10 s", "lease_renew_interval": "8 s"}},
         "daemon.lease_renew_interval", "half"),
        ({**MINIMAL, "tasks": {"compact": {"engine": "flink"}}}, "tasks.compact.engine",
         "must be one of"),
        ({**MINIMAL, "tasks": {"compact": {"engine": "spark"}}}, "tasks.compact.spark.remote",
         "is required"),
        ({**MINIMAL, "tasks": {"compact": {"engine": "spark", "spark": {"remote": "http://x:1"}}}},
         "tasks.compact.spark.remote", "sc://host:port"),
        ({**MINIMAL, "tasks": {"compact": {"engine": "spark", "spark": {
            "remote": "sc://h:1", "min-input-bytes": "lots"}}}},
         "tasks.compact.spark.min-input-bytes", "size"),
        ({**MINIMAL, "tasks": {"compact": {"engine": "spark", "spark": {
            "remote": "sc://h:1", "master": "local"}}}}, "tasks.compact.spark.master",
         "unknown key"),
        ({**MINIMAL, "tasks": {"compact": {"spark": {"remote": "sc://h:1"}}}},
         "tasks.compact.spark.remote", "needs engine = 'spark'"),
        ({**MINIMAL, "tasks": {"compact": {"engine": "spark", "spark.remote": "sc://h:1"}}},
         "tasks.compact.spark.remote", "unknown key"),
        ({"warehouse": [{"tables": ["a.b"]}]}, "warehouse[0].uri", "required"),
        ({"warehouse": [{"uri": "/w", "tables": ["nodot"]}]}, "warehouse[0].tables", "db.table"),
    ],
)  # fmt: skip
def test_invalid_config_names_key_and_reason(doc, key, reason):
    with pytest.raises(InvalidOptionError) as info:
        parse_config(doc, source="snaplake.toml")
    assert info.value.key == key
    assert key in str(info.value)
    assert reason in str(info.value)
    assert str(info.value).startswith("snaplake.toml: ")


def test_secrets_are_hidden(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text(
        '[[warehouse]]\nuri = "s3://b/w"\n'
        'options = { "s3.access-key-id" = "AKIA", "s3.secret-access-key" = "hunter2", '
        '"s3.endpoint" = "http://127.0.0.1:1" }\n'
    )
    cfg = load_config(str(path))
    assert "hunter2" not in repr(cfg)
    text = describe_config(cfg)
    assert "hunter2" not in text
    assert "AKIA" not in text
    assert "http://127.0.0.1:1" in text


def test_describe_config_round_trips_through_toml(tmp_path):
    cfg = parse_config(
        {**MINIMAL, "tasks": {"manifest_merge": {"manifest.merge-min-count": 7, "interval": "2 s"}}}
    )
    text = describe_config(cfg)
    doc = tomllib.loads(text)
    again = parse_config(doc)
    assert again.tasks == cfg.tasks
    assert again.effective_options({}).manifest_merge_min_count == 7
    assert again.daemon.lease_ttl == cfg.daemon.lease_ttl


def test_check_config_cli(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text('[[warehouse]]\nuri = "/tmp/x"\n[tasks.compact]\ninterval = "30 s"\n')
    assert main(["--config", str(good), "--check-config"]) == 0
    out = capsys.readouterr().out
    assert '[tasks.compact]\nenabled = true\ninterval = "30 s"' in out
    assert '"manifest.merge-min-count" = "30"  # Paimon default' in out

    bad = tmp_path / "bad.toml"
    bad.write_text('[[warehouse]]\nuri = "/tmp/x"\n[tasks.compact]\nintervall = "30 s"\n')
    assert main(["--config", str(bad), "--check-config"]) == 2
    err = capsys.readouterr().err
    assert "tasks.compact.intervall" in err
    assert "unknown key" in err

    broken = tmp_path / "broken.toml"
    broken.write_text("[[warehouse]\n")
    assert main(["--config", str(broken)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["--config", str(tmp_path / "missing.toml")]) == 2


def test_spark_engine_settings_and_check_config(tmp_path, capsys):
    cfg = parse_config({**MINIMAL, "tasks": {"compact": {"engine": "spark", "spark": {
        "remote": "sc://spark:15002/;token=s3cr3t", "min-input-bytes": "256 mb"}}}})  # fmt: skip
    d = cfg.daemon
    assert (d.compact_engine, d.spark_remote, d.spark_min_input_bytes) == (
        "spark", "sc://spark:15002/;token=s3cr3t", 256 << 20,
    )  # fmt: skip
    assert "s3cr3t" not in repr(cfg)
    default = parse_config(MINIMAL).daemon
    assert (default.compact_engine, default.spark_remote) == ("in-process", None)
    assert default.spark_min_input_bytes == 1 << 30

    path = tmp_path / "spark.toml"
    path.write_text(
        '[[warehouse]]\nuri = "/tmp/x"\n[tasks.compact]\nengine = "spark"\n'
        'spark.remote = "sc://127.0.0.1:15002"\nspark.min-input-bytes = 1048576\n'
    )
    assert main(["--config", str(path), "--check-config"]) == 0
    out = capsys.readouterr().out
    assert 'engine = "spark"\nspark.remote = "sc://127.0.0.1:15002"\n' in out
    assert 'spark.min-input-bytes = "1 mb"' in out
    again = parse_config(tomllib.loads(out))
    assert again.daemon.spark_min_input_bytes == 1 << 20
    assert again.daemon.spark_remote == "sc://127.0.0.1:15002"
    hidden = describe_config(cfg)
    assert "s3cr3t" not in hidden and 'spark.remote = "sc://spark:15002/;<hidden>"' in hidden
    assert 'engine = "in-process"' in describe_config(parse_config(MINIMAL))


def test_check_config_prints_each_tables_effective_target_file_size(tmp_path, capsys):
    """Paimon's target-file-size default is 128 mb for primary-key tables, 256 mb otherwise."""
    import pyarrow as pa

    import snaplake

    warehouse = tmp_path / "wh"
    catalog = snaplake.FileSystemCatalog(str(warehouse))
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog.create_table("db.pk", schema=schema, primary_keys=["id"], options={"bucket": "1"})
    catalog.create_table("db.log", schema=schema)
    catalog.create_table("db.own", schema=schema, options={"target-file-size": "64 mb"})
    path = tmp_path / "check.toml"
    path.write_text(
        f'[[warehouse]]\nuri = "{warehouse}"\ntables = ["db.*", "db.typo"]\n'
        '[tasks.compact]\n"compaction.min.file-num" = 7\n'
    )
    assert main(["--config", str(path), "--check-config"]) == 0
    out: str = capsys.readouterr().out

    def block(identifier: str) -> str:
        start = out.index(f"# warehouse[0] {identifier} (")
        end = out.find("\n# warehouse[0] ", start + 1)
        return out[start : end if end > 0 else len(out)]

    assert "(primary-key table)" in block("db.pk")
    assert '"target-file-size" = "128 mb"  # Paimon default for primary-key tables' in block(
        "db.pk"
    )
    assert '"target-file-size" = "256 mb"  # Paimon default for append tables' in block("db.log")
    assert '"target-file-size" = "64 mb"  # table option' in block("db.own")
    assert '"compaction.min.file-num" = "7"  # daemon default' in block("db.log")
    assert "# warehouse[0] MISSING db.typo: table db.typo does not exist" in out
    # No single target-file-size is claimed for every table, and the output stays valid TOML.
    assert '\n"target-file-size" = ' not in out
    assert "128 mb for primary-key tables" in out
    again = parse_config(tomllib.loads(out))
    assert "target-file-size" not in again.default_options
    assert again.default_options["compaction.min.file-num"] == "7"
