"""Code staging: the init container's fetch script against HTTP on loopback and real HDFS,
run as the pod runs it (``python3 -m tfk8s_airflow.pod.codefetch ...`` in a subprocess)."""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from tests.ports import free_port
from tfk8s_airflow.job.builders.objects import FETCH_CONTAINER
from tfk8s_airflow.pod.codefetch import EXIT_PERMANENT, EXIT_RETRYABLE, resolve_url

REPO = Path(__file__).resolve().parents[2]
RUN_SH = b"#!/bin/sh\necho training with $(cat \"$(dirname \"$0\")/lib/params.txt\")\n"


def _targz(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buf.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


ALGO = {"run.sh": RUN_SH, "lib/params.txt": b"lr=0.1\n"}
#: Plain http:// needs a sha256; where the download fails before it is checked, any will do.
ANY_SHA256 = "0" * 64


@pytest.fixture(scope="module")
def http_files():
    """A loopback HTTP server serving a dict of path -> bytes (filled by the tests)."""
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            data = files.get(self.path)
            if data is None:
                self.send_error(404, "no such code")
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    files["base"] = f"http://127.0.0.1:{server.server_address[1]}".encode()
    yield files
    server.shutdown()
    server.server_close()


def fetch(uri: str, dest: Path, entrypoint: str = "run.sh", sha256: str | None = None,
          **env: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tfk8s_airflow.pod.codefetch", "--uri", uri, "--dest", str(dest),
           "--entrypoint", entrypoint, "--retries", "1", "--timeout", "10"]
    if sha256:
        cmd += ["--sha256", sha256]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**os.environ, "TFK8S_TERMINATION_LOG": str(dest.parent / "term"),
                               **env})


def _base(files) -> str:
    return files["base"].decode()


@pytest.mark.parametrize("name,data", [("/algo.tar.gz", _targz(ALGO)), ("/algo.zip", _zip(ALGO)),
                                       ("/algo.tgz", _targz(ALGO))])
def test_http_archive_unpacked_verified_and_runnable(http_files, tmp_path, name, data):
    http_files[name] = data
    dest = tmp_path / "code"
    res = fetch(_base(http_files) + name, dest, sha256=hashlib.sha256(data).hexdigest())
    assert res.returncode == 0, res.stderr
    assert os.access(dest / "run.sh", os.X_OK)
    assert subprocess.run(["sh", str(dest / "run.sh")], capture_output=True, text=True).stdout \
        == "training with lr=0.1\n"


def test_single_script_becomes_the_entrypoint(http_files, tmp_path):
    http_files["/train.sh"] = RUN_SH
    res = fetch(_base(http_files) + "/train.sh", tmp_path / "code", sha256=hashlib.sha256(RUN_SH).hexdigest())
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "code" / "run.sh").read_bytes() == RUN_SH


def test_bad_checksum_is_permanent_and_places_nothing(http_files, tmp_path):
    http_files["/algo.tar.gz"] = _targz(ALGO)
    res = fetch(_base(http_files) + "/algo.tar.gz", tmp_path / "code", sha256="0" * 64)
    assert res.returncode == EXIT_PERMANENT
    assert "sha256 mismatch" in res.stderr
    assert "sha256 mismatch" in (tmp_path / "term").read_text()  # the pod's termination message
    assert list((tmp_path / "code").iterdir()) == []


def test_404_is_permanent(http_files, tmp_path):
    res = fetch(_base(http_files) + "/missing.tar.gz", tmp_path / "code", sha256=ANY_SHA256)
    assert res.returncode == EXIT_PERMANENT
    assert "HTTP 404" in res.stderr


def test_connection_refused_is_retryable(tmp_path):
    port = free_port()  # reserved: no other test process listens on it meanwhile
    res = fetch(f"http://127.0.0.1:{port}/algo.tar.gz", tmp_path / "code", sha256=ANY_SHA256)
    assert res.returncode == EXIT_RETRYABLE
    assert "cannot reach" in res.stderr


