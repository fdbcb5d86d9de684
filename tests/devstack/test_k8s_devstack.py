"""Acceptance tests of the devstack Kubernetes control plane and its KWOK pod simulation.

Everything here talks to the real kube-apiserver started by ``devstack/up k8s``; pods run
on KWOK fake nodes and follow the annotation contract of devstack/components/k8s/README.md.
"""
from __future__ import annotations

import json
import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.fixtures.waiting import wait_until

# serial: its pods select no node (they may land on another test's nodes), it adds a node, and it asserts the
# KWOK nodes carry no taint.
pytestmark = [pytest.mark.k8s, pytest.mark.serial]

FAKE_NODES = ("kwok-node-0", "kwok-node-1")


def _pod(name: str, annotations: dict[str, str] | None = None, restart_policy: str = "Never",
         limits: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations or {},
                                     labels={"app": "devstack-test"}),
        spec=client.V1PodSpec(
            restart_policy=restart_policy,
            containers=[client.V1Container(
                name="main", image="registry.invalid/tfk8s/trainer:1",
                resources=client.V1ResourceRequirements(limits=limits) if limits else None,
            )],
        ),
    )


def _read(core, ns: str, name: str) -> client.V1Pod:
    return core.read_namespaced_pod(name, ns)


def _phase_is(core, ns, name, *phases):
    def check():
        pod = _read(core, ns, name)
        return pod if pod.status.phase in phases else None
    return check


def _log(core, ns: str, name: str, **kwargs) -> str:
    # The generated client turns the text body into the repr of bytes ("b'...'") when it
    # preloads it; read the raw response instead.
    return core.read_namespaced_pod_log(name, ns, _preload_content=False, **kwargs).data.decode()


def _condition(pod: client.V1Pod, ctype: str):
    for c in pod.status.conditions or []:
        if c.type == ctype:
            return c
    return None


def test_fake_nodes_ready_with_gpu_capacity(k8s_cluster):
    nodes = {n.metadata.name: n for n in k8s_cluster.core_v1.list_node(label_selector="type=kwok").items}
    assert set(FAKE_NODES) <= set(nodes)
    for name in FAKE_NODES:
        node = nodes[name]
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", node.status.conditions
        assert node.status.allocatable["nvidia.com/gpu"] == "4"
        assert node.status.allocatable["cpu"] == "32"
        assert node.status.capacity["memory"] == "128Gi"
        assert not node.spec.taints, node.spec.taints


def test_kubectl_get_nodes(k8s_cluster):
    out = k8s_cluster.kubectl_run("get", "nodes", "-l", "type=kwok", "--no-headers").stdout
    for name in FAKE_NODES:
        assert any(line.split()[:2] == [name, "Ready"] for line in out.splitlines()), out


def test_gpu_limit_beyond_any_node_is_unschedulable(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod("too-many-gpus", limits={"nvidia.com/gpu": "8"}))

    def unschedulable():
        pod = _read(core, k8s_namespace, "too-many-gpus")
        cond = _condition(pod, "PodScheduled")
        return pod if cond and cond.status == "False" and cond.reason == "Unschedulable" else None

    pod = wait_until(unschedulable, 30, "PodScheduled=False/Unschedulable")
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None
    assert "nvidia.com/gpu" in _condition(pod, "PodScheduled").message


def test_plain_pod_runs_ready_and_stays(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod("ps-0", restart_policy="Always"))
    pod = wait_until(_phase_is(core, k8s_namespace, "ps-0", "Running"), 30, "pod Running")
    assert pod.spec.node_name in FAKE_NODES
    wait_until(lambda: _condition(_read(core, k8s_namespace, "ps-0"), "Ready").status == "True", 15, "Ready")
    pod = _read(core, k8s_namespace, "ps-0")
    assert pod.status.pod_ip and pod.status.container_statuses[0].state.running
    # A server never exits on its own: still running a few seconds later.
    time.sleep(3)
    pod = _read(core, k8s_namespace, "ps-0")
    assert pod.status.phase == "Running" and pod.status.container_statuses[0].restart_count == 0


