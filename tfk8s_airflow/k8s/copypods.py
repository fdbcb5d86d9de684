"""Kubernetes operations of a staging fan-out: create the copy pods, delete them (synchronous, on the
provider's hook; the waiting is :class:`tfk8s_airflow.triggers.staging.CopyPodsTrigger`'s)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.k8s.client import api_client, call, wrap_api_error

__all__ = ["LABEL_STAGING", "LABEL_PART", "copy_key", "pod_name", "create", "delete_all", "delete_one", "core"]

LABEL_STAGING = "tfk8s.io/staging"
LABEL_PART = "tfk8s.io/part"


def copy_key(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """A short hash for one staging task of one run: its pods' label value and name stem."""
    return hashlib.sha256(f"{dag_id}\0{run_id}\0{task_id}\0{map_index}".encode()).hexdigest()[:12]


def pod_name(key: str, part: int, attempt: int) -> str:
    return f"tfk8s-stage-{key}-p{part}-a{attempt}"


def core(conn_id: str | None) -> CoreV1Api:
    return CoreV1Api(api_client(conn_id))


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
