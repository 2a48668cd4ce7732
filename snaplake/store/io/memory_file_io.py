"""InMemoryFileIO: a FileIO in a dict, with fault injection, for tests and dry runs.

Faults are injected per operation (``write``, ``write_if_absent``, ``read``,
``delete``, ``list``) and path substring: the Nth matching call raises the
given error instead of (or, with ``after=True``, after) doing its work. This
is how tests prove that no half-written snapshot becomes visible and that an
uncertain publish is resolved by reading back.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, ClassVar

from snaplake.errors import FileAlreadyExistsError
from snaplake.store.io.file_io import FileIO, FileStatus

__all__ = ["InMemoryFileIO"]


@dataclass(slots=True, kw_only=True)
class _Fault:
    operation: str
    path_contains: str
    nth: int
    error: Callable[[str], BaseException]
    after: bool
    seen: int = 0


class _OutputBuffer(io.BytesIO):
    def __init__(self, on_close: Callable[[bytes], None]) -> None:
        super().__init__()
        self._on_close = on_close

    def close(self) -> None:
        if not self.closed:
            self._on_close(self.getvalue())
        super().close()


class InMemoryFileIO(FileIO):
    """FileIO keeping files in memory; paths are any strings (``memory://t/...``).

    Thread-safe. Instances created through :meth:`shared` are process-wide per
    name so that ``memory://name`` catalogs opened twice see the same files.
    Not shared across processes; pickling copies the files.
    """

    _registry: ClassVar[dict[str, InMemoryFileIO]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._files: dict[str, tuple[bytes, int]] = {}
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()

    @classmethod
    def shared(cls, name: str) -> InMemoryFileIO:
        """Return the process-wide instance for ``memory://name``."""
        with cls._registry_lock:
            return cls._registry.setdefault(name, cls())

    def __getstate__(self) -> dict[str, object]:
        return {"files": dict(self._files)}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__()  # type: ignore[misc]
        self._files = dict(state["files"])  # type: ignore[call-overload]

    def inject_fault(
        self,
        operation: str,
        *,
        path_contains: str = "",
        nth: int = 1,
        error: Callable[[str], BaseException] = lambda p: OSError(f"injected fault on {p}"),
        after: bool = False,
    ) -> None:
        """Make the ``nth`` call of ``operation`` on a matching path raise ``error(path)``.

        Args:
            operation: ``write``, ``write_if_absent``, ``read``, ``delete`` or ``list``.
            path_contains: Only paths containing this substring count.
            nth: 1-based index of the matching call that fails.
            error: Builds the exception from the path.
            after: Raise after the operation took effect (an uncertain outcome).
        """
        with self._lock:
            self._faults.append(
                _Fault(
                    operation=operation,
                    path_contains=path_contains,
                    nth=nth,
                    error=error,
                    after=after,
                )
            )

    def _check(self, operation: str, path: str, *, after: bool) -> None:
        firing = None
        for fault in self._faults:
            if fault.operation != operation or fault.path_contains not in path:
                continue
            if fault.after != after:
                continue
            fault.seen += 1
            if fault.seen == fault.nth and firing is None:
                firing = fault
        if firing is not None:
            raise firing.error(path)

    def _put(self, path: str, data: bytes) -> None:
        self._files[path] = (bytes(data), time.time_ns() // 1_000_000)

    def read_bytes(self, path: str) -> bytes:
        """Return the content of ``path``; raises ``FileNotFoundError`` if absent."""
        with self._lock:
            self._check("read", path, after=False)
            try:
                return self._files[path][0]
            except KeyError:
                raise FileNotFoundError(path) from None

    def write_bytes(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Store ``data`` at ``path``; see :meth:`FileIO.write_bytes`."""
        with self._lock:
            self._check("write", path, after=False)
            if not overwrite and path in self._files:
                raise FileAlreadyExistsError(f"{path} already exists", path=path, operation="write")
            self._put(path, data)
            self._check("write", path, after=True)

    def write_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` only if absent; see :meth:`FileIO.write_if_absent`."""
        with self._lock:
            self._check("write_if_absent", path, after=False)
            if path in self._files:
                raise FileAlreadyExistsError(
                    f"{path} already exists", path=path, operation="write_if_absent"
                )
            self._put(path, data)
            self._check("write_if_absent", path, after=True)

    def open_input(self, path: str) -> IO[bytes]:
        """Return a seekable in-memory stream over ``path``."""
        return io.BytesIO(self.read_bytes(path))

    def open_output(self, path: str) -> IO[bytes]:
        """Return a stream whose content is stored at ``path`` when closed."""
        return _OutputBuffer(lambda data: self.write_bytes(path, data))

    def exists(self, path: str) -> bool:
        """Tell whether ``path`` is a file or a prefix of one (a directory)."""
        with self._lock:
            if path in self._files:
                return True
            prefix = path.rstrip("/") + "/"
            return any(p.startswith(prefix) for p in self._files)

    def file_status(self, path: str) -> FileStatus:
        """Return size and mtime of ``path``; raises ``FileNotFoundError`` if absent."""
        with self._lock:
            try:
                data, mtime = self._files[path]
            except KeyError:
                raise FileNotFoundError(path) from None
            return FileStatus(path=path, size_bytes=len(data), modification_time_ms=mtime)

    def set_modification_time(self, path: str, modification_time_ms: int) -> None:
        """Backdate ``path`` (tests of grace periods)."""
        with self._lock:
            self._files[path] = (self._files[path][0], modification_time_ms)

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """Delete ``path``; see :meth:`FileIO.delete`."""
        with self._lock:
            self._check("delete", path, after=False)
            if self._files.pop(path, None) is None and not missing_ok:
                raise FileNotFoundError(path)

    def delete_dir(self, path: str) -> None:
        """Delete every file below ``path``."""
        prefix = path.rstrip("/") + "/"
        with self._lock:
            for p in [p for p in self._files if p.startswith(prefix)]:
                del self._files[p]

    def list_files(self, prefix: str) -> Iterator[FileStatus]:
        """Yield every file below ``prefix`` (a snapshot taken under the lock)."""
        base = prefix.rstrip("/") + "/"
        with self._lock:
            self._check("list", prefix, after=False)
            found = [
                FileStatus(path=p, size_bytes=len(d), modification_time_ms=m)
                for p, (d, m) in self._files.items()
                if p.startswith(base)
            ]
        yield from found

    def list_dirs(self, path: str) -> list[str]:
        """Return the names of the immediate sub-directories of ``path``."""
        base = path.rstrip("/") + "/"
        with self._lock:
            names = {p[len(base) :].split("/", 1)[0] for p in self._files if p.startswith(base)}
            return sorted(
                n for n in names if any(p.startswith(base + n + "/") for p in self._files)
            )
