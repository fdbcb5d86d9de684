"""Fetch a job's training code into a shared directory (the ``fetch-code`` init container).

    python3 -m tfk8s_airflow.pod.codefetch --uri URI --dest DIR --entrypoint run.sh [--sha256 HEX]

Why it exists: users should not build an image per algorithm. The job spec's ``code:``
field names an archive or a script served over HTTP(S) or stored on HDFS; every replica's
init container runs this module to place it in an ``emptyDir`` that the training container
mounts, and the training container runs ``sh DIR/run.sh``.

Why only the standard library: it runs in whatever image the job (or ``code.image``) uses,
with nothing of Airflow, ``requests`` or ``hdfs`` installed; ``tfk8s_airflow/__init__.py``
imports nothing, so ``python3 -m`` works with just this package directory on the path.

Sources:

* ``http://`` and ``https://`` URLs. Plain ``http://`` needs ``--sha256`` (nothing else
  protects the code on the wire). Redirects are followed to http(s) only, never from https
  down to http; a ``user:password@`` in the URL is sent as Basic auth to that host only;
* ``webhdfs://host[:port]/path`` (``swebhdfs://`` for HTTPS): WebHDFS ``op=OPEN`` at that
  address (port default 9870), following the NameNode's redirect to a DataNode;
* ``hdfs://host[:port]/path``: the same file through WebHDFS on ``host``. The port in an
  ``hdfs://`` URI is the RPC port, which a REST client cannot use, so it is ignored and the
  WebHDFS port is taken from ``--webhdfs-port`` / ``$TFK8S_WEBHDFS_PORT`` (default 9870).

The HDFS user is ``--user``, ``$TFK8S_HDFS_USER`` or ``$HADOOP_USER_NAME`` (none: HDFS's
anonymous user, enough for world-readable code).

What it places: ``.tar.gz``/``.tgz``/``.tar``/``.zip`` archives are unpacked member by member
into a fresh directory by the rules of tarfile's ``data`` filter, on every interpreter and
for zip too (:class:`_Tree`: no absolute names or ``..``, no link leaving the destination,
judged against the links already placed, no member through a symlink, no device or FIFO,
no setuid/setgid or world-writable bit); anything else is a single script saved as the
entrypoint. The entrypoint must be a regular file inside the code (not a symlink, not a
directory, not under a symlink) and is made executable. Only then does the code replace
what the destination held.

Limits (:data:`SETTINGS`, each a flag and an environment variable): the bytes downloaded
(default 256 MiB), the bytes an archive unpacks to (1 GiB) and its members (10,000), each a
permanent failure that says how to raise it; and a deadline for the whole fetch, retries
included (300 s, retryable). A body shorter than its Content-Length is a failed download,
not code.

Exit codes, as the ExitCode restart policy and the job sensor read them: 0 success; 1
permanent (bad URI or flag, plain http without a sha256, a refused redirect, HTTP 4xx such
as 404, a response that is not HTTP, an untrusted TLS certificate, sha256 mismatch, bad or
unsafe archive, missing entrypoint); 138 retryable (DNS failure, connection refused or
reset, timeout, a cut body, HTTP 5xx/408/429, the deadline, a full disk). The reason, one
line with credentials redacted (:func:`tfk8s_airflow.redaction.redact_text`), goes to stderr and to the pod's
termination message (``/dev/termination-log``) so ``kubectl describe`` and the job sensor
show it; a failure is never a traceback.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import errno
import hashlib
import http.client
import os
import posixpath
import re
import shutil
import socket
import ssl
import stat
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple, NoReturn

from tfk8s_airflow.contract import EXIT_PERMANENT, EXIT_RETRYABLE, TERMINATION_LOG
from tfk8s_airflow.contract import EXIT_SUCCESS as EXIT_OK
from tfk8s_airflow.pathrules import is_safe_relative
from tfk8s_airflow.redaction import redact_text

DEFAULT_WEBHDFS_PORT = 9870
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
_READ = 1 << 20


def _split_url(url: str) -> tuple[str, str, str, str, str]:
    """(scheme://, userinfo, host and the rest of the path, query, #fragment), without parsing errors."""
    scheme, sep, rest = url.partition("://")
    rest, hash_, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    return scheme + sep, userinfo + at, host + slash + path, query, hash_ + fragment


class FetchError(Exception):
    """A failure with the exit code it maps to; its message never carries credentials."""

    def __init__(self, message: str, code: int = EXIT_PERMANENT) -> None:
        super().__init__(redact_text(message))
        self.code = code


class DeadlinePassed(FetchError):
    """The fetch ran out of time (retryable: the next attempt may find the server well)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_RETRYABLE)


_NUMBER = re.compile(r"(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class Setting(NamedTuple):
    """A limit of every fetch: its default, and the flag and environment variable that change it."""

    default: float
    flag: str
    env: str
    unit: str  # "bytes" (which may be written 512M, 1G...), "members" or "seconds"
    about: str

    def how(self) -> str:
        return f"{self.flag} or ${self.env}"

    def show(self, value: float) -> str:
        if self.unit == "seconds":
            return f"{value:g}s"
        for suffix, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if self.unit == "bytes" and value >= factor and value % factor == 0:
                return f"{value / factor:g} {suffix}"
        return f"{value:,.0f} {self.unit}"

    def exceeded(self, what: str, limit: float) -> FetchError:
        """The permanent failure of ``what`` going over ``limit``."""
        return FetchError(f"{what} exceeds the cap of {self.show(limit)}; if the code really is this large, "
                          f"raise the cap with {self.how()}")

    def parse(self, text: str) -> float:
        """``text`` as a positive value; bytes may end in K, M, G or T (powers of 1024)."""
        match = _NUMBER.fullmatch(text.strip())
        value = 0.0
        if match and (self.unit == "bytes" or not match.group(2)):
            value = float(match.group(1)) * _FACTORS[match.group(2).upper()]
        if value <= 0 or (self.unit == "members" and value != int(value)):
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of {self.unit} (set by "
                                             f"{self.how()})")
        return value if self.unit == "seconds" else int(value)


DOWNLOAD_BYTES = Setting(256 << 20, "--max-download-bytes", "TFK8S_CODE_MAX_DOWNLOAD_BYTES", "bytes",
                         "the most bytes to download")
UNPACKED_BYTES = Setting(1 << 30, "--max-unpacked-bytes", "TFK8S_CODE_MAX_UNPACKED_BYTES", "bytes",
                         "the most bytes an archive may unpack to")
MEMBERS = Setting(10_000, "--max-members", "TFK8S_CODE_MAX_MEMBERS", "members",
                  "the most members (files, directories, links) an archive may have")
DEADLINE = Setting(300, "--deadline", "TFK8S_CODE_DEADLINE", "seconds",
                   "the most seconds the whole fetch may take, retries included")
#: Each field of :class:`Limits` and the setting that gives it.
SETTINGS = {"download_bytes": DOWNLOAD_BYTES, "unpacked_bytes": UNPACKED_BYTES, "members": MEMBERS,
            "deadline": DEADLINE}


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one fetch may take (see :data:`SETTINGS`)."""

    download_bytes: float = DOWNLOAD_BYTES.default
    unpacked_bytes: float = UNPACKED_BYTES.default
    members: float = MEMBERS.default
    deadline: float = DEADLINE.default


class Deadline:
    """The end of the whole fetch, retries included."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def __str__(self) -> str:
        return f"the deadline of {DEADLINE.show(self.seconds)} ({DEADLINE.how()})"

    def check(self, when: str) -> None:
        if self.left() <= 0:
            raise DeadlinePassed(f"{self} passed {when}")

    def timeout(self, timeout: float, when: str) -> float:
        """A socket timeout that does not outlast the deadline."""
        self.check(when)
        return min(timeout, self.left())


def resolve_url(uri: str, user: str | None = None, webhdfs_port: int | None = None) -> str:
    """The HTTP(S) URL to GET for ``uri`` (WebHDFS OPEN for ``hdfs``/``webhdfs`` URIs)."""
    try:
        parts = urllib.parse.urlsplit(uri)
        uri_port = parts.port
    except ValueError as exc:
        raise FetchError(f"bad code URI {uri!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        if not parts.netloc:
            raise FetchError(f"bad code URI {uri!r}: no host")
        return uri
    if scheme not in ("hdfs", "webhdfs", "swebhdfs"):
        raise FetchError(f"unsupported code URI {uri!r}: use http(s)://, hdfs:// or webhdfs://")
    if not parts.hostname or not parts.path or parts.path == "/":
        raise FetchError(f"bad code URI {uri!r}: expected {scheme}://host[:port]/path/to/file")
    if scheme == "hdfs":
        port = webhdfs_port or DEFAULT_WEBHDFS_PORT
    else:
        port = uri_port or webhdfs_port or DEFAULT_WEBHDFS_PORT
    http = "https" if scheme == "swebhdfs" else "http"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    query = {"op": "OPEN"}
    if user:
        query["user.name"] = user
    path = urllib.parse.quote(posixpath.normpath(parts.path))
    return f"{http}://{host}:{port}/webhdfs/v1{path}?{urllib.parse.urlencode(query)}"


def _request(url: str) -> urllib.request.Request:
    """A GET of ``url``; its userinfo, if any, becomes HTTP Basic auth for this host only."""
    scheme, userinfo, rest, query, _ = _split_url(url)
    request = urllib.request.Request(scheme + rest + ("?" + query if query else ""),
                                     headers={"User-Agent": "tfk8s-codefetch"})
    if userinfo:
        user, _, password = userinfo[:-1].partition(":")
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
        # unredirected: a redirect to another host (a DataNode, a CDN) does not get the password
        request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(pair).decode())
    return request


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http(s) only, and never from https down to http."""

    def http_error_302(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                       headers: http.client.HTTPMessage) -> Any:
        target = urllib.parse.urljoin(req.full_url, headers.get("Location") or headers.get("URI") or "")
        scheme = target.partition(":")[0].lower()
        why = ("only http(s) redirects are followed" if scheme not in ("http", "https")
               else "https must not be downgraded to http" if req.type == "https" and scheme == "http"
               else "")
        if why:
            fp.close()
            raise FetchError(f"refused the redirect from {req.full_url} to {target}: {why}")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _opener() -> urllib.request.OpenerDirector:
    """An opener for http(s) alone: no ftp:, file: or data: handler that a redirect could reach."""
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.HTTPHandler(), urllib.request.HTTPSHandler(),
                    urllib.request.HTTPDefaultErrorHandler(), _Redirects(), urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


#: What talking to a server can raise (OSError: refused, reset, timed out, TLS; ValueError: a bad URL).
_NETWORK_ERRORS = (OSError, http.client.HTTPException, ValueError)


def _network_error(exc: BaseException, url: str, what: str) -> FetchError:
    """The failure ``exc`` means for ``url``; ``what`` says how far the download got."""
    if isinstance(exc, urllib.error.HTTPError):
        return _http_error(exc, url)
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, socket.gaierror):
        return FetchError(f"cannot resolve the host of {url}: {reason.strerror or reason}", EXIT_RETRYABLE)
    if isinstance(reason, ssl.SSLCertVerificationError):
        return FetchError(f"{what}: its TLS certificate is not trusted ({reason.verify_message}); fix the "
                          "server's certificate or add its CA to the image (SSL_CERT_FILE)")
    if isinstance(reason, http.client.IncompleteRead):
        return FetchError(f"{what}: the response ended early", EXIT_RETRYABLE)
    if isinstance(reason, http.client.HTTPException) and not isinstance(reason, ConnectionError):
        return FetchError(f"not a valid HTTP response from {url} ({type(reason).__name__}: "
                          f"{str(reason).strip()!r}); is that "
                          "port an HTTP server (for HDFS the WebHDFS port, not the RPC port)?")
    if isinstance(reason, ValueError):
        return FetchError(f"bad code URL {url}: {reason}")
    if isinstance(reason, OSError):
        return FetchError(f"{what}: {reason}", EXIT_RETRYABLE)
    return FetchError(f"{what}: {reason}")


