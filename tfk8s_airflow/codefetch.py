"""Fetch a job's training code into a shared directory (the ``fetch-code`` init container).

    python3 -m tfk8s_airflow.codefetch --uri URI --dest DIR --entrypoint run.sh [--sha256 HEX]

Why it exists: users should not build an image per algorithm. The job spec's ``code:``
field names an archive or a script served over HTTP(S) or stored on HDFS; every replica's
init container runs this module to place it in an ``emptyDir`` that the training container
mounts, and the training container runs ``sh DIR/run.sh``.

Why only the standard library: it runs in whatever image the job (or ``code.image``) uses,
with nothing of Airflow, ``requests`` or ``hdfs`` installed; ``tfk8s_airflow/__init__.py``
imports nothing, so ``python3 -m`` works with just this package directory on the path.

Sources:

* ``http://`` and ``https://`` URLs (redirects followed);
* ``webhdfs://host[:port]/path`` (``swebhdfs://`` for HTTPS): WebHDFS ``op=OPEN`` at that
  address (port default 9870), following the NameNode's redirect to a DataNode;
* ``hdfs://host[:port]/path``: the same file through WebHDFS on ``host``. The port in an
  ``hdfs://`` URI is the RPC port, which a REST client cannot use, so it is ignored and the
  WebHDFS port is taken from ``--webhdfs-port`` / ``$TFK8S_WEBHDFS_PORT`` (default 9870).

The HDFS user is ``--user``, ``$TFK8S_HDFS_USER`` or ``$HADOOP_USER_NAME`` (none: HDFS's
anonymous user, enough for world-readable code).

What it places: ``.tar.gz``/``.tgz``/``.tar``/``.zip`` archives are unpacked into the
destination (members with absolute names, ``..`` segments, links leaving the destination,
or device files are refused before anything is extracted); anything else is a single script
saved as the entrypoint. The entrypoint must exist afterwards and is made executable.

Exit codes, as the ExitCode restart policy and the job sensor read them: 0 success; 1
permanent (bad URI, HTTP 4xx such as 404, sha256 mismatch, bad or unsafe archive, missing
entrypoint); 138 retryable (connection refused or reset, timeout, HTTP 5xx). The reason goes
to stderr and to the pod's termination message (``/dev/termination-log``) so
``kubectl describe`` and the job sensor show it.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import os
import posixpath
import re
import shutil
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

from tfk8s_airflow.contract import EXIT_PERMANENT, EXIT_RETRYABLE, TERMINATION_LOG
from tfk8s_airflow.contract import EXIT_SUCCESS as EXIT_OK
from tfk8s_airflow.pathrules import is_safe_relative

DEFAULT_WEBHDFS_PORT = 9870
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
_READ = 1 << 20


#: Query parameters whose values are credentials: tokens, signatures, delegation tokens, keys.
_SECRET_PARAM = re.compile(r"token|sig|secret|passw|credential|delegation|auth|key", re.IGNORECASE)
#: A URL inside free text, ending before trailing punctuation.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,;:)\]]")
#: A secret value shorter than this is only redacted inside URLs, not wherever it occurs.
_MIN_SCRUBBED = 6


def redact(text: str, *urls: str) -> str:
    """``text`` with the credentials in it replaced by ``***``.

    In every URL found in ``text``: the userinfo (``user:pass@``) and the values of query
    parameters named like credentials (``token``, ``delegation``, ``sig``, ``signature``,
    ``X-Amz-Signature``, ``access_token``...). The secrets of ``urls`` are also hidden
    wherever else they occur in ``text`` (a server's error page may echo them).
    """
    for secret in (s for url in urls for s in _secrets(url) if len(s) >= _MIN_SCRUBBED):
        text = text.replace(secret, "***")
    return _URL_IN_TEXT.sub(lambda match: _redact_url(match.group(0)), text)


def _split_url(url: str) -> tuple[str, str, str, str, str]:
    """(scheme://, userinfo, host and the rest of the path, query, #fragment), without parsing errors."""
    scheme, sep, rest = url.partition("://")
    rest, hash_, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    return scheme + sep, userinfo + at, host + slash + path, query, hash_ + fragment


def _secret_pairs(query: str) -> list[tuple[str, bool]]:
    """Each ``name=value`` of ``query`` with whether its value is a credential."""
    return [(pair, _SECRET_PARAM.search(urllib.parse.unquote_plus(pair.partition("=")[0])) is not None)
            for pair in query.split("&")]


def _secrets(url: str) -> list[str]:
    _, userinfo, _, query, _ = _split_url(url)
    found = [urllib.parse.unquote(part) for part in userinfo[:-1].split(":") if part]
    for pair, secret in _secret_pairs(query):
        if secret and pair.partition("=")[2]:
            found += [pair.partition("=")[2], urllib.parse.unquote_plus(pair.partition("=")[2])]
    return found


def _redact_url(url: str) -> str:
    scheme, userinfo, rest, query, fragment = _split_url(url)
    pairs = [pair.partition("=")[0] + "=***" if secret and "=" in pair else pair
             for pair, secret in _secret_pairs(query)]
    return (scheme + ("***@" if userinfo else "") + rest + ("?" + "&".join(pairs) if query else "")
            + fragment)


class FetchError(Exception):
    """A failure with the exit code it maps to; its message never carries credentials."""

    def __init__(self, message: str, code: int = EXIT_PERMANENT) -> None:
        super().__init__(redact(message))
        self.code = code


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


def download(url: str, target: Path, timeout: float) -> tuple[int, str]:
    """Stream ``url`` into ``target``; returns (bytes, sha256 hex)."""
    digest = hashlib.sha256()
    size = 0
    request = _request(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, \
                open(target, "wb") as out:
            while chunk := response.read(_READ):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
    except urllib.error.HTTPError as exc:
        detail = ""
        with contextlib.suppress(Exception):  # the body is only a hint
            detail = redact(exc.read(2000).decode("utf-8", "replace").strip(), url, exc.geturl())
        code = EXIT_RETRYABLE if exc.code >= 500 or exc.code in (408, 429) else EXIT_PERMANENT
        raise FetchError(f"HTTP {exc.code} {exc.reason} fetching {url}"
                         + (f": {detail[:500]}" if detail else ""), code) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(f"cannot reach {url}: {reason}", EXIT_RETRYABLE) from None
    return size, digest.hexdigest()


def _safe_member(name: str, dest: Path) -> Path:
    if not is_safe_relative(name):
        raise FetchError(f"unsafe archive member {name!r}: it would leave {dest}")
    target = (dest / name).resolve()
    if target != dest and dest not in target.parents:
        raise FetchError(f"unsafe archive member {name!r}: it would leave {dest}")
    return target


def _check_tar(tar: tarfile.TarFile, dest: Path) -> None:
    for member in tar.getmembers():
        _safe_member(member.name, dest)
        if member.isdev() or member.isfifo():
            raise FetchError(f"archive member {member.name!r} is a device or FIFO: refused")
        if member.issym() or member.islnk():
            link = member.linkname
            base = dest / (posixpath.dirname(member.name) if member.issym() else "")
            resolved = (base / link).resolve()
            if link.startswith("/") or (resolved != dest and dest not in resolved.parents):
                raise FetchError(f"archive link {member.name!r} -> {link!r} leaves {dest}: refused")


def unpack(archive: Path, dest: Path, name: str) -> None:
    """Unpack into ``dest`` after checking every member."""
    dest = dest.resolve()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    _safe_member(info.filename, dest)
                bad = zf.testzip()
                if bad is not None:
                    raise FetchError(f"corrupt zip archive: member {bad!r} fails its CRC")
                zf.extractall(dest)
        else:
            with tarfile.open(archive, "r:*") as tar:
                _check_tar(tar, dest)
                if hasattr(tarfile, "tar_filter"):  # Python >= 3.11.4 and 3.12
                    tar.extractall(dest, filter="tar")
                else:  # pragma: no cover - older interpreters in training images
                    tar.extractall(dest)  # noqa: S202 - members checked above
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno:
            raise FetchError(f"cannot write the code into {dest}: {exc}", EXIT_RETRYABLE) from None
        raise FetchError(f"not a valid {name.rsplit('.', 1)[-1]} archive: {exc}") from None


def fetch(uri: str, dest: str | Path, entrypoint: str, sha256: str | None = None, *,
          user: str | None = None, webhdfs_port: int | None = None, timeout: float = 60.0,
          retries: int = 3) -> Path:
    """Fetch, verify and place the code; returns the entrypoint's path."""
    if not is_safe_relative(entrypoint):
        raise FetchError(f"entrypoint {entrypoint!r} must be a relative path inside the code")
    dest_dir = Path(dest)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest_dir = dest_dir.resolve()
    url = resolve_url(uri, user, webhdfs_port)
    name = urllib.parse.urlsplit(uri).path.lower()
    work = Path(tempfile.mkdtemp(prefix=".tfk8s-fetch-", dir=dest_dir))
    try:
        download_to = work / "download"
        for attempt in range(1, retries + 1):
            try:
                size, digest = download(url, download_to, timeout)
                break
            except FetchError as exc:
                if exc.code != EXIT_RETRYABLE or attempt == retries:
                    raise
                _say(f"{exc}; retrying ({attempt}/{retries})")
                time.sleep(min(2 ** attempt, 10))
        if sha256 and digest != sha256.lower():
            raise FetchError(f"sha256 mismatch for {uri}: expected {sha256.lower()}, got {digest} "
                             f"({size} bytes); the code changed or the URI is wrong")
        if name.endswith(ARCHIVE_SUFFIXES):
            unpacked = work / "unpacked"
            unpacked.mkdir()
            unpack(download_to, unpacked, name)
            for item in unpacked.iterdir():  # move into place, replacing an earlier fetch
                target = dest_dir / item.name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif target.exists() or target.is_symlink():
                    target.unlink()
                os.replace(item, target)
        else:
            target = dest_dir / entrypoint
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(download_to, target)
        entry = dest_dir / entrypoint
        if not entry.is_file():
            present = sorted(p.name for p in dest_dir.iterdir() if not p.name.startswith(".tfk8s-"))
            raise FetchError(f"entrypoint {entrypoint!r} not found in the code from {uri} "
                             f"(top level holds: {', '.join(present) or 'nothing'})")
        entry.chmod(entry.stat().st_mode | 0o755)
        print(redact(f"tfk8s codefetch: fetched {uri} ({size} bytes, sha256 {digest}) into {dest_dir}; "
                     f"entrypoint {entry}"), flush=True)
        return entry
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _say(message: str) -> str:
    """Print one redacted line to stderr; returns it."""
    line = " ".join(redact(message).split())
    print(f"tfk8s codefetch: {line}", file=sys.stderr, flush=True)
    return line


def _fail(message: str, code: int) -> int:
    """Report a failure on stderr and in the pod's termination message; returns the exit code."""
    kind = "retryable" if code == EXIT_RETRYABLE else "permanent"
    line = _say(f"code fetch failed ({kind}): {message}")
    path = os.environ.get("TFK8S_TERMINATION_LOG", TERMINATION_LOG)
    with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as fh:
        fh.write(line[:4000])
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tfk8s_airflow.codefetch",
                                     description="Fetch training code into a directory.")
    parser.add_argument("--uri", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--entrypoint", default="run.sh")
    parser.add_argument("--sha256")
    parser.add_argument("--user", default=os.environ.get("TFK8S_HDFS_USER")
                        or os.environ.get("HADOOP_USER_NAME"))
    parser.add_argument("--webhdfs-port", type=int,
                        default=int(os.environ.get("TFK8S_WEBHDFS_PORT", DEFAULT_WEBHDFS_PORT)))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--retries", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        fetch(args.uri, args.dest, args.entrypoint, args.sha256, user=args.user,
              webhdfs_port=args.webhdfs_port, timeout=args.timeout, retries=max(1, args.retries))
    except FetchError as exc:
        return _fail(str(exc), exc.code)
    except Exception as exc:  # a case not foreseen is still one line and an exit code, not a traceback
        return _fail(f"unexpected {type(exc).__name__}: {exc}", EXIT_PERMANENT)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