def test_pod_annotated_to_succeed_ends_succeeded(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod(
        "worker-0", {"tfk8s.io/sim-duration": "2s", "tfk8s.io/sim-exit-code": "0"}))
    wait_until(_phase_is(core, k8s_namespace, "worker-0", "Running"), 30, "pod Running")
    pod = wait_until(_phase_is(core, k8s_namespace, "worker-0", "Succeeded", "Failed"), 30, "pod finished")
    assert pod.status.phase == "Succeeded"
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"


def test_pod_annotated_to_fail_ends_failed_with_exit_code(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod(
        "worker-1", {"tfk8s.io/sim-duration": "1s", "tfk8s.io/sim-exit-code": "3"}))
    pod = wait_until(_phase_is(core, k8s_namespace, "worker-1", "Succeeded", "Failed"), 40, "pod finished")
    assert pod.status.phase == "Failed"
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 3 and term.reason == "Error"


def test_on_failure_restarts_in_place(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod(
        "flaky", {"tfk8s.io/sim-duration": "1s", "tfk8s.io/sim-exit-code": "2"},
        restart_policy="OnFailure"))

    def restarted_twice():
        pod = _read(core, k8s_namespace, "flaky")
        statuses = pod.status.container_statuses or []
        return pod if statuses and statuses[0].restart_count >= 2 else None

    pod = wait_until(restarted_twice, 40, "restartCount >= 2")
    status = pod.status.container_statuses[0]
    assert pod.status.phase == "Running"
    assert status.last_state.terminated.exit_code == 2


def test_on_failure_recovers_after_sim_restarts(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod(
        "recovers", {"tfk8s.io/sim-duration": "1s", "tfk8s.io/sim-exit-code": "1",
                     "tfk8s.io/sim-restarts": "2"},
        restart_policy="OnFailure"))
    pod = wait_until(_phase_is(core, k8s_namespace, "recovers", "Succeeded", "Failed"), 60, "pod finished")
    status = pod.status.container_statuses[0]
    assert pod.status.phase == "Succeeded"
    assert status.restart_count == 2
    assert status.state.terminated.exit_code == 0
    assert status.last_state.terminated.exit_code == 1


def test_image_pull_failure_shows_waiting_reason(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod("bad-image", {"tfk8s.io/sim-image-pull": "fail"}))

    def waiting_reason():
        pod = _read(core, k8s_namespace, "bad-image")
        for s in pod.status.container_statuses or []:
            if s.state and s.state.waiting and s.state.waiting.reason in ("ErrImagePull", "ImagePullBackOff"):
                return pod
        return None

    pod = wait_until(waiting_reason, 30, "ErrImagePull/ImagePullBackOff")
    assert pod.status.phase == "Pending"
    wait_until(lambda: _read(core, k8s_namespace, "bad-image").status.container_statuses[0]
             .state.waiting.reason == "ImagePullBackOff", 15, "ImagePullBackOff")


def test_pod_deletion_completes(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod("doomed", restart_policy="Always"))
    wait_until(_phase_is(core, k8s_namespace, "doomed", "Running"), 30, "pod Running")
    core.delete_namespaced_pod("doomed", k8s_namespace)  # default grace period, as a user would

    def gone():
        try:
            _read(core, k8s_namespace, "doomed")
            return False
        except ApiException as exc:
            return exc.status == 404

    wait_until(gone, 30, "pod removed")


def test_pod_logs_are_served(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod("chatty", restart_policy="Always"))
    wait_until(_phase_is(core, k8s_namespace, "chatty", "Running"), 30, "pod Running")
    text = _log(core, k8s_namespace, "chatty", container="main")
    assert "KWOK fake node" in text


