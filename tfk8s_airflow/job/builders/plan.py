"""The plan of one job: every object setup creates, in the order it creates them, built once.

Why one plan: setup creates the job's objects and ``tfk8s render`` prints them; built in two
places, the two drifted (render printed no NetworkPolicy, no templates ConfigMap, no scheduling
gate, no task or Kueue label). :func:`plan_job` is the only place a job's objects are assembled:
setup executes the plan (its checks and its creation steps read the objects from it), render
prints it, and tests prove both against it.

Creation order (:meth:`JobPlan.objects`): the headless Service first (every other object is its
dependent, so deleting it lets Kubernetes remove them all), the shard ConfigMap (when shards are
given), the templates ConfigMap (the pods kept for recovery), the NetworkPolicy, under
``admission: workload`` the Workload and the first attempt's PodGroup, one pod per replica (gated by
``tfk8s.io/gang``, labelled for the replica tasks, in the Kueue pod group when Kueue admits the job,
in the PodGroup under the Workload API, admitted by the deployment's policy), then the TensorBoard
pod (when the spec has one).

The owner reference needs the Service's UID, which exists only once the Service does:
:meth:`JobPlan.owned` gives the plan with it on every object but the Service, and the templates
ConfigMap rebuilt from the owned pods (recovery recreates pods from it, and the job record keeps its
digest, :attr:`JobPlan.templates_digest`).

Pure: no Airflow, no Kubernetes client, no cluster. The one thing read from outside is the local
file system's answer to ``realpath`` for a ``hostPath`` (the admission resolves links now,
:mod:`tfk8s_airflow.job.builders.admission`); ``realpath`` is a parameter.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job import kueue, naming, podgroup
from tfk8s_airflow.job.builders.admission import admit_pod, admit_pods
from tfk8s_airflow.job.builders.network import network_policy_manifest
from tfk8s_airflow.job.builders.objects import (
    JobNames,
    Replica,
    configmap_manifest,
    job_labels,
    owned_by,
    plan_replicas,
    pod_manifest,
    service_manifest,
)
from tfk8s_airflow.job.builders.templatemap import templates_configmap, templates_digest
from tfk8s_airflow.job.builders.tensorboard import TensorBoardPlan, plan_tensorboard, tensorboard_manifest
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import TFJobSpec

__all__ = ["REPLICA_TASK", "JobPlan", "plan_job", "replica_task_id", "replica_task_labels", "admission_of",
           "may_use_workload_api", "GATE", "KUEUE", "WORKLOAD"]

#: Who admits a job (the spec's ``admission`` resolved, :func:`admission_of`).
GATE, KUEUE, WORKLOAD = "gate", "kueue", "workload"

#: The replica tasks' id in a DAG without a task group (``<group>.replica`` in one).
REPLICA_TASK = "replica"


def replica_task_id(group: str) -> str:
    """The replica tasks' id that ``tf_job()`` gives them: ``replica``, or ``<group>.replica``."""
    return f"{group}.{REPLICA_TASK}" if group else REPLICA_TASK


def replica_task_labels(dag_id: str, task_id: str, run_id: str, map_index: int) -> dict[str, str]:
    """The labels the provider's KubernetesPodOperator finds its pod by (``find_pod``), for one
    replica task: setup creates the pods, the replica tasks attach to them."""
    labels = {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "kubernetes_pod_operator": "True",
              "map_index": str(map_index), "try_number": "1"}
    return {k: naming.pod_operator_label_value(v) for k, v in labels.items()}


