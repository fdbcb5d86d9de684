"""Pure builders: from a spec to the Kubernetes objects of one job.

Why a replica plan between the spec and the objects: every fact of a replica's pod (names,
labels, env, TF_CONFIG...) is computed once here, as a :class:`Replica`, and everything that
needs one reads it: the pod builder, the job record (the replica tasks' map indexes), recovery,
evaluation. The job's objects are assembled from these builders in one place only, the job's plan
(:mod:`tfk8s_airflow.job.builders.plan`), which setup creates and ``tfk8s render`` prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfk8s_airflow import contract as c
from tfk8s_airflow.contract import (
    CODE_VOLUME,
    CONTAINER_NAME,
    FETCH_CONTAINER,
    GANG_GATE,
    LABEL_DAG,
    LABEL_INDEX,
    LABEL_JOB,
    LABEL_ROLE,
    LABEL_RUN,
    LABEL_TRACKED,
    PORT_NAME,
    SHARDS_KEY,
    SHARDS_MOUNT,
    SHARDS_VOLUME,
    TENSORBOARD_PORT_NAME,
)
from tfk8s_airflow.job import naming
from tfk8s_airflow.job.builders.shardmap import shards_json
from tfk8s_airflow.job.builders.wiring import cluster_spec, legacy_flags, tf_config_dict
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import CodeSource, EnvFrom, TFJobSpec, ValueFrom, Volume, podtemplate

__all__ = ["CODE_VOLUME", "CONTAINER_NAME", "FETCH_CONTAINER", "LABEL_DAG", "LABEL_INDEX", "LABEL_JOB",
           "LABEL_ROLE", "LABEL_RUN", "LABEL_TRACKED", "PORT_NAME", "SHARDS_KEY", "SHARDS_MOUNT",
           "SHARDS_VOLUME", "JobNames", "Replica", "job_labels", "plan_replicas", "pod_manifest",
           "service_manifest", "configmap_manifest", "shards_json", "owner_reference",
           "owned_by"]

@dataclass(frozen=True)
class JobNames:
    """Everything that identifies one run of a job in the cluster."""

    job: str
    namespace: str
    service: str
    configmap: str
    identity: Mapping[str, str] = field(default_factory=dict)  # run/dag labels

    @classmethod
    def for_run(cls, spec: TFJobSpec, run_id: str = "", group: str = "", dag_id: str = "") -> JobNames:
        """Names for (spec name or dag_id, run_id, group): one function (docs/architecture.md)."""
        job = naming.job_name(dag_id or spec.name, run_id, group or (spec.name if dag_id else ""))
        identity = {}
        if run_id:
            identity[LABEL_RUN] = naming.sanitize_label_value(run_id)
        if dag_id:
            identity[LABEL_DAG] = naming.sanitize_label_value(dag_id)
        return cls(job=job, namespace=spec.namespace, service=naming.service_name(job),
                   configmap=naming.configmap_name(job), identity=identity)

    @property
    def selector(self) -> str:
        """The label selector that finds every object of this job."""
        return f"{LABEL_JOB}={self.job}"


@dataclass(frozen=True)
class Replica:
    """Every fact of one replica's pod, computed once (:func:`plan_replicas`)."""

    role: str
    index: int
    pod_name: str
    hostname: str
    image: str
    image_pull_policy: str
    command: list[str] | None
    args: list[str]
    env: list[dict[str, Any]]
    env_from: list[dict[str, Any]]
    tf_config: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    resources: dict[str, dict[str, str]]
    restart_policy: str
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    volume_mounts: list[dict[str, Any]]
    init_containers: list[dict[str, Any]]
    tracked: bool
    active_deadline: int
    pod_security_context: dict[str, Any]
    security_context: dict[str, Any]
    automount_service_account_token: bool
    # What the role's pod_template adds (tfk8s_airflow.job.spec.podtemplate.parts); the fields above
    # already hold its labels, annotations, env, mounts, volumes, init containers and security contexts.
    extra_ports: list[dict[str, Any]] = field(default_factory=list)
    container_extra: dict[str, Any] = field(default_factory=dict)
    sidecars: list[dict[str, Any]] = field(default_factory=list)
    pod_extra: dict[str, Any] = field(default_factory=dict)


def _kubeflow_labels(spec: TFJobSpec, role: str, index: int) -> dict[str, str]:
    """The TFJob operator's labels of one replica: its type as TF_CONFIG names it, its index, and
    ``job-role: master`` on the chief (worker 0 without one), as the operator's IsMasterRole decides."""
    rtype = spec.chief_name if role == "chief" else role
    out = {c.KUBEFLOW_JOB_NAME: spec.name, c.KUBEFLOW_REPLICA_TYPE: rtype, c.KUBEFLOW_REPLICA_INDEX: str(index)}
    if role == "chief" or (role == "worker" and index == 0 and not spec.replicas("chief")):
        out[c.KUBEFLOW_JOB_ROLE] = "master"
    return out


