"""S3FileIO: the FileIO for ``s3://bucket/key`` paths, over boto3.

This module holds the client plumbing (per-process boto3 client, pickling,
the pyarrow bridge) and the content operations (reads and writes). Its
helpers: :mod:`~snaplake.store.io.s3.namespace` (existence, metadata, listing
and deleting, inherited by :class:`S3FileIO`),
:mod:`~snaplake.store.io.s3.client` (client construction),
:mod:`~snaplake.store.io.s3.errors`, :mod:`~snaplake.store.io.s3.streams` and
:mod:`~snaplake.store.io.s3.conditional`. Only the ``s3_*`` modules use
``boto3`` or ``botocore``, imported inside functions, so ``import snaplake``
works without the ``s3`` extra. Every botocore failure is translated once, in
:mod:`~snaplake.store.io.s3.errors`, into a builtin (``FileNotFoundError``) or a
:mod:`snaplake.errors` type naming the bucket, the key and what to check.

The commit primitive is ``PutObject`` with ``If-None-Match: *`` (412: a lost
race; 409: retried; an uncertain outcome: read back and compared), preceded
once per bucket by a check that the server honours the header (a scratch
object created twice, or a new manifest created twice, the second create
refused with 412); both live in :mod:`~snaplake.store.io.s3.conditional`.
Nothing ever checks existence before writing.

Options (catalog options, highest precedence; unset keys fall back to the
standard AWS environment variables, ``~/.aws/config`` / ``credentials`` and
the default credential chain):

==============================  =========================================================
``s3.endpoint``                 URL of an S3-compatible server (``http://127.0.0.1:8333``);
                                else ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` / AWS.
``s3.region``                   Signing region; else ``AWS_REGION`` / config; else
                                ``us-east-1``.
``s3.access-key-id``            Access key id (alias ``s3.access-key``).
``s3.secret-access-key``        Secret key (alias ``s3.secret-key``); never logged.
``s3.session-token``            Session token of temporary credentials; never logged.
``s3.path-style-access``        ``true`` for ``http://host/bucket/key`` addressing (alias
                                ``s3.path.style.access``); default: botocore's choice.
``s3.max-attempts``             Total attempts per request in botocore's ``standard`` retry
                                mode (first try included); else ``AWS_MAX_ATTEMPTS``;
                                default 5.
``s3.connect-timeout-ms``       Connection timeout, default 10000.
``s3.read-timeout-ms``          Socket read timeout, default 60000.
``s3.max-pool-connections``     HTTP connections per client, default 32.
``s3.multipart.part-size-bytes``  Part size of streamed writes (>= 5 MiB), default 8 MiB;
                                smaller files are one ``PutObject``; 2 parts upload at once.
``s3.conflict.max-retries``     Retries of a create-only write after 409 or an unresolved
                                uncertain outcome, default 10.
``s3.allow-unsafe-create``      ``true`` skips the conditional-write probe and accepts a
                                server that may ignore ``If-None-Match`` (commits are then
                                NOT atomic under concurrency); default false.
==============================  =========================================================

Source: AWS S3 user guide, "Add preconditions to S3 operations with
conditional requests" (``If-None-Match: *`` on ``PutObject`` and
``CompleteMultipartUpload``; 412 and 409 ``ConditionalRequestConflict``);
Paimon's ``S3FileIO`` (options ``s3.endpoint``, ``s3.access-key``,
``s3.secret-key``, ``s3.path.style.access`` kept as aliases) and pyiceberg's
``PyArrowFileIO`` (clients dropped on pickling). Unlike Paimon's
rename-based publish, the publish here is a single conditional request.
"""

from __future__ import annotations

import errno
import io
import os
import threading
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, NoReturn, cast

from snaplake.errors import InvalidOptionError
from snaplake.store.io.s3.client import create_client, frozen_credentials, new_arrow_filesystem
from snaplake.store.io.s3.conditional import create_new, ensure_conditional_writes, put_create_only
from snaplake.store.io.s3.errors import (
    arrow_error_path,
    boto_error_from_arrow,
    status_code,
    translate_boto_error,
)
from snaplake.store.io.s3.namespace import S3Namespace
from snaplake.store.io.s3.options import (
    ALIASES,
    DEFAULTS,
    MIB,
    SECRET_KEYS,
    S3Settings,
    split_s3_path,
)
from snaplake.store.io.s3.streams import S3OutputStream, S3RangeReader

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["S3FileIO"]

