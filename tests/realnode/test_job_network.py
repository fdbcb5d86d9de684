"""The job's own NetworkPolicy, enforced on the real node (kube-router's firewall).

Real parts: Airflow's ``dag.test()`` of a job (setup, the replica tasks, the sensor, teardown) against
the devstack's kube-apiserver, its pods on the real node ``tfk8s-node-0`` in the training image, their
names from CoreDNS, and kube-router enforcing the NetworkPolicy setup created with the job. The replicas
run ``tests/tf/programs/serve_and_reach.py`` (each serves its TF port; the worker reaches the PS by its
name): what is checked is who may open a connection to a port, which a plain TCP server shows as a
TensorFlow gRPC server would. Without enforcement (a cluster whose network plugin ignores
NetworkPolicies) every "cannot" below connects and the test fails.
"""
from __future__ import annotations

import json
import time

import pytest

from tests.fixtures.realnode import CONNECT, REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS
from tests.fixtures.waiting import wait_until
from tests.realpods.support import REPO, JobWatch, in_background, report

pytestmark = [pytest.mark.k8s, pytest.mark.realnode, pytest.mark.airflow, pytest.mark.timeout(900)]

PROGRAMS = REPO / "tests" / "tf" / "programs"
TF_PORT, TENSORBOARD_PORT = 2222, 6006


def _probe(name: str, image: str, labels: dict[str, str], host: str, port: int, mode: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"restartPolicy": "Never", "nodeSelector": REAL_NODE_SELECTOR,
                     "tolerations": REAL_NODE_TOLERATIONS, "terminationGracePeriodSeconds": 1,
                     "automountServiceAccountToken": False, "enableServiceLinks": False,
                     "containers": [{"name": "probe", "image": image, "imagePullPolicy": "IfNotPresent",
                                     "command": ["python3", "-c", CONNECT, host, str(port), mode]}]}}


def _ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_only_the_jobs_pods_reach_its_tf_port_and_its_tensorboard_only_from_the_ingress(
        realnode, k8s_namespace, more_namespaces, airflow_db, tmp_path, monkeypatch):
    import tfk8s_realpod_scenarios as s

    core, ns = realnode.cluster.core_v1, k8s_namespace
    viewers, stranger = more_namespaces(), more_namespaces()  # the TensorBoard's ingress; any other namespace
    for name in (ns, viewers, stranger):
        realnode.grant_pull(name)
    monkeypatch.setenv("AIRFLOW__TFK8S__TENSORBOARD_INGRESS", f"namespace:{viewers}")
    monkeypatch.setenv("AIRFLOW__TFK8S__ALLOWED_HOST_PATHS", f"{tmp_path},{PROGRAMS}")
    model = tmp_path / "model"
    model.mkdir()

    def probe_from_outside_the_job() -> dict:
        """Once the PS runs and the TensorBoard is Ready: each probe pod's outcome and log. Whatever happens,
        the worker is let go (``network.done``), so the run ends."""
        try:
            ps = wait_until(lambda: next((p for p in core.list_namespaced_pod(ns).items
                                          if p.spec.hostname == "ps-0" and p.status.phase == "Running"
                                          and p.status.pod_ip), None), 300, "the job's PS to run")
            tb = wait_until(lambda: next((p for p in core.list_namespaced_pod(
                ns, label_selector="app.kubernetes.io/component=tensorboard").items if _ready(p)), None),
                300, "the job's TensorBoard to be Ready")
            job = ps.metadata.labels["tfk8s.io/job"]
            probes = {  # name: (namespace, labels, address, port, mode)
                "another-job": (ns, {"tfk8s.io/job": f"{job}-x", "tfk8s.io/role": "worker"},
                                ps.status.pod_ip, TF_PORT, "deny"),
                "stranger-tf": (stranger, {}, ps.status.pod_ip, TF_PORT, "deny"),
                "stranger-tb": (stranger, {}, tb.status.pod_ip, TENSORBOARD_PORT, "deny"),
                "viewer-tf": (viewers, {}, ps.status.pod_ip, TF_PORT, "deny"),
                "viewer-tb": (viewers, {}, tb.status.pod_ip, TENSORBOARD_PORT, "allow"),
            }
            for name, (where, labels, host, port, mode) in probes.items():
                core.create_namespaced_pod(where, _probe(name, realnode.image, labels, host, port, mode))
            out = {}
            for name, (where, *_rest) in probes.items():
                pod = wait_until(lambda name=name, where=where: (p := core.read_namespaced_pod(name, where))
                                 .status.phase in ("Succeeded", "Failed") and p, 180, f"probe {name} to end")
                log = core.read_namespaced_pod_log(name, where, _preload_content=False).data  # bytes, as sent
                out[name] = {"phase": pod.status.phase, "log": log.decode("utf-8", "replace")}
                core.delete_namespaced_pod(name, where, grace_period_seconds=0)
            return out
        finally:
            (model / "network.done").touch()

    t0 = time.monotonic()
    with JobWatch(realnode, ns) as watch:
        probed = in_background(probe_from_outside_the_job)
        dr = s.network.test(run_conf={"namespace": ns, "model_dir": str(model), "programs_dir": str(PROGRAMS)})
        outcomes = probed(timeout=120)
    report("job-network", time.monotonic() - t0,
           **{name: f"{o['phase']}: {o['log'].count('connected')} connected, {o['log'].count('failed')} failed"
              for name, o in outcomes.items()})
    assert dr.state == "success", [(ti.task_id, ti.state) for ti in dr.get_task_instances()]
    # The job's own pods reach each other: the worker reached the PS by its name (the headless Service).
    peer = json.loads((model / "worker-0.peer.json").read_text())
    assert peer.get("got") == "ok" and peer["peer"].startswith("ps-0.") and peer["peer"].endswith(f":{TF_PORT}"), \
        peer
    # Nothing else reaches the TF port: not a pod of another job in the namespace, not another namespace's,
    # not the TensorBoard's ingress; the TensorBoard only from its ingress. A "cannot" never connected once.
    for name in ("another-job", "stranger-tf", "stranger-tb", "viewer-tf"):
        assert outcomes[name]["phase"] == "Succeeded" and "connected" not in outcomes[name]["log"], \
            (name, outcomes[name])
    assert outcomes["viewer-tb"]["phase"] == "Succeeded", outcomes["viewer-tb"]
    assert "connected b'" in outcomes["viewer-tb"]["log"], outcomes["viewer-tb"]
    watch.assert_nothing_left()