def job_labels(spec: TFJobSpec, names: JobNames) -> dict[str, str]:
    """Labels every object of the job carries; values sanitized to 63 characters."""
    labels = dict(spec.labels)
    labels.update({
        "app.kubernetes.io/name": "tensorflow",
        "app.kubernetes.io/instance": names.job,
        "app.kubernetes.io/part-of": naming.sanitize_label_value(spec.name),
        "app.kubernetes.io/managed-by": "tfk8s-airflow",
        LABEL_JOB: names.job,
    })
    labels.update(names.identity)
    return labels


def plan_replicas(spec: TFJobSpec, names: JobNames, shards: Mapping[str, Sequence[str]] | None = None,
                  policy: DeploymentPolicy | None = None) -> list[Replica]:
    """One :class:`Replica` per pod, in TF_CONFIG role order.

    ``policy``: the deployment's (:mod:`tfk8s_airflow.job.policy`), which decides the pods'
    deadline when the spec sets none, their security contexts and whether they get their
    ServiceAccount's token; by default its built-in defaults.
    """
    policy = policy or DeploymentPolicy()
    pod_security, container_security, token = policy.pod_security(spec)
    deadline = policy.active_deadline(spec)
    base_labels = job_labels(spec, names)
    cluster = cluster_spec(spec, names.service, include_evaluator=not spec.hide_evaluator)
    volumes, mounts = _volumes(spec, names, with_shards=shards is not None)
    out = []
    for rs in spec.active_roles:
        tpl = podtemplate.parts(rs.pod_template, CONTAINER_NAME, pod_security, container_security)
        role_volumes, role_mounts = volumes + tpl.volumes, mounts + tpl.volume_mounts
        init = _init_containers(spec, rs.image, container_security) + tpl.init_containers
        for i in range(rs.replicas):
            hostname = naming.replica_hostname(rs.role, i)
            labels = dict(base_labels)
            labels.update({
                "app.kubernetes.io/component": rs.role,
                LABEL_ROLE: rs.role,
                LABEL_INDEX: str(i),
                LABEL_TRACKED: "true" if rs.tracked else "false",
            })
            labels.update(tpl.labels)
            if spec.kubeflow_labels:
                labels.update(_kubeflow_labels(spec, rs.role, i))
            env = [{"name": c.JOB_NAME_ENV, "value": names.job},
                   {"name": c.NAMESPACE_ENV, "value": names.namespace},
                   {"name": c.ROLE_ENV, "value": rs.role},
                   {"name": c.INDEX_ENV, "value": str(i)}]
            tf_config = None
            if spec.tf_wiring in ("tf_config", "both"):
                tf_config = json.dumps(tf_config_dict(spec, names.service, rs.role, i, cluster),
                                       separators=(",", ":"))
                env.insert(0, {"name": c.TF_CONFIG_ENV, "value": tf_config})
            if shards is not None:
                env.append({"name": c.SHARDS_FILE_ENV, "value": c.DEFAULT_SHARDS_FILE})
            for vol in spec.volumes:
                env.append({"name": c.volume_dir_env(vol.name), "value": vol.mount_path})
            if spec.code:
                env.append({"name": c.CODE_DIR_ENV, "value": spec.code.mount_path})
            env += [env_var(k, val) for k, val in rs.env.items()] + tpl.env
            args = list(rs.args)
            if spec.tf_wiring in ("flags", "both"):
                args += legacy_flags(spec, names.service, rs.role, i)
            command = list(rs.command) if rs.command is not None else None
            if command is None and spec.code:
                command = code_command(spec.code)
            resources = rs.resources.to_kubernetes()
            out.append(Replica(
                role=rs.role, index=i, pod_name=naming.pod_name(names.job, rs.role, i),
                hostname=hostname, image=rs.image, image_pull_policy=spec.image_pull_policy,
                command=command, args=args, env=env, env_from=[env_from(e) for e in rs.env_from],
                tf_config=tf_config, labels=labels,
                annotations={**rs.annotations, **tpl.annotations}, resources=resources,
                restart_policy=rs.pod_restart_policy, node_selector=dict(rs.node_selector),
                tolerations=[dict(t) for t in rs.tolerations], volumes=role_volumes,
                volume_mounts=role_mounts, init_containers=init,
                tracked=rs.tracked, active_deadline=deadline, pod_security_context=tpl.pod_security,
                security_context=tpl.security, automount_service_account_token=token,
                extra_ports=tpl.ports, container_extra=tpl.container_extra, sidecars=tpl.sidecars,
                pod_extra=tpl.pod_extra,
            ))
    return out


