"""The package's structure: the table kind is decided in one place (issue 19).

No module outside ``snaplake/filestore/`` and the schema rules tests whether a
table has primary keys: a new table mode must be a FileStore variant, not a
branch in the facade, Spark, the daemon, the CLI or maintenance.
"""

from __future__ import annotations

import ast
from pathlib import Path

import snaplake

PACKAGE = Path(snaplake.__file__).parent

ALLOWED = {
    "filestore",  # the one object per table kind
    "store/format/schema.py",  # the schema rules: key columns, trimmed keys
    "store/format/primary_key.py",  # the primary-key schema rules
    # Paimon's CoreOptions.targetFileSize(hasPrimaryKey): the option's default per kind,
    # asked by the FileStores with their own kind.
    "options/core_options.py",
}
"""Where testing for primary keys is the point."""


def _allowed(rel: str) -> bool:
    return any(rel == a or rel.startswith(a + "/") for a in ALLOWED)


def _tests_primary_keys(node: ast.expr) -> bool:
    """Whether ``node``, used as a truth value, is ``<x>.primary_keys`` (or its length)."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"len", "bool"}:
        return any(_tests_primary_keys(a) for a in node.args)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _tests_primary_keys(node.operand)
    if isinstance(node, ast.BoolOp):
        return any(_tests_primary_keys(v) for v in node.values)
    if isinstance(node, ast.Attribute):
        return node.attr in _KEY_NAMES
    return isinstance(node, ast.Name) and node.id in _KEY_NAMES


_KEY_NAMES = frozenset({"primary_keys", "has_primary_key"})


def _conditions(tree: ast.AST) -> list[ast.expr]:
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            out.append(node.test)
        elif isinstance(node, ast.comprehension):
            out.extend(node.ifs)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "bool":
            out.extend(node.args)
    return out


def test_only_the_filestore_decides_the_table_kind() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if _allowed(rel):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for cond in _conditions(tree):
            if _tests_primary_keys(cond):
                offenders.append(f"snaplake/{rel}:{cond.lineno}: {ast.unparse(cond)}")
    assert not offenders, "ask the FileStore instead:\n" + "\n".join(sorted(set(offenders)))


def test_no_module_exceeds_600_lines_except_declaration_tables() -> None:
    tables = {"options/registry.py", "store/format/types.py"}  # declaration tables (issue 19)
    long = {
        path.relative_to(PACKAGE).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 600
    }
    assert not {k: v for k, v in long.items() if k not in tables}
