"""The devstack node agent as a kubelet: pods on ``tfk8s-local-0`` run as local processes.

Small shell/Python pods (no TensorFlow) check what the agent promises in devstack/components/nodeagent/README.md:
restart policies and exit codes, deletion with grace periods, activeDeadlineSeconds, init
containers, volumes, DNS names of a Service's pods, logs through the API server, and that
``devstack/down nodeagent`` leaves nothing behind.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.k8s import DEVSTACK
from tests.fixtures.nodeagent import LOCAL_NODE_SELECTOR, LOCAL_TOLERATIONS
from tests.fixtures.waiting import wait_until

# serial: devstack/down nodeagent stops every pod on the agent's node (other tests' too), and a test bounds its time.
pytestmark = [pytest.mark.k8s, pytest.mark.timeout(300), pytest.mark.serial]


def _pod(name: str, script: str, restart: str = "Never", **spec) -> dict:
    container = {"name": "main", "image": "ignored.invalid/any:1", "command": ["sh", "-c", script]}
    container.update(spec.pop("container", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"restartPolicy": restart, "nodeSelector": LOCAL_NODE_SELECTOR,
                     "tolerations": LOCAL_TOLERATIONS, "containers": [container], **spec}}


def _phase(core, ns, name, *phases):
    def check():
        p = core.read_namespaced_pod(name, ns)
        return p if p.status.phase in phases else None
    return check


def _log(core, ns, name, **kw) -> str:
    return core.read_namespaced_pod_log(name, ns, _preload_content=False, **kw).data.decode()


def test_node_registered_ready_tainted_with_lease(nodeagent):
    core = nodeagent.cluster.core_v1
    node = core.read_node(nodeagent.node)
    assert node.metadata.labels["type"] == "local" and node.metadata.labels["tfk8s.io/node-agent"] == "true"
    assert [(t.key, t.effect) for t in node.spec.taints] == [("tfk8s.io/node-agent", "NoSchedule")]
    ready = [c for c in node.status.conditions if c.type == "Ready"][0]
    assert ready.status == "True"
    assert node.status.allocatable["cpu"] == "8" and "nvidia.com/gpu" not in node.status.allocatable
    from kubernetes import client
    lease = client.CoordinationV1Api(nodeagent.cluster.api_client).read_namespaced_lease(
        nodeagent.node, "kube-node-lease")
    assert lease.spec.holder_identity == nodeagent.node


def test_exit_codes_and_restart_policies(nodeagent, k8s_namespace):
    core, ns = nodeagent.cluster.core_v1, k8s_namespace
    core.create_namespaced_pod(ns, _pod("never", "echo bye; exit 3"))
    # OnFailure: fails twice (a counter in its emptyDir survives restarts), then succeeds.
    core.create_namespaced_pod(ns, _pod(
        "onfailure", 'n=$(cat /scratch/n 2>/dev/null || echo 0); echo $((n+1)) > /scratch/n; '
        'echo "run $n"; [ "$n" -ge 2 ] || exit 1', restart="OnFailure",
        volumes=[{"name": "scratch", "emptyDir": {}}],
        container={"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}))
    core.create_namespaced_pod(ns, _pod("always", "echo tick; sleep 0.5", restart="Always"))

    p = wait_until(_phase(core, ns, "never", "Failed", "Succeeded"), 30, "never ends")
    term = p.status.container_statuses[0].state.terminated
    assert p.status.phase == "Failed" and term.exit_code == 3 and term.reason == "Error"
    assert _log(core, ns, "never") == "bye\n"

    p = wait_until(_phase(core, ns, "onfailure", "Failed", "Succeeded"), 60, "onfailure ends")
    cs = p.status.container_statuses[0]
    assert p.status.phase == "Succeeded" and cs.restart_count == 2
    assert cs.last_state.terminated.exit_code == 1 and cs.state.terminated.exit_code == 0
    assert _log(core, ns, "onfailure") == "run 2\n"

    def restarted():
        p = core.read_namespaced_pod("always", ns)
        cs = (p.status.container_statuses or [None])[0]
        return p if cs and cs.restart_count >= 2 else None
    p = wait_until(restarted, 60, "always restarted twice")
    assert p.status.phase == "Running"
    assert _log(core, ns, "always", previous=True) == "tick\n"


def test_deletion_sends_sigterm_then_sigkill_after_grace(nodeagent, k8s_namespace, tmp_path):
    core, ns = nodeagent.cluster.core_v1, k8s_namespace
    marker = tmp_path / "got-term"
    core.create_namespaced_pod(ns, _pod(
        "polite", f"trap 'echo term > {marker}; exit 0' TERM; while true; do sleep 0.1; done",
        terminationGracePeriodSeconds=30))
    core.create_namespaced_pod(ns, _pod("stubborn", "trap '' TERM; while true; do sleep 0.1; done",
                                        terminationGracePeriodSeconds=2))
    for name in ("polite", "stubborn"):
        wait_until(_phase(core, ns, name, "Running"), 30, f"{name} running")
    time.sleep(0.5)
    t0 = time.monotonic()
    core.delete_namespaced_pod("polite", ns)
    core.delete_namespaced_pod("stubborn", ns)
    wait_until(lambda: not core.list_namespaced_pod(ns).items, 30, "both pods gone")
    elapsed = time.monotonic() - t0
    assert marker.read_text() == "term\n"
    assert 1.5 < elapsed < 15, elapsed  # stubborn: SIGKILL after its 2 s grace
    wait_until(lambda: not nodeagent.leftovers(ns), 15, "sandboxes removed")


def test_active_deadline_fails_the_pod(nodeagent, k8s_namespace):
    core, ns = nodeagent.cluster.core_v1, k8s_namespace
    core.create_namespaced_pod(ns, _pod("late", "sleep 60", activeDeadlineSeconds=2,
                                        terminationGracePeriodSeconds=1))
    p = wait_until(_phase(core, ns, "late", "Failed"), 30, "deadline exceeded")
    assert p.status.reason == "DeadlineExceeded"


def test_init_containers_volumes_and_service_dns(nodeagent, k8s_namespace, tmp_path):
    """Init containers run first, in order; configMap, emptyDir and hostPath volumes appear
    at their mount paths (a read-only bind mount refuses writes); the pods of a headless
    Service resolve each other by <hostname>.<subdomain>.<ns>.svc before they are Ready."""
    core, ns = nodeagent.cluster.core_v1, k8s_namespace
    host = tmp_path / "host"
    host.mkdir()
    (host / "data.txt").write_text("from the host\n")
    core.create_namespaced_config_map(ns, {"metadata": {"name": "shards"},
                                           "data": {"shards.json": '{"worker-0": ["a"]}'}})
    core.create_namespaced_service(ns, {"metadata": {"name": "grp"}, "spec": {
        "clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"grp": "x"},
        "ports": [{"port": 2222}]}})
    check = (f"cat /etc/tfk8s/shards/shards.json; echo; cat /scratch/order; cat /in/data.txt; "
             f"touch /in/x 2>/dev/null && echo writable || echo read-only; hostname; "
             f"for i in $(seq 1 100); do getent hosts peer.grp.{ns}.svc && break; sleep 0.1; done")
    body = _pod("main", check, hostname="main", subdomain="grp",
                volumes=[{"name": "s", "configMap": {"name": "shards"}}, {"name": "scratch", "emptyDir": {}},
                         {"name": "in", "hostPath": {"path": str(host), "type": "Directory"}}],
                initContainers=[{"name": f"init{i}", "image": "x",
                                 "command": ["sh", "-c", f"echo init{i} >> /scratch/order"],
                                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]} for i in (1, 2)],
                container={"volumeMounts": [{"name": "s", "mountPath": "/etc/tfk8s/shards"},
                                            {"name": "scratch", "mountPath": "/scratch"},
                                            {"name": "in", "mountPath": "/in", "readOnly": True}]})
    body["metadata"]["labels"]["grp"] = "x"
    peer = _pod("peer", "sleep 30", hostname="peer", subdomain="grp")
    peer["metadata"]["labels"]["grp"] = "x"
    core.create_namespaced_pod(ns, body)
    core.create_namespaced_pod(ns, peer)
    p = wait_until(_phase(core, ns, "main", "Succeeded", "Failed"), 60, "main ends")
    out = _log(core, ns, "main")
    assert p.status.phase == "Succeeded", out
    peer_ip = core.read_namespaced_pod("peer", ns).status.pod_ip
    assert out.splitlines()[:6] == ['{"worker-0": ["a"]}', "init1", "init2", "from the host", "read-only", "main"]
    resolved = out.splitlines()[6].split()
    assert resolved[0] == peer_ip and f"peer.grp.{ns}.svc" in resolved, out
    assert [c.state.terminated.exit_code for c in p.status.init_container_statuses] == [0, 0]
    assert not Path("/etc/tfk8s/shards/shards.json").exists()  # the bind mount stayed in the pod
    assert not (host / "x").exists()


def test_down_stops_pods_and_leaves_nothing(nodeagent, k8s_namespace):
    core, ns = nodeagent.cluster.core_v1, k8s_namespace
    core.create_namespaced_pod(ns, _pod("victim", "sleep 600"))
    wait_until(_phase(core, ns, "victim", "Running"), 30, "victim running")
    uid = core.read_namespaced_pod("victim", ns).metadata.uid
    pid = wait_until(lambda: nodeagent.pid(ns, "victim", "main"), 10, "victim pid")
    try:
        down = subprocess.run([str(DEVSTACK / "down"), "nodeagent"], capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr
        p = core.read_namespaced_pod("victim", ns)
        assert p.status.phase == "Failed" and p.status.reason == "Terminated"
        assert nodeagent.leftovers(ns, [uid], [pid]) == []
        assert nodeagent.netns() == []
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert "tfk8s-br0" not in links and "tfkv" not in links
        assert not any(Path("/etc/netns").glob("tfk8s-*")) if Path("/etc/netns").exists() else True
    finally:
        up = subprocess.run([str(DEVSTACK / "up"), "nodeagent"], capture_output=True, text=True, timeout=180)
        assert up.returncode == 0, up.stderr


def test_termination_messages_from_the_file_and_from_the_log(nodeagent, k8s_namespace):
    """Every container run gets its own termination file, named by TFK8S_TERMINATION_LOG and
    bind-mounted at its terminationMessagePath (default /dev/termination-log) in the
    container's mount namespace; the agent puts its last 4096 bytes into
    state.terminated.message, as the kubelet does. FallbackToLogsOnError: a failed container
    with an empty file gets the last 80 lines of its log instead."""
    core, ns = nodeagent.cluster.core_v1, k8s_namespace
    custom = f"/var/tmp/tfk8s-termination-test-{ns}"
    fallback = {"terminationMessagePolicy": "FallbackToLogsOnError"}
    core.create_namespaced_pod(ns, _pod(
        "file", 'echo "$TFK8S_TERMINATION_LOG"; printf "bye from /dev/termination-log" > /dev/termination-log; exit 3',
        initContainers=[{"name": "init", "image": "x", "command": [
            "sh", "-c", 'echo "$TFK8S_TERMINATION_LOG"; printf "init says hi" > "$TFK8S_TERMINATION_LOG"']}]))
    core.create_namespaced_pod(ns, _pod(
        "custom-path", f'printf "at a custom path" > {custom}', container={"terminationMessagePath": custom}))
    core.create_namespaced_pod(ns, _pod(
        "big", "head -c 904 /dev/zero | tr '\\0' a > \"$TFK8S_TERMINATION_LOG\"; "
               "head -c 4096 /dev/zero | tr '\\0' b >> \"$TFK8S_TERMINATION_LOG\""))
    core.create_namespaced_pod(ns, _pod("fallback", "seq 1 100; exit 1", container=fallback))
    core.create_namespaced_pod(ns, _pod(
        "fallback-file-wins", 'seq 1 100; printf "the file wins" > "$TFK8S_TERMINATION_LOG"; exit 1',
        container=fallback))
    core.create_namespaced_pod(ns, _pod("fallback-success", "seq 1 100", container=fallback))
    # A restarted container starts with an empty file: the message belongs to its run.
    core.create_namespaced_pod(ns, _pod(
        "rerun", 'if [ ! -e /scratch/ran ]; then touch /scratch/ran; printf "first run" > /dev/termination-log; '
                 "exit 1; fi", restart="OnFailure", volumes=[{"name": "scratch", "emptyDir": {}}],
        container={"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}))

    ended = {}
    for name in ("file", "custom-path", "big", "fallback", "fallback-file-wins", "fallback-success", "rerun"):
        ended[name] = wait_until(_phase(core, ns, name, "Failed", "Succeeded"), 60, f"{name} ends")

    def term(name):
        return ended[name].status.container_statuses[0].state.terminated

    init = ended["file"].status.init_container_statuses[0].state.terminated
    assert (init.exit_code, init.message) == (0, "init says hi")
    assert (term("file").exit_code, term("file").message) == (3, "bye from /dev/termination-log")
    files = _log(core, ns, "file", container="init").strip(), _log(core, ns, "file").strip()
    assert files[0] != files[1] and all(f.startswith(str(nodeagent.pods_dir)) for f in files), files
    assert term("custom-path").message == "at a custom path"
    assert term("big").message == "b" * 4096  # the last 4096 bytes, as the kubelet reads them
    assert term("fallback").message == "".join(f"{i}\n" for i in range(21, 101))
    assert term("fallback-file-wins").message == "the file wins"
    assert term("fallback-success").exit_code == 0 and term("fallback-success").message is None
    rerun = ended["rerun"].status.container_statuses[0]
    assert rerun.restart_count == 1 and rerun.last_state.terminated.message == "first run"
    assert rerun.state.terminated.exit_code == 0 and rerun.state.terminated.message is None
    # Messages went to the pods' own files, not to the host's paths (mount points only; the
    # host's /dev/termination-log may exist, written by a process outside any pod).
    for name in list(ended):
        core.delete_namespaced_pod(name, ns)
    wait_until(lambda: not core.list_namespaced_pod(ns).items, 30, "the pods deleted")
    wait_until(lambda: not nodeagent.leftovers(ns), 15, "sandboxes removed")
    assert not Path(custom).exists()
    host_default = Path("/dev/termination-log")
    host_text = host_default.read_text(errors="replace") if host_default.is_file() else ""
    assert "bye from /dev/termination-log" not in host_text and "first run" not in host_text, host_text


def test_pods_reach_the_host_address_and_name_but_not_its_loopback(nodeagent, k8s_namespace):
    """A server on the host address (the bridge's, exported as TFK8S_NODEAGENT_HOST_ADDR)
    answers pods, also by this machine's host name (every pod's hosts file maps it); a
    server on the host's 127.0.0.1 does not: a pod's 127.0.0.1 is its own loopback."""
    import http.server
    import threading

    core, ns = nodeagent.cluster.core_v1, k8s_namespace

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = f"hello {self.client_address[0]}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    servers = [http.server.ThreadingHTTPServer((addr, 0), Hello) for addr in (nodeagent.host_addr, "127.0.0.1")]
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    on_host_addr, on_loopback = (srv.server_address[1] for srv in servers)
    probe = ("import socket, urllib.request as u\n"
             f"print(socket.gethostbyname({nodeagent.host_name!r}))\n"
             f"for url in ('http://{nodeagent.host_addr}:{on_host_addr}/', 'http://{nodeagent.host_name}:{on_host_addr}/',"
             f" 'http://127.0.0.1:{on_loopback}/'):\n"
             "    try:\n"
             "        print(u.urlopen(url, timeout=5).read().decode())\n"
             "    except OSError as exc:\n"
             "        print('error', getattr(exc, 'reason', exc))\n")
    try:
        core.create_namespaced_pod(ns, _pod("probe", "", container={"command": ["python3", "-c", probe]}))
        p = wait_until(_phase(core, ns, "probe", "Failed", "Succeeded"), 60, "probe ends")
        out = _log(core, ns, "probe").splitlines()
    finally:
        for srv in servers:
            srv.shutdown()
            srv.server_close()
    assert p.status.phase == "Succeeded", out
    assert out[0] == nodeagent.host_addr
    assert out[1] == out[2] == f"hello {p.status.pod_ip}", out
    assert out[3] == "error [Errno 111] Connection refused", out
