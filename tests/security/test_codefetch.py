"""Hostile input for the code fetcher: crafted archives and misbehaving servers.

Every server here is a loopback fake started inside the test: ``http.server`` in a thread
for well-formed answers (archives, redirects, errors), a raw socket server for answers no
HTTP library would send (a malformed status line, a short or cut body, a server that never
answers), and ``http.server`` behind TLS with a self-signed certificate for the https cases.
They stand in for artifact stores, WebHDFS and CDNs because the point is the bytes a hostile
or broken server sends, which a real one cannot be made to send on demand.

The fetcher runs as the pod runs it (``python -m tfk8s_airflow.pod.codefetch`` in a subprocess),
so each test checks the exit code, stderr and the termination message end to end.
"""
from __future__ import annotations

import base64
import contextlib
import datetime
import gzip
import hashlib
import http.server
import io
import ipaddress
import os
import resource
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tfk8s_airflow.pod.codefetch import EXIT_PERMANENT, EXIT_RETRYABLE

REPO = Path(__file__).resolve().parents[2]
#: The interpreter the fetcher runs under: a training image's python3 may be older than ours.
FETCH_PYTHON = os.environ.get("TFK8S_FETCH_PYTHON", sys.executable)
RUN_SH = b"#!/bin/sh\necho ok\n"


