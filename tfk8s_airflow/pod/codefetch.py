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
for zip too (:mod:`tfk8s_airflow.pod.unpack`: no absolute names or ``..``, no link leaving the destination,
judged against the links already placed, no member through a symlink, no device or FIFO,
no setuid/setgid or world-writable bit); anything else is a single script saved as the
entrypoint. The entrypoint must be a regular file inside the code (not a symlink, not a
directory, not under a symlink) and is made executable. Only then does the code replace
what the destination held.

Limits (:data:`tfk8s_airflow.pod.fetchlimits.SETTINGS`, each a flag and an environment variable): the bytes downloaded
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
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from tfk8s_airflow.contract import EXIT_PERMANENT, EXIT_RETRYABLE, TERMINATION_LOG, TERMINATION_LOG_ENV
from tfk8s_airflow.contract import EXIT_SUCCESS as EXIT_OK
from tfk8s_airflow.pathrules import is_safe_relative
from tfk8s_airflow.pod.fetchlimits import (
    DEFAULT_LIMITS,
    DOWNLOAD_BYTES,
    SETTINGS,
    Deadline,
    DeadlinePassed,
    FetchError,
    Limits,
)
from tfk8s_airflow.pod.unpack import first_symlink, unpack
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


def _entrypoint(root: Path, entrypoint: str, uri: str) -> Path:
    """``root/entrypoint``, which must be a regular file reached through no symlink."""
    rel = posixpath.normpath(entrypoint)
    where, mode = first_symlink(root, rel)
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
          retries: int = 3, limits: Limits = DEFAULT_LIMITS) -> Path:
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
    path = os.environ.get(TERMINATION_LOG_ENV) or TERMINATION_LOG
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