@dataclass(frozen=True)
class JobPlan:
    """Every object of one job as setup creates it, and what setup needs besides.

    The objects are plain manifests (dicts, camelCase, as the API server takes them); treat them as
    read-only: :meth:`owned` and :meth:`objects` give new containers, not copies of every dict.
    """

    spec: TFJobSpec
    names: JobNames
    #: One per pod, in TF_CONFIG role order (the replica tasks' map indexes).
    replicas: tuple[Replica, ...]
    #: The Kueue LocalQueue the pods are submitted to (the spec's, else the deployment's default), or None.
    queue: str | None
    #: Who admits the job: GATE, KUEUE or WORKLOAD (:func:`admission_of`).
    admission: str
    tensorboard: TensorBoardPlan | None
    service: dict[str, Any]
    #: The shard assignments' ConfigMap, when shards were given.
    shards: dict[str, Any] | None
    #: The pods as created, kept for recovery (``<job>-pods``).
    templates: dict[str, Any]
    network_policy: dict[str, Any]
    #: One per replica, as :attr:`replicas`: gated, labelled, admitted.
    pods: tuple[dict[str, Any], ...]
    tensorboard_pod: dict[str, Any] | None
    #: Under WORKLOAD admission: the job's Workload (else None) and its first attempt's PodGroups (one of the
    #: whole job, or one per role when the roles state ``gang_min``).
    workload: dict[str, Any] | None = None
    pod_groups: tuple[dict[str, Any], ...] = ()
    #: The owner reference every object but the Service carries (:meth:`owned`); None before.
    owner: Mapping[str, Any] | None = None

    @property
    def kueue_group(self) -> str | None:
        """The Kueue pod group (and Workload) of the pods, when the job has a queue."""
        return kueue.group_name(self.names.job) if self.queue else None

    @property
    def support_objects(self) -> list[dict[str, Any]]:
        """The objects between the Service and the pods: the shard ConfigMap (when given), the
        templates ConfigMap, the NetworkPolicy, the Workload and PodGroup (under WORKLOAD admission).
        Setup creates each of them with its mark."""
        gang = [*([self.workload] if self.workload is not None else []), *self.pod_groups]
        return [*([self.shards] if self.shards is not None else []), self.templates, self.network_policy, *gang]

    def objects(self) -> list[dict[str, Any]]:
        """Every object, in creation order: Service, shard ConfigMap, templates ConfigMap,
        NetworkPolicy, Workload and PodGroup, the replica pods, the TensorBoard pod."""
        tensorboard = [self.tensorboard_pod] if self.tensorboard_pod is not None else []
        return [self.service, *self.support_objects, *self.pods, *tensorboard]

    @property
    def templates_digest(self) -> str:
        """``sha256:<hex>`` of the templates ConfigMap's data (setup keeps it in the job record)."""
        return templates_digest(self.templates)

    def owned(self, reference: Mapping[str, Any]) -> JobPlan:
        """The plan with ``reference`` (the Service's, :func:`~tfk8s_airflow.job.builders.objects.owner_reference`)
        as the owner of every object but the Service, the templates ConfigMap rebuilt from the owned pods."""
        pods = tuple(owned_by(p, reference) for p in self.pods)
        templates = owned_by(_templates(self.spec, self.names, pods), reference)
        return replace(
            self, shards=owned_by(self.shards, reference) if self.shards is not None else None,
            templates=templates, network_policy=owned_by(self.network_policy, reference), pods=pods,
            tensorboard_pod=owned_by(self.tensorboard_pod, reference) if self.tensorboard_pod is not None else None,
            workload=owned_by(self.workload, reference) if self.workload is not None else None,
            pod_groups=tuple(owned_by(g, reference) for g in self.pod_groups),
            owner=dict(reference))


