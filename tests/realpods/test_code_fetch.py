"""Training code fetched inside real pods: the ``code:`` field through Airflow and the real node.

Each job runs through ``tf_job()`` with ``dag.test()``; the real scheduler binds its pods to
the devstack's real node, where each pod's ``fetch-code`` init container downloads the code from
inside the pod's own network namespace. So the servers are where pods can reach them: an
HTTP server this test starts on the node's host address (10.214.0.1), and the devstack
HDFS, whose WebHDFS listens there too and redirects reads to the DataNode by this machine's
host name (which the node's CoreDNS resolves to the host address).

The fetched code writes a marker per replica into a hostPath volume, so a passing job proves
the code ran in every pod. Failures (a 404, a wrong entrypoint, a server only on the host's
127.0.0.1) must fail the job from the fetcher's exit code with the fetcher's own message in
the sensor's reason: with a parameter server (restartPolicy Never) and with workers only
(OnFailure, where the init container would otherwise crash-loop until startup_timeout).
"""
from __future__ import annotations

import hashlib
import http.server
import io
import re
import tarfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.dagrun import states, xcom, xcom_at
from tests.realpods.support import JobWatch, run_dag

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.timeout(600),
              pytest.mark.usefixtures("allowed_host_paths")]

FETCH = "fetch-code"
OUT = "/mnt/tfk8s-codefetch/out"  # the scenario DAGs' OUT: the out volume inside the pods


def scenarios():
    """The scenario DAG module (imports Airflow; tests/dags is on sys.path, see test_realpods)."""
    import tfk8s_codefetch_scenarios as s  # noqa: PLC0415

    assert s.OUT == OUT
    return s


def run_sh(token: str) -> bytes:
    """The fetched entrypoint: a marker per replica (token, hostname, the archive's own file).
    A parameter server then serves until teardown stops it; a worker first waits (bounded)
    for the markers of the replicas in $CF_WAIT_FOR, so it cannot finish before they ran."""
    return (
        "#!/bin/sh\nset -e\n"
        'here="$(dirname "$0")"\n'
        'extra="$(cat "$here/lib/params.txt" 2>/dev/null || echo no-archive)"\n'
        f'printf "%s %s %s\\n" "{token}" "$(hostname)" "$extra" > "{OUT}/$TFK8S_ROLE-$TFK8S_INDEX.txt"\n'
        'echo "fetched code ran as $TFK8S_ROLE-$TFK8S_INDEX"\n'
        'if [ "$TFK8S_ROLE" = ps ]; then exec sleep 3600; fi\n'
        f'for peer in ${{CF_WAIT_FOR:-}}; do i=0; until [ -e "{OUT}/$peer.txt" ]; do\n'
        '  i=$((i + 1)); [ "$i" -le 600 ] || { echo "no marker of $peer" >&2; exit 2; }; sleep 0.1; done; done\n'
    ).encode()


