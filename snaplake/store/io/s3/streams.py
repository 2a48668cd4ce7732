"""The file objects of S3FileIO: a ranged-GET reader and a streaming (multipart) writer.

:class:`S3RangeReader` is the fallback reader when pyarrow has no S3 support;
:class:`S3OutputStream` is what ``S3FileIO.open_output`` returns. Both use the
owning :class:`~snaplake.store.io.s3.file_io.S3FileIO`'s boto3 client and its
error translation, so failures surface as the same typed errors.

Source: AWS S3 multipart upload API (``CreateMultipartUpload``,
``UploadPart``, ``CompleteMultipartUpload`` with ``If-None-Match``,
``AbortMultipartUpload``); ``io.RawIOBase`` / ``io.BufferedIOBase`` protocols.
"""

from __future__ import annotations

import io
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from snaplake.errors import FileAlreadyExistsError
from snaplake.store.io.s3.errors import status_code
from snaplake.store.io.s3.options import split_s3_path

if TYPE_CHECKING:
    from snaplake.store.io.s3.file_io import S3FileIO

__all__ = ["S3OutputStream", "S3RangeReader"]

logger = logging.getLogger(__name__)

PARTS_IN_FLIGHT = 2  # concurrent UploadPart calls per output stream


class S3RangeReader(io.RawIOBase):
    """Raw, seekable reader of one object; each ``readinto`` is one ranged GET."""

    def __init__(self, file_io: S3FileIO, path: str, *, size_bytes: int) -> None:
        super().__init__()
        self._file_io = file_io
        self._path = path
        self._bucket, self._key = split_s3_path(path)
        self._size = size_bytes
        self._pos = 0

    def readable(self) -> bool:
        """Always true."""
        return True

    def seekable(self) -> bool:
        """Always true: every read is a ranged GET at the current position."""
        return True

    def tell(self) -> int:
        """Return the current read position."""
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the position (no request); return the new absolute position."""
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        elif whence == io.SEEK_END:
            target = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if target < 0:
            raise ValueError(f"negative seek position {target}")
        self._pos = target
        return target

    def _get(self, start: int, length: int) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self._file_io._s3().get_object(
                Bucket=self._bucket, Key=self._key, Range=f"bytes={start}-{start + length - 1}"
            )
            with response["Body"] as body:
                return cast("bytes", body.read())
        except (ClientError, BotoCoreError) as exc:
            self._file_io._raise(exc, path=self._path, operation="read")

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` with one ranged ``GetObject``; return the bytes read (0 at the end)."""
        view = memoryview(buffer).cast("B")
        length = min(len(view), self._size - self._pos)
        if length <= 0:
            return 0
        data = self._get(self._pos, length)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def readall(self) -> bytes:
        """Return the rest of the object with one ranged ``GetObject``."""
        length = self._size - self._pos
        if length <= 0:
            return b""
        data = self._get(self._pos, length)
        self._pos += len(data)
        return data


