"""The namespace half of S3FileIO: existence, metadata, listing and deleting of objects.

:class:`S3Namespace` implements the :class:`~snaplake.store.io.file_io.FileIO`
methods that look at or remove keys without moving their content:
``HeadObject`` (:meth:`~S3Namespace.exists`, :meth:`~S3Namespace.file_exists`,
:meth:`~S3Namespace.file_status`), paginated ``ListObjectsV2``
(:meth:`~S3Namespace.list_files`, :meth:`~S3Namespace.list_dirs`) and
``DeleteObject`` / batched ``DeleteObjects``. :class:`~snaplake.store.io.s3.file_io.S3FileIO`
inherits them and supplies the boto3 client (``_s3``) and the error
translation (``_raise``); reads and writes of content stay there. botocore's
exception classes come from :func:`~snaplake.store.io.s3.errors.boto_exception_types`,
so botocore is imported on first use only.

Source: AWS S3 API reference (``HeadObject``, ``HeadBucket``, ``ListObjectsV2``
with ``Delimiter`` and continuation tokens, ``DeleteObjects`` with at most
1,000 keys); Paimon's ``FileIO`` (``exists``, ``getFileStatus``,
``listStatus``, ``delete``).
"""

from __future__ import annotations

import abc
import errno
import logging
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, cast

from snaplake.errors import StorageAccessError, StorageError
from snaplake.store.io.file_io import FileIO, FileStatus
from snaplake.store.io.s3.errors import DENIED_CODES, boto_exception_types, status_code
from snaplake.store.io.s3.options import dir_prefix, split_s3_path

__all__ = ["S3Namespace"]

logger = logging.getLogger(__name__)

DELETE_BATCH = 1000  # DeleteObjects accepts at most 1,000 keys per call


