"""Reading tagged versions on the command line, and hints after an expired snapshot.

Issue 18 item 13: ``read`` and ``files`` take ``--tag``; the hint printed after
``--snapshot N`` of an expired snapshot names commands that work, which these
tests check by running them.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from tests.unit.cli.runner import Snaplake

_QUOTED_COMMAND = re.compile(r"'(snaplake [^']*)'")


@pytest.fixture
def expired(snaplake: Snaplake, sales_parquet: Path, sales_csv: Path, tmp_path: Path) -> str:
    """``shop.sales``: snapshot 1 (4 rows) tagged ``v1``, snapshot 2 untagged, both expired."""
    snaplake("create-table", "shop.sales", "--from-parquet", str(sales_parquet),
             "--option", "snapshot.num-retained.min=1",
             "--option", "snapshot.num-retained.max=1")  # fmt: skip
    snaplake("write", "shop.sales", str(sales_parquet))
    snaplake("tag", "create", "shop.sales", "v1", "--snapshot", "1")
    snaplake("write", "shop.sales", str(sales_csv))
    snaplake("alter-table", "shop.sales", "--add-column", "note string")
    noted = tmp_path / "noted.csv"
    noted.write_text("id,city,amount,day,note\n7,Lima,2.0,2024-01-04,late\n")
    snaplake("write", "shop.sales", str(noted))
    snaplake("expire-snapshots", "shop.sales", "--execute")
    assert [s["id"] for s in snaplake.json("snapshots", "shop.sales")] == [3]
    return "shop.sales"


def _commands(hint: str) -> list[list[str]]:
    """Every ``'snaplake ...'`` command a message names, split into arguments."""
    return [shlex.split(c)[1:] for c in _QUOTED_COMMAND.findall(hint)]


def test_read_and_files_take_a_tag(snaplake: Snaplake, expired: str) -> None:
    rows = snaplake.json("read", expired, "--tag", "v1")
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 4]
    assert "note" not in rows[0]  # the tag reads in the schema it was committed with
    picked = snaplake.json("read", expired, "--tag", "v1", "--columns", "id,city",
                           "--filter", "city = 'Berlin'")  # fmt: skip
    assert sorted(r["id"] for r in picked) == [1, 3]
    files = snaplake.json("files", expired, "--tag", "v1")
    assert sum(f["rows"] for f in files) == 4
    latest = snaplake.json("files", expired)
    assert {f["file"] for f in files} < {f["file"] for f in latest}


def test_tag_errors(snaplake: Snaplake, expired: str) -> None:
    for command in ("read", "files"):
        both = snaplake(command, expired, "--tag", "v1", "--snapshot", "3", expect=2)
        assert "--snapshot or --tag, not both" in both.stderr
        missing = snaplake(command, expired, "--tag", "nope", expect=4)
        assert "tag 'nope' does not exist (tags: v1)" in missing.stderr


@pytest.mark.parametrize("command", ["read", "files"])
def test_the_hint_for_an_expired_tagged_snapshot_names_a_working_command(
    snaplake: Snaplake, expired: str, command: str
) -> None:
    result = snaplake(command, expired, "--snapshot", "1", expect=4)
    hint = result.stderr.strip()
    assert "snapshot 1 does not exist" in hint
    named = _commands(hint)
    assert named == [[command, expired, "--tag", "v1"]], hint
    shown = snaplake.json(*named[0])
    assert len(shown) >= 1


def test_the_hint_for_an_expired_snapshot_names_working_commands(
    snaplake: Snaplake, expired: str
) -> None:
    hint = snaplake("read", expired, "--snapshot", "2", expect=4).stderr.strip()
    named = _commands(hint)
    assert [c[0] for c in named] == ["snapshots", "tag", "read"], hint
    tags = [t["name"] for t in snaplake.json("tag", "list", expired)]
    assert tags == ["v1"]
    for args in named:
        args = [tags[0] if a == "NAME" else a for a in args]
        snaplake(*args)  # exit 0
