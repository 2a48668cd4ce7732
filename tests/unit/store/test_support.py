"""check_supported: the one decision about what snaplake refuses to do with a table."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pyarrow as pa
import pytest

import snaplake
from snaplake.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTableError
from snaplake.options import ConfigOption, Operation, OptionStatus
from snaplake.options.registry import (
    iter_options,
    lookup_option,
    option_refusal,
    primary_key_option_refusal,
)
from snaplake.store.format.schema import TableSchema
from snaplake.store.support import check_supported

_SCHEMA = pa.schema([("id", pa.int64()), ("b", pa.binary()), ("v", pa.string())])


def test_primary_key_tables_pass_unless_they_use_what_the_merge_tree_lacks():
    schema = TableSchema.from_arrow(_SCHEMA, options={"primary-key": "id", "bucket": "2"})
    assert schema.primary_keys == ("id",)
    assert "primary-key" not in schema.options  # moved into the schema, as Paimon does
    for op in Operation:
        check_supported(schema, op)
    with_dv = dataclasses.replace(
        schema, options={**schema.options, "deletion-vectors.enabled": "true"}
    )
    for op in Operation:  # deletion vectors: read, written and compacted
        check_supported(with_dv, op)
    for bad in ({"merge-engine": "first-row"}, {"changelog-producer": "full-compaction"}):
        refused = dataclasses.replace(with_dv, options={**with_dv.options, **bad})
        with pytest.raises(InvalidOptionError, match="deletion vectors"):
            check_supported(refused, Operation.CREATE)
    with pytest.raises(InvalidOptionError, match=r"deletion-vectors\.enabled"):
        check_supported(
            dataclasses.replace(
                schema, options={**schema.options, "deletion-vectors.enabled": "maybe"}
            ),
            Operation.CREATE,
        )
    dynamic = dataclasses.replace(schema, options={**schema.options, "bucket": "-1"})
    for op in Operation:  # dynamic buckets: Paimon's default, read and written
        check_supported(dynamic, op)


def test_append_tables_pass():
    schema = TableSchema.from_arrow(_SCHEMA, partition_keys=["v"])
    for op in Operation:
        check_supported(schema, op)


def test_append_tables_with_deletion_vectors_pass_every_operation():
    schema = TableSchema.from_arrow(_SCHEMA, options={"deletion-vectors.enabled": "true"})
    for op in Operation:  # read with vectors, deleted by Table.delete, compacted with them
        check_supported(schema, op)


def test_binary_partition_keys_are_read_only():
    schema = TableSchema.from_arrow(_SCHEMA, partition_keys=["b"])
    check_supported(schema, Operation.READ)
    for op in (Operation.CREATE, Operation.WRITE, Operation.COMMIT, Operation.MAINTENANCE):
        with pytest.raises(UnsupportedTableError, match="BINARY") as info:
            check_supported(schema, op)
        assert info.value.feature == "BINARY partition key"


def test_partition_option_becomes_the_partition_keys(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    table = catalog.create_table("db.t", schema=_SCHEMA, options={"partition": "v"})
    assert table.partition_keys == ["v"]
    assert "partition" not in table.options
    with pytest.raises(SchemaMismatchError, match="both"):
        catalog.create_table(
            "db.u", schema=_SCHEMA, partition_keys=["v"], options={"partition": "v"}
        )


def test_create_refuses_binary_partition_keys_before_writing(tmp_path):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    with pytest.raises(UnsupportedTableError, match="BINARY"):
        catalog.create_table("db.t", schema=_SCHEMA, partition_keys=["b"])
    assert not any(tmp_path.iterdir())


# --- the registry's primary-key refusals -------------------------------------------------

_PK_REFUSALS = [o for o in iter_options() if o.status is OptionStatus.PRIMARY_KEY and o.refused_for]


def test_primary_key_refusals_are_declared_in_the_registry():
    """Formerly hand-written in primary_key._refused_options; now declarations."""
    up_level0 = lookup_option("compaction.force-up-level-0")
    assert up_level0 is not None
    assert up_level0.status is OptionStatus.PRIMARY_KEY
    assert up_level0.refused_for == {
        Operation.CREATE, Operation.WRITE, Operation.COMMIT, Operation.MAINTENANCE
    }  # fmt: skip
    key = "compaction.force-up-level-0"
    assert primary_key_option_refusal(key, "true", Operation.WRITE) is not None
    assert primary_key_option_refusal(key, "false", Operation.WRITE) is None
    assert primary_key_option_refusal(key, "true", Operation.READ) is None
    assert option_refusal(key, "true", Operation.WRITE) is None  # append tables
    # force-lookup writes compact with lookup at prepare (test_force_lookup.py)
    assert primary_key_option_refusal("force-lookup", "true", Operation.WRITE) is None
    group = lookup_option("fields.n.sequence-group")
    assert group is not None and group.key == "fields.#.sequence-group"
    assert {o.key for o in _PK_REFUSALS} >= {
        "changelog-producer", "fields.#.sequence-group", "fields.#.distinct",
        "fields.#.nested-key", "partial-update.remove-record-on-sequence-group",
        "aggregation.remove-record-on-delete", "data-file.thin-mode", "record-level.expire-time",
        "compaction.force-up-level-0", "write.sequence-number-init-mode",
        "compaction.optimization-interval", "sequence.snapshot-ordering", "scan.bucket",
        "pk-clustering-override",
    }  # fmt: skip


def _refused_value(option: ConfigOption[Any]) -> str:
    return next(v for v in ("x-not-accepted", "true") if not option.accepts(v))


@pytest.mark.parametrize("option", _PK_REFUSALS, ids=lambda o: o.key)
def test_primary_key_refusals_apply_to_primary_key_tables_for_exactly_their_operations(option):
    key = option.key.replace("#", "v")
    value = _refused_value(option)
    pk = TableSchema.from_arrow(_SCHEMA, options={"primary-key": "id", "bucket": "2"})
    pk = dataclasses.replace(pk, options={**pk.options, key: value})
    append = TableSchema.from_arrow(_SCHEMA)
    append = dataclasses.replace(append, options={**append.options, key: value})
    for op in Operation:
        check_supported(append, op)  # Paimon ignores primary-key options on append tables
        if op in option.refused_for:
            with pytest.raises(UnsupportedTableError, match="primary-key tables") as info:
                check_supported(pk, op)
            assert info.value.key == key
            assert info.value.operation == op.value
        else:
            check_supported(pk, op)


# --- one check per operation ---------------------------------------------------------------


@pytest.fixture
def checks(monkeypatch) -> list[Operation]:
    """The operations check_supported ran for, in order (a spy on its one per-call step)."""
    seen: list[Operation] = []
    original = TableSchema.check_primary_key_table

    def spy(self: TableSchema, operation: Operation) -> None:
        seen.append(operation)
        original(self, operation)

    monkeypatch.setattr(TableSchema, "check_primary_key_table", spy)
    return seen


@pytest.mark.parametrize("primary_keys", [["id"], []], ids=["primary-key", "append"])
def test_each_operation_runs_the_check_once(tmp_path, checks, primary_keys):
    catalog = snaplake.FileSystemCatalog(str(tmp_path))
    options = {"bucket": "2"} if primary_keys else {}
    table = catalog.create_table("db.t", schema=_SCHEMA, primary_keys=primary_keys, options=options)
    assert checks == [Operation.CREATE]
    data = pa.table({"id": [1, 2], "b": [b"x", b"y"], "v": ["a", "b"]}, schema=_SCHEMA)

    def step(action) -> list[Operation]:
        checks.clear()
        action()
        return list(checks)

    writer = table.new_write(commit_user="u")
    assert step(lambda: writer.write_arrow(data)) == []
    messages = writer.prepare_commit()
    committer = table.new_commit(commit_user="u")
    assert step(lambda: table.new_write(commit_user="u")) == [Operation.WRITE]
    # a Spark driver checks once for its executors' writers
    assert step(lambda: table.file_store().new_write("u", checked=True)) == []
    assert step(lambda: table.new_commit(commit_user="u").commit(messages)) == [Operation.COMMIT]
    again = table.new_write(commit_user="u")
    again.write_arrow(data)
    assert step(lambda: committer.commit(again.prepare_commit())) == []  # checked at new_commit
    third = table.new_write(commit_user="u")
    third.write_arrow(data)
    committer.commit(third.prepare_commit())
    assert step(table.to_arrow) == [Operation.READ]
    assert step(lambda: table.new_scan().plan()) == [Operation.READ]
    # a compaction is two operations, both checked when it plans: rewriting files
    # (maintenance), then its commit (the committer does not check that schema again)
    assert step(lambda: table.compact(full=True)) == [Operation.MAINTENANCE, Operation.COMMIT]
    assert step(lambda: table.merge_manifests(full=True)) == [Operation.MAINTENANCE]
    assert step(table.expire_snapshots) == [Operation.MAINTENANCE]


def test_a_compaction_whose_commit_is_refused_writes_nothing(tmp_path):
    """An option refusing commits only is found when the compaction plans, before a rewrite."""
    table = snaplake.FileSystemCatalog(str(tmp_path)).create_table(
        "db.t", schema=_SCHEMA, primary_keys=["id"], options={"bucket": "1"}
    )
    data = pa.table({"id": [1, 2], "b": [b"x", b"y"], "v": ["a", "b"]}, schema=_SCHEMA)
    for _ in range(3):
        table.write(data)
    schema_dir = tmp_path / "db.db" / "t" / "schema"
    latest = json.loads((schema_dir / "schema-0").read_text())
    # another engine set an option snaplake refuses for commits only
    latest.update(id=1, options={**latest["options"], "commit.discard-duplicate-files": "true"})
    (schema_dir / "schema-1").write_text(json.dumps(latest))
    before = sorted(p.name for p in (tmp_path / "db.db" / "t").rglob("*") if p.is_file())
    with pytest.raises(UnsupportedTableError, match=r"commit\.discard-duplicate-files"):
        table.compact(full=True)
    after = sorted(p.name for p in (tmp_path / "db.db" / "t").rglob("*") if p.is_file())
    assert after == before