def _http_error(exc: urllib.error.HTTPError, url: str) -> FetchError:
    """HTTP 5xx, 408 and 429 are retryable, any other error status permanent."""
    detail = ""
    with contextlib.suppress(Exception):  # the body is only a hint, and never waited for
        detail = exc.read1(2000).decode("utf-8", "replace").strip()
        exc.close()
    code = EXIT_RETRYABLE if exc.code >= 500 or exc.code in (408, 429) else EXIT_PERMANENT
    return FetchError(f"HTTP {exc.code} {exc.reason} fetching {url}"
                      + (f": {redact_text(detail[:500], url, exc.geturl())}" if detail else ""), code)


def _content_length(response: http.client.HTTPResponse) -> int | None:
    """The body length the server announced (None: not given, or chunked)."""
    if "chunked" in (response.getheader("Transfer-Encoding") or "").lower():
        return None
    value = (response.getheader("Content-Length") or "").strip()
    return int(value) if value.isdigit() else None


def download(url: str, target: Path, timeout: float, clock: Deadline, max_bytes: float) -> tuple[int, str]:
    """Stream ``url`` into ``target``; returns (bytes, sha256 hex).

    Each read waits at most ``timeout`` and never past ``clock``; a body shorter than its
    Content-Length is a retryable failure, one longer than ``max_bytes`` a permanent one.
    Errors writing ``target`` are left to the caller.
    """
    digest = hashlib.sha256()
    size = 0
    try:
        response = _opener().open(_request(url), timeout=clock.timeout(timeout, f"before connecting to {url}"))
    except _NETWORK_ERRORS as exc:
        raise _network_error(exc, url, f"cannot reach {url}") from None
    with response, open(target, "wb") as out:
        expected = _content_length(response)
        if expected is not None and expected > max_bytes:
            raise DOWNLOAD_BYTES.exceeded(f"the download of {url} ({expected:,} bytes, its Content-Length)",
                                          max_bytes)
        while True:
            try:
                chunk = response.read1(_READ)
            except _NETWORK_ERRORS as exc:
                raise _network_error(exc, url, f"the download of {url} broke off after {size} bytes") from None
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise DOWNLOAD_BYTES.exceeded(f"the download of {url}", max_bytes)
            out.write(chunk)
            digest.update(chunk)
            clock.check(f"while downloading {url} ({size} bytes so far)")
    if expected is not None and size < expected:
        raise FetchError(f"the download of {url} broke off after {size} of {expected} bytes (its Content-Length)",
                         EXIT_RETRYABLE)
    return size, digest.hexdigest()


