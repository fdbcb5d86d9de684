"""The devstack's real node (``devstack/components/node``): containerd, kubelet, CNI, CoreDNS,
kube-router's NetworkPolicy firewall, on node ``tfk8s-node-0``.

The module brings the node up through ``devstack/up node`` (idempotent: a no-op when it is up;
it also starts the control plane and the registry and pushes the training image) and fails,
never skips, when it cannot. Every pod here selects the node and tolerates its taint; images
come from the devstack registry with a pull secret made of its auth file.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.k8s import DEVSTACK, K8sCluster, _parse_exports
from tests.fixtures.realnode import CONNECT
from tests.fixtures.waiting import wait_until
from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.admission import admit_pod
from tfk8s_airflow.job.policy import DeploymentPolicy

# The first test's setup may build the node's binaries (~16 min cold) and the images (~3.5 min).
pytestmark = [pytest.mark.k8s, pytest.mark.realnode, pytest.mark.timeout(2400)]

NODE_UP_TIMEOUT_S = int(os.environ.get("TFK8S_NODE_UP_TIMEOUT", "3600"))
PULL_SECRET = "tfk8s-registry"
NODE_LABEL = ("tfk8s.io/real-node", "true")


@pytest.fixture(scope="module")
def real_node(k8s_cluster: K8sCluster) -> dict[str, str]:
    """``devstack/up node``, then ``devstack/env node``: the node's settings."""
    t0 = time.monotonic()
    try:
        up = subprocess.run([str(DEVSTACK / "up"), "node"], capture_output=True, text=True, timeout=NODE_UP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"devstack/up node did not finish within {NODE_UP_TIMEOUT_S}s:\n{exc.stderr or ''}", pytrace=False)
    if up.returncode != 0:
        pytest.fail(f"devstack/up node failed (exit {up.returncode}); the real node is required.\n"
                    f"--- stderr ---\n{up.stderr[-8000:]}", pytrace=False)
    print(f"\n[timing] devstack/up node: {time.monotonic() - t0:.1f}s")
    out = subprocess.run([str(DEVSTACK / "env"), "node"], capture_output=True, text=True, timeout=60)
    env = _parse_exports(out.stdout)
    need = {"TFK8S_NODE_NAME", "TFK8S_TRAINING_IMAGE", "TFK8S_REGISTRY", "TFK8S_NODE_HOST_ADDR",
            "TFK8S_REGISTRY_AUTH_FILE"}
    if need - env.keys():
        pytest.fail(f"devstack/env node did not print {sorted(need - env.keys())}:\n{out.stdout}{out.stderr}",
                    pytrace=False)
    return env


def _pull_secret(core: Any, namespace: str, auth_file: str) -> None:
    from kubernetes import client

    with open(auth_file, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=PULL_SECRET), type="kubernetes.io/dockerconfigjson",
        data={".dockerconfigjson": data}))


@pytest.fixture
def ns(k8s_cluster: K8sCluster, k8s_namespace: str, real_node: dict[str, str]) -> str:
    """A test namespace with the registry's pull secret."""
    _pull_secret(k8s_cluster.core_v1, k8s_namespace, real_node["TFK8S_REGISTRY_AUTH_FILE"])
    return k8s_namespace


