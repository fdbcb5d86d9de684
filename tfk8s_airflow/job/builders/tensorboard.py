"""The job's TensorBoard (``tensorboard:`` in the spec): its pod, the URL a link opens, its state in a LIST.

Why a pod of its own, beside the replicas and not a sidecar of one: it must outlive any
replica's restart, serve the summaries of every attempt, and never make a replica's outcome
depend on it. It carries the job's labels (so teardown's selector deletes it with the job and
the watch's one LIST sees it) but no role or index label, so the judge, the recovery, the
replica tasks and the TF jobs view's replica rows never count it: a TensorBoard that cannot
start, crashes or is deleted changes nothing about the job.

The pod runs ``tensorboard --logdir <log_dir> --host 0.0.0.0 --port <port>`` in the lead
replica's image (the chief's, else worker 0's; a TensorFlow image ships the program) on the
lead's nodes (the same node selector and tolerations: those nodes mount the job's volumes),
mounts only the volume that holds ``log_dir``, read-only, asks for little, and gets the
deployment's security contexts like the replicas. It is reached on the job's headless Service
as ``tensorboard.<service>.<namespace>.svc:<port>`` (the Service's port ``tensorboard``).

Where a browser reaches it depends on the deployment: the setting ``[tfk8s] tensorboard_url``
is a template of that URL (:mod:`tfk8s_airflow.job.policy.tensorboard_url`); ``{pod_ip}`` is known only once the pod
runs, the rest when setup plans the job. Without the setting there is no link.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tfk8s_airflow.contract import (
    LABEL_JOB,
    TENSORBOARD_CONTAINER,
    TENSORBOARD_HOSTNAME,
    TENSORBOARD_PORT_NAME,
)
from tfk8s_airflow.job import naming
from tfk8s_airflow.job.builders.objects import JobNames, job_labels, pull_policy, volume_source
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.policy.tensorboard_url import fill_url, placeholders
from tfk8s_airflow.job.spec import RoleSpec, TFJobSpec, Volume

__all__ = ["REQUESTS", "LIMITS", "TensorBoardPlan", "TensorBoardState", "plan_tensorboard", "tensorboard_manifest",
           "tensorboard_state", "tensorboard_url"]

#: The TensorBoard container's requests and limits: it reads event files and serves a page.
REQUESTS = {"cpu": "100m", "memory": "256Mi"}
LIMITS = {"cpu": "1", "memory": "2Gi"}


@dataclass(frozen=True)
class TensorBoardPlan:
    """Every fact of the job's TensorBoard pod (:func:`tensorboard_manifest` builds the pod of it)."""

    pod_name: str
    hostname: str
    image: str
    image_pull_policy: str
    command: list[str]
    args: list[str]
    port: int
    labels: dict[str, str]
    annotations: dict[str, str]
    resources: dict[str, dict[str, str]]
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    volume_mounts: list[dict[str, Any]]
    readiness_probe: dict[str, Any]
    active_deadline: int
    pod_security_context: dict[str, Any]
    security_context: dict[str, Any]
    service_account: str | None


def _lead(spec: TFJobSpec) -> RoleSpec:
    """The replica that writes the summaries: the chief, else worker 0 (TFJob's rule)."""
    return spec.roles["chief"] if spec.replicas("chief") else spec.roles["worker"]


def _log_volume(spec: TFJobSpec, log_dir: str) -> Volume:
    """The (innermost) host_path or pvc volume holding ``log_dir``; the parser made sure there is one."""
    def holds(vol: Volume) -> bool:
        root = vol.mount_path.rstrip("/")
        return vol.kind in ("host_path", "pvc") and (log_dir == root or log_dir.startswith(root + "/"))

    return max((vol for vol in spec.volumes if holds(vol)), key=lambda vol: len(vol.mount_path))


def plan_tensorboard(spec: TFJobSpec, names: JobNames, policy: DeploymentPolicy | None = None,
                     labels: Mapping[str, str] | None = None) -> TensorBoardPlan | None:
    """The TensorBoard pod's facts, or None when the spec has no ``tensorboard``.

    ``labels``: the job's labels (default :func:`~tfk8s_airflow.job.builders.objects.job_labels`);
    ``policy``: the deployment's, which decides the pod's deadline and security contexts as for
    the replicas.
    """
    tb = spec.tensorboard
    if tb is None:
        return None
    policy = policy or DeploymentPolicy()
    pod_security, container_security, _token = policy.pod_security(spec)
    lead = _lead(spec)
    vol = _log_volume(spec, tb.log_dir)
    mount: dict[str, Any] = {"name": vol.name, "mountPath": vol.mount_path, "readOnly": True}
    if vol.sub_path:
        mount["subPath"] = vol.sub_path
    own_labels = dict(labels if labels is not None else job_labels(spec, names))
    own_labels["app.kubernetes.io/component"] = TENSORBOARD_CONTAINER
    return TensorBoardPlan(
        pod_name=naming.tensorboard_pod_name(names.job), hostname=TENSORBOARD_HOSTNAME,
        image=tb.image or lead.image, image_pull_policy=spec.image_pull_policy,
        command=["tensorboard"], args=["--logdir", posixpath.normpath(tb.log_dir), "--host", "0.0.0.0",
                                       "--port", str(tb.port)],
        port=tb.port, labels=own_labels, annotations=dict(spec.annotations),
        resources={"requests": dict(REQUESTS), "limits": dict(LIMITS)},
        node_selector=dict(lead.node_selector), tolerations=[dict(t) for t in lead.tolerations],
        volumes=[{"name": vol.name, **volume_source(vol)}], volume_mounts=[mount],
        readiness_probe={"httpGet": {"path": "/", "port": TENSORBOARD_PORT_NAME}, "periodSeconds": 10,
                         "timeoutSeconds": 5},
        active_deadline=policy.active_deadline(spec), pod_security_context=pod_security,
        security_context=container_security, service_account=spec.service_account,
    )