def _download_with_retries(url: str, target: Path, timeout: float, retries: int, clock: Deadline,
                           max_bytes: float) -> tuple[int, str]:
    """:func:`download`, again after a retryable failure while ``retries`` and the deadline allow."""
    for attempt in range(1, retries + 1):
        try:
            return download(url, target, timeout, clock, max_bytes)
        except DeadlinePassed:
            raise
        except FetchError as exc:
            pause = min(2 ** attempt, 10)
            if exc.code != EXIT_RETRYABLE or attempt == retries:
                raise
            if clock.left() < pause:
                raise DeadlinePassed(f"gave up after {attempt} attempt(s), as another would start past {clock}; "
                                     f"the last: {exc}") from None
            _say(f"{exc}; retrying in {pause}s ({attempt}/{retries})")
            time.sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _lmode(path: Path) -> int | None:
    """The ``lstat`` mode of ``path`` (None: nothing there)."""
    try:
        return os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def _first_symlink(root: Path, rel: str) -> tuple[str, int | None]:
    """The first prefix of ``rel`` under ``root`` that is missing or a symlink, else ``rel``; with its mode."""
    prefix, mode = "", None
    for part in rel.split("/"):
        prefix = f"{prefix}/{part}" if prefix else part
        mode = _lmode(root / prefix)
        if mode is None or stat.S_ISLNK(mode):
            break
    return prefix, mode