# ----------------------------------------------------------------------------- archives
def _file(name: str, data: bytes = b"", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _entry(name: str, kind: bytes, linkname: str = "", mode: int = 0o755) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, mode
    return info, b""


def _symlink(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    return _entry(name, tarfile.SYMTYPE, target)


def _hardlink(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    return _entry(name, tarfile.LNKTYPE, target)


def _dir(name: str, mode: int = 0o755) -> tuple[tarfile.TarInfo, bytes]:
    return _entry(name, tarfile.DIRTYPE, mode=mode)


def tarball(*members: tuple[tarfile.TarInfo, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def zipped(*members: tuple[str, bytes, int]) -> bytes:
    """A zip whose members carry Unix modes (file type included) in their external attributes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.create_system, info.external_attr = 3, mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- servers
@dataclass
class Reply:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class Web:
    """``http.server`` on loopback answering each path with a :class:`Reply`; TLS if given a context."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self.replies: dict[str, Reply] = {}
        self.seen: list[tuple[str, dict[str, str]]] = []
        web = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                web.seen.append((self.path, dict(self.headers.items())))
                reply = web.replies.get(self.path.split("?", 1)[0])
                if reply is None:
                    self.send_error(404, "no such code")
                    return
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if context else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, path: str, body: bytes = b"", status: int = 200, **headers: str) -> str:
        self.replies[path] = Reply(body, status, {k.replace("_", "-"): v for k, v in headers.items()})
        return self.url + path

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def web() -> Iterator[Web]:
    server = Web()
    yield server
    server.close()


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (cert, key), made with ``cryptography``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tfk8s-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture(scope="module")
def tls_web(tls_cert) -> Iterator[Web]:
    """An HTTPS fake; the fetcher trusts it through ``SSL_CERT_FILE`` (see :func:`run_fetch`'s ``env``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_cert)
    server = Web(context)
    yield server
    server.close()


@contextlib.contextmanager
def raw_server(answer: Callable[[socket.socket, threading.Event], None]) -> Iterator[str]:
    """A loopback TCP server that reads each request's head, then lets ``answer`` write raw bytes."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)

    def one(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            head = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in head and (chunk := conn.recv(4096)):
                    head += chunk
                answer(conn, stop)

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _send(data: bytes) -> Callable[[socket.socket, threading.Event], None]:
    return lambda conn, stop: conn.sendall(data)


def _reset_after(data: bytes) -> Callable[[socket.socket, threading.Event], None]:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(data)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    return answer


def _never_answer(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(60)


def _drip(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    while not stop.wait(0.1):
        conn.sendall(b"x")


# ----------------------------------------------------------------------------- running the fetcher
def run_fetch(uri: str, tmp_path: Path, *args: str, sha256: str | None = None, entrypoint: str = "run.sh",
              env: dict[str, str] | None = None, preexec_fn=None) -> subprocess.CompletedProcess:
    cmd = [FETCH_PYTHON, "-m", "tfk8s_airflow.pod.codefetch", "--uri", uri, "--dest", str(tmp_path / "code"),
           "--entrypoint", entrypoint, "--retries", "1", "--timeout", "10", *args]
    if sha256:
        cmd += ["--sha256", sha256]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO, preexec_fn=preexec_fn,
                          env={**os.environ, "TFK8S_TERMINATION_LOG": str(tmp_path / "termination-log"),
                               **(env or {})})


def fetch_served(web: Web, name: str, data: bytes, tmp_path: Path, *args: str,
                 **kwargs) -> subprocess.CompletedProcess:
    """Serve ``data`` at ``name`` and fetch it with its sha256 (plain http needs one)."""
    return run_fetch(web.serve(name, data), tmp_path, *args, sha256=sha(data), **kwargs)


def assert_fails(res: subprocess.CompletedProcess, tmp_path: Path, code: int, *fragments: str) -> str:
    """The failure contract: the exit code, no traceback, one line on stderr and in the termination message."""
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    message = (tmp_path / "termination-log").read_text()
    assert "\n" not in message.strip()
    assert res.stderr.strip().splitlines()[-1] == f"tfk8s codefetch: {message}"
    for fragment in fragments:
        assert fragment in message, message
    return message


def assert_nothing_placed(tmp_path: Path) -> None:
    code = tmp_path / "code"
    assert not code.exists() or list(code.iterdir()) == []


# ----------------------------------------------------------------------------- 1. extraction
def test_symlink_chain_then_hardlink_cannot_write_outside(web, tmp_path):
    """The review's escape: a link chain that only leaves the destination once extracted, then a
    hardlink through it, then a file written through the hardlink."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"untouched")
    up = "../../.."  # from a/b/c back to the unpack root
    data = tarball(_file("run.sh", RUN_SH, 0o755), _symlink("a/b/c/l", up),
               _symlink("p", "a/b/c/l/../../.."),  # reads as "a", resolves to tmp_path
               _hardlink("h", "p/victim.txt"), _file("h", b"pwned"))
    res = fetch_served(web, "/chain.tgz", data, tmp_path)
    assert_fails(res, tmp_path, EXIT_PERMANENT, "'p'", "leaves the destination")
    assert victim.read_bytes() == b"untouched" and victim.stat().st_nlink == 1
    assert_nothing_placed(tmp_path)


@pytest.mark.parametrize("members,why", [
    ([_dir("sub"), _symlink("d", "sub"), _file("d/x", b"x")], "goes through the symlink 'd'"),
    ([_file("sub/f", b"x"), _symlink("s", "sub"), _hardlink("h", "s/f")], "goes through the symlink 's'"),
    ([_symlink("lib", "/etc")], "leaves the destination"),
    ([_symlink("lib", "../..")], "leaves the destination"),
    ([_hardlink("passwd", "/etc/passwd")], "unsafe archive member"),
    ([_hardlink("h", "missing")], "not a regular file extracted before it"),
    ([_entry("null", tarfile.CHRTYPE)], "device or FIFO"),
    ([_entry("disk", tarfile.BLKTYPE)], "device or FIFO"),
    ([_entry("pipe", tarfile.FIFOTYPE)], "device or FIFO"),
    ([_file("a/../../x", b"x")], "unsafe archive member"),
    # each link stays inside when it is made; together they point out of the destination
    ([_symlink("b", "c/d/../.."), _dir("sub"), _symlink("c", "sub"), _symlink("sub/d", "..")],
     "leaves the destination"),
], ids=["through-symlink", "hardlink-through-symlink", "absolute-symlink", "symlink-up", "hardlink-absolute",
        "hardlink-dangling", "chardev", "blockdev", "fifo", "dotdot", "late-chain"])
def test_unsafe_tar_members_are_refused(web, tmp_path, members, why):
    data = tarball(_file("run.sh", RUN_SH, 0o755), *members)
    res = fetch_served(web, "/unsafe.tgz", data, tmp_path)
    assert_fails(res, tmp_path, EXIT_PERMANENT, why)
    assert_nothing_placed(tmp_path)


def test_modes_are_data_filtered_and_links_inside_kept(web, tmp_path):
    data = tarball(_dir("bin", 0o777), _file("run.sh", RUN_SH, 0o6777), _file("bin/tool", b"t", 0o4755),
               _file("conf.txt", b"c", 0o666), _file("plain", b"p", 0o646), _dir("v1"),
               _file("v1/params.txt", b"lr=0.1\n"), _symlink("current", "v1"), _hardlink("again.txt", "conf.txt"),
               _file("./dotted", b"d"))
    res = fetch_served(web, "/modes.tgz", data, tmp_path)
    assert res.returncode == 0, res.stderr
    code = tmp_path / "code"
    modes = {name: stat.S_IMODE((code / name).lstat().st_mode)
             for name in ("run.sh", "bin/tool", "conf.txt", "plain")}
    assert modes == {"run.sh": 0o755, "bin/tool": 0o755, "conf.txt": 0o644, "plain": 0o644}
    assert not (code / "bin").stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert os.readlink(code / "current") == "v1" and (code / "current" / "params.txt").read_bytes() == b"lr=0.1\n"
    assert (code / "again.txt").read_bytes() == b"c" and (code / "dotted").read_bytes() == b"d"


@pytest.mark.parametrize("members,why", [
    ([("lib", b"../../../etc", 0o120777)], "leaves the destination"),
    ([("lib", b"/etc", 0o120777)], "leaves the destination"),
    ([("sub/", b"", 0o40755), ("d", b"sub", 0o120777), ("d/x", b"x", 0o100644)], "goes through the symlink 'd'"),
    ([("pipe", b"", 0o10644)], "device or FIFO"),
    ([("../x", b"x", 0o100644)], "unsafe archive member"),
    ([("a\\..\\x", b"x", 0o100644)], "unsafe archive member"),
], ids=["symlink-up", "symlink-absolute", "through-symlink", "fifo", "dotdot", "backslash"])
def test_unsafe_zip_members_are_refused(web, tmp_path, members, why):
    data = zipped(("run.sh", RUN_SH, 0o100755), *members)
    res = fetch_served(web, "/unsafe.zip", data, tmp_path)
    assert_fails(res, tmp_path, EXIT_PERMANENT, why)
    assert_nothing_placed(tmp_path)


def test_zip_modes_and_symlinks_inside(web, tmp_path):
    data = zipped(("run.sh", RUN_SH, 0o104777), ("lib/params.txt", b"lr", 0o100666), ("current", b"lib", 0o120777),
                  ("old.txt", b"o", 0))  # no Unix mode: an ordinary file
    res = fetch_served(web, "/modes.zip", data, tmp_path)
    assert res.returncode == 0, res.stderr
    code = tmp_path / "code"
    assert stat.S_IMODE((code / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((code / "lib/params.txt").stat().st_mode) == 0o644
    assert os.readlink(code / "current") == "lib" and (code / "old.txt").read_bytes() == b"o"


# ----------------------------------------------------------------------------- 2. the entrypoint
@pytest.mark.parametrize("members,entrypoint,why", [
    ([_file("real.sh", RUN_SH), _symlink("run.sh", "real.sh")], "run.sh", "'run.sh' is a symlink"),
    ([_file("sub/run.sh", RUN_SH), _symlink("lib", "sub")], "lib/run.sh", "'lib' is a symlink"),
    ([_dir("run.sh"), _file("run.sh/x", b"x")], "run.sh", "is a directory"),
], ids=["symlink", "under-symlink", "directory"])
def test_entrypoint_must_be_a_regular_file(web, tmp_path, members, entrypoint, why):
    res = fetch_served(web, "/entry.tgz", tarball(*members), tmp_path, entrypoint=entrypoint)
    assert_fails(res, tmp_path, EXIT_PERMANENT, why)
    assert_nothing_placed(tmp_path)


def test_single_script_entrypoint_in_a_subdirectory(web, tmp_path):
    res = fetch_served(web, "/train.py", RUN_SH, tmp_path, entrypoint="bin/train.py")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "code" / "bin" / "train.py").read_bytes() == RUN_SH


# ----------------------------------------------------------------------------- 3. size caps
ZEROS = b"\0" * (3 << 20)


@pytest.mark.parametrize("name,data,args,env,cap", [
    ("/big.sh", b"x" * 5000, ["--max-download-bytes", "1000"], {}, "--max-download-bytes"),
    ("/bomb.tgz", tarball(_file("run.sh", RUN_SH), _file("zeros", ZEROS)), ["--max-unpacked-bytes", "1M"], {},
     "--max-unpacked-bytes"),
    ("/bomb.zip", zipped(("run.sh", RUN_SH, 0o100755), ("zeros", ZEROS, 0o100644)), [],
     {"TFK8S_CODE_MAX_UNPACKED_BYTES": "1M"}, "--max-unpacked-bytes"),
    ("/many.tgz", tarball(*(_file(f"f{i}") for i in range(30))), ["--max-members", "10"], {}, "--max-members"),
    ("/many.zip", zipped(*((f"f{i}", b"", 0o100644) for i in range(30))), [], {"TFK8S_CODE_MAX_MEMBERS": "10"},
     "--max-members"),
], ids=["download", "unpacked-tar", "unpacked-zip", "members-tar", "members-zip"])
def test_caps_are_permanent_and_say_how_to_raise_them(web, tmp_path, name, data, args, env, cap):
    res = fetch_served(web, name, data, tmp_path, *args, env=env)
    variable = {"--max-download-bytes": "TFK8S_CODE_MAX_DOWNLOAD_BYTES", "--max-members": "TFK8S_CODE_MAX_MEMBERS",
                "--max-unpacked-bytes": "TFK8S_CODE_MAX_UNPACKED_BYTES"}[cap]
    assert_fails(res, tmp_path, EXIT_PERMANENT, cap, variable)
    assert_nothing_placed(tmp_path)


def test_download_cap_holds_without_content_length(tmp_path):
    """No Content-Length (the body ends when the connection closes): the cap is counted as bytes arrive."""
    body = b"x" * 5000
    with raw_server(_send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body)) as url:
        res = run_fetch(url + "/big.sh", tmp_path, sha256=sha(body), env={"TFK8S_CODE_MAX_DOWNLOAD_BYTES": "1K"})
    assert_fails(res, tmp_path, EXIT_PERMANENT, "TFK8S_CODE_MAX_DOWNLOAD_BYTES")


def test_a_bad_cap_value_is_a_clear_permanent_failure(web, tmp_path):
    res = run_fetch(web.url + "/x.sh", tmp_path, sha256="0" * 64, env={"TFK8S_CODE_MAX_MEMBERS": "lots"})
    assert_fails(res, tmp_path, EXIT_PERMANENT, "--max-members", "lots")


# ----------------------------------------------------------------------------- 4. Content-Length
@pytest.mark.parametrize("answer,why", [
    (_send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10), "10 of 1000 bytes"),
    (_send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n100\r\nshort"), "ended early"),
], ids=["content-length", "chunked"])
def test_a_cut_body_is_retryable(tmp_path, answer, why):
    """A raw socket fake: no HTTP server sends less than it announces on purpose, but a dropped
    connection or a broken proxy does."""
    full = b"x" * 1000
    with raw_server(answer) as url:
        res = run_fetch(url + "/train.sh", tmp_path, sha256=sha(full))
    assert_fails(res, tmp_path, EXIT_RETRYABLE, why)
    assert_nothing_placed(tmp_path)


# ----------------------------------------------------------------------------- 5. the deadline
@pytest.mark.parametrize("answer,args,env", [
    (_never_answer, ["--deadline", "2", "--timeout", "60", "--retries", "10"], {}),
    (_drip, ["--timeout", "60"], {"TFK8S_CODE_DEADLINE": "2"}),
], ids=["silent-server", "dripping-body"])
def test_the_deadline_bounds_the_whole_fetch(tmp_path, answer, args, env):
    """Raw socket fakes: one accepts and never answers; one sends a byte every 0.1 s, so no read
    ever times out and only the deadline ends the fetch."""
    with raw_server(answer) as url:
        res = run_fetch(url + "/train.sh", tmp_path, *args, sha256="0" * 64, env=env)
    assert_fails(res, tmp_path, EXIT_RETRYABLE, "deadline of 2s", "--deadline", "TFK8S_CODE_DEADLINE")


# ----------------------------------------------------------------------------- 6. redirects
@pytest.mark.parametrize("location,why", [
    ("ftp://127.0.0.1:1/algo.sh", "only http(s) redirects are followed"),
    ("file:///etc/passwd", "only http(s) redirects are followed"),
], ids=["ftp", "file"])
def test_redirects_leave_http_only(web, tmp_path, location, why):
    url = web.serve("/moved.sh", status=302, Location=location)
    res = run_fetch(url, tmp_path, sha256="0" * 64)
    assert_fails(res, tmp_path, EXIT_PERMANENT, why, url, location)


def test_https_is_never_downgraded_to_http(web, tls_web, tls_cert, tmp_path):
    """The HTTPS fake (self-signed, trusted through SSL_CERT_FILE) stands in for an artifact store
    whose redirect to plain http would hand the code to anyone on the path."""
    data = tarball(_file("run.sh", RUN_SH))
    plain = web.serve("/algo.tgz", data)
    url = tls_web.serve("/algo.tgz", status=302, Location=plain)
    res = run_fetch(url, tmp_path, sha256=sha(data), env={"SSL_CERT_FILE": str(tls_cert[0])})
    assert_fails(res, tmp_path, EXIT_PERMANENT, "https must not be downgraded to http", url, plain)
    assert_nothing_placed(tmp_path)


def test_https_redirects_within_https_and_needs_no_checksum(tls_web, tls_cert, tmp_path):
    tls_web.serve("/v1/algo.tgz", tarball(_file("run.sh", RUN_SH)))
    url = tls_web.serve("/latest.tgz", status=302, Location="/v1/algo.tgz")
    res = run_fetch(url, tmp_path, env={"SSL_CERT_FILE": str(tls_cert[0])})
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "code" / "run.sh").read_bytes() == RUN_SH


def test_an_untrusted_certificate_is_permanent(tls_web, tmp_path):
    url = tls_web.serve("/algo.tgz", tarball(_file("run.sh", RUN_SH)))
    res = run_fetch(url, tmp_path)
    assert_fails(res, tmp_path, EXIT_PERMANENT, "certificate", url)


# ----------------------------------------------------------------------------- 7. plain http needs a checksum
def test_plain_http_without_sha256_is_refused(web, tmp_path):
    url = web.serve("/plain.sh", RUN_SH)
    res = run_fetch(url, tmp_path)
    assert_fails(res, tmp_path, EXIT_PERMANENT, "code.sha256", "https://", url)
    assert_nothing_placed(tmp_path)
    assert not any(path == "/plain.sh" for path, _ in web.seen)  # refused before any request


def test_a_malformed_sha256_is_refused(web, tmp_path):
    res = run_fetch(web.serve("/train.sh", RUN_SH), tmp_path, sha256="abc")
    assert_fails(res, tmp_path, EXIT_PERMANENT, "--sha256", "64 hex")


# ----------------------------------------------------------------------------- 8. every failure is one line
def _cut_gzip() -> bytes:
    whole = tarball(_file("run.sh", RUN_SH), _file("data", os.urandom(4096)))
    return whole[: len(whole) // 2]


def _corrupt_gzip() -> bytes:
    return gzip.compress(b"\0" * 512)[:10] + b"\xff" * 200


def _cut_tar() -> bytes:
    whole = tarball(_file("run.sh", RUN_SH), _file("data", b"d" * 4096), mode="w")
    return whole[:1536]


@pytest.mark.parametrize("name,data,why", [
    ("/cut.tgz", _cut_gzip(), "not a valid tgz archive"),
    ("/corrupt.tar.gz", _corrupt_gzip(), "not a valid gz archive"),
    ("/cut.tar", _cut_tar(), "not a valid tar archive"),
    ("/bad.zip", b"PK\x03\x04 not really a zip", "not a valid zip archive"),
], ids=["cut-gzip", "corrupt-gzip", "cut-tar", "bad-zip"])
def test_broken_archives_are_one_permanent_line(web, tmp_path, name, data, why):
    res = fetch_served(web, name, data, tmp_path)
    assert_fails(res, tmp_path, EXIT_PERMANENT, why)
    assert_nothing_placed(tmp_path)


@pytest.mark.parametrize("answer,code,why", [
    (_send(b"HTTP/1.1 two-hundred OK\r\n\r\n"), EXIT_PERMANENT, "not a valid HTTP response"),
    (_send(b"SSH-2.0-OpenSSH_9.6\r\n"), EXIT_PERMANENT, "not a valid HTTP response"),
    (_send(b""), EXIT_RETRYABLE, "cannot reach"),
    (_reset_after(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 5000), EXIT_RETRYABLE,
     "broke off"),
], ids=["bad-status", "not-http", "empty", "reset-mid-body"])
def test_misbehaving_servers_are_one_line(tmp_path, answer, code, why):
    """Raw socket fakes for what no HTTP server sends: a malformed status line, another protocol
    (an SSH banner, as on a wrong port), no answer at all, a reset in the middle of the body."""
    with raw_server(answer) as url:
        res = run_fetch(url + "/train.sh", tmp_path, sha256="0" * 64)
    assert_fails(res, tmp_path, code, why)


def test_unknown_host_is_retryable(tmp_path):
    """``.invalid`` never resolves (RFC 6761), so this needs no network."""
    res = run_fetch("http://tfk8s-no-such-host.invalid/train.sh", tmp_path, sha256="0" * 64)
    assert_fails(res, tmp_path, EXIT_RETRYABLE, "cannot resolve", "tfk8s-no-such-host.invalid")


def _small_file_limit() -> None:
    """A file-size limit stands in for a full emptyDir: writes past 64 KiB fail (EFBIG) as on a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))


@pytest.mark.parametrize("name,data", [
    ("/big.sh", b"x" * (256 << 10)),
    ("/big.tgz", tarball(_file("run.sh", RUN_SH), _file("data", b"\0" * (256 << 10)))),
], ids=["download", "unpack"])
def test_a_full_disk_is_retryable(web, tmp_path, name, data):
    res = fetch_served(web, name, data, tmp_path, preexec_fn=_small_file_limit)
    assert_fails(res, tmp_path, EXIT_RETRYABLE, "cannot write the code into", str((tmp_path / "code").resolve()))


def test_a_bad_uri_is_one_line(tmp_path):
    res = run_fetch("http://[::1/train.sh", tmp_path, sha256="0" * 64)
    assert_fails(res, tmp_path, EXIT_PERMANENT, "bad code URI")


# ----------------------------------------------------------------------------- 9. redaction
SECRET_QUERY = ("op=OPEN&user.name=bob&token=T0KEN111&delegation=DELEG222&signature=SIGN3333&X-Amz-Signature=AMZ44444"
                "&X-Amz-Credential=CRED5555&access_token=ACCESS66&sig=SIG77777&X-Goog-Signature=GOOG8888")
SECRETS = ("s3cret", "T0KEN111", "DELEG222", "SIGN3333", "AMZ44444", "CRED5555", "ACCESS66", "SIG77777", "GOOG8888")


def assert_no_secrets(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, text


def test_redact_hides_userinfo_and_every_query_value():
    """The fetcher redacts by the package's one rule (tfk8s_airflow.redaction): every query value."""
    from tfk8s_airflow.redaction import redact_text

    text = f"fetching https://alice:s3cret@host:8443/a/b.tgz?{SECRET_QUERY}#frag: HTTP 403"
    out = redact_text(text)
    assert_no_secrets(out)
    assert out.startswith("fetching https://***@host:8443/a/b.tgz?op=***&user.name=***&token=***&")
    assert out.endswith("#frag: HTTP 403")
    assert redact_text("webhdfs://nn:9870/code/a.tgz and 'hdfs://u:p@nn/x'") == "webhdfs://nn:9870/code/a.tgz and " \
        "'hdfs://***@nn/x'"
    body = "the S3 body says <SignatureProvided>AMZ44444</SignatureProvided>"
    assert redact_text(body, "https://s3/b?X-Amz-Signature=AMZ44444") == body.replace("AMZ44444", "***")


def test_secrets_never_reach_messages_or_logs(web, tmp_path):
    web.serve("/denied.tgz", b"request for token T0KEN111 with signature AMZ44444 denied", status=403)
    url = web.url.replace("://", "://alice:s3cret@") + "/denied.tgz?" + SECRET_QUERY
    res = run_fetch(url, tmp_path, sha256="0" * 64)
    message = assert_fails(res, tmp_path, EXIT_PERMANENT, "HTTP 403", "token=***", "denied")
    assert_no_secrets(res.stdout, res.stderr, message)


def test_retry_lines_are_redacted(web, tmp_path):
    url = web.serve("/busy.sh", b"busy", status=503) + "?" + SECRET_QUERY
    res = run_fetch(url, tmp_path, "--retries", "2", sha256="0" * 64)
    assert_fails(res, tmp_path, EXIT_RETRYABLE, "HTTP 503")
    assert "retrying" in res.stderr
    assert_no_secrets(res.stdout, res.stderr)


def test_refused_redirect_is_redacted(web, tmp_path):
    url = web.serve("/moved.sh", status=302, Location=f"ftp://carol:s3cret@127.0.0.1:1/x?{SECRET_QUERY}")
    res = run_fetch(url + "?" + SECRET_QUERY, tmp_path, sha256="0" * 64)
    message = assert_fails(res, tmp_path, EXIT_PERMANENT, "ftp://***@127.0.0.1:1/x?op=***")
    assert_no_secrets(res.stderr, message)


def test_userinfo_is_sent_as_basic_auth_and_never_logged(web, tmp_path):
    data = tarball(_file("run.sh", RUN_SH))
    web.serve("/private.tgz", data)
    url = web.url.replace("://", "://alice:s3cret@") + "/private.tgz?" + SECRET_QUERY
    res = run_fetch(url, tmp_path, sha256=sha(data))
    assert res.returncode == 0, res.stderr
    assert_no_secrets(res.stdout, res.stderr)
    headers = next(h for path, h in reversed(web.seen) if path.startswith("/private.tgz"))
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"alice:s3cret").decode()