class S3Namespace(FileIO):
    """Existence, metadata, listing and deleting of ``s3://bucket/key`` objects, over boto3.

    Abstract: the concrete class (:class:`~snaplake.store.io.s3.file_io.S3FileIO`)
    provides the per-process boto3 client and the translation of botocore
    failures into builtin and :mod:`snaplake.errors` types. Every method
    raises ``StorageAccessError`` for refused, expired or missing
    credentials and ``StorageError`` for a missing bucket, an unreachable
    endpoint or another failure, unless its docstring says otherwise.

    Source:
        Paimon's ``FileIO`` (the operations); AWS S3 API reference (their requests).
    """

    @abc.abstractmethod
    def _s3(self) -> Any:
        """Return this process's boto3 S3 client, creating it on first use."""

    @abc.abstractmethod
    def _raise(self, exc: BaseException, *, path: str, operation: str) -> NoReturn:
        """Raise the builtin or snaplake error for botocore's ``exc`` ``from exc``."""

    # -- existence and metadata ---------------------------------------------------------

    def _head(self, path: str, *, operation: str) -> dict[str, Any]:
        """HEAD ``path``; a 404 is disambiguated into a missing key or a missing bucket."""
        client_error, boto_error = boto_exception_types()

        bucket, key = split_s3_path(path)
        client = self._s3()
        try:
            return cast("dict[str, Any]", client.head_object(Bucket=bucket, Key=key))
        except client_error as exc:
            status, _ = status_code(exc)
            if status != 404:
                self._raise(exc, path=path, operation=operation)
            try:
                client.head_bucket(Bucket=bucket)
            except client_error as bucket_exc:
                if status_code(bucket_exc)[0] == 404:
                    response = cast("Any", bucket_exc).response
                    response.setdefault("Error", {})["Code"] = "NoSuchBucket"
                self._raise(bucket_exc, path=path, operation=operation)
            except boto_error as bucket_exc:
                self._raise(bucket_exc, path=path, operation=operation)
            raise FileNotFoundError(errno.ENOENT, f"no S3 object at {path}", path) from None
        except boto_error as exc:
            self._raise(exc, path=path, operation=operation)

    def exists(self, path: str) -> bool:
        """Tell whether ``path`` is an object or a non-empty "directory" prefix.

        Raises:
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket, unreachable endpoint or another failure.

        Storage:
            One ``HeadObject``; when it misses, one ``ListObjectsV2`` (1 key).
        """
        client_error, boto_error = boto_exception_types()

        bucket, key = split_s3_path(path)
        client = self._s3()
        try:
            if key.strip("/"):
                try:
                    client.head_object(Bucket=bucket, Key=key)
                    return True
                except client_error as exc:
                    if status_code(exc)[0] != 404:
                        raise
            listed = client.list_objects_v2(Bucket=bucket, Prefix=dir_prefix(key), MaxKeys=1)
            return bool(listed.get("KeyCount", 0))
        except (client_error, boto_error) as exc:
            self._raise(exc, path=path, operation="exists")

    def file_exists(self, path: str) -> bool:
        """Tell whether an object is stored at exactly ``path`` ("directories" do not count).

        Unlike :meth:`exists`, a miss costs no listing: this is the commit
        path's probe of ``snapshot-(N+1)``. A missing bucket reads as
        ``False`` (S3 answers ``HeadObject`` with a bare 404 either way);
        the next write names it.

        Raises:
            StorageAccessError: credentials refused or not allowed.
            StorageError: unreachable endpoint or another failure.

        Storage:
            One ``HeadObject``.
        """
        client_error, boto_error = boto_exception_types()

        bucket, key = split_s3_path(path)
        try:
            self._s3().head_object(Bucket=bucket, Key=key)
        except client_error as exc:
            if status_code(exc)[0] == 404:
                return False
            self._raise(exc, path=path, operation="exists")
        except boto_error as exc:
            self._raise(exc, path=path, operation="exists")
        return True

    def file_status(self, path: str) -> FileStatus:
        """Return size and modification time of ``path`` from ``HeadObject``.

        Raises:
            FileNotFoundError: no object at ``path``.
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket or another failure.

        Storage:
            One ``HeadObject``.
        """
        head = self._head(path, operation="file_status")
        return FileStatus(
            path=path,
            size_bytes=int(head["ContentLength"]),
            modification_time_ms=int(head["LastModified"].timestamp() * 1000),
        )

    def list_files(self, prefix: str) -> Iterator[FileStatus]:
        """Yield every object below directory ``prefix``, following continuation tokens.

        Keys ending in ``/`` (directory markers) are skipped. Listing is
        paginated (1,000 keys per ``ListObjectsV2`` page), so tables with
        100,000+ files stream in constant memory.

        Raises:
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket, unreachable endpoint or another failure.

        Storage:
            ``ListObjectsV2`` pages.
        """
        client_error, boto_error = boto_exception_types()

        bucket, key = split_s3_path(prefix)
        paginator = self._s3().get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=bucket, Prefix=dir_prefix(key)):
                for item in page.get("Contents", ()):
                    if item["Key"].endswith("/"):
                        continue
                    yield FileStatus(
                        path=f"s3://{bucket}/{item['Key']}",
                        size_bytes=int(item["Size"]),
                        modification_time_ms=int(item["LastModified"].timestamp() * 1000),
                    )
        except (client_error, boto_error) as exc:
            self._raise(exc, path=prefix, operation="list")

    def list_dirs(self, path: str) -> list[str]:
        """Return the sorted names of the immediate sub-directories of ``path``.

        Raises:
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket, unreachable endpoint or another failure.

        Storage:
            ``ListObjectsV2`` pages with ``Delimiter="/"``.
        """
        client_error, boto_error = boto_exception_types()

        bucket, key = split_s3_path(path)
        base = dir_prefix(key)
        names: set[str] = set()
        paginator = self._s3().get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=bucket, Prefix=base, Delimiter="/"):
                for common in page.get("CommonPrefixes", ()):
                    name = common["Prefix"][len(base) :].rstrip("/")
                    if name:
                        names.add(name)
        except (client_error, boto_error) as exc:
            self._raise(exc, path=path, operation="list_dirs")
        return sorted(names)

    # -- deletes ------------------------------------------------------------------------

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """Delete one object (``DeleteObject`` is idempotent on S3).

        Raises:
            FileNotFoundError: ``path`` is absent and ``missing_ok`` is false.
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket or another failure.

        Storage:
            One ``DeleteObject`` (plus a ``HeadObject`` when ``missing_ok`` is false).
        """
        client_error, boto_error = boto_exception_types()

        if not missing_ok:
            self._head(path, operation="delete")
        bucket, key = split_s3_path(path)
        try:
            self._s3().delete_object(Bucket=bucket, Key=key)
        except (client_error, boto_error) as exc:
            self._raise(exc, path=path, operation="delete")

    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete many objects with ``DeleteObjects``, 1,000 keys per call; missing ones are fine.

        Raises:
            StorageAccessError: a key was refused for lack of permission.
            StorageError: a batch failed or the server reported per-key
                errors (the first few are named in the message).

        Storage:
            One ``DeleteObjects`` per 1,000 keys of a bucket.
        """
        client_error, boto_error = boto_exception_types()

        by_bucket: dict[str, list[str]] = {}
        for path in paths:
            bucket, key = split_s3_path(path)
            by_bucket.setdefault(bucket, []).append(key)
        client = self._s3()
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), DELETE_BATCH):
                batch = keys[start : start + DELETE_BATCH]
                first = f"s3://{bucket}/{batch[0]}"
                try:
                    response = client.delete_objects(
                        Bucket=bucket,
                        Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                    )
                except (client_error, boto_error) as exc:
                    self._raise(exc, path=first, operation="delete_many")
                errors = [e for e in response.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
                if errors:
                    shown = "; ".join(
                        f"{e.get('Key')}: {e.get('Code')} {e.get('Message', '')}".strip()
                        for e in errors[:5]
                    )
                    error_type = (
                        StorageAccessError
                        if any(e.get("Code") in DENIED_CODES for e in errors)
                        else StorageError
                    )
                    raise error_type(
                        f"deleting {len(errors)} of {len(batch)} keys in bucket {bucket!r} "
                        f"failed: {shown}; check s3:DeleteObject permission on these keys",
                        path=f"s3://{bucket}/{errors[0].get('Key', '')}",
                        operation="delete_many",
                    )
                logger.debug("deleted %d keys from bucket %s", len(batch), bucket)

    def delete_dir(self, path: str) -> None:
        """Delete every object below directory ``path`` (listing, then batched deletes).

        Raises:
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket or another failure.

        Storage:
            ``ListObjectsV2`` pages and ``DeleteObjects`` batches, marker
            objects (``dir/``) included.
        """
        client_error, boto_error = boto_exception_types()

        bucket, key = split_s3_path(path)
        if not key.strip("/"):
            raise ValueError(f"refusing to delete a whole bucket: {path!r}")
        paginator = self._s3().get_paginator("list_objects_v2")
        keys: list[str] = []
        try:
            for page in paginator.paginate(Bucket=bucket, Prefix=dir_prefix(key)):
                keys.extend(item["Key"] for item in page.get("Contents", ()))
        except (client_error, boto_error) as exc:
            self._raise(exc, path=path, operation="delete_dir")
        self.delete_many(f"s3://{bucket}/{k}" for k in keys)
