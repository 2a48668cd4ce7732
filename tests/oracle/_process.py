"""Oracles as long-lived processes answering a request per stdin line, and OracleError.

The pypaimon driver (``paimon_driver.py --serve``: ``PaimonOracle.session()`` and
``shared_driver()`` in ``tests/oracle/__init__.py``) and the Java Paimon reader
(``tests/oracle/java_paimon.py``) speak the same protocol: a line in, one line out,
``ok`` or ``error <JSON string: the traceback>``.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class OracleError(RuntimeError):
    """The driver subprocess failed; the message carries the op, exit code and stderr."""


class DriverSession:
    """One serving process (a ``--serve`` pypaimon driver, the Java reader) answering line by line.

    ``name`` starts its error messages; ``error`` is the exception class it raises.
    """

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        cwd: Path,
        name: str = "pypaimon driver",
        error: type[RuntimeError] = OracleError,
    ) -> None:
        self.name = name
        self.error = error
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            self.proc = subprocess.Popen(
                list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, text=True, cwd=cwd,
            )  # fmt: skip
        except FileNotFoundError as exc:
            self._stderr.close()
            raise error(f"{name}: executable not found: {cmd[0]}") from exc

    def alive(self) -> bool:
        """Whether the process still runs (a timeout or a death closes it)."""
        return self.proc.poll() is None

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def call(self, line: str, *, op: Any, timeout_s: float) -> None:
        """Send one request line and wait for its answer (the result is where it said).

        Raises:
            self.error: the op failed (its traceback), the process died, or no answer
                came within ``timeout_s`` (the process is killed).
        """
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: readline below reports it
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            self.close()
            raise self.error(
                f"{self.name} op={op!r} timed out after {timeout_s} s\n"
                f"--- stderr ---\n{self.stderr()}"
            )
        answer = self.proc.stdout.readline().rstrip("\n")
        if answer == "ok":
            return
        if answer.startswith("error "):
            raise self.error(
                f"{self.name} op={op!r} failed in its session\n"
                f"--- traceback ---\n{json.loads(answer[6:])}"
            )
        self.close()
        raise self.error(
            f"{self.name} session died (exit code {self.proc.returncode}) during "
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
    """One serving process per command line, shared by every caller in this process.

    ``call`` starts the process on first use and again after one died or timed out; calls
    are serialised (a lock), as a process answers one request at a time. ``name`` and
    ``error`` as in :class:`DriverSession`.
    """

    def __init__(
        self, *, cwd: Path, name: str = "pypaimon driver", error: type[RuntimeError] = OracleError
    ) -> None:
        self.cwd = cwd
        self.name = name
        self.error = error
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, ...], DriverSession] = {}

    def call(self, cmd: Sequence[str], line: str, *, op: Any, timeout_s: float) -> None:
        """Run one request on ``cmd``'s shared process (raises as ``DriverSession.call``)."""
        key = tuple(cmd)
        with self._lock:
            session = self._sessions.get(key)
            if session is None or not session.alive():
                if session is not None:
                    session.close()
                session = self._sessions[key] = DriverSession(
                    key, cwd=self.cwd, name=self.name, error=self.error
                )
            try:
                session.call(line, op=op, timeout_s=timeout_s)
            except self.error:
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