def _file_mode(mode: int) -> int:
    """tarfile's ``data`` filter: no setuid/setgid/sticky bit, no group/other write, owner rw, x only if owner x."""
    mode = (mode & 0o755) | 0o600
    return mode if mode & stat.S_IXUSR else mode & ~0o111


class _Tree:
    """Archive members placed one at a time under a fresh directory, by the rules of tarfile's
    ``data`` filter, judged when each member is placed (so against the links placed before it).

    Refused: absolute names, ``..`` and backslashes; a member whose path goes through a
    symlink placed before it; a symlink whose target resolves outside the root, then or once
    the archive is unpacked; a hardlink to anything but a regular file placed before it;
    devices and FIFOs. Files keep no setuid/setgid or group/other write bit; directories are
    0755; nothing is chowned. The member count and the bytes written are capped by ``limits``.
    """

    def __init__(self, root: Path, clock: Deadline, limits: Limits) -> None:
        self.root = root.resolve()
        self.clock = clock
        self.limits = limits
        self.links: list[tuple[str, Path]] = []
        self.members = 0
        self.written = 0

    def directory(self, name: str) -> None:
        path = self._target(name)
        if path is not None and not self._free(path, name, for_directory=True):
            os.mkdir(path, 0o755)

    def file(self, name: str, mode: int, source: IO[bytes]) -> None:
        path = self._named_target(name)
        self._free(path, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(_READ):
                self.written += len(chunk)
                if self.written > self.limits.unpacked_bytes:
                    raise UNPACKED_BYTES.exceeded("the unpacked archive", self.limits.unpacked_bytes)
                out.write(chunk)
            os.fchmod(out.fileno(), _file_mode(mode))

    def symlink(self, name: str, target: str) -> None:
        path = self._named_target(name)
        if not target or target.startswith("/") or not self._inside(path.parent / target):
            raise FetchError(f"archive link {name!r} -> {target!r} leaves the destination: refused")
        self._free(path, name)
        os.symlink(target, path)
        self.links.append((name, path))

    def hardlink(self, name: str, target: str) -> None:
        path = self._named_target(name)
        if not is_safe_relative(target):
            raise FetchError(f"unsafe archive member {name!r}: a hardlink to {target!r}")
        source = posixpath.normpath(target)
        where, mode = _first_symlink(self.root, source)
        if mode is not None and stat.S_ISLNK(mode) and where != source:
            raise FetchError(f"archive member {name!r} goes through the symlink {where!r} extracted before it: "
                             "refused")
        if mode is None or not stat.S_ISREG(mode) or self.root / source == path:
            raise FetchError(f"archive hardlink {name!r} -> {target!r}: not a regular file extracted before it")
        self._free(path, name)
        os.link(self.root / source, path, follow_symlinks=False)

    def finish(self) -> None:
        """Refuse the archive if a link it made now resolves outside (later links can re-aim earlier ones)."""
        for name, path in self.links:
            if not self._inside(path):
                raise FetchError(f"archive link {name!r} leaves the destination once the archive is unpacked: "
                                 "refused")

    def _inside(self, path: Path) -> bool:
        real = os.path.realpath(path)
        return os.path.commonpath([real, str(self.root)]) == str(self.root)

    def _target(self, name: str) -> Path | None:
        """Where member ``name`` goes, its directories made (none of them a symlink); None: the root."""
        self.clock.check(f"while unpacking (at member {name!r})")
        self.members += 1
        if self.members > self.limits.members:
            raise MEMBERS.exceeded("the number of archive members", self.limits.members)
        if not is_safe_relative(name):
            raise FetchError(f"unsafe archive member {name!r}: absolute, with a '..' or with a backslash")
        clean = posixpath.normpath(name)
        if clean == ".":
            return None
        path = self.root
        for part in clean.split("/")[:-1]:
            path = path / part
            mode = _lmode(path)
            if mode is None:
                os.mkdir(path, 0o755)
            elif stat.S_ISLNK(mode):
                raise FetchError(f"archive member {name!r} goes through the symlink "
                                 f"{str(path.relative_to(self.root))!r} extracted before it: refused")
            elif not stat.S_ISDIR(mode):
                raise FetchError(f"archive member {name!r} is below {str(path.relative_to(self.root))!r}, "
                                 "which is not a directory")
        return path / clean.rpartition("/")[2]

    def _named_target(self, name: str) -> Path:
        path = self._target(name)
        if path is None:
            raise FetchError(f"archive member {name!r} names the top directory, but is not a directory")
        return path

    def _free(self, path: Path, name: str, for_directory: bool = False) -> bool:
        """Clear ``path`` for member ``name``, as tar replaces an earlier member of the same name;
        True if a directory is there and may stay."""
        mode = _lmode(path)
        if mode is None:
            return False
        if stat.S_ISDIR(mode):
            if for_directory:
                return True
            raise FetchError(f"archive member {name!r} would replace a directory extracted before it: refused")
        os.unlink(path)
        return False


def _unpack_tar(archive: Path, tree: _Tree) -> None:
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            if member.isdir():
                tree.directory(member.name)
            elif member.isreg():
                source = tar.extractfile(member)
                assert source is not None  # a regular member always has data
                tree.file(member.name, member.mode, source)
            elif member.issym():
                tree.symlink(member.name, member.linkname)
            elif member.islnk():
                tree.hardlink(member.name, member.linkname)
            elif member.isdev() or member.isfifo():
                raise FetchError(f"archive member {member.name!r} is a device or FIFO: refused")
            else:
                raise FetchError(f"archive member {member.name!r} has an unknown type {member.type!r}: refused")


#: The longest symlink target a zip member may hold.
_MAX_LINK = 4096


def _unpack_zip(archive: Path, tree: _Tree) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            mode = info.external_attr >> 16 if info.create_system == 3 else 0  # 3: Unix, whose modes zip keeps
            kind = stat.S_IFMT(mode)
            if info.is_dir() or kind == stat.S_IFDIR:
                tree.directory(info.filename)
            elif kind == stat.S_IFLNK:
                with zf.open(info) as fh:
                    target = fh.read(_MAX_LINK + 1)
                if len(target) > _MAX_LINK:
                    raise FetchError(f"archive link {info.filename!r} has a target longer than {_MAX_LINK} bytes")
                tree.symlink(info.filename, os.fsdecode(target))
            elif kind in (0, stat.S_IFREG):
                with zf.open(info) as fh:
                    tree.file(info.filename, mode or 0o644, fh)
            elif kind in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK):
                raise FetchError(f"archive member {info.filename!r} is a device or FIFO: refused")
            else:
                raise FetchError(f"archive member {info.filename!r} has an unknown type {kind:o}: refused")