def targz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class CodeServer:
    """An HTTP server in this process serving ``files``; records who fetched what."""

    host: str
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # (client address, path, status)

    def __post_init__(self):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                data = outer.files.get(self.path)
                outer.requests.append((self.client_address[0], self.path, 200 if data is not None else 404))
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((self.host, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def host_server(node):
    """A code server on the host address pods reach (the real node's bridge address)."""
    server = CodeServer(node.host_addr)
    yield server
    server.close()


@pytest.fixture
def loopback_server():
    """A code server only on the host's 127.0.0.1: up and serving, but not for pods."""
    server = CodeServer("127.0.0.1")
    yield server
    server.close()


@pytest.fixture
def out_dir(tmp_path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d


def markers(out_dir: Path) -> dict[str, list[str]]:
    return {p.stem: p.read_text().split() for p in sorted(out_dir.glob("*.txt"))}


def assert_fetched_code_ran(dr, out_dir: Path, token: str, replicas: list[str], extra: str):
    summary = xcom(dr, "train.wait", "summary")
    assert dr.state == "success", (states(dr), summary)
    assert summary["state"] == "succeeded", summary
    # Every replica's marker, written by the fetched code in that replica's pod.
    assert markers(out_dir) == {key: [token, key, extra] for key in replicas}, markers(out_dir)
    for key in replicas:
        if key.startswith("worker"):
            assert summary["replicas"][key]["exit_code"] == 0, summary


def assert_init_fetched(watch: JobWatch, replicas: list[str]):
    """Each pod's fetch-code init container ran and exited 0 (the kubelet's status)."""
    for key in replicas:
        pod = watch.pod(key)
        assert pod is not None, key
        init = {s.name: s for s in pod.status.init_container_statuses or []}[FETCH]
        assert init.state.terminated is not None and init.state.terminated.exit_code == 0, (key, init)


# --------------------------------------------------------------------------- success
def test_code_over_http_from_the_host_address_with_sha256(node, k8s_namespace, airflow_db, host_server,
                                                         out_dir):
    s = scenarios()
    token = uuid.uuid4().hex
    archive = targz({"run.sh": run_sh(token), "lib/params.txt": b"lr=0.1\n"})
    host_server.files["/algo.tar.gz"] = archive
    code = {"uri": host_server.url("/algo.tar.gz"), "entrypoint": "run.sh",
            "sha256": hashlib.sha256(archive).hexdigest()}
    replicas = ["ps-0", "worker-0", "worker-1"]
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.with_ps, k8s_namespace, code=code, out_dir=str(out_dir))
    assert_fetched_code_ran(dr, out_dir, token, replicas, "lr=0.1")
    assert_init_fetched(watch, replicas)
    # One download per pod, each from that pod's own address on the bridge.
    pod_ips = sorted(watch.pod(key).status.pod_ip for key in replicas)
    fetched = sorted(ip for ip, path, status in host_server.requests if path == "/algo.tar.gz" and status == 200)
    bridge = host_server.host.rsplit(".", 1)[0] + "."
    assert fetched == pod_ips and all(ip.startswith(bridge) for ip in fetched), host_server.requests
    watch.assert_nothing_left()


@pytest.mark.hdfs
@pytest.mark.parametrize("scheme", ["hdfs", "webhdfs"])
def test_code_from_hdfs_at_the_host_address(node, k8s_namespace, airflow_db, hdfs_server, hdfs_dir,
                                           out_dir, scheme):
    """hdfs:// (the RPC port is ignored; WebHDFS on 9870) and webhdfs:// URIs naming the host
    address: the NameNode answers there, and its redirect to the DataNode resolves in pods."""
    s = scenarios()
    token = uuid.uuid4().hex
    client = hdfs_server.client()
    if scheme == "hdfs":  # a single script becomes the entrypoint
        client.write(f"{hdfs_dir}/run.sh", data=run_sh(token))
        rpc_port = urlparse(hdfs_server.rpc).port
        code, extra = {"uri": f"hdfs://{node.host_addr}:{rpc_port}{hdfs_dir}/run.sh"}, "no-archive"
    else:
        client.write(f"{hdfs_dir}/algo.tgz", data=targz({"run.sh": run_sh(token), "lib/params.txt": b"hdfs\n"}))
        http_port = urlparse(hdfs_server.url).port
        code, extra = {"uri": f"webhdfs://{node.host_addr}:{http_port}{hdfs_dir}/algo.tgz"}, "hdfs"
    replicas = ["worker-0", "worker-1"]
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(s.workers_only, k8s_namespace, code=code, out_dir=str(out_dir))
    assert_fetched_code_ran(dr, out_dir, token, replicas, extra)
    assert_init_fetched(watch, replicas)
    watch.assert_nothing_left()


# --------------------------------------------------------------------------- failures
FAILURES = ["http-404", "wrong-entrypoint", "loopback-only-server"]
FEW_RESTARTS = 5


def failing_code(kind: str, host_server: CodeServer, loopback_server: CodeServer) -> tuple[dict, str, int]:
    """(code, the fetcher's message expected in the reason, the fetcher's exit code)."""
    archive = targz({"run.sh": run_sh("unused"), "lib/params.txt": b"x\n"})
    sha = hashlib.sha256(archive).hexdigest()  # a plain http:// code URI needs one
    if kind == "http-404":
        url = host_server.url("/missing.tar.gz")
        return {"uri": url, "sha256": sha}, f"HTTP 404 Not Found fetching {url}", 1
    if kind == "wrong-entrypoint":
        host_server.files["/algo.tar.gz"] = archive
        url = host_server.url("/algo.tar.gz")
        return ({"uri": url, "entrypoint": "train.sh", "sha256": sha},
                f"entrypoint 'train.sh' not found in the code from {url} (top level holds: lib, run.sh)", 1)
    loopback_server.files["/algo.tar.gz"] = archive  # served, but on the host's loopback
    url = loopback_server.url("/algo.tar.gz")
    return {"uri": url, "sha256": sha}, f"cannot reach {url}: [Errno 111] Connection refused", 138


@pytest.mark.parametrize("topology", ["with-ps", "workers-only"])
@pytest.mark.parametrize("kind", FAILURES)
def test_failed_fetch_fails_the_job_with_the_fetchers_message(node, k8s_namespace, airflow_db, host_server,
                                                              loopback_server, out_dir, kind, topology, capfd):
    s = scenarios()
    code, message, exit_code = failing_code(kind, host_server, loopback_server)
    dag = s.with_ps if topology == "with-ps" else s.workers_only
    with JobWatch(node, k8s_namespace) as watch:
        dr = run_dag(dag, k8s_namespace, code=code, out_dir=str(out_dir))
    st = states(dr)
    summary = xcom(dr, "train.wait", "summary")
    reason = summary["reason"]
    assert dr.state == "failed" and st[("train.wait", -1)] == "failed", (st, summary)
    assert st[("train.teardown", -1)] == "success", st
    assert message in reason, reason
    assert f"init container {FETCH} failed with exit code {exit_code}" in reason, reason
    assert summary["failed_container"] == FETCH, summary
    failed = next(r for r in summary["replicas"].values() if r["pod"] == summary["failed_pod"])
    assert failed["container"] == FETCH and failed["init_exit_code"] == exit_code, summary
    # Failed from the fetch's outcome within seconds, not at startup_timeout (900 s): a
    # crash-looping init container is restarted after 1, 2, 4, 8, then every 10 s, so it
    # would have restarted about 90 times by then; here none got past a few restarts (more
    # than one can happen: under dag.test() the sensor polls after the replica tasks ended).
    assert "startup_timeout" not in reason, reason
    assert max(r["restarts"] for r in summary["replicas"].values()) <= FEW_RESTARTS, summary
    if topology == "workers-only" and exit_code != 1:
        # A retryable exit counts against max_restarts; past it, the job fails.
        m = re.search(r"restarted (\d+) times, more than max_restarts (\d+)", reason)
        assert m and int(m.group(2)) == s.WORKERS_ONLY_MAX_RESTARTS < int(m.group(1)) <= FEW_RESTARTS, reason
    assert markers(out_dir) == {}  # the training container never ran
    # Each replica task whose own fetch failed names that failure in its own outcome and task log,
    # not only the replica the job failed by. A replica task decides from the snapshot in which the job
    # failed: a peer whose fetch was still running then (its own failure came a moment later, in the
    # summary the sensor took after) had not started, and says so; it is never "healthy".
    log = capfd.readouterr()
    text = log.out + log.err
    fetch_failed = {key for key, r in summary["replicas"].items() if r.get("container") == FETCH}
    assert fetch_failed, summary
    results = {}
    for index in range(len(summary["replicas"])):
        result = xcom_at(dr, "train.replica", index, "replica")
        if result:
            results[result["key"]] = result
    # Under dag.test() each task's trigger has a watch of its own, so when every fetch fails the task that failed
    # first may not be the replica the sensor's later summary names; one of them always names its own failure.
    named = {key for key in fetch_failed if results[key]["state"] == "failed"}
    assert named, results
    for key in fetch_failed:
        if key in named:
            assert message in results[key]["reason"], results[key]
            assert re.search(rf"replica {key} failed: .*{re.escape(message)}", text), key
        else:
            assert results[key]["state"] == "skipped", results[key]
            assert "had not started when the job failed" in results[key]["reason"], results[key]
    watch.assert_nothing_left()
