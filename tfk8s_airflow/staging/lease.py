"""The lease of a staging fan-out: what deletes its pods when nothing of Airflow is left to do it.

A task that stages through pods (copy or checksum pods) first creates one ``batch/v1`` Job for itself,
``tfk8s-stage-<key>-lease``, that runs no pod (``parallelism: 0``) and owns, through owner references
(never as their controller), every pod of the task and its delegation-token Secret. Kubernetes ends the
Job ``activeDeadlineSeconds`` after it started (the Job controller marks it failed,
``DeadlineExceeded``), the TTL-after-finished controller deletes it at once
(``ttlSecondsAfterFinished: 0``), and the garbage collector deletes what it owns: running pods (the
kubelet stops their containers), ended pods, the Secret.

While the task waits for its pods, its trigger renews the lease (the Job's deadline raised to its age
plus ``[tfk8s] staging_lease``) every quarter of it. A task that nobody waits for any more stops renewing:
marked failed, success or cleared before the triggerer ran its trigger, its DAG run deleted, the
triggerer down or killed. Its pods are gone at most ``staging_lease`` seconds (and the controllers'
reaction time) after the last renewal, whatever became of Airflow. A trigger that runs when the task is
cancelled deletes them at once (its ``on_kill``); the lease is the guarantee that does not rest on it.

Pure: the objects and the arithmetic; :mod:`tfk8s_airflow.k8s.copypods` creates, renews and deletes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import STAGING_NAME_PREFIX

__all__ = ["LEASE_API_VERSION", "lease_name", "lease_job", "owner_reference", "renewed_deadline", "RENEW_FRACTION",
           "has_expired", "is_lease"]

LEASE_API_VERSION = "batch/v1"
#: The trigger renews the lease when a quarter of it has passed since the last renewal.
RENEW_FRACTION = 0.25


def lease_name(key: str) -> str:
    """The lease Job of the staging task ``key`` (at most 30 characters for a 12-character key)."""
    return f"{STAGING_NAME_PREFIX}{key}-lease"


def lease_job(key: str, namespace: str, labels: Mapping[str, str], lease_s: int, image: str,
              security: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {})) -> dict[str, Any]:
    """The lease Job: no pod ever runs (``parallelism: 0``); its pod template is only there because a Job
    must have one (the copy image, ``true``, the deployment's security contexts, so no policy that reads
    templates objects to it)."""
    pod_sc, container_sc = security
    container: dict[str, Any] = {"name": "lease", "image": image, "command": ["true"]}
    if container_sc:
        container["securityContext"] = dict(container_sc)
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "automountServiceAccountToken": False,
                                "containers": [container]}
    if pod_sc:
        pod_spec["securityContext"] = dict(pod_sc)
    return {
        "apiVersion": LEASE_API_VERSION, "kind": "Job",
        "metadata": {"name": lease_name(key), "namespace": namespace, "labels": dict(labels)},
        "spec": {"parallelism": 0, "completions": 1, "backoffLimit": 0, "activeDeadlineSeconds": int(lease_s),
                 "ttlSecondsAfterFinished": 0,
                 "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}},
    }


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    """What each pod (and the Secret) of the task carries: owned by the lease, not controlled by it (the
    Job controller never counts or adopts them), and no ``blockOwnerDeletion`` (that would need rights on
    the Job's finalizers)."""
    return {"apiVersion": LEASE_API_VERSION, "kind": "Job", "name": name, "uid": uid}


def renewed_deadline(started: float, now: float, lease_s: int) -> int:
    """The Job's ``activeDeadlineSeconds`` that ends it ``lease_s`` seconds from ``now``, for a Job that
    started (``status.startTime``, else its creation) at ``started`` (both epoch seconds)."""
    return max(1, math.ceil(max(0.0, now - started)) + int(lease_s))


def has_expired(conditions: Any) -> bool:
    """Whether a Job's status conditions say it ended (a lease that ran out cannot be renewed)."""
    for cond in conditions or ():
        kind = cond.get("type") if isinstance(cond, Mapping) else getattr(cond, "type", None)
        status = cond.get("status") if isinstance(cond, Mapping) else getattr(cond, "status", None)
        if kind in ("Failed", "Complete", "FailureTarget", "SuccessCriteriaMet") and status == "True":
            return True
    return False


def is_lease(spec: Any) -> bool:
    """Whether a Job's spec (a mapping, or the client's model) is a lease's: it runs no pod, is not suspended
    (a suspended Job's deadline does not run) and is deleted the moment it ends. The labels say whose task a
    Job is for; only this shape makes it a lease that ends: a Job of the lease's name and labels that would
    not end (someone else's, or one whose spec was changed) never gets the task's pods."""
    def field(name: str, attr: str) -> Any:
        return spec.get(name) if isinstance(spec, Mapping) else getattr(spec, attr, None)

    return (spec is not None and field("parallelism", "parallelism") == 0 and not field("suspend", "suspend")
            and field("ttlSecondsAfterFinished", "ttl_seconds_after_finished") == 0
            and isinstance(field("activeDeadlineSeconds", "active_deadline_seconds"), int))