#: What reading a broken archive raises (besides OSErrors without an errno, such as gzip's).
_ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError)


def unpack(archive: Path, dest: Path, name: str, clock: Deadline, limits: Limits) -> None:
    """Unpack ``archive`` (``name`` says which kind) into the empty directory ``dest``, member by
    member by the rules of :class:`_Tree`. Errors writing ``dest`` are left to the caller."""
    tree = _Tree(dest, clock, limits)
    try:
        (_unpack_zip if name.endswith(".zip") else _unpack_tar)(archive, tree)
        tree.finish()
    except _ARCHIVE_ERRORS + (OSError,) as exc:  # RuntimeError: an encrypted zip member
        if isinstance(exc, OSError) and exc.errno:
            raise
        raise FetchError(f"not a valid {name.rsplit('.', 1)[-1]} archive: {exc}") from None


def _entrypoint(root: Path, entrypoint: str, uri: str) -> Path:
    """``root/entrypoint``, which must be a regular file reached through no symlink."""
    rel = posixpath.normpath(entrypoint)
    where, mode = _first_symlink(root, rel)
    if mode is None:
        present = sorted(p.name for p in root.iterdir())
        raise FetchError(f"entrypoint {entrypoint!r} not found in the code from {uri} "
                         f"(top level holds: {', '.join(present) or 'nothing'})")
    if stat.S_ISLNK(mode):
        raise FetchError(f"entrypoint {entrypoint!r}: {where!r} is a symlink in the code from {uri}; the "
                         "entrypoint must be a regular file inside the code")
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise FetchError(f"entrypoint {entrypoint!r} is {kind} in the code from {uri}")
    return root / rel