def test_pod_can_get_its_own_log(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_pod(k8s_namespace, _pod("worker-7", restart_policy="Always"))
    wait_until(_phase_is(core, k8s_namespace, "worker-7", "Running"), 30, "pod Running")
    k8s_cluster.set_pod_log(k8s_namespace, "worker-7", ["step 1 loss=0.9", "step 2 loss=0.4"],
                            previous=["crashed: OOM"])

    def own_log():
        text = _log(core, k8s_namespace, "worker-7", container="main")
        return text if "loss=0.4" in text else None

    assert wait_until(own_log, 15, "the pod's own log") == "step 1 loss=0.9\nstep 2 loss=0.4\n"
    assert _log(core, k8s_namespace, "worker-7", tail_lines=1) == "step 2 loss=0.4\n"
    assert _log(core, k8s_namespace, "worker-7", previous=True) == "crashed: OOM\n"
    out = k8s_cluster.kubectl_run("logs", "-n", k8s_namespace, "worker-7").stdout
    assert out == "step 1 loss=0.9\nstep 2 loss=0.4\n"


def test_kwok_ignores_pods_on_nodes_it_does_not_manage(k8s_cluster, k8s_namespace):
    """A node without the kwok annotation (e.g. the devstack's real node) keeps its pods untouched."""
    core = k8s_cluster.core_v1
    node_name = f"plain-{k8s_namespace[-6:]}"
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=node_name, labels={"type": "plain"})))
    try:
        pod = _pod("elsewhere", restart_policy="Always")
        pod.spec.node_name = node_name
        core.create_namespaced_pod(k8s_namespace, pod)
        time.sleep(3)
        pod = _read(core, k8s_namespace, "elsewhere")
        assert pod.status.phase == "Pending"
        assert not pod.status.container_statuses
        node = core.read_node(node_name)
        assert not [c for c in node.status.conditions or [] if c.type == "Ready" and c.status == "True"]
    finally:
        core.delete_node(node_name)


def test_headless_service_with_publish_not_ready_addresses(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    svc = core.create_namespaced_service(k8s_namespace, client.V1Service(
        metadata=client.V1ObjectMeta(name="job-abc"),
        spec=client.V1ServiceSpec(
            cluster_ip="None", publish_not_ready_addresses=True,
            selector={"tfk8s.io/job": "job-abc"},
            ports=[client.V1ServicePort(name="tf", port=2222, target_port=2222)],
        ),
    ))
    assert svc.spec.cluster_ip == "None"
    assert svc.spec.publish_not_ready_addresses is True
    read = core.read_namespaced_service("job-abc", k8s_namespace)
    assert read.spec.cluster_ip == "None" and read.spec.publish_not_ready_addresses is True


def test_invalid_pod_name_is_rejected_by_the_api_server(k8s_cluster, k8s_namespace):
    with pytest.raises(ApiException) as err:
        k8s_cluster.core_v1.create_namespaced_pod(k8s_namespace, _pod("Bad_Name"))
    assert err.value.status == 422
    status = json.loads(err.value.body)
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')
    assert "RFC 1123" in status["message"]
    assert status["details"]["causes"][0]["field"] == "metadata.name"


def test_rbac_denies_an_unprivileged_service_account(k8s_cluster, k8s_namespace):
    core = k8s_cluster.core_v1
    core.create_namespaced_service_account(
        k8s_namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody")))
    token = core.create_namespaced_service_account_token(
        "nobody", k8s_namespace,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
            audiences=[], expiration_seconds=600)),
    ).status.token

    admin_conf = k8s_cluster.api_client.configuration
    conf = client.Configuration()
    conf.host = admin_conf.host
    conf.ssl_ca_cert = admin_conf.ssl_ca_cert
    conf.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(conf) as sa_client:
        sa_core = client.CoreV1Api(sa_client)
        # The token authenticates (403 names the ServiceAccount, not 401) but RBAC grants nothing.
        with pytest.raises(ApiException) as err:
            sa_core.list_namespaced_pod("kube-system")
        assert err.value.status == 403
        assert f"system:serviceaccount:{k8s_namespace}:nobody" in err.value.body
        with pytest.raises(ApiException) as err:
            sa_core.list_namespaced_pod(k8s_namespace)
        assert err.value.status == 403
