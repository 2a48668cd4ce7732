"""pypaimon 2.1.0 reads manifests and manifest lists written by snaplake.

A copy of the golden pypaimon table gets a snapshot 4 whose base list is built
by ``concat_manifest_lists`` (blocks copied from pypaimon's lists) and whose
delta manifest (a DELETE written by ``write_manifest_file``) removes one data
file. pypaimon, in its own venv, must then plan and read the table through its
real manifest readers, and decode our files against its own Avro schemas.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from snaplake.store.format.data_file import SimpleStats
from snaplake.store.format.manifest import FileKind, read_manifest_file, write_manifest_file
from snaplake.store.format.manifest_list import (
    ManifestFileMeta,
    concat_manifest_lists,
    read_manifest_list,
    write_manifest_list,
)
from snaplake.store.io.local_file_io import LocalFileIO

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
PAIMON_PY = ROOT / ".venv-paimon" / "bin" / "python"
TABLE = ROOT / "tests" / "fixtures" / "pypaimon_table"

_SCRIPT = r"""
import io, json, sys
import fastavro
from pypaimon import CatalogFactory
from pypaimon.manifest.schema.manifest_entry import MANIFEST_ENTRY_SCHEMA
from pypaimon.manifest.schema.manifest_file_meta import MANIFEST_FILE_META_SCHEMA

warehouse, manifest, base_list, delta_list = sys.argv[1:5]
out = {}
def read(path, schema):
    with open(path, "rb") as f:
        return list(fastavro.reader(f, reader_schema=schema))
recs = read(manifest, MANIFEST_ENTRY_SCHEMA)
out["manifest"] = [
    [r["_VERSION"], r["_KIND"], r["_BUCKET"], r["_TOTAL_BUCKETS"], r["_FILE"]["_FILE_NAME"],
     r["_FILE"]["_ROW_COUNT"], r["_FILE"]["_VALUE_STATS"]["_NULL_COUNTS"], r["_PARTITION"].hex()]
    for r in recs
]
base = read(base_list, MANIFEST_FILE_META_SCHEMA)
out["base"] = [[r["_FILE_NAME"], r["_FILE_SIZE"], r["_NUM_ADDED_FILES"]] for r in base]
delta = read(delta_list, MANIFEST_FILE_META_SCHEMA)
out["delta"] = [[r["_FILE_NAME"], r["_NUM_DELETED_FILES"], r["_MIN_BUCKET"]] for r in delta]
table = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
rb = table.new_read_builder()
splits = rb.new_scan().plan().splits()
out["ids"] = sorted(rb.new_read().to_arrow(splits).column("id").to_pylist())
print(json.dumps(out))
"""


@pytest.mark.skipif(not PAIMON_PY.exists(), reason="needs the .venv-paimon oracle venv")
def test_pypaimon_reads_snaplake_manifests(tmp_path: Path) -> None:
    table = tmp_path / "db.db" / "t"
    shutil.copytree(TABLE, table)
    fio = LocalFileIO(fsync=False)
    snap3 = json.loads((table / "snapshot" / "snapshot-3").read_text())
    mdir = table / "manifest"
    base = [
        (mdir / snap3["baseManifestList"]).read_bytes(),
        (mdir / snap3["deltaManifestList"]).read_bytes(),
    ]

    # The 3-row file of dt=2024-01-02 (written by commit 2) is deleted by snapshot 4.
    live = [
        e
        for m in read_manifest_list(fio, str(mdir / snap3["baseManifestList"]))
        + read_manifest_list(fio, str(mdir / snap3["deltaManifestList"]))
        for e in read_manifest_file(fio, str(mdir / m.file_name))
    ]
    victim = next(e for e in live if e.kind == FileKind.ADD and e.file.row_count == 3)
    manifest_name = "manifest-snaplake-0"
    size = write_manifest_file(fio, str(mdir / manifest_name), [victim.as_delete()])
    delta_meta = ManifestFileMeta(
        file_name=manifest_name,
        file_size_bytes=size,
        num_added_files=0,
        num_deleted_files=1,
        partition_stats=SimpleStats(
            min_values=victim.partition, max_values=victim.partition, null_counts=(0,)
        ),
        schema_id=0,
        min_bucket=0,
        max_bucket=0,
        min_level=0,
        max_level=0,
    )
    base_name, delta_name = "manifest-list-snaplake-0", "manifest-list-snaplake-1"
    base_bytes = concat_manifest_lists(base, [])
    fio.write_if_absent(str(mdir / base_name), base_bytes)
    delta_size = write_manifest_list(fio, str(mdir / delta_name), [delta_meta])
    snap4 = {
        **snap3,
        "id": 4,
        "baseManifestList": base_name,
        "baseManifestListSize": len(base_bytes),
        "deltaManifestList": delta_name,
        "deltaManifestListSize": delta_size,
        "commitKind": "OVERWRITE",
        "totalRecordCount": snap3["totalRecordCount"] - 3,
        "deltaRecordCount": -3,
    }
    (table / "snapshot" / "snapshot-4").write_text(json.dumps(snap4))
    (table / "snapshot" / "LATEST").write_text("4")

    proc = subprocess.run(
        [
            str(PAIMON_PY),
            "-c",
            _SCRIPT,
            str(tmp_path),
            str(mdir / manifest_name),
            str(mdir / base_name),
            str(mdir / delta_name),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["manifest"] == [
        [
            2,
            1,
            0,
            -1,
            victim.file.file_name,
            3,
            list(victim.file.value_stats.null_counts or ()),
            victim.partition.hex(),
        ]
    ]
    assert [b[0] for b in out["base"]] == [
        m.file_name for m in read_manifest_list(fio, str(mdir / base_name))
    ]
    assert len(out["base"]) == 3
    assert out["delta"] == [[manifest_name, 1, 0]]
    # Snapshot 3 held ids {99} + {10} + {20, 21, 22}; the delete removed 20..22.
    assert out["ids"] == [10, 99]
    print(out, file=sys.stderr)
