"""The Grafana dashboard: metric names exist, HELP texts, structure, Grafana's schema (tsc)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from tests.daemon.promql import DASHBOARD, expressions, load_dashboard, metric_names, panels

from snaplake.metrics import SnaplakeMetrics, exposition

GRAFANA = DASHBOARD.parents[1]
SCHEMA_DIR = GRAFANA / ".schema-check"


def _registry_names() -> set[str]:
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    SnaplakeMetrics(registry=registry)
    return set(registry._names_to_collectors)


def test_metric_name_extraction():
    assert metric_names(
        'histogram_quantile(0.5, sum by (le, table) (rate(a_bucket{table=~"$t"}[5m]))) '
        "or vector(0) + time() - max by (x) (b_total) / on(table) c"
    ) == {"a_bucket", "b_total", "c"}
    assert metric_names("max(x_total < 1e9) * 2.5e-3") == {"x_total"}


def test_every_dashboard_metric_is_registered_by_the_code():
    names = _registry_names()
    exprs = expressions(load_dashboard())
    assert len(exprs) > 30
    used = set()
    for title, expr in exprs:
        found = metric_names(expr)
        assert found, f"{title}: no metric in {expr}"
        missing = found - names
        assert not missing, f"{title}: {sorted(missing)} not exported by snaplake.metrics"
        used |= found
    # The panels cover the list.
    for required in (
        "snaplake_table_commit_duration_seconds_bucket", "snaplake_commit_duration_seconds_bucket",
        "snaplake_commits_total", "snaplake_commit_retries_total",
        "snaplake_table_freshness_seconds",
        "snaplake_snapshots_retained", "snaplake_snapshots_retained_limit",
        "snaplake_manifest_files", "snaplake_manifest_merge_threshold", "snaplake_data_files",
        "snaplake_small_files", "snaplake_maintenance_runs_total",
        "snaplake_maintenance_duration_seconds_bucket", "snaplake_files_deleted_total",
        "snaplake_daemon_up",
    ):  # fmt: skip
        assert required in used, required


def test_every_exported_metric_has_help_text():
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    m = SnaplakeMetrics(registry=registry)
    m.init_table(table="db.t", tasks=["compact"])
    body, _ = exposition(registry)
    families = list(text_string_to_metric_families(body.decode()))
    assert len(families) > 40
    for family in families:
        assert family.documentation.strip(), f"{family.name} has no HELP text"


def test_dashboard_structure():
    dash = load_dashboard()
    ps = panels(dash)
    ids = [p["id"] for p in ps]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in ps:
        g = p["gridPos"]
        assert g["x"] >= 0, p["title"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps another panel"
                cells.add((x, y))
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert refs
        assert len(refs) == len(set(refs))
        assert all(t["expr"].strip() for t in p["targets"])
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "table"}


def _ensure_schema_package() -> Path:
    tsc = SCHEMA_DIR / "node_modules" / ".bin" / "tsc"
    if not tsc.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed; `make grafana-schema` installs the checker")
        SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "i", "--silent", "--no-audit", "--no-fund", "--prefix", str(SCHEMA_DIR),
             "@grafana/schema", "typescript"],
            check=True, timeout=300,
        )  # fmt: skip
    return tsc


def _tsc(tsc: Path, source: str, name: str) -> subprocess.CompletedProcess[str]:
    path = SCHEMA_DIR / name
    path.write_text(
        "import type { Dashboard } from '@grafana/schema';\n"
        "// JSON spells string enums by their values; accept exactly those values.\n"
        "type Json<T> = T extends string ? `${T}` : T extends readonly (infer U)[] ? Json<U>[]"
        " : T extends object ? { [K in keyof T]: Json<T[K]> } : T;\n"
        f"export const dashboard: Json<Dashboard> = {source};\n"
    )
    try:
        return subprocess.run(
            [str(tsc), "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext",
             "--moduleResolution", "nodenext", "--skipLibCheck", str(path)],
            capture_output=True, text=True, timeout=120, cwd=SCHEMA_DIR,
        )  # fmt: skip
    finally:
        path.unlink(missing_ok=True)


def test_dashboard_matches_grafana_schema():
    """tsc checks the JSON as a typed @grafana/schema Dashboard literal (excess keys refused)."""
    tsc = _ensure_schema_package()
    source = DASHBOARD.read_text()
    ok = _tsc(tsc, source, "check_dashboard.ts")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The check is strict: a misspelt key, a wrong type and a bad enum value are refused.
    for bad in (
        source.replace('"title": "Rows"', '"titel": "Rows"'),
        source.replace('"refresh": "30s"', '"refresh": 30'),
        source.replace('"mode": "absolute"', '"mode": "absolut"', 1),
    ):
        assert bad != source
        result = _tsc(tsc, bad, "check_bad.ts")
        assert result.returncode != 0
