"""Helpers for the dashboard tests: the dashboard's PromQL and the metric names in it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "grafana" / "dashboards" / "snaplake.json"

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
             "and", "or", "unless", "inf", "nan"}  # fmt: skip
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def load_dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every query, plus the template variables' queries."""
    out = [(p["title"], t["expr"]) for p in panels(dashboard) for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var["type"] == "query" and isinstance(query, str):
            match = re.fullmatch(r"label_values\((\w+),\s*\w+\)", query)
            assert match, query
            out.append((f"variable {var['name']}", match.group(1)))
    return out


def substitute(expr: str, *, rate_interval: str = "30s") -> str:
    """Replace Grafana's variables so Prometheus can evaluate ``expr``."""
    return (
        expr.replace("$__rate_interval", rate_interval)
        .replace('=~"$table"', '=~".*"')
        .replace("${datasource}", "")
    )


def metric_names(expr: str) -> set[str]:
    """Metric names referenced by a PromQL expression (functions, labels, keywords removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = _GROUPING.sub("", text)
    text = re.sub(r"(?<![A-Za-z_:])\d+(\.\d+)?([eE][+-]?\d+)?", "0", text)  # numbers
    names = set()
    for match in _IDENT.finditer(text):
        name = match.group(0)
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or name.lower() in _KEYWORDS:
            continue  # a function call or a keyword
        names.add(name)
    return names