class S3OutputStream(io.BufferedIOBase):
    """Write-only stream uploading one object: ``PutObject`` or multipart parts.

    Full parts are uploaded by a small per-stream thread pool while the
    caller keeps writing; at most ``PARTS_IN_FLIGHT`` uploads run at once,
    so memory stays below ``(PARTS_IN_FLIGHT + 1) * part size``.
    """

    def __init__(
        self,
        file_io: S3FileIO,
        path: str,
        *,
        bucket: str,
        key: str,
        part_size_bytes: int,
        conditional: bool,
    ) -> None:
        super().__init__()
        self._file_io = file_io
        self._path = path
        self._bucket = bucket
        self._key = key
        self._part_size = part_size_bytes
        self._conditional = conditional
        self._buffer = bytearray()
        self._written = 0
        self._upload_id: str | None = None
        self._pending: list[Future[dict[str, Any]]] = []
        self._parts: list[dict[str, Any]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._finished = False

    def writable(self) -> bool:
        """Always true."""
        return True

    def tell(self) -> int:
        """Return the number of bytes written so far."""
        return self._written

    def write(self, data: Any) -> int:
        """Buffer ``data``, handing each full part to the upload pool; return its length."""
        if self.closed or self._finished:
            raise ValueError(f"write to closed S3 stream {self._path}")
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            take = min(len(view), self._part_size - len(self._buffer))
            self._buffer += view[:take]
            view = view[take:]
            if len(self._buffer) >= self._part_size:
                self._submit_part()
        self._written += total
        return total

    def _submit_part(self) -> None:
        """Hand the buffer to the upload pool, first waiting if too many parts are in flight."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            if self._upload_id is None:
                created = self._file_io._s3().create_multipart_upload(
                    Bucket=self._bucket, Key=self._key
                )
                self._upload_id = str(created["UploadId"])
                self._pool = ThreadPoolExecutor(
                    max_workers=PARTS_IN_FLIGHT, thread_name_prefix="snaplake-s3-upload"
                )
            while len(self._pending) >= PARTS_IN_FLIGHT:
                self._parts.append(self._pending.pop(0).result())
        except BaseException as exc:
            self.abort()
            if isinstance(exc, ClientError | BotoCoreError):
                self._file_io._raise(exc, path=self._path, operation="open_output")
            raise  # already translated by _upload_part, or not ours to translate
        body, self._buffer = bytes(self._buffer), bytearray()
        number = len(self._parts) + len(self._pending) + 1
        assert self._pool is not None
        self._pending.append(self._pool.submit(self._upload_part, number, body))

    def _upload_part(self, number: int, body: bytes) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        assert self._upload_id is not None
        try:
            uploaded = self._file_io._s3().upload_part(
                Bucket=self._bucket,
                Key=self._key,
                UploadId=self._upload_id,
                PartNumber=number,
                Body=body,
            )
        except (ClientError, BotoCoreError) as exc:
            self._file_io._raise(exc, path=self._path, operation="open_output")
        return {"PartNumber": number, "ETag": uploaded["ETag"]}

    def close(self) -> None:
        """Finish the upload (``PutObject`` or ``CompleteMultipartUpload``); idempotent."""
        if self.closed:
            return
        try:
            if not self._finished:
                self._finish()
        finally:
            super().close()

    def _finish(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        condition = {"IfNoneMatch": "*"} if self._conditional else {}
        client = self._file_io._s3()
        if self._upload_id is not None and self._buffer:
            self._submit_part()
        self._finished = True
        try:
            if self._upload_id is None:
                client.put_object(
                    Bucket=self._bucket, Key=self._key, Body=bytes(self._buffer), **condition
                )
            else:
                while self._pending:
                    self._parts.append(self._pending.pop(0).result())
                client.complete_multipart_upload(
                    Bucket=self._bucket,
                    Key=self._key,
                    UploadId=self._upload_id,
                    MultipartUpload={"Parts": self._parts},
                    **condition,
                )
                self._upload_id = None
        except BaseException as exc:
            self.abort()
            if status_code(exc)[0] == 412:
                raise FileAlreadyExistsError(
                    f"{self._path} already exists", path=self._path, operation="open_output"
                ) from exc
            if isinstance(exc, ClientError | BotoCoreError):
                self._file_io._raise(exc, path=self._path, operation="open_output")
            raise
        finally:
            self._buffer = bytearray()
            self._shutdown_pool()
        logger.debug(
            "uploaded %s (%d bytes, %d parts)", self._path, self._written, len(self._parts)
        )

    def abort(self) -> None:
        """Discard everything written; nothing becomes visible at ``path``."""
        self._finished = True
        self._buffer = bytearray()
        for pending in self._pending:
            pending.cancel()
        self._shutdown_pool()
        self._pending = []
        self._abort_upload()
        if not self.closed:
            super().close()

    def _shutdown_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _abort_upload(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:
            return
        try:
            self._file_io._s3().abort_multipart_upload(
                Bucket=self._bucket, Key=self._key, UploadId=upload_id
            )
        except (ClientError, BotoCoreError):
            logger.warning("could not abort multipart upload of %s", self._path, exc_info=True)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True) and not getattr(self, "_finished", True):
            logger.warning("S3 stream for %s was never closed; upload discarded", self._path)
            self.abort()