def fetch(uri: str, dest: str | Path, entrypoint: str, sha256: str | None = None, *,
          user: str | None = None, webhdfs_port: int | None = None, timeout: float = 60.0,
          retries: int = 3, limits: Limits = Limits()) -> Path:
    """Fetch, verify and place the code; returns the entrypoint's path."""
    clock = Deadline(limits.deadline)
    if not is_safe_relative(entrypoint) or posixpath.normpath(entrypoint) == ".":
        raise FetchError(f"entrypoint {entrypoint!r} must be a relative path inside the code")
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        raise FetchError(f"--sha256 must be 64 hex characters (the output of sha256sum), got {sha256!r}")
    url = resolve_url(uri, user, webhdfs_port)
    if uri.partition(":")[0].lower() == "http" and not sha256:
        raise FetchError(f"refusing {uri}: code over plain http:// must be checked against a checksum; add "
                         "code.sha256 (the sha256sum of the file) to the job spec, or serve it over https://")
    dest_dir = Path(dest)
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest_dir = dest_dir.resolve()
        return _fetch_into(uri, url, dest_dir, entrypoint, sha256, timeout, retries, clock, limits)
    except OSError as exc:  # the network's are FetchErrors by now: this is the disk
        code = EXIT_PERMANENT if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else EXIT_RETRYABLE
        raise FetchError(f"cannot write the code into {dest_dir}: {exc.strerror or exc}", code) from None