def _pod(name: str, image: str, command: list[str], *, labels: dict[str, str] | None = None,
         pull_secret: bool = True, pull_policy: str = "IfNotPresent", memory_limit: str | None = None,
         hostname: str | None = None, subdomain: str | None = None,
         readiness_fails: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image, "command": command,
                                 "imagePullPolicy": pull_policy}
    if memory_limit:
        container["resources"] = {"limits": {"memory": memory_limit, "cpu": "500m"},
                                  "requests": {"memory": memory_limit, "cpu": "100m"}}
    if readiness_fails:
        container["readinessProbe"] = {"exec": {"command": ["false"]}, "periodSeconds": 2}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {NODE_LABEL[0]: NODE_LABEL[1]},
        "tolerations": [{"key": NODE_LABEL[0], "operator": "Equal", "value": NODE_LABEL[1],
                         "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [container],
    }
    if pull_secret:
        spec["imagePullSecrets"] = [{"name": PULL_SECRET}]
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def _create(core: Any, ns: str, body: dict[str, Any]) -> None:
    core.create_namespaced_pod(ns, body)


def _finished(core: Any, ns: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, ns)
    return pod if pod.status.phase in ("Succeeded", "Failed") else None


def _logs(core: Any, ns: str, name: str) -> str:
    try:
        return core.read_namespaced_pod_log(name, ns)
    except Exception as exc:  # noqa: BLE001 - only for a failure message
        return f"<no log: {exc}>"


def _events(core: Any, ns: str, name: str) -> list[str]:
    evs = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return [f"{e.reason}: {e.message}" for e in evs]


def _waiting_reason(core: Any, ns: str, name: str) -> str | None:
    pod = core.read_namespaced_pod(name, ns)
    for st in pod.status.container_statuses or []:
        if st.state and st.state.waiting:
            return st.state.waiting.reason
    return None


def _run_to_end(core: Any, ns: str, name: str, timeout: float) -> Any:
    """Wait for the pod to end; on a timeout, fail with its status and events."""
    def status() -> str:
        pod = core.read_namespaced_pod(name, ns)
        return f"phase {pod.status.phase}, {pod.status.container_statuses}\nevents: {_events(core, ns, name)}"

    return wait_until(lambda: _finished(core, ns, name), timeout, f"pod {name} to finish", 0.5, on_fail=status)


def _assert_succeeded(core: Any, ns: str, pod: Any) -> None:
    name = pod.metadata.name
    assert pod.status.phase == "Succeeded", (
        f"pod {name} ended {pod.status.phase}: {pod.status.container_statuses}\n"
        f"log:\n{_logs(core, ns, name)}\nevents: {_events(core, ns, name)}")


def test_node_ready_with_containerd(k8s_cluster: K8sCluster, real_node: dict[str, str]):
    out = k8s_cluster.kubectl_run("get", "node", real_node["TFK8S_NODE_NAME"], "-o", "json")
    node = json.loads(out.stdout)
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    assert ready == "True", node["status"]["conditions"]
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert node["metadata"]["labels"][NODE_LABEL[0]] == NODE_LABEL[1]
    assert node["metadata"]["labels"]["type"] == "local"  # what the example DAG's form (node_type) selects
    # The retired node agent's Node is gone, or its agent still runs it (an older checkout's devstack):
    # devstack/up node deletes it once it is not Ready.
    retired = k8s_cluster.kubectl_run("get", "node", "tfk8s-local-0", "--ignore-not-found", "-o",
                                      'jsonpath={.status.conditions[?(@.type=="Ready")].status}').stdout
    assert retired in ("", "True"), retired
    assert {"key": NODE_LABEL[0], "value": NODE_LABEL[1], "effect": "NoSchedule"} in node["spec"]["taints"]
    addrs = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addrs["InternalIP"] == real_node["TFK8S_NODE_HOST_ADDR"]


def test_training_image_runs_with_pull_secret(k8s_cluster: K8sCluster, real_node: dict[str, str], ns: str):
    core = k8s_cluster.core_v1
    t0 = time.monotonic()
    _create(core, ns, _pod("trainer", real_node["TFK8S_TRAINING_IMAGE"],
                           ["python3", "-c", "import tensorflow, tfk8s_airflow.pod.trainer.cli; print('imported')"]))
    pod = _run_to_end(core, ns, "trainer", 600)
    elapsed = time.monotonic() - t0
    _assert_succeeded(core, ns, pod)
    assert "imported" in _logs(core, ns, "trainer")
    cid = pod.status.container_statuses[0].container_id
    assert cid.startswith("containerd://"), cid
    pulled = [e for e in _events(core, ns, "trainer") if e.startswith("Pulled")]
    print(f"\n[timing] trainer pod create -> Succeeded: {elapsed:.1f}s; {pulled}")


def test_image_pull_fails_without_secret_or_reference(k8s_cluster: K8sCluster, real_node: dict[str, str], ns: str):
    core = k8s_cluster.core_v1
    image = real_node["TFK8S_TRAINING_IMAGE"]
    # Always: the kubelet asks the registry even when the node has the image already.
    _create(core, ns, _pod("nosecret", image, ["true"], pull_secret=False, pull_policy="Always"))
    missing = f"{real_node['TFK8S_REGISTRY']}/tfk8s/trainer:not-in-the-registry"
    _create(core, ns, _pod("missing", missing, ["true"]))
    for name in ("nosecret", "missing"):
        reason = wait_until(lambda name=name: _waiting_reason(core, ns, name) in ("ErrImagePull", "ImagePullBackOff")
                          and _waiting_reason(core, ns, name), 120, f"pod {name} to fail its image pull")
        assert reason in ("ErrImagePull", "ImagePullBackOff")
        assert core.read_namespaced_pod(name, ns).status.phase == "Pending"
    failed = " ".join(_events(core, ns, "nosecret"))
    assert "401" in failed or "unauthorized" in failed.lower() or "authorization failed" in failed.lower(), failed
    failed = " ".join(_events(core, ns, "missing"))
    assert "not found" in failed.lower(), failed


def test_dns_resolves_a_pod_before_it_is_ready(k8s_cluster: K8sCluster, real_node: dict[str, str], ns: str):
    from kubernetes import client

    core = k8s_cluster.core_v1
    image = real_node["TFK8S_TRAINING_IMAGE"]
    core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="grp"),
        spec=client.V1ServiceSpec(cluster_ip="None", publish_not_ready_addresses=True,
                                  selector={"app": "dns"},
                                  ports=[client.V1ServicePort(name="p", port=2222)])))
    _create(core, ns, _pod("peer", image, ["sleep", "600"], labels={"app": "dns"}, hostname="peer",
                           subdomain="grp", readiness_fails=True))
    peer = wait_until(lambda: (p := core.read_namespaced_pod("peer", ns)).status.pod_ip and p, 180, "pod peer's IP")
    fqdn = f"peer.grp.{ns}.svc.cluster.local"
    host = real_node.get("TFK8S_NODE_HOST_NAME") or os.uname().nodename
    script = (
        "import socket, sys, time\n"
        f"deadline = time.time() + 60\n"
        "while True:\n"
        "    try:\n"
        f"        print('peer', socket.gethostbyname({fqdn!r})); break\n"
        "    except OSError as e:\n"
        "        if time.time() > deadline: raise\n"
        "        time.sleep(1)\n"
        f"print('host', socket.gethostbyname({host!r}))\n"
        "print(open('/etc/resolv.conf').read())\n")
    _create(core, ns, _pod("asker", image, ["python3", "-c", script], labels={"app": "dns"}, hostname="asker",
                           subdomain="grp", readiness_fails=True))
    pod = _run_to_end(core, ns, "asker", 180)
    _assert_succeeded(core, ns, pod)
    out = _logs(core, ns, "asker")
    assert f"peer {peer.status.pod_ip}" in out, out
    assert f"host {real_node['TFK8S_NODE_HOST_ADDR']}" in out, out
    assert f"nameserver {real_node['TFK8S_NODE_HOST_ADDR']}" in out, out
    peer = core.read_namespaced_pod("peer", ns)
    assert peer.status.phase == "Running"
    assert not peer.status.container_statuses[0].ready, "the peer must not be Ready (its probe fails)"


