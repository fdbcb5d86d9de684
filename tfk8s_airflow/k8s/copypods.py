"""Kubernetes operations of a staging fan-out: the task's lease (:mod:`tfk8s_airflow.staging.lease`),
create the copy pods under it, delete them (synchronous, on the provider's hook; the waiting and the
lease's renewal are :class:`tfk8s_airflow.triggers.staging.CopyPodsTrigger`'s)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes.client import BatchV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.contract import STAGING_NAME_PREFIX
from tfk8s_airflow.exceptions import StagingError
from tfk8s_airflow.k8s.client import api_client, call, wrap_api_error
from tfk8s_airflow.staging.lease import (
    has_expired,
    is_lease,
    lease_job,
    lease_name,
    owner_reference,
    renewed_deadline,
)

__all__ = ["LABEL_STAGING", "LABEL_PART", "copy_key", "pod_name", "create", "delete_all", "delete_one", "core",
           "batch", "ensure_lease", "end_lease", "task_labels"]

LABEL_STAGING = "tfk8s.io/staging"
LABEL_PART = "tfk8s.io/part"


def copy_key(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """A short hash for one staging task of one run: its pods' label value and name stem."""
    return hashlib.sha256(f"{dag_id}\0{run_id}\0{task_id}\0{map_index}".encode()).hexdigest()[:12]


def task_labels(key: str) -> dict[str, str]:
    """The labels of everything a staging task makes (its lease, pods and Secret)."""
    return {LABEL_STAGING: key, "app.kubernetes.io/managed-by": "tfk8s-airflow",
            "app.kubernetes.io/component": "staging"}


def pod_name(key: str, part: int, attempt: int) -> str:
    return f"{STAGING_NAME_PREFIX}{key}-p{part}-a{attempt}"


def core(conn_id: str | None) -> CoreV1Api:
    return CoreV1Api(api_client(conn_id))


def batch(conn_id: str | None) -> BatchV1Api:
    return BatchV1Api(api_client(conn_id))


def _ours(job: Any, labels: Mapping[str, str]) -> bool:
    """A lease Job of this task: its labels, and the shape of a lease (:func:`is_lease`)."""
    have = getattr(getattr(job, "metadata", None), "labels", None) or {}
    return all(have.get(k) == v for k, v in labels.items()) and is_lease(getattr(job, "spec", None))


def ensure_lease(api: BatchV1Api, namespace: str, key: str, labels: Mapping[str, str], lease_s: int, image: str,
                 security: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {}), *,
                 wait_s: float = 60.0) -> dict[str, Any]:
    """The owner reference of the task's lease Job: created, or (one of ours from an earlier round or try
    that has not run out) renewed. One that ran out is waited for until Kubernetes has deleted it (its pods
    with it) and made anew. A Job of that name that is not ours is left alone: :class:`StagingError`."""
    name = lease_name(key)
    body = lease_job(key, namespace, labels, lease_s, image, security)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            job = api.create_namespaced_job(namespace, body)
            return owner_reference(name, job.metadata.uid)
        except ApiException as exc:
            if exc.status != 409:
                raise wrap_api_error(f"creating the staging lease Job {namespace}/{name}", exc) from None
        try:
            job = api.read_namespaced_job(name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise wrap_api_error(f"reading the staging lease Job {namespace}/{name}", exc) from None
            continue  # gone between the two calls: create it
        if not _ours(job, labels):
            raise StagingError(f"Job {namespace}/{name} exists and is not this staging task's lease (not created by "
                               "tfk8s-airflow for it, or its spec no longer ends it: parallelism 0, not suspended, "
                               "ttlSecondsAfterFinished 0); it is left alone (delete or rename it, then retry the "
                               "task)")
        if job.metadata.deletion_timestamp is None and not has_expired(job.status.conditions):
            started = (job.status.start_time or job.metadata.creation_timestamp).timestamp()
            call(f"renewing the staging lease Job {namespace}/{name}", api.patch_namespaced_job, name, namespace,
                 {"spec": {"activeDeadlineSeconds": renewed_deadline(started, time.time(), lease_s)}})
            return owner_reference(name, job.metadata.uid)
        if time.monotonic() > deadline:
            raise StagingError(f"the staging lease Job {namespace}/{name} ran out and was not deleted within "
                               f"{wait_s:.0f}s (is the cluster's TTL-after-finished controller running?)")
        if job.metadata.deletion_timestamp is None:
            _delete_lease(api, namespace, name)
        time.sleep(1.0)


def _delete_lease(api: BatchV1Api, namespace: str, name: str) -> None:
    try:
        api.delete_namespaced_job(name, namespace, propagation_policy="Background")
    except ApiException as exc:
        if exc.status != 404:
            raise wrap_api_error(f"deleting the staging lease Job {namespace}/{name}", exc) from None


def end_lease(api: BatchV1Api, namespace: str, key: str) -> bool:
    """Delete the task's lease Job (ours only); the garbage collector deletes whatever it still owns. Call
    it last: the delegation-token Secret it owns must have had its token cancelled first."""
    name = lease_name(key)
    try:
        job = api.read_namespaced_job(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise wrap_api_error(f"reading the staging lease Job {namespace}/{name}", exc) from None
    if not _ours(job, task_labels(key)):
        return False
    _delete_lease(api, namespace, name)
    return True


def create(api: CoreV1Api, pods: Sequence[Mapping[str, Any]]) -> None:
    """Create each pod (one that exists already, from an earlier try of the same attempt, is kept)."""
    for pod in pods:
        meta = pod["metadata"]
        try:
            api.create_namespaced_pod(meta["namespace"], dict(pod))
        except ApiException as exc:
            if exc.status != 409:
                raise wrap_api_error(f"creating staging copy pod {meta['name']}", exc) from exc


def delete_all(api: CoreV1Api, namespace: str, key: str) -> int:
    """Delete every copy pod of ``key`` (grace 0: a copy pod's partial work is never published)."""
    pods = call(f"listing staging copy pods {key}", api.list_namespaced_pod, namespace,
                label_selector=f"{LABEL_STAGING}={key}").items
    for pod in pods:
        delete_one(api, namespace, pod.metadata.name)
    return len(pods)


def delete_one(api: CoreV1Api, namespace: str, name: str) -> None:
    try:
        api.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status != 404:
            raise wrap_api_error(f"deleting staging copy pod {name}", exc) from exc
