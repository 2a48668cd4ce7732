"""TextOutput / JsonOutput rendering details."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

import pytest
from rich.console import Console

from snaplake.cli.output import Column, JsonOutput, TextOutput, format_size, format_time_ms


def test_format_helpers() -> None:
    assert format_time_ms(0) == "1970-01-01T00:00:00.000Z"
    assert format_time_ms(None) is None
    assert format_size(999) == "999 B"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(5 * 1024**3) == "5.0 GiB"


def test_json_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    JsonOutput().rows(
        [{"d": dt.date(2024, 1, 2), "p": Decimal("1.10"), "b": b"\x00\x01", "n": None}],
        columns=[Column(key="d", header="d")],
    )
    assert json.loads(capsys.readouterr().out) == [
        {"d": "2024-01-02", "p": "1.10", "b": "AAE=", "n": None}
    ]


def test_text_record_units_and_lists(capsys: pytest.CaptureFixture[str]) -> None:
    TextOutput(interactive=False).record(
        {"bytes_freed": 2048, "duration_s": 0.5, "files": [f"f{i}" for i in range(25)],
         "options": {"bucket": "-1"}, "ok": True},
    )  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["bytes", "freed:", "2.0", "KiB"]
    assert lines[1].split() == ["duration:", "0.500", "s"]
    assert lines[2].split() == ["files:", "25"]
    assert lines[3].strip() == "f0" and "5 more" in lines[23]
    assert lines[24].split() == ["options:", "bucket=-1"]
    assert lines[25].split() == ["ok:", "yes"]


def test_text_rows_are_not_wrapped_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    long = "x" * 300
    TextOutput(interactive=False).rows(
        [{"a": 1, "b": long}, {"a": 22, "b": None}],
        columns=[Column(key="a", header="a", numeric=True), Column(key="b", header="b")],
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines == [" a  b", f" 1  {long}", "22  -"]


def test_progress_and_status_draw_on_stderr_on_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = TextOutput(interactive=True)
    drawn = io.StringIO()
    out.err_console = Console(file=drawn, force_terminal=True, width=80)
    with out.progress(total=2, description="writing") as progress:
        progress.advance()
        progress.advance(description="done")
    with out.status("working"):
        pass
    frames = drawn.getvalue()
    assert "writing" in frames and "done" in frames and "2/2" in frames
    assert "working" in frames
    assert capsys.readouterr().out == ""  # stdout stays the command's result only


def test_progress_and_status_draw_nothing_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = TextOutput(interactive=False)
    with quiet.progress(total=1, description="x") as progress:
        progress.advance()
    with quiet.status("working"):
        pass
    assert capsys.readouterr() == ("", "")
