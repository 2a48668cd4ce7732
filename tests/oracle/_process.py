"""The pypaimon driver as a long-lived process (``paimon_driver.py --serve``), and OracleError.

``PaimonOracle.session()`` (``tests/oracle/__init__.py``) sends its calls here.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any


class OracleError(RuntimeError):
    """The driver subprocess failed; the message carries the op, exit code and stderr."""


class DriverSession:
    """One ``paimon_driver.py --serve`` process answering request after request."""

    def __init__(self, python: Path, *, driver: Path, cwd: Path) -> None:
        self.python = python
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            self.proc = subprocess.Popen(
                [str(python), str(driver), "--serve"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=cwd,
            )  # fmt: skip
        except FileNotFoundError as exc:
            self._stderr.close()
            raise OracleError(f"pypaimon interpreter not found: {python}") from exc

    def alive(self) -> bool:
        """Whether the process still runs (a timeout or a death closes it)."""
        return self.proc.poll() is None

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def call(self, request_path: Path, out_path: Path, *, op: Any, timeout_s: float) -> None:
        """Run one request (its result is then in ``out_path``).

        Raises:
            OracleError: the op failed (its traceback), the process died, or no answer
                came within ``timeout_s`` (the process is killed).
        """
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps([str(request_path), str(out_path)]) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: readline below reports it
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            self.close()
            raise OracleError(
                f"pypaimon driver op={op!r} timed out after {timeout_s} s\n"
                f"--- stderr ---\n{self.stderr()}"
            )
        answer = self.proc.stdout.readline().rstrip("\n")
        if answer == "ok":
            return
        if answer.startswith("error "):
            raise OracleError(
                f"pypaimon driver op={op!r} failed in its session\n"
                f"--- traceback ---\n{json.loads(answer[6:])}"
            )
        self.close()
        raise OracleError(
            f"pypaimon driver session died (exit code {self.proc.returncode}) during "
            f"op={op!r}\n--- stderr ---\n{self.stderr()}"
        )

    def close(self) -> None:
        """End the process (stdin closed: it exits; killed if it does not within 30 s)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


class SharedDrivers:
    """One ``--serve`` process per pypaimon interpreter, shared by every caller in this process.

    ``call`` starts the process on first use and again after one died or timed out; calls
    are serialised (a lock), as a driver answers one request at a time.
    """

    def __init__(self, *, driver: Path, cwd: Path) -> None:
        self.driver = driver
        self.cwd = cwd
        self._lock = threading.Lock()
        self._sessions: dict[Path, DriverSession] = {}

    def call(
        self, python: Path, request_path: Path, out_path: Path, *, op: Any, timeout_s: float
    ) -> None:
        """Run one request on ``python``'s shared driver (raises as ``DriverSession.call``)."""
        with self._lock:
            session = self._sessions.get(python)
            if session is None or not session.alive():
                if session is not None:
                    session.close()
                session = self._sessions[python] = DriverSession(
                    python, driver=self.driver, cwd=self.cwd
                )
            try:
                session.call(request_path, out_path, op=op, timeout_s=timeout_s)
            except OracleError:
                raise  # a failed op keeps the session in step; a death or timeout closed it
            except BaseException:
                session.close()  # interrupted mid-call: the next call must not read its answer
                raise

    def close(self) -> None:
        """End every shared process."""
        with self._lock:
            sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            session.close()