# Kept importable from here for benchmarks/s3_io.py.
_MIB = MIB
_S3RangeReader = S3RangeReader


class S3FileIO(S3Namespace):
    """FileIO over Amazon S3 or an S3-compatible server, for ``s3://bucket/key`` paths.

    Holds configuration only: the boto3 client (and the pyarrow filesystem)
    are created lazily, once per process, and are left out of the pickled
    state, so Spark can ship the object to executors. Thread-safe. Reads
    and writes are defined here; existence, metadata, listing and deleting
    are inherited from :class:`~snaplake.store.io.s3.namespace.S3Namespace`.

    Args:
        options: Catalog options; the ``s3.*`` keys in the module docstring
            are read, other keys are ignored, an unknown ``s3.*`` key raises.

    Raises:
        InvalidOptionError: an unknown ``s3.*`` key or an unparsable value.

    Storage:
        Nothing at construction. The first create-only write per bucket
        writes and deletes one scratch object ``<dir>/.snaplake-probe-<uuid>``
        next to its target, unless it is a small :meth:`write_new`, which
        sends its own file a second time instead.

    Source:
        Paimon's ``S3FileIO`` (configuration keys) and pyiceberg's
        ``PyArrowFileIO`` (lazy, pickle-safe clients).
    """

    read_parallelism = 16  # round trips dominate small metadata reads on object stores

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        raw: dict[str, str] = {}
        for key, value in (options or {}).items():
            canonical = ALIASES.get(key, key)
            if not canonical.startswith("s3."):
                continue
            if canonical not in DEFAULTS:
                raise InvalidOptionError(
                    f"unknown S3 option {key!r}; known options: {', '.join(sorted(DEFAULTS))}",
                    key=key,
                )
            raw[canonical] = str(value)
        self._raw = raw
        self._settings = S3Settings.parse(raw)
        self._verified_buckets: set[str] = set()
        self._init_runtime()

    def _init_runtime(self) -> None:
        # Below one multipart part, a new file is one PutObject via write_new.
        self.buffered_write_max_bytes = self._settings.part_size_bytes
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._client: Any = None
        self._credential_source = "the AWS default credential chain"
        self._session: Any = None
        self._arrow_fs: pafs.S3FileSystem | None = None
        self._arrow_credentials: tuple[str, str, str] | None = None
        self._warned_unsafe = False

    # -- pickling, equality, repr -------------------------------------------------

    def __getstate__(self) -> dict[str, object]:
        with self._lock:
            return {"options": dict(self._raw), "verified": sorted(self._verified_buckets)}

    def __setstate__(self, state: dict[str, object]) -> None:
        self._raw = dict(cast("dict[str, str]", state["options"]))
        self._settings = S3Settings.parse(self._raw)
        self._verified_buckets = set(cast("list[str]", state["verified"]))
        self._init_runtime()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3FileIO) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(("s3", tuple(sorted(self._raw.items()))))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k}={'***' if k in SECRET_KEYS else v!r}" for k, v in sorted(self._raw.items())
        )
        return f"S3FileIO({shown})"

    # -- clients --------------------------------------------------------------------

    def _s3(self) -> Any:
        """Return this process's boto3 S3 client, creating it on first use."""
        if self._client is not None and self._pid == os.getpid():
            return self._client
        if self._pid != os.getpid():  # forked: the parent's lock and client are not ours
            self._init_runtime()
        with self._lock:
            if self._client is None:
                self._client = self._create_client()
            return self._client

    def _create_client(self) -> Any:
        made = create_client(self._settings)
        self._session, self._credential_source = made.session, made.credential_source
        return made.client

    def _endpoint_for_messages(self) -> str:
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        return self._settings.endpoint or "the default AWS endpoint"

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str] | None:
        """Return a ``pyarrow.fs.S3FileSystem`` configured like the boto3 client, and ``"s3://"``.

        Endpoint (as ``endpoint_override`` plus ``scheme``), region,
        credentials (those boto3 resolved), timeouts, retry budget and
        addressing style match the boto3 client's. Strip the prefix from a
        snaplake path to get the pyarrow path (``bucket/key``). Temporary
        credentials are re-read on every call and the filesystem is rebuilt
        when botocore has refreshed them. Measured on SeaweedFS
        (``benchmarks/s3_io.py``), pyarrow's native S3 reader is the faster
        path for Parquet (full reads and projections), so bulk reads and
        writes should go through it. Errors it raises are pyarrow's
        ``OSError`` subclasses, not translated here.

        Returns:
            ``(filesystem, "s3://")``, or ``None`` when this pyarrow build
            has no S3 support (then use :meth:`open_input` /
            :meth:`open_output`).

        Raises:
            StorageAccessError: no credentials can be found.

        Storage:
            None; the filesystem connects lazily.

        Source:
            ``pyarrow.fs.S3FileSystem`` (Arrow C++ S3 client, AWS SDK standard retries).
        """
        try:
            import pyarrow.fs as pafs
        except ImportError:
            return None
        if not hasattr(pafs, "S3FileSystem"):  # pyarrow built without S3
            return None
        client = self._s3()
        credentials = frozen_credentials(self._settings, self._session)
        with self._lock:
            if self._arrow_fs is None or self._arrow_credentials != credentials:
                self._arrow_fs = new_arrow_filesystem(self._settings, client, credentials)
                self._arrow_credentials = credentials
            return self._arrow_fs, "s3://"

    # -- error translation --------------------------------------------------------------
    def _translate(self, exc: BaseException, *, path: str, operation: str) -> BaseException:
        """Map a botocore exception to the builtin or snaplake error to raise ``from exc``."""
        return translate_boto_error(
            exc,
            path=path,
            operation=operation,
            endpoint=self._endpoint_for_messages(),
            credential_source=self._credential_source,
        )

    def _raise(self, exc: BaseException, *, path: str, operation: str) -> NoReturn:
        raise self._translate(exc, path=path, operation=operation) from exc

    def translate_error(self, exc: OSError, *, path: str, operation: str) -> BaseException:
        """Map an ``OSError`` from :meth:`arrow_filesystem`'s filesystem to a typed error.

        pyarrow names the AWS error in its message (``AWS Error ACCESS_DENIED
        during HeadObject operation``); that is rebuilt into the botocore
        error and translated like every boto3 failure, so the message and
        type match :meth:`read_bytes`'s. pyarrow answers a missing bucket and
        a missing key alike with ``FileNotFoundError``; one ``HeadBucket``
        then tells them apart.

        Args:
            exc: What pyarrow raised.
            path: The ``s3://`` path being accessed (the first, for a
                dataset); the one pyarrow's message names wins.
            operation: ``"read"``, ``"write"``, ...

        Returns:
            ``FileNotFoundError`` (missing key), ``StorageAccessError``
            (refused or expired credentials, access denied) or
            ``StorageError`` (missing bucket, unreachable endpoint, other AWS
            errors); ``exc`` itself when it is not an S3 error.

        Storage:
            One ``HeadBucket`` for a ``FileNotFoundError``; nothing otherwise.
        """
        path = arrow_error_path(exc) or path
        if isinstance(exc, FileNotFoundError):
            return self._missing(path, operation=operation, cause=exc)
        boto_exc = boto_error_from_arrow(exc, endpoint=self._endpoint_for_messages())
        if boto_exc is None:
            return exc
        if status_code(boto_exc) == (404, "NoSuchKey"):
            return self._missing(path, operation=operation, cause=exc)
        return self._translate(boto_exc, path=path, operation=operation)

    def _missing(self, path: str, *, operation: str, cause: OSError) -> BaseException:
        """``FileNotFoundError`` for ``path``, or the error its bucket's ``HeadBucket`` gives."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _ = split_s3_path(path)
        try:
            self._s3().head_bucket(Bucket=bucket)
        except ClientError as exc:
            if status_code(exc)[0] == 404:
                exc.response.setdefault("Error", {})["Code"] = "NoSuchBucket"
            return self._translate(exc, path=path, operation=operation)
        except BotoCoreError as exc:
            return self._translate(exc, path=path, operation=operation)
        return FileNotFoundError(errno.ENOENT, f"no S3 object at {path} ({cause})", path)

    # -- reads --------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """Return the whole content of ``path`` with one ``GetObject``.

        Raises:
            FileNotFoundError: no object at ``path``.
            StorageAccessError: credentials refused, expired or not allowed.
            StorageError: missing bucket, unreachable endpoint or another failure.

        Storage:
            Reads one object.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3_path(path)
        try:
            response = self._s3().get_object(Bucket=bucket, Key=key)
            with response["Body"] as body:
                return cast("bytes", body.read())
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, path=path, operation="read")

    def open_input(self, path: str) -> IO[bytes]:
        """Open ``path`` for random-access reading with ranged GETs.

        A boto3 ``HeadObject`` first turns a missing object, a missing
        bucket or refused credentials into the typed errors below; the
        stream itself is pyarrow's native S3 file (``NativeFile``: seekable,
        ``read``/``seek``/``tell``, usable by ``pq.read_table`` without the
        GIL), which ``benchmarks/s3_io.py`` measured faster than a Python
        file object over boto3 ranged GETs (a 1-column projection of a
        48 MB file: ~120 ms vs ~240 ms on SeaweedFS). Without pyarrow S3
        support the stream is a buffered boto3 ranged-GET reader. Failures
        while reading from a ``NativeFile`` are pyarrow ``OSError`` s.

        Raises:
            FileNotFoundError: no object at ``path``.
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket or another failure.

        Storage:
            One ``HeadObject`` now, ranged ``GetObject`` calls while reading.
        """
        head = self._head(path, operation="open_input")
        arrow = self.arrow_filesystem()
        if arrow is not None:
            filesystem, _ = arrow
            bucket, key = split_s3_path(path)
            return cast("IO[bytes]", filesystem.open_input_file(f"{bucket}/{key}"))
        raw = S3RangeReader(self, path, size_bytes=int(head["ContentLength"]))
        return cast("IO[bytes]", io.BufferedReader(raw, buffer_size=MIB))

    # -- writes -------------------------------------------------------------------------

    def write_bytes(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Write ``data`` to ``path``; a single ``PutObject`` is all-or-nothing on S3.

        Args:
            path: ``s3://bucket/key``.
            data: The full content.
            overwrite: Replace an existing object (hint files, leases).
                Without it this is a create-only write, exactly
                :meth:`write_if_absent`.

        Raises:
            FileAlreadyExistsError: ``overwrite`` is false and ``path`` exists.
            UnsafeStorageError: the server ignores ``If-None-Match`` (create-only only).
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket, unreachable endpoint or another failure.

        Storage:
            One ``PutObject`` (plus the once-per-bucket probe when create-only).
        """
        if not overwrite:
            self.write_if_absent(path, data)
            return
        self._put(path, data)

    def _put(self, path: str, data: bytes) -> None:
        """Send one unconditional ``PutObject``; errors are reported as ``"write"``."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = split_s3_path(path)
        try:
            self._s3().put_object(Bucket=bucket, Key=key, Body=data)
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, path=path, operation="write")

    def write_output(self, path: str, data: bytes) -> None:
        """Create the data file ``path`` with one ``PutObject``, without the probe.

        ``If-None-Match: *`` guards against a reused name, with the 409 retry
        and read-back of :meth:`write_if_absent`, but the bucket is not
        probed: a data file is not a commit point, so a server that ignores
        the header costs no atomicity here (as with :meth:`open_output`).
        With ``s3.allow-unsafe-create`` the header is not sent.

        Args:
            path: ``s3://bucket/key`` of a new data file.
            data: The complete content (meant for up to
                ``s3.multipart.part-size-bytes``; S3 accepts 5 GiB).

        Raises:
            FileAlreadyExistsError: ``path`` exists with other content.
            StorageAccessError: credentials refused, expired or not allowed.
            StorageError: missing bucket, unreachable endpoint, or an outcome
                that stayed unknown.

        Storage:
            One ``PutObject`` (one ``GetObject`` more after an uncertain outcome).
        """
        if self._settings.allow_unsafe_create:  # the server may reject the header
            self._put(path, data)
            return
        bucket, key = split_s3_path(path)
        put_create_only(self, path, bucket=bucket, key=key, data=data, operation="write")

    def write_new(self, path: str, data: bytes) -> None:
        """Create a manifest or manifest list under its fresh, unique name.

        A :meth:`write_if_absent`, except for the first such write to a
        bucket not yet verified: instead of the scratch probe, the file is
        created (:meth:`write_output`) and put once more with
        ``If-None-Match: *`` and the same bytes, which must be refused with
        412 (:func:`~snaplake.store.io.s3.conditional.create_new`).

        Args:
            path: ``s3://bucket/key`` of the new file.
            data: The complete content.

        Raises:
            FileAlreadyExistsError: ``path`` exists (a reused name: a bug).
            UnsafeStorageError: the server ignores ``If-None-Match``, or
                rejects it as not implemented, and ``s3.allow-unsafe-create``
                is not true. Nothing is left at ``path``.
            StorageAccessError: credentials refused, expired or not allowed.
            StorageError: missing bucket, unreachable endpoint or another failure.

        Storage:
            One conditional ``PutObject``; the first time per bucket one
            more (answered 412), or the scratch probe when that does not
            settle it.
        """
        create_new(self, path, data)

    def write_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` only if no object is there: the commit primitive.

        ``PutObject`` with ``If-None-Match: *``. 412 means another writer
        won. 409 ``ConditionalRequestConflict`` (a concurrent conditional
        write on AWS) is retried with backoff. A timeout, connection loss or
        5xx after the request may have been sent is resolved by reading the
        object back: our bytes mean success, other bytes mean the race was
        lost, nothing means the conditional PUT is sent again (safe, since it
        can only create). A 412 after botocore retried the request is checked
        the same way, because the first attempt may have been ours.

        Args:
            path: ``s3://bucket/key``, e.g. ``.../snapshot/snapshot-7``.
            data: The complete content.

        Raises:
            FileAlreadyExistsError: the object exists with other content (race lost).
            UnsafeStorageError: the probe found that the server ignores
                ``If-None-Match``, or rejects it as not implemented, and
                ``s3.allow-unsafe-create`` is not true. Nothing is written.
            StorageAccessError: credentials refused, expired or not allowed.
            StorageError: missing bucket, unreachable endpoint, 409 beyond
                ``s3.conflict.max-retries``, or an outcome that stayed
                unknown; the write may or may not have landed, so read
                ``path`` back before retrying.

        Storage:
            One conditional ``PutObject`` per attempt; reads ``path`` back
            only after an uncertain outcome. The first create-only write per
            bucket also writes twice and deletes one scratch object.

        Source:
            AWS S3 conditional writes (``If-None-Match: *``, 412, 409 retry);
            DESIGN.md §5d/§5f.
        """
        bucket, key = split_s3_path(path)
        ensure_conditional_writes(self, path, bucket=bucket, key=key)
        put_create_only(self, path, bucket=bucket, key=key, data=data)

    def open_output(self, path: str) -> IO[bytes]:
        """Open a stream that uploads ``path`` as it is written; visible once closed.

        Bytes are buffered up to ``s3.multipart.part-size-bytes`` (8 MiB);
        a file that stays below it is one ``PutObject`` at close, larger ones
        become a multipart upload whose parts are uploaded by two background
        threads while writing continues, so at most three parts (24 MiB by
        default) are held in memory, never the whole file. Closing after an exception
        inside ``with`` (or never closing) aborts the upload: nothing
        becomes visible. The final request carries ``If-None-Match: *``
        (unless ``s3.allow-unsafe-create``), like ``open(path, "xb")``.

        Raises:
            FileAlreadyExistsError: at close, when ``path`` already exists.
            StorageAccessError: credentials refused or not allowed.
            StorageError: missing bucket or another failure (upload aborted).

        Storage:
            ``PutObject``, or ``CreateMultipartUpload`` + ``UploadPart`` per
            part + ``CompleteMultipartUpload`` (``AbortMultipartUpload`` on failure).
        """
        bucket, key = split_s3_path(path)
        return cast(
            "IO[bytes]",
            S3OutputStream(
                self,
                path,
                bucket=bucket,
                key=key,
                part_size_bytes=self._settings.part_size_bytes,
                conditional=not self._settings.allow_unsafe_create,
            ),
        )