def tensorboard_manifest(plan: TensorBoardPlan, names: JobNames) -> dict[str, Any]:
    """The TensorBoard Pod: never gated (nothing waits for it, it waits for nothing)."""
    container: dict[str, Any] = {
        "name": TENSORBOARD_CONTAINER, "image": plan.image, **pull_policy(plan.image_pull_policy),
        "command": plan.command, "args": plan.args,
        "ports": [{"name": TENSORBOARD_PORT_NAME, "containerPort": plan.port, "protocol": "TCP"}],
        "resources": plan.resources, "volumeMounts": plan.volume_mounts, "readinessProbe": plan.readiness_probe,
    }
    if plan.security_context:
        container["securityContext"] = plan.security_context
    pod_spec: dict[str, Any] = {"hostname": plan.hostname, "subdomain": names.service, "restartPolicy": "Always",
                                "enableServiceLinks": False}
    if plan.service_account:
        pod_spec["serviceAccountName"] = plan.service_account
    pod_spec["automountServiceAccountToken"] = False
    pod_spec["activeDeadlineSeconds"] = plan.active_deadline
    if plan.pod_security_context:
        pod_spec["securityContext"] = plan.pod_security_context
    if plan.node_selector:
        pod_spec["nodeSelector"] = plan.node_selector
    if plan.tolerations:
        pod_spec["tolerations"] = plan.tolerations
    pod_spec["containers"] = [container]
    pod_spec["volumes"] = plan.volumes
    metadata: dict[str, Any] = {"name": plan.pod_name, "namespace": names.namespace, "labels": plan.labels}
    if plan.annotations:
        metadata["annotations"] = plan.annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


# ----------------------------------------------------------------------------- its state
@dataclass(frozen=True)
class TensorBoardState:
    """The TensorBoard pod as one LIST of the job's pods shows it."""

    phase: str
    ready: bool = False
    pod_ip: str | None = None
    restarts: int = 0
    waiting_reason: str | None = None

    def describe(self) -> str:
        extra = self.waiting_reason or ("ready" if self.ready else "not ready")
        return f"{self.phase} ({extra}" + (f", restarts {self.restarts}" if self.restarts else "") + ")"


def tensorboard_state(pods: Iterable[Mapping[str, Any]], pod_name: str | None) -> TensorBoardState | None:
    """The named TensorBoard pod's state among ``pods`` (the API's JSON); None when it is not there."""
    if not pod_name:
        return None
    for pod in pods:
        meta = _dict(_dict(pod).get("metadata"))
        if meta.get("name") != pod_name or LABEL_JOB not in _dict(meta.get("labels")):
            continue
        status = _dict(pod.get("status"))
        ready = any(_dict(c).get("type") == "Ready" and _dict(c).get("status") == "True"
                    for c in _list(status.get("conditions")))
        cs: Mapping[str, Any] = next((c for c in map(_dict, _list(status.get("containerStatuses")))
                                      if c.get("name") == TENSORBOARD_CONTAINER), {})
        restarts = cs.get("restartCount")
        waiting = _dict(_dict(cs.get("state")).get("waiting")).get("reason")
        return TensorBoardState(
            phase=_str(status.get("phase")) or "Pending", ready=ready and not meta.get("deletionTimestamp"),
            pod_ip=_str(status.get("podIP")) or None,
            restarts=restarts if isinstance(restarts, int) and not isinstance(restarts, bool) else 0,
            waiting_reason=_str(waiting))
    return None


def _dict(value: Any) -> Mapping[str, Any]:
    """A field of a pod's JSON that should be an object (anything else reads as empty: never raises)."""
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def tensorboard_url(template: str | None, state: TensorBoardState | None) -> str | None:
    """The URL a link may open: the template filled in, once the pod is ready (and has its IP, when
    the template needs it); None before, and without a template."""
    if not template or state is None or state.phase != "Running" or not state.ready:
        return None
    if "pod_ip" in placeholders(template):
        if not state.pod_ip:
            return None
        ip = f"[{state.pod_ip}]" if ":" in state.pod_ip else state.pod_ip
        return fill_url(template, {"pod_ip": ip})
    return fill_url(template, {})