SERVE = (
    "import socket\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', 8080)); s.listen(16); print('listening', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); c.sendall(b'ok'); c.close()\n")


def test_network_policy_is_enforced(k8s_cluster: K8sCluster, real_node: dict[str, str], ns: str):
    from kubernetes import client

    core = k8s_cluster.core_v1
    image = real_node["TFK8S_TRAINING_IMAGE"]
    _create(core, ns, _pod("server", image, ["python3", "-c", SERVE], labels={"app": "server"}))
    server = wait_until(lambda: (p := core.read_namespaced_pod("server", ns)).status.phase == "Running"
                      and p.status.pod_ip and p, 180, "the server pod to run")
    ip = server.status.pod_ip
    # Without a policy every pod reaches the server: what follows is the policy's doing.
    _create(core, ns, _pod("before", image, ["python3", "-c", CONNECT, ip, "8080", "allow"], labels={"role": "other"}))
    _assert_succeeded(core, ns, _run_to_end(core, ns, "before", 120))

    client.NetworkingV1Api(k8s_cluster.api_client).create_namespaced_network_policy(ns, {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "only-allowed"},
        "spec": {"podSelector": {"matchLabels": {"app": "server"}}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "allowed"}}}],
                              "ports": [{"protocol": "TCP", "port": 8080}]}]}})
    # The denied client ends well only after three failed connections in a row (it retries for
    # 60 s, so a policy programmed a little late still counts, and no policy at all fails it).
    _create(core, ns, _pod("denied", image, ["python3", "-c", CONNECT, ip, "8080", "deny"], labels={"role": "other"}))
    denied = _run_to_end(core, ns, "denied", 180)
    assert denied.status.phase == "Succeeded", f"the denied client got through:\n{_logs(core, ns, 'denied')}"
    _create(core, ns, _pod("allowed", image, ["python3", "-c", CONNECT, ip, "8080", "allow"],
                           labels={"role": "allowed"}))
    _assert_succeeded(core, ns, _run_to_end(core, ns, "allowed", 180))
    assert "connected b'ok'" in _logs(core, ns, "allowed")