def _templates(spec: TFJobSpec, names: JobNames, pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return templates_configmap(names.job, names.namespace, naming.templates_name(names.job), job_labels(spec, names),
                               pods)


def may_use_workload_api(spec: TFJobSpec, policy: DeploymentPolicy) -> bool:
    """Whether the job's admission depends on the cluster serving the Workload API (setup asks it then)."""
    asked = spec.admission or policy.admission
    queue = spec.queue or policy.default_queue
    return asked == WORKLOAD or (asked == "auto" and not queue and policy.auto_workload)


def admission_of(spec: TFJobSpec, policy: DeploymentPolicy, workload_api: bool) -> tuple[str, str | None]:
    """(who admits the job, its Kueue queue or None): the one place this is chosen.

    The spec's ``admission``, else the deployment's ``[tfk8s] admission``. ``auto``: KUEUE when a queue is in
    effect (the spec's, else the deployment's ``default_queue``), WORKLOAD when the cluster serves the Workload
    API (``workload_api``) and the deployment's ``auto_workload`` allows it, GATE otherwise. SpecError naming
    ``admission`` for a choice the job or the cluster cannot honour.
    """
    asked = spec.admission or policy.admission
    queue = spec.queue or policy.default_queue or None
    where = "admission" if spec.admission else "[tfk8s] admission"
    if asked == "auto":
        if queue:
            return KUEUE, queue
        return (WORKLOAD if workload_api and policy.auto_workload else GATE), None
    if asked == KUEUE and not queue:
        raise SpecError([Problem(where, "is kueue but the job has no queue and the deployment no default_queue",
                                 "add queue: <LocalQueue>, or write admission: auto")])
    if asked in (GATE, WORKLOAD) and queue:
        raise SpecError([Problem(where, f"is {asked} but the deployment's default_queue {queue} puts every job in "
                                        "Kueue, which admits it", "write admission: kueue, or an administrator "
                                        "removes [tfk8s] default_queue")])
    if asked == WORKLOAD and not workload_api:
        raise SpecError([Problem(where, "is workload but the cluster does not serve Kubernetes' Workload API "
                                        f"({podgroup.API_VERSION} {podgroup.POD_GROUPS}); nothing was created",
                                 "write admission: auto, or enable the API (Kubernetes 1.37+: feature gate "
                                 "GenericWorkload on the API server, controller manager and scheduler, and "
                                 f"--runtime-config={podgroup.API_VERSION}=true)")])
    return asked, queue if asked == KUEUE else None


def plan_job(spec: TFJobSpec, names: JobNames, policy: DeploymentPolicy,
             shards: Mapping[str, Sequence[str]] | None = None, *, dag_id: str = "", task_id: str = REPLICA_TASK,
             run_id: str = "", realpath: Callable[[str], str] = os.path.realpath,
             workload_api: bool = False) -> JobPlan:
    """The job's plan: every object setup creates for ``spec`` under ``names``, not yet owned.

    ``policy``: the deployment's (deadlines, security contexts, the default queue, the admission).
    ``shards``: the normalized assignments (:func:`~tfk8s_airflow.job.builders.shardmap.normalize_shards`),
    or None for a job without. ``dag_id``, ``task_id`` (the replica tasks', :func:`replica_task_id`) and
    ``run_id``: what the replica pods' task labels say (:func:`replica_task_labels`). ``realpath``: how a
    ``hostPath`` is resolved by the admission. ``workload_api``: whether the cluster serves Kubernetes'
    Workload API (:func:`admission_of`). SpecError when the deployment's policy refuses a pod, or the
    job's admission cannot be honoured.
    """
    replicas = plan_replicas(spec, names, shards, policy)
    pods = [pod_manifest(spec, names, r, gated=True, extra_labels=replica_task_labels(dag_id, task_id, run_id, i))
            for i, r in enumerate(replicas)]
    # Admission: who decides that the whole job may start. KUEUE: the pods form one Kueue pod group, which
    # its ClusterQueue admits whole when the quota allows. WORKLOAD: the pods form one PodGroup, which
    # kube-scheduler places all together or none. GATE: setup releases the gates as soon as every pod exists,
    # and each is then scheduled on its own.
    admission, queue = admission_of(spec, policy, workload_api)
    if spec.topology is not None and admission != KUEUE:
        raise SpecError([Problem("topology", f"is Kueue's topology-aware scheduling, but the job's admission is "
                                             f"{admission}", "add queue: <LocalQueue of a ClusterQueue whose flavor "
                                             "has a topology>, or remove topology")])
    gang_min = [f"{role}.gang_min" for role, rs in spec.roles.items() if rs.gang_min is not None]
    if gang_min and admission != WORKLOAD:
        raise SpecError([Problem(gang_min[0], f"is a PodGroup's minimum, but the job's admission is {admission}",
                                 "write admission: workload (Kubernetes 1.37+), or remove gang_min")])
    workload: dict[str, Any] | None = None
    groups: tuple[dict[str, Any], ...] = ()
    if admission == KUEUE and queue:
        name = kueue.group_name(names.job)
        placement = (spec.topology.mode, spec.topology.level) if spec.topology is not None else None
        pods = [kueue.in_group(p, queue, name, len(pods), spec.priority_class, placement) for p in pods]
    elif admission == WORKLOAD:
        labels = job_labels(spec, names)
        templates = podgroup.gangs({role: (spec.replicas(role), rs.gang_min) for role, rs in spec.roles.items()})
        workload = podgroup.workload_manifest(names.job, names.namespace, labels, templates)
        groups = tuple(podgroup.pod_group_manifest(names.job, names.namespace, labels, low, template=name)
                       for name, low in templates.items())
        template_of = (lambda r: r.role) if podgroup.TEMPLATE not in templates else (lambda r: podgroup.TEMPLATE)
        pods = [podgroup.in_pod_group(p, podgroup.group_name(names.job, 1, template_of(r)))
                for p, r in zip(pods, replicas, strict=True)]
    # Every pod as the deployment admits it now (host paths resolved, read-only ones mounted read-only).
    pods = admit_pods(pods, policy, realpath=realpath)
    tensorboard = plan_tensorboard(spec, names, policy)
    tensorboard_pod = (admit_pod(tensorboard_manifest(tensorboard, names), policy, realpath=realpath)
                       if tensorboard is not None else None)
    return JobPlan(
        spec=spec, names=names, replicas=tuple(replicas), queue=queue, admission=admission, tensorboard=tensorboard,
        service=service_manifest(spec, names),
        shards=configmap_manifest(spec, names, shards) if shards is not None else None,
        templates=_templates(spec, names, pods), network_policy=network_policy_manifest(spec, names, policy, pods),
        pods=tuple(pods), tensorboard_pod=tensorboard_pod, workload=workload, pod_groups=groups)