def _volumes(spec: TFJobSpec, names: JobNames, with_shards: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for vol in spec.volumes:
        volumes.append({"name": vol.name, **volume_source(vol)})
        mount: dict[str, Any] = {"name": vol.name, "mountPath": vol.mount_path}
        if vol.read_only:
            mount["readOnly"] = True
        if vol.sub_path:
            mount["subPath"] = vol.sub_path
        mounts.append(mount)
    if with_shards:
        volumes.append({"name": SHARDS_VOLUME, "configMap": {"name": names.configmap}})
        mounts.append({"name": SHARDS_VOLUME, "mountPath": SHARDS_MOUNT, "readOnly": True})
    if spec.code:
        volumes.append({"name": CODE_VOLUME, "emptyDir": {}})
        mounts.append({"name": CODE_VOLUME, "mountPath": spec.code.mount_path})
    return volumes, mounts


def code_command(code: CodeSource) -> list[str]:
    """How a code entrypoint runs when the spec gives no command: ``python3`` for a ``.py`` file
    (the image's Python, as the fetcher's own), ``sh`` for anything else (``run.sh``)."""
    path = f"{code.mount_path.rstrip('/')}/{code.entrypoint}"
    return ["python3" if code.entrypoint.endswith(".py") else "sh", path]


def env_var(name: str, value: str | ValueFrom) -> dict[str, Any]:
    """One container env entry: a value, or a ``valueFrom`` the kubelet resolves (the value never passes here)."""
    if isinstance(value, str):
        return {"name": name, "value": value}
    if value.source == "field_ref":
        ref: dict[str, Any] = {"fieldRef": {"fieldPath": value.field_path}}
    else:
        selector: dict[str, Any] = {"name": value.name, "key": value.key}
        if value.optional:
            selector["optional"] = True
        ref = {"secretKeyRef" if value.source == "secret_key_ref" else "configMapKeyRef": selector}
    return {"name": name, "valueFrom": ref}


def env_from(item: EnvFrom) -> dict[str, Any]:
    """One container ``envFrom`` entry."""
    ref: dict[str, Any] = {"name": item.name}
    if item.optional:
        ref["optional"] = True
    out: dict[str, Any] = {"secretRef" if item.source == "secret_ref" else "configMapRef": ref}
    if item.prefix:
        out["prefix"] = item.prefix
    return out


def volume_source(vol: Volume) -> dict[str, Any]:
    """The pod volume's source of one spec volume."""
    if vol.host_path:
        # A read-only volume (data) must already exist; a writable one (model, logs) is created.
        return {"hostPath": {"path": vol.host_path, "type": "Directory" if vol.read_only else "DirectoryOrCreate"}}
    if vol.pvc:
        return {"persistentVolumeClaim": {"claimName": vol.pvc, "readOnly": vol.read_only}}
    if vol.secret:
        return {"secret": {"secretName": vol.secret}}
    if vol.config_map:
        return {"configMap": {"name": vol.config_map}}
    empty: dict[str, Any] = {}
    if vol.empty_dir and vol.empty_dir.medium:
        empty["medium"] = vol.empty_dir.medium
    if vol.empty_dir and vol.empty_dir.size_limit:
        empty["sizeLimit"] = vol.empty_dir.size_limit
    return {"emptyDir": empty}


def _init_containers(spec: TFJobSpec, image: str, security: dict[str, Any]) -> list[dict[str, Any]]:
    """The code-fetch init container: seed/TonY style code delivery without an image per algorithm."""
    if not spec.code:
        return []
    code = spec.code
    args = ["-m", "tfk8s_airflow.pod.codefetch", "--uri", code.uri, "--dest", code.mount_path,
            "--entrypoint", code.entrypoint]
    if code.sha256:
        args += ["--sha256", code.sha256]
    container: dict[str, Any] = {"name": FETCH_CONTAINER, "image": code.image or image,
                                 **pull_policy(spec.image_pull_policy), "command": ["python3"], "args": args,
                                 "volumeMounts": [{"name": CODE_VOLUME, "mountPath": code.mount_path}]}
    if security:
        container["securityContext"] = security
    return [container]


def pull_policy(policy: str) -> dict[str, str]:
    """A container's ``imagePullPolicy`` when the spec sets one; without, Kubernetes decides (Always for
    an image tagged ``:latest`` or untagged, IfNotPresent otherwise), as it does for a TFJob's pods."""
    return {"imagePullPolicy": policy} if policy else {}


def pod_manifest(spec: TFJobSpec, names: JobNames, replica: Replica, *, gated: bool = False,
                 extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One replica's Pod.

    ``gated``: held by the scheduling gate ``tfk8s.io/gang`` (setup creates every pod of the
    job gated, then releases the gates together). ``extra_labels``: added to the replica's
    own (setup adds the provider's task-instance labels, so the replica task finds its pod).
    The deployment's policy is already in the replica (:func:`plan_replicas`).
    """
    container: dict[str, Any] = {"name": CONTAINER_NAME, "image": replica.image,
                                 **pull_policy(replica.image_pull_policy)}
    if replica.command is not None:
        container["command"] = replica.command
    if replica.args:
        container["args"] = replica.args
    container["env"] = replica.env
    if replica.env_from:
        container["envFrom"] = replica.env_from
    container["ports"] = [{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}, *replica.extra_ports]
    if replica.resources:
        container["resources"] = replica.resources
    if replica.volume_mounts:
        container["volumeMounts"] = replica.volume_mounts
    if replica.security_context:
        container["securityContext"] = replica.security_context
    container.update(replica.container_extra)
    pod_spec: dict[str, Any] = {
        "hostname": replica.hostname,
        "subdomain": names.service,
        "restartPolicy": replica.restart_policy,
        "enableServiceLinks": False,
    }
    if gated:
        pod_spec["schedulingGates"] = [{"name": GANG_GATE}]
    if spec.service_account:
        pod_spec["serviceAccountName"] = spec.service_account
    pod_spec["automountServiceAccountToken"] = replica.automount_service_account_token
    pod_spec["activeDeadlineSeconds"] = replica.active_deadline
    if replica.pod_security_context:
        pod_spec["securityContext"] = replica.pod_security_context
    if replica.node_selector:
        pod_spec["nodeSelector"] = replica.node_selector
    if replica.tolerations:
        pod_spec["tolerations"] = replica.tolerations
    if replica.init_containers:
        pod_spec["initContainers"] = replica.init_containers
    pod_spec["containers"] = [container, *replica.sidecars]
    if replica.volumes:
        pod_spec["volumes"] = replica.volumes
    pod_spec.update(replica.pod_extra)
    labels = {**replica.labels, **(extra_labels or {})} if extra_labels else replica.labels
    metadata: dict[str, Any] = {"name": replica.pod_name, "namespace": names.namespace, "labels": labels}
    if replica.annotations:
        metadata["annotations"] = replica.annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def service_manifest(spec: TFJobSpec, names: JobNames) -> dict[str, Any]:
    """The job's headless Service: DNS for every replica, published before Ready; with the port
    ``tensorboard`` when the job has a TensorBoard (``tensorboard.<service>.<namespace>.svc``)."""
    ports = [{"name": PORT_NAME, "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}]
    if spec.tensorboard is not None:
        tb = spec.tensorboard.port
        ports.append({"name": TENSORBOARD_PORT_NAME, "port": tb, "targetPort": tb, "protocol": "TCP"})
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": names.service, "namespace": names.namespace,
                     "labels": job_labels(spec, names)},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": {LABEL_JOB: names.job}, "ports": ports},
    }


def owner_reference(service: str, uid: str) -> dict[str, Any]:
    """The reference that makes an object a dependent of the job's Service.

    Why the Service: it is created first and lives exactly as long as the job, so deleting it
    (teardown, or a person with ``kubectl delete service``) lets Kubernetes' garbage collector
    remove every pod and ConfigMap of the job, even when teardown never ran. Not
    ``blockOwnerDeletion``: that needs permission on the Service's finalizers, and nothing
    waits on the Service's deletion.
    """
    return {"apiVersion": "v1", "kind": "Service", "name": service, "uid": uid}


def owned_by(obj: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` with ``reference`` as its owner."""
    out = dict(obj)
    out["metadata"] = {**obj["metadata"], "ownerReferences": [dict(reference)]}
    return out


def configmap_manifest(spec: TFJobSpec, names: JobNames, shards: Mapping[str, Sequence[str]]
                       ) -> dict[str, Any]:
    """Shard assignments, keyed '<role>-<index>', read by tfk8s_airflow.pod.runtime in the pod."""
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": names.configmap, "namespace": names.namespace,
                     "labels": job_labels(spec, names)},
        "data": {SHARDS_KEY: shards_json(shards)},
    }
