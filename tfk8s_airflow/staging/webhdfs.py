"""WebHDFS: listing with sizes and checksums, streaming reads, errors that say what happened.

Why not the cncf/hdfs provider's ``WebHDFSHook``: its ``read_file`` returns a whole file as
``bytes`` (a 64 MB file is 64 MB of worker memory, times the copy parallelism) and it probes
HA NameNodes without a bound. This module uses the ``hdfs`` package's client directly for
metadata and writes, and :mod:`~tfk8s_airflow.staging.webhdfs_stream` (urllib3, about half
the client CPU per request) for reads and checksums: reads are streamed in fixed-size
chunks, and every NameNode is tried in order with the connection's timeout, so a dead
NameNode costs at most ``timeout`` seconds before the next is tried and
``len(urls) * timeout`` before :class:`HdfsUnavailableError` names them all.

Connection (an Airflow connection, default ``webhdfs_default``):

* ``host`` (may be ``nn1,nn2``), ``port`` (default 9870), ``login``: the HDFS user;
* ``extra``: ``https`` (or ``use_ssl``) bool, ``verify`` (bool or CA bundle path),
  ``namenodes`` (list of ``host:port`` or URLs, tried in order after ``host``),
  ``timeout`` (seconds, default 30), ``kerberos`` (bool; needs ``tfk8s-airflow[kerberos]``),
  ``proxy_user`` (``doas``).

Errors: a missing path and a permission denial (HDFS's own message, e.g. the
``AccessControlException`` text naming user and inode) are :class:`DataError` (permanent);
no NameNode answering is :class:`HdfsUnavailableError` (retryable); anything else from HDFS
is :class:`StagingError`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import posixpath
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
import urllib3

from tfk8s_airflow.exceptions import DataError, HdfsUnavailableError, MissingInputError, SpecError, StagingError
from tfk8s_airflow.staging.listing import FileEntry, has_magic, is_hidden, name_matches, relative_to, split_glob
from tfk8s_airflow.staging.webhdfs_stream import WebHdfsStreams

log = logging.getLogger(__name__)

__all__ = ["WebHdfsConfig", "WebHdfs", "DEFAULT_PORT"]

DEFAULT_PORT = 9870
DEFAULT_TIMEOUT = 30.0
T = TypeVar("T")


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


@dataclass(frozen=True)
class WebHdfsConfig:
    """Where and as whom to reach WebHDFS. ``urls`` are NameNode base URLs in HA order."""

    urls: tuple[str, ...]
    user: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    verify: bool | str = True
    kerberos: bool = False
    proxy_user: str | None = None

    @classmethod
    def from_connection(cls, conn: Any) -> WebHdfsConfig:
        """From an Airflow ``Connection`` (or anything with host/port/login/extra_dejson)."""
        extra: Mapping[str, Any] = getattr(conn, "extra_dejson", None) or {}
        https = _as_bool(extra.get("https", extra.get("use_ssl", False)))
        scheme = "https" if https else "http"
        port = getattr(conn, "port", None) or DEFAULT_PORT
        hosts = [h.strip() for h in (getattr(conn, "host", None) or "").split(",") if h.strip()]
        namenodes = extra.get("namenodes") or []
        if isinstance(namenodes, str):
            namenodes = [n.strip() for n in namenodes.split(",") if n.strip()]
        urls: list[str] = []
        for node in [*hosts, *namenodes]:
            node = str(node).rstrip("/")
            url = node if "://" in node else f"{scheme}://{node}"
            if url.count(":") < 2:  # no port given
                url = f"{url}:{port}"
            if url not in urls:
                urls.append(url)
        if not urls:
            raise SpecError("the WebHDFS connection has no host (and no extra.namenodes)",
                            field="webhdfs_conn_id")
        verify: bool | str = extra.get("verify", True)
        if isinstance(verify, str) and verify.lower() in ("true", "false"):
            verify = verify.lower() == "true"
        try:
            timeout = float(extra.get("timeout", DEFAULT_TIMEOUT))
        except (TypeError, ValueError):
            raise SpecError(f"extra.timeout must be a number, got {extra.get('timeout')!r}",
                            field="webhdfs_conn_id") from None
        return cls(urls=tuple(urls), user=getattr(conn, "login", None) or None, timeout=timeout,
                   verify=verify, kerberos=_as_bool(extra.get("kerberos", False)),
                   proxy_user=extra.get("proxy_user") or None)


class WebHdfs:
    """A WebHDFS client with bounded HA failover and errors mapped onto our exceptions."""

    def __init__(self, config: WebHdfsConfig) -> None:
        self.config = config
        session = requests.Session()
        session.verify = config.verify
        # Enough pooled connections for the copy's parallel streams.
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=32)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        url = ";".join(config.urls)
        timeout = (min(config.timeout, 10.0), config.timeout)  # (connect, read)
        #: Reads and checksums (see webhdfs_stream); ``None`` with Kerberos, whose SPNEGO
        #: handshake lives in the hdfs package's requests session.
        self.streams: WebHdfsStreams | None = None
        if config.kerberos:
            try:
                from hdfs.ext.kerberos import KerberosClient
            except ImportError as exc:
                raise SpecError("Kerberos needs the optional extra: pip install "
                                "'tfk8s-airflow[kerberos]'", field="webhdfs_conn_id") from exc
            self.client = KerberosClient(url, proxy=config.proxy_user, timeout=timeout,
                                         session=session)
        else:
            from hdfs import InsecureClient

            self.client = InsecureClient(url, user=config.user, proxy=config.proxy_user,
                                         timeout=timeout, session=session)
            self.streams = WebHdfsStreams(config.urls, user=config.user,
                                          proxy_user=config.proxy_user, timeout=timeout,
                                          verify=config.verify)

    @property
    def user(self) -> str:
        return self.config.user or "(default user)"

    # ----------------------------------------------------------------------- errors

    def call(self, action: str, path: str, fn: Callable[[], T]) -> T:
        """Run one WebHDFS call, turning failures into our exception classes."""
        from hdfs.util import HdfsError

        try:
            return fn()
        except HdfsError as exc:
            raise self._error(action, path, exc) from exc
        except (requests.ConnectionError, requests.Timeout, ConnectionError) as exc:
            raise HdfsUnavailableError(
                f"no WebHDFS NameNode answered while {action} {path}; tried "
                f"{', '.join(self.config.urls)} (timeout {self.config.timeout:g}s each): "
                f"{exc if isinstance(exc, ConnectionError) else type(exc).__name__}") from exc

    def _error(self, action: str, path: str, exc: Exception) -> Exception:
        kind = getattr(exc, "exception", None) or ""
        message = str(getattr(exc, "message", exc))
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        if kind == "FileNotFoundException":
            return MissingInputError(f"HDFS path does not exist: {path} (while {action})")
        if kind == "AccessControlException" or "Permission denied" in message:
            return DataError(f"permission denied by HDFS while {action} {path} as user "
                             f"{self.user}: {message}")
        if "Authentication failure" in message:
            return DataError(f"HDFS rejected the credentials while {action} {path}: {message}")
        if kind in ("StandbyException", "RetriableException", "SafeModeException"):
            return HdfsUnavailableError(f"HDFS is not serving while {action} {path} "
                                        f"({kind}); tried {', '.join(self.config.urls)}: {message}")
        return StagingError(f"HDFS error while {action} {path}: {kind or 'error'}: {message}")

    # ---------------------------------------------------------------------- metadata

    def status(self, path: str) -> dict[str, Any] | None:
        """FileStatus of ``path``, or ``None`` when it does not exist (any other failure,
        such as a permission denial on a parent directory, raises)."""
        try:
            return self.call("reading the status of", path, lambda: self.client.status(path))
        except MissingInputError:
            return None

    def exists(self, path: str) -> bool:
        return self.status(path) is not None

    def checksum(self, path: str, datanode: str | None = None) -> dict[str, Any]:
        """WebHDFS GETFILECHECKSUM: ``{"algorithm", "bytes", "length"}``. ``datanode``: the
        redirect a read of this file was given (``stream.datanode``), asked first."""
        if self.streams is not None:
            streams = self.streams
            return self.call("reading the checksum of", path,
                             lambda: streams.checksum(path, datanode))
        return self.call("reading the checksum of", path, lambda: self.client.checksum(path))

    def list_dir(self, path: str) -> list[tuple[str, dict[str, Any]]]:
        return self.call("listing", path, lambda: self.client.list(path, status=True))

    def list_files(self, path: str, pattern: str | None = None, include_hidden: bool = False,
                   with_checksums: bool = True, parallelism: int = 4) -> tuple[str, list[FileEntry]]:
        """All files under ``path`` (a file, a directory, or a glob such as
        ``/data/clicks/dt=2026-01-0*``), recursively, sorted by path.

        Returns ``(root, files)``: ``root`` is the literal part of ``path`` before any glob,
        each file's ``relpath`` is relative to it. Hidden names (``_*``, ``.*``) are skipped
        unless ``include_hidden``. Raises :class:`DataError` when ``path`` (or the glob's
        root) does not exist; an empty result is left to the caller to judge.
        """
        root, segments = split_glob(path)
        top = self.status(root)
        if top is None:
            raise MissingInputError(f"HDFS input does not exist: {root}"
                            + (f" (the root of the glob {path})" if segments else ""))
        matched: list[tuple[str, dict[str, Any]]] = [(root, top)]
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            nxt: list[tuple[str, dict[str, Any]]] = []
            for base, status in matched:
                if status["type"] != "DIRECTORY":
                    continue
                for name, child in self.list_dir(base):
                    if not name_matches(name, seg):
                        continue
                    if is_hidden(name) and not include_hidden and not is_hidden(seg):
                        continue
                    if not last and child["type"] != "DIRECTORY":
                        continue
                    nxt.append((posixpath.join(base, name), child))
            matched = nxt
        files: list[FileEntry] = []
        for base, status in matched:
            self._collect(base, status, root, pattern, include_hidden, files)
        files.sort(key=lambda f: f.path)
        if with_checksums and files:
            files = self.add_checksums(files, parallelism)
        return root, files

    def _collect(self, path: str, status: Mapping[str, Any], root: str, pattern: str | None,
                 include_hidden: bool, out: list[FileEntry]) -> None:
        if status["type"] == "FILE":
            if name_matches(posixpath.basename(path), pattern):
                out.append(FileEntry(path=path, relpath=relative_to(path, root),
                                     size=int(status["length"]),
                                     mtime=status.get("modificationTime", 0) / 1000.0,
                                     block_size=int(status.get("blockSize") or 0) or None))
            return
        for name, child in self.list_dir(path):
            if is_hidden(name) and not include_hidden:
                continue
            self._collect(posixpath.join(path, name), child, root, pattern, include_hidden, out)

    def add_checksums(self, files: Sequence[FileEntry], parallelism: int = 4) -> list[FileEntry]:
        """The same entries with their GETFILECHECKSUM (one NameNode call each, in parallel)."""
        def one(entry: FileEntry) -> FileEntry:
            return FileEntry(entry.path, entry.relpath, entry.size, entry.mtime,
                             entry.block_size, self.checksum(entry.path))

        with ThreadPoolExecutor(max_workers=max(1, parallelism),
                                thread_name_prefix="hdfs-checksum") as pool:
            return list(pool.map(one, files))

    # -------------------------------------------------------------------------- data

    @contextlib.contextmanager
    def open_chunks(self, path: str, chunk_size: int = 1 << 20,
                    offset: int = 0) -> Iterator[_Guarded]:
        """``with hdfs.open_chunks(path) as chunks: for chunk in chunks: ...``: the file
        as a stream of ``chunk_size`` pieces (bounded memory whatever the file size).
        ``chunks.datanode`` (when present) is where the NameNode sent the read."""
        if self.streams is None:
            with self._open_with_client(path, chunk_size, offset) as chunks:
                yield chunks
            return
        streams = self.streams
        stream = self.call("opening", path, lambda: streams.open(path, offset, chunk_size))
        try:
            yield _Guarded(path, stream)
        finally:
            stream.close()

    @contextlib.contextmanager
    def _open_with_client(self, path: str, chunk_size: int,
                          offset: int) -> Iterator[_Guarded]:
        cm = self.call("opening", path,
                       lambda: self.client.read(path, offset=offset, chunk_size=chunk_size))
        chunks = self.call("opening", path, cm.__enter__)
        try:
            yield _Guarded(path, chunks)
        except BaseException as exc:
            if not cm.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            cm.__exit__(None, None, None)

    def read_bytes(self, path: str) -> bytes:
        """A small file's content (manifests, markers): never use it for data."""
        with self.open_chunks(path) as chunks:
            return b"".join(chunks)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write under a temporary name in the same directory, then rename into place, so
        readers see the old file, no file, or the whole new one; never a partial one."""
        parent, name = posixpath.split(path)
        tmp = posixpath.join(parent, f".{name}.tmp-{uuid.uuid4().hex[:12]}")
        self.call("creating", parent, lambda: self.client.makedirs(parent))
        self.call("writing", tmp, lambda: self.client.write(tmp, data=data, overwrite=True))
        try:
            self.call("replacing", path, lambda: self.client.delete(path))
            self.call("renaming into", path, lambda: self.client.rename(tmp, path))
        except BaseException:
            with contextlib.suppress(Exception):
                self.client.delete(tmp)
            raise

    def delete(self, path: str) -> bool:
        return bool(self.call("deleting", path, lambda: self.client.delete(path)))

    def write_json_atomic(self, path: str, doc: Any) -> None:
        self.write_atomic(path, json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n")


class _Guarded:
    """A read's chunks with transport failures mid-stream raised as :class:`StagingError`."""

    def __init__(self, path: str, chunks: Iterable[bytes]) -> None:
        self.path = path
        self.chunks = chunks
        self.datanode: str | None = getattr(chunks, "datanode", None)

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.chunks
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise StagingError(f"reading HDFS {self.path} broke off: {type(exc).__name__}: "
                               f"{exc}") from exc


def is_glob(path: str) -> bool:
    """Whether an input path holds glob characters."""
    return any(has_magic(part) for part in path.split("/"))
