"""One admission wherever a pod is made: evaluation refuses what setup refuses, the form's image never
reaches the evaluation pod, and recovery checks the host paths again when it recreates the pods.

Real parts: Airflow's ``dag.test()``, the devstack's kube-apiserver with KWOK nodes, the real node for
the evaluation pod that must run (the deployment's evaluation image), the GlusterFS volume for the
planted link.
"""
from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest

from tests.dagrun import states, xcom

pytestmark = [pytest.mark.k8s, pytest.mark.airflow, pytest.mark.timeout(600)]
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "dags"))
sys.path.insert(0, str(REPO / "dags"))

FIVE = {"volumes[0].host_path", "service_account", "automount_service_account_token",
        "env.DB_PASSWORD.value_from.secret_key_ref.name", "pod_template.spec.containers[tensorflow].securityContext"
                                                          ".privileged"}


def _refused_fields(text: str) -> set[str]:
    return {f for f in FIVE if f"  - {f}: " in text}


def test_the_evaluation_refuses_the_five_problems_setup_refuses(k8s_cluster, k8s_namespace, airflow_db, capsys):
    import tfk8s_boundary_scenarios as scenarios

    core, ns = k8s_cluster.core_v1, k8s_namespace
    dr = scenarios.hostile_setup.test(run_conf={"namespace": ns})
    setup_log = "".join(capsys.readouterr())
    assert states(dr)[("setup", -1)] == "failed"
    dr = scenarios.hostile_eval.test(run_conf={"namespace": ns})
    eval_log = "".join(capsys.readouterr())
    assert states(dr)[("evaluate", -1)] == "failed"
    assert _refused_fields(setup_log) == FIVE == _refused_fields(eval_log), eval_log[-3000:]
    assert core.list_namespaced_pod(ns).items == []  # nothing was created, by either


def test_the_retraining_forms_image_does_not_reach_the_evaluation_pod(realnode, k8s_namespace, airflow_db,
                                                                      gluster_dir, monkeypatch, capsys):
    import tfk8s_boundary_scenarios as scenarios
    from kubernetes import watch

    core, ns = realnode.cluster.core_v1, k8s_namespace
    realnode.grant_pull(ns)
    monkeypatch.setenv("TFK8S_ALLOWED_HOST_PATHS", str(gluster_dir))
    monkeypatch.setenv("AIRFLOW__TFK8S__EVALUATION_IMAGE", realnode.image)  # the deployment's evaluator image
    seen: list[tuple[str, list[str], list[str]]] = []
    stop = threading.Event()

    def observe() -> None:  # every pod the evaluation creates, as the API server stored it
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_pod, ns, timeout_seconds=120):
            pod = event["object"]
            seen.append((pod.metadata.name, [c.image for c in pod.spec.containers],
                         [e.name for c in pod.spec.containers for e in (c.env or [])]))
            if stop.is_set():
                w.stop()

    thread = threading.Thread(target=observe, daemon=True)
    thread.start()
    dr = scenarios.form_image.test(run_conf={"namespace": ns, "image": "registry.example.com/form/chosen:666",
                                             "root": str(gluster_dir)})
    stop.set()
    log = "".join(capsys.readouterr())
    assert ("evaluate", -1) in states(dr)
    assert seen, "the evaluation created no pod: " + log[-2000:]
    images = {image for _, imgs, _ in seen for image in imgs}
    assert images == {realnode.image}, images  # the deployment's evaluation_image
    assert "registry.example.com/form/chosen:666" not in log.split("evaluating", 1)[-1].split("\n", 1)[0]


def test_a_link_planted_before_a_recovery_is_refused_at_recreation(k8s_cluster, k8s_namespace, airflow_db,
                                                                   gluster_dir, monkeypatch):
    import tfk8s_boundary_scenarios as scenarios
    from kubernetes_asyncio import config

    from tfk8s_airflow.exceptions import PermanentKubernetesApiError
    from tfk8s_airflow.job.run.records import JobRecord
    from tfk8s_airflow.job.run.recovery import RESTART_GROUP, Decision
    from tfk8s_airflow.k8s.relaunch import Recoverer

    core, ns = k8s_cluster.core_v1, k8s_namespace
    monkeypatch.setenv("TFK8S_ALLOWED_HOST_PATHS", str(gluster_dir))
    (gluster_dir / "scratch" / "x").mkdir(parents=True)
    dr = scenarios.setup_volumes.test(run_conf={"namespace": ns, "root": str(gluster_dir)})
    assert states(dr)[("setup", -1)] == "success", states(dr)
    record = JobRecord.from_xcom(xcom(dr, "setup", key="job"))
    before = {p.metadata.name: p.metadata.uid
              for p in core.list_namespaced_pod(ns, label_selector=record.selector).items}
    assert len(before) == 2

    # What a replica does through its writable mount of scratch/ (the same GlusterFS directory on the node):
    # x, a host path the job was admitted with, becomes a link to the node's root.
    (gluster_dir / "scratch" / "x").rmdir()
    os.symlink("/", gluster_dir / "scratch" / "x")

    async def recover() -> None:
        api = await config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
        try:
            recoverer = Recoverer(record, api)
            await recoverer.load()
            await recoverer.execute(Decision(RESTART_GROUP, "infrastructure", "exit code 137"), 0.0, _Log())
        finally:
            await api.close()

    with pytest.raises(PermanentKubernetesApiError) as info:
        asyncio.run(recover())
    text = str(info.value)
    assert "recreated pod" in text and "volumes[x].hostPath.path" in text, text
    assert "resolves (through a symbolic link) to" in text, text
    after = {p.metadata.name: p.metadata.uid
             for p in core.list_namespaced_pod(ns, label_selector=record.selector).items}
    assert after == before  # refused before anything was deleted or recreated
    svc = core.read_namespaced_service(record.service, ns)
    assert "tfk8s.io/attempts" not in (svc.metadata.annotations or {})  # no attempt recorded either


class _Log:
    def warning(self, *args, **kwargs) -> None:
        pass
