"""The staging lease on the real control plane: the Job controller ends a lease that is not renewed, the
TTL-after-finished controller deletes it, and the garbage collector deletes the pods and the Secret it owns;
a renewed lease keeps them; a Job of the lease's name that is not ours is never touched.

The pods here are never scheduled (a node selector no node has): what the lease does to them is the API
server's and the controllers' business, not a kubelet's. The whole path through Airflow (a run marked
failed before the triggerer ran the trigger, a killed triggerer) is tests/e2e/test_stage_cancel.py.
"""
from __future__ import annotations

import time

import pytest
from kubernetes import client

from tests.fixtures.waiting import wait_until
from tfk8s_airflow.exceptions import StagingError
from tfk8s_airflow.k8s import copypods, tokensecret
from tfk8s_airflow.staging.lease import lease_name

pytestmark = [pytest.mark.k8s]
KEY = "0a1b2c3d4e5f"


def _owned_pods(core, namespace: str, owner: dict, count: int = 2) -> list[str]:
    names = []
    for part in range(count):
        name = copypods.pod_name(KEY, part, 0)
        core.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {**copypods.task_labels(KEY), copypods.LABEL_PART: str(part)},
                         "ownerReferences": [owner]},
            "spec": {"nodeSelector": {"tfk8s.io/no-such-node": "x"}, "restartPolicy": "Never",
                     "containers": [{"name": "copy", "image": "img", "command": ["true"]}]}})
        names.append(name)
    return names


def _left(core, batch, namespace: str) -> list[str]:
    pods = [p.metadata.name for p in core.list_namespaced_pod(namespace).items]
    secrets = [s.metadata.name for s in core.list_namespaced_secret(namespace).items
               if s.metadata.name.startswith(f"tfk8s-stage-{KEY}-hdfs-")]
    jobs = [j.metadata.name for j in batch.list_namespaced_job(namespace).items]
    return pods + secrets + jobs


def test_a_lease_that_is_not_renewed_takes_its_pods_and_secret_with_it(k8s_cluster, k8s_namespace):
    core, batch = k8s_cluster.core_v1, client.BatchV1Api(k8s_cluster.api_client)
    owner = copypods.ensure_lease(batch, k8s_namespace, KEY, copypods.task_labels(KEY), 5, "img")
    assert owner["name"] == lease_name(KEY) and owner["uid"]
    _owned_pods(core, k8s_namespace, owner)
    tokensecret.create(core, k8s_namespace, KEY, "token-value", owner)
    assert len(_left(core, batch, k8s_namespace)) == 4
    wait_until(lambda: not _left(core, batch, k8s_namespace), 90, "the lease, its pods and its Secret gone")


def test_a_renewed_lease_keeps_its_pods_and_ending_it_deletes_them(k8s_cluster, k8s_namespace):
    core, batch = k8s_cluster.core_v1, client.BatchV1Api(k8s_cluster.api_client)
    labels = copypods.task_labels(KEY)
    owner = copypods.ensure_lease(batch, k8s_namespace, KEY, labels, 6, "img")
    pods = _owned_pods(core, k8s_namespace, owner)
    end = time.monotonic() + 20  # three leases long
    while time.monotonic() < end:
        again = copypods.ensure_lease(batch, k8s_namespace, KEY, labels, 6, "img")  # renews the same Job
        assert again == owner
        time.sleep(1.5)
    assert sorted(p.metadata.name for p in core.list_namespaced_pod(k8s_namespace).items) == pods
    assert copypods.end_lease(batch, k8s_namespace, KEY)
    wait_until(lambda: not _left(core, batch, k8s_namespace), 60, "the ended lease and its pods gone")
    assert not copypods.end_lease(batch, k8s_namespace, KEY)  # idempotent


def test_a_lease_that_ran_out_is_made_anew_for_the_next_round(k8s_cluster, k8s_namespace):
    batch = client.BatchV1Api(k8s_cluster.api_client)
    labels = copypods.task_labels(KEY)
    first = copypods.ensure_lease(batch, k8s_namespace, KEY, labels, 2, "img")
    wait_until(lambda: not batch.list_namespaced_job(k8s_namespace).items
             or any(c.type == "Failed" for j in batch.list_namespaced_job(k8s_namespace).items
                    for c in j.status.conditions or ()), 60, "the lease running out")
    second = copypods.ensure_lease(batch, k8s_namespace, KEY, labels, 300, "img")
    assert second["uid"] != first["uid"]
    (job,) = batch.list_namespaced_job(k8s_namespace).items
    assert job.metadata.uid == second["uid"] and job.spec.active_deadline_seconds == 300


@pytest.mark.parametrize("labelled", [False, True], ids=["foreign-labels", "our-labels-suspended"])
def test_a_job_of_the_leases_name_that_is_not_ours_is_left_alone(k8s_cluster, k8s_namespace, labelled):
    """A Job of the lease's name is taken only when it is ours and a lease: a foreign one, and one with the
    task's labels that would never end (suspended: its deadline does not run), are left alone."""
    batch = client.BatchV1Api(k8s_cluster.api_client)
    labels = copypods.task_labels(KEY) if labelled else {"team": "other"}
    foreign = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": lease_name(KEY), "labels": labels},
               "spec": {"parallelism": 0, "completions": 1, "suspend": labelled,
                        "template": {"spec": {"restartPolicy": "Never",
                                              "containers": [{"name": "c", "image": "img"}]}}}}
    if labelled:
        foreign["spec"].update(activeDeadlineSeconds=300, ttlSecondsAfterFinished=0)
    batch.create_namespaced_job(k8s_namespace, foreign)
    with pytest.raises(StagingError, match="not this staging task's lease"):
        copypods.ensure_lease(batch, k8s_namespace, KEY, copypods.task_labels(KEY), 300, "img")
    assert not copypods.end_lease(batch, k8s_namespace, KEY)
    job = batch.read_namespaced_job(lease_name(KEY), k8s_namespace)
    assert job.metadata.labels == labels and job.metadata.deletion_timestamp is None
    assert job.spec.active_deadline_seconds == (300 if labelled else None)