def _fetch_into(uri: str, url: str, dest_dir: Path, entrypoint: str, sha256: str | None, timeout: float,
                retries: int, clock: Deadline, limits: Limits) -> Path:
    name = urllib.parse.urlsplit(uri).path.lower()
    work = Path(tempfile.mkdtemp(prefix=".tfk8s-fetch-", dir=dest_dir))
    try:
        download_to = work / "download"
        size, digest = _download_with_retries(url, download_to, timeout, retries, clock, limits.download_bytes)
        if sha256 and digest != sha256.lower():
            raise FetchError(f"sha256 mismatch for {uri}: expected {sha256.lower()}, got {digest} "
                             f"({size} bytes); the code changed or the URI is wrong")
        staged = work / "code"  # placed and checked here, then moved into dest_dir
        staged.mkdir()
        if name.endswith(ARCHIVE_SUFFIXES):
            unpack(download_to, staged, name, clock, limits)
        else:
            script = staged / posixpath.normpath(entrypoint)
            script.parent.mkdir(parents=True, exist_ok=True)
            os.replace(download_to, script)
        entry = _entrypoint(staged, entrypoint, uri)
        entry.chmod(stat.S_IMODE(entry.stat().st_mode) | 0o755)
        for item in staged.iterdir():  # move into place, replacing an earlier fetch
            target = dest_dir / item.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            os.replace(item, target)
        entry = dest_dir / entry.relative_to(staged)
        print(redact_text(f"tfk8s codefetch: fetched {uri} ({size} bytes, sha256 {digest}) into {dest_dir}; "
                     f"entrypoint {entry}"), flush=True)
        return entry
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _say(message: str) -> str:
    """Print one redacted line to stderr; returns it."""
    line = " ".join(redact_text(message).split())
    print(f"tfk8s codefetch: {line}", file=sys.stderr, flush=True)
    return line


def _fail(message: str, code: int) -> int:
    """Report a failure on stderr and in the pod's termination message; returns the exit code."""
    kind = "retryable" if code == EXIT_RETRYABLE else "permanent"
    line = _say(f"code fetch failed ({kind}): {message}")
    path = os.environ.get("TFK8S_TERMINATION_LOG") or TERMINATION_LOG
    # The kubelet creates /dev/termination-log before the container starts; run outside a pod
    # (by hand, in a test) the fetcher never creates one on the host.
    if path != TERMINATION_LOG or os.path.exists(path):
        with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as fh:
            fh.write(line[:4000])
    return code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # a bad flag is a permanent failure like any other
        raise FetchError(f"bad arguments: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python3 -m tfk8s_airflow.pod.codefetch", description="Fetch training code into a directory.",
                     epilog="BYTES may end in K, M, G or T (powers of 1024): 512M, 1G. See docs/code-staging.md.")
    parser.add_argument("--uri", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--entrypoint", default="run.sh")
    parser.add_argument("--sha256")
    parser.add_argument("--user", default=os.environ.get("TFK8S_HDFS_USER")
                        or os.environ.get("HADOOP_USER_NAME"))
    parser.add_argument("--webhdfs-port", type=int,
                        default=os.environ.get("TFK8S_WEBHDFS_PORT", str(DEFAULT_WEBHDFS_PORT)))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one read may wait (default 60)")
    parser.add_argument("--retries", type=int, default=3, help="attempts at a retryable download (default 3)")
    for name, setting in SETTINGS.items():
        parser.add_argument(setting.flag, dest=name, type=setting.parse, metavar=setting.unit.upper(),
                            default=os.environ.get(setting.env, str(setting.default)),
                            help=f"{setting.about} (default {setting.show(setting.default)}; ${setting.env})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        limits = Limits(**{name: getattr(args, name) for name in SETTINGS})
        fetch(args.uri, args.dest, args.entrypoint, args.sha256, user=args.user, webhdfs_port=args.webhdfs_port,
              timeout=args.timeout, retries=max(1, args.retries), limits=limits)
    except FetchError as exc:
        return _fail(str(exc), exc.code)
    except Exception as exc:  # a case not foreseen is still one line and an exit code, not a traceback
        return _fail(f"unexpected {type(exc).__name__}: {exc}", EXIT_PERMANENT)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