def test_memory_limit_oom_kills(k8s_cluster: K8sCluster, real_node: dict[str, str], ns: str):
    core = k8s_cluster.core_v1
    _create(core, ns, _pod("oom", real_node["TFK8S_TRAINING_IMAGE"],
                           ["python3", "-c", "x = b'\\x01' * (256 << 20); print(len(x))"], memory_limit="64Mi"))
    pod = _run_to_end(core, ns, "oom", 180)
    assert pod.status.phase == "Failed", pod.status
    term = pod.status.container_statuses[0].state.terminated
    assert term.reason == "OOMKilled", term
    assert term.exit_code == 137, term


# ----------------------------------------------------------------- read-only means read-only
# A training pod with a writable mount of ``<volume>/tfk8s`` plants ``link -> ../serving``. The kubelet
# follows such a link when it bind-mounts a hostPath: the test shows it does (a pod reading through the
# link reads the served model). The admission (``admit_pod``, the package's one admission of every pod)
# refuses a writable mount through the link before anything is created; the same path mounted read-only
# is admitted, and on the real node a write through it fails with a read-only file system, as does a
# write to the read-only root itself, which the pod asked writable. The host's file is unchanged.

SECURE = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
          "seccompProfile": {"type": "RuntimeDefault"}}

WRITE = """
import sys
if len(sys.argv) > 2:
    print(open(sys.argv[1]).read())
try:
    with open(sys.argv[1], "w") as f:
        f.write("overwritten")
    print("WROTE")
except OSError as exc:
    print("REFUSED", exc.errno, exc.strerror)
"""


def _mounting(name: str, image: str, host_path: str, command: list[str], read_only: bool = False) -> dict[str, Any]:
    pod = _pod(name, image, command)
    c = pod["spec"]["containers"][0]
    c["securityContext"] = copy.deepcopy(SECURE)
    c["volumeMounts"] = [{"name": "v", "mountPath": "/v", **({"readOnly": True} if read_only else {})}]
    pod["spec"]["volumes"] = [{"name": "v", "hostPath": {"path": host_path, "type": "Directory"}}]
    return pod


def test_a_planted_link_gives_no_writable_path_into_the_read_only_tree(k8s_cluster, real_node, ns, tmp_path: Path):
    core, image = k8s_cluster.core_v1, real_node["TFK8S_TRAINING_IMAGE"]
    volume = tmp_path / "volume"
    (volume / "tfk8s").mkdir(parents=True)
    (volume / "serving" / "model").mkdir(parents=True)
    weights = volume / "serving" / "model" / "weights"
    weights.write_text("v1")
    os.chmod(tmp_path, 0o755)
    policy = DeploymentPolicy(allowed_host_paths=(str(volume),), read_only_host_paths=(f"{volume}/serving",))

    # A training pod's writable mount of tfk8s/ (admitted as it is) plants the link.
    planter = admit_pod(_mounting("planter", image, f"{volume}/tfk8s",
                                  ["python", "-c", "import os; os.symlink('../serving', '/v/link'); print('PLANTED')"]),
                        policy)
    _create(core, ns, planter)
    done = _run_to_end(core, ns, "planter", 300)
    assert done.status.phase == "Succeeded", _logs(core, ns, "planter")
    assert os.readlink(volume / "tfk8s" / "link") == "../serving"

    # A writable mount through it: refused by the admission, nothing created.
    with pytest.raises(SpecError, match="is a symbolic link"):
        admit_pod(_mounting("through", image, f"{volume}/tfk8s/link", ["python", "-c", WRITE, "/v/model/weights"]),
                  policy)

    # Read-only through it: admitted; the kubelet follows the link (the model is read), and a write fails.
    reader = admit_pod(_mounting("reader", image, f"{volume}/tfk8s/link",
                                 ["python", "-c", WRITE, "/v/model/weights", "read"],
                                 read_only=True), policy)
    _create(core, ns, reader)
    done = _run_to_end(core, ns, "reader", 300)
    log = _logs(core, ns, "reader")
    assert done.status.phase == "Succeeded", log
    assert "v1" in log.split("REFUSED")[0], log  # the model read through the link: the kubelet followed it
    assert "REFUSED 30" in log and "WROTE" not in log, log  # EROFS

    # The read-only root itself, asked writable: mounted read-only all the same.
    served = admit_pod(_mounting("served", image, f"{volume}/serving", ["python", "-c", WRITE, "/v/model/weights"]),
                       policy)
    assert served["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is True
    _create(core, ns, served)
    done = _run_to_end(core, ns, "served", 300)
    log = _logs(core, ns, "served")
    assert done.status.phase == "Succeeded" and "REFUSED 30" in log, log
    assert weights.read_text() == "v1"