@pytest.mark.parametrize("data,why", [
    (_targz({"../evil.sh": b"x", "run.sh": RUN_SH}), "unsafe archive member"),
    (_targz({"/etc/evil": b"x", "run.sh": RUN_SH}), "unsafe archive member"),
    (_targz({"run.sh": RUN_SH}, links={"lib": "../../.."}), "leaves"),
    (_zip({"../../evil.sh": b"x", "run.sh": RUN_SH}), "unsafe archive member"),
    (b"this is not gzip at all", "not a valid"),
])
def test_unsafe_or_bad_archives_are_refused(http_files, tmp_path, data, why):
    name = "/bad.zip" if data.startswith(b"PK") else "/bad.tar.gz"
    http_files[name] = data
    res = fetch(_base(http_files) + name, tmp_path / "sub" / "code", sha256=hashlib.sha256(data).hexdigest())
    assert res.returncode == EXIT_PERMANENT, res.stderr
    assert why in res.stderr
    assert not (tmp_path / "sub" / "evil.sh").exists() and not (tmp_path / "evil.sh").exists()


def test_missing_entrypoint_names_what_is_there(http_files, tmp_path):
    http_files["/algo2.tar.gz"] = data = _targz({"algo/run.sh": RUN_SH})
    res = fetch(_base(http_files) + "/algo2.tar.gz", tmp_path / "code", sha256=hashlib.sha256(data).hexdigest())
    assert res.returncode == EXIT_PERMANENT
    assert "entrypoint 'run.sh' not found" in res.stderr and "algo" in res.stderr


def test_uri_resolution():
    assert resolve_url("hdfs://nn:8020/code/a.tgz", "alice") == \
        "http://nn:9870/webhdfs/v1/code/a.tgz?op=OPEN&user.name=alice"
    assert resolve_url("webhdfs://nn:50070/code/a.tgz") == "http://nn:50070/webhdfs/v1/code/a.tgz?op=OPEN"
    assert resolve_url("swebhdfs://nn/c.zip").startswith("https://nn:9870/webhdfs/v1/c.zip")


@pytest.mark.hdfs
@pytest.mark.parametrize("scheme", ["hdfs", "webhdfs"])
def test_fetch_from_real_hdfs(hdfs_server, hdfs_dir, tmp_path, scheme):
    data = _targz(ALGO)
    hdfs_server.client().write(f"{hdfs_dir}/algo.tar.gz", data=data, overwrite=True)
    host_port = hdfs_server.url.split("://", 1)[1]
    uri = (f"hdfs://{hdfs_server.rpc.split('://', 1)[1]}{hdfs_dir}/algo.tar.gz" if scheme == "hdfs"
           else f"webhdfs://{host_port}{hdfs_dir}/algo.tar.gz")
    res = fetch(uri, tmp_path / "code", sha256=hashlib.sha256(data).hexdigest(),
                TFK8S_HDFS_USER=hdfs_server.user, TFK8S_WEBHDFS_PORT=host_port.rsplit(":", 1)[1])
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "code" / "lib" / "params.txt").read_bytes() == b"lr=0.1\n"
    missing = fetch(f"webhdfs://{host_port}{hdfs_dir}/nope.tgz", tmp_path / "code2")
    assert missing.returncode == EXIT_PERMANENT
    assert "404" in missing.stderr and "FileNotFoundException" in missing.stderr


def test_rendered_pods_carry_the_init_container():
    from tfk8s_airflow.job.builders.objects import JobNames
    from tfk8s_airflow.job.builders.plan import plan_job
    from tfk8s_airflow.job.policy import DeploymentPolicy
    from tfk8s_airflow.job.spec import parse_spec

    spec = parse_spec({"name": "algo", "image": "tfk8s/trainer:0.1", "ps": 1, "worker": 2,
                      "code": {"uri": "hdfs://nn:8020/code/algo.tgz", "entrypoint": "run.sh"}})
    names = JobNames.for_run(spec, "manual__1", dag_id="dag")
    pods = plan_job(spec, names, DeploymentPolicy()).pods
    assert len(pods) == 3
    for pod in pods:
        init = pod["spec"]["initContainers"][0]
        assert init["name"] == FETCH_CONTAINER
        assert init["args"][:2] == ["-m", "tfk8s_airflow.pod.codefetch"]
        assert "hdfs://nn:8020/code/algo.tgz" in init["args"]
