"""What make needs beyond Python is checked first, installed with apt-get, or named (item 12).

``.ci/prereqs`` runs here with a PATH holding only stub tools (a ``java`` that
reports version 11, an ``apt-get`` that logs and "installs", an ``id`` that
says root or not), since the real Java and Node.js on this machine cannot be
removed; the real tools are checked too.
"""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "prereqs"
BASH = shutil.which("bash") or "/bin/bash"
UTILITIES = ("sed", "awk", "head", "cat", "cp", "env", "bash", "sh")


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(f"#!{BASH}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH with the shell utilities the script uses and nothing else."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in UTILITIES:
        found = shutil.which(name)
        assert found is not None, name
        (directory / name).symlink_to(found)
    return directory


def _run(bin_dir: Path, tool: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, str(SCRIPT), tool],
        env={"PATH": str(bin_dir), "HOME": str(bin_dir.parent)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _old_java(bin_dir: Path, version: str = "11.0.2") -> None:
    _stub(bin_dir, "java", f"echo 'openjdk version \"{version}\" 2019-01-15' >&2")
    _stub(bin_dir, "javac", "echo javac")


def _apt(bin_dir: Path, *, installs: str) -> Path:
    """An apt-get that logs its arguments and, on install, runs ``installs``."""
    log = bin_dir.parent / "apt.log"
    _stub(bin_dir, "apt-get", f'echo "$*" >> {log}\nif [ "$1" = install ]; then {installs}; fi')
    return log


def _installs(bin_dir: Path, tools: dict[str, str]) -> str:
    """Shell for the apt-get stub: put these tool stubs on PATH (what a package would do)."""
    new = bin_dir.parent / "package"
    new.mkdir(exist_ok=True)
    for name, body in tools.items():
        _stub(new, name, body)
    return f"cp {new}/* {bin_dir}/"


NEW_JDK = {"java": "echo 'openjdk version \"17.0.9\" 2023-10-17' >&2", "javac": "true"}


def test_old_java_without_apt_stops_naming_the_tool(bin_dir: Path) -> None:
    _old_java(bin_dir)
    _stub(bin_dir, "id", "echo 0")
    done = _run(bin_dir, "java")
    assert done.returncode == 1
    assert "Java 17+" in done.stderr and "apt-get install -y openjdk-17-jdk-headless" in (
        done.stderr
    )


def test_java_8_version_string_counts_as_too_old(bin_dir: Path) -> None:
    _old_java(bin_dir, "1.8.0_402")
    _stub(bin_dir, "id", "echo 0")
    assert "Java 17+" in _run(bin_dir, "java").stderr


def test_not_root_and_no_sudo_stops_naming_root_or_sudo(bin_dir: Path) -> None:
    _old_java(bin_dir)
    _stub(bin_dir, "id", "echo 1000")
    log = _apt(bin_dir, installs="true")
    done = _run(bin_dir, "java")
    assert done.returncode == 1
    assert "root or sudo" in done.stderr and "Java 17+" in done.stderr
    assert not log.exists()  # nothing attempted


def test_root_installs_a_jdk_with_apt_get(bin_dir: Path) -> None:
    _old_java(bin_dir)
    _stub(bin_dir, "id", "echo 0")
    log = _apt(bin_dir, installs=_installs(bin_dir, NEW_JDK))
    done = _run(bin_dir, "java")
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("update")
    assert calls[1] == "install -y -qq --no-install-recommends openjdk-17-jdk-headless"


def test_sudo_is_used_when_not_root(bin_dir: Path) -> None:
    _old_java(bin_dir)
    _stub(bin_dir, "id", "echo 1000")
    log = _apt(bin_dir, installs=_installs(bin_dir, NEW_JDK))
    _stub(bin_dir, "sudo", f'echo "sudo $*" >> {log.parent / "sudo.log"}\n"$@"')
    done = _run(bin_dir, "java")
    assert done.returncode == 0, done.stderr
    assert "sudo apt-get install" in (log.parent / "sudo.log").read_text()


def test_a_package_still_too_old_after_apt_stops(bin_dir: Path) -> None:
    _stub(bin_dir, "node", "echo v12.22.12")
    _stub(bin_dir, "npm", "echo 6")
    _stub(bin_dir, "id", "echo 0")
    log = _apt(bin_dir, installs="true")
    done = _run(bin_dir, "node")
    assert done.returncode == 1
    assert "Node.js 18+" in done.stderr and "still missing" in done.stderr
    assert "install -y -qq --no-install-recommends nodejs npm" in log.read_text()


def test_missing_node_is_installed_with_npm(bin_dir: Path) -> None:
    _stub(bin_dir, "id", "echo 0")
    log = _apt(bin_dir, installs=_installs(bin_dir, {"node": "echo v18.19.0", "npm": "true"}))
    done = _run(bin_dir, "node")
    assert done.returncode == 0, done.stderr
    assert "nodejs npm" in log.read_text()


@pytest.mark.parametrize("tool", ["java", "node", "venv"])
def test_this_machine_has_what_make_needs(tool: str) -> None:
    done = subprocess.run(
        [BASH, str(SCRIPT), tool], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_make_checks_tools_before_installing_anything() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target, tools in (
        ("demo", ["java"]),
        ("test", ["java", "node"]),
        ("unit", ["java", "node"]),
    ):
        match = re.search(rf"^{target}:(.*)$", makefile, re.M)
        assert match is not None, target
        assert match.group(1).split()[: len(tools)] == tools, match.group(0)


def test_readme_lists_the_prerequisites() -> None:
    readme = (ROOT / "README.md").read_text()
    for needed in ("Java 17+", "Node.js\n  18+ with npm", "Root or sudo", "python3-venv"):
        assert needed in readme, needed
