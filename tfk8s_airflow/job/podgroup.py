"""Kubernetes' own gang scheduling: a job's Workload and PodGroup, and how a pod shows it waits for its group.

Why a module of its own: with ``admission: workload`` (docs/jobs.md, "Admission") kube-scheduler
places a job's pods all together or none (KEP-4671, ``scheduling.k8s.io/v1beta1`` in Kubernetes 1.37,
feature gate ``GenericWorkload``). The job has one Workload (what the group is: one pod group
template, gang, its minimum the job's size) and one PodGroup per attempt (the runtime group the
scheduler counts; a recovery attempt makes a new one, so a replacement is never counted with the
pods it replaces). A job whose roles state a gang minimum (``gang_min``) has one template and one
PodGroup per role instead, each gang with the role's minimum: Kubernetes 1.37 places a PodGroup
whole, not a Workload, so its roles are then placed each on its own. Every pod names its attempt's
PodGroup in ``spec.schedulingGroup.podGroupName``,
a field that cannot change once the pod exists. The scheduler holds every pod of a group until
``minCount`` of them exist and fit, then binds them together; a group that does not fit leaves
each pod ``PodScheduled=False`` (reason ``Unschedulable``, the scheduler's message starting
``pod group is unschedulable``). What those objects are and how such a pod reads are written once
here, pure (no Kubernetes client), so that setup, render, the job's watch and recovery agree.

Names as Kubernetes v1.37 spells them (``k8s.io/api/scheduling/v1beta1``, ``core/v1`` ``PodSchedulingGroup``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job import naming

__all__ = ["API_VERSION", "GROUP", "VERSION", "WORKLOADS", "POD_GROUPS", "TEMPLATE", "HELD_BY",
           "group_name", "template_of", "gangs", "workload_manifest", "pod_group_manifest", "gang_of",
           "in_pod_group", "pod_group_of",
           "waits_for_group", "held_by", "is_group_hold"]

GROUP, VERSION = "scheduling.k8s.io", "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
#: The resources' plural names (the API paths, and what discovery lists).
WORKLOADS, POD_GROUPS = "workloads", "podgroups"
#: The Workload's one pod group template: every replica of the job.
TEMPLATE = "replicas"
#: How a replica held by its pod group is shown (beside another controller's gates, ``held by ...``).
HELD_BY = "PodGroup"
#: The scheduler's message on the PodScheduled condition of a pod whose group cannot be placed whole.
_GROUP_UNSCHEDULABLE = "pod group is unschedulable"


def group_name(job: str, attempt: int = 1, template: str = TEMPLATE) -> str:
    """The PodGroup of a job's attempt: the job's name (``<job>-<role>`` for a role's group when the roles
    have gang minimums), then ``<job>-a<N>`` (``<job>-<role>-a<N>``) for recovery attempts."""
    return naming.attempt_group_name(job if template == TEMPLATE else f"{job}-{template}", attempt)


def template_of(job: str, role: str, group: str) -> str:
    """The Workload template of a pod of ``role`` that setup put in PodGroup ``group``: the role's when the
    group is the role's (the roles state ``gang_min``), else :data:`TEMPLATE`."""
    return role if role and group == group_name(job, 1, role) else TEMPLATE


def gangs(roles: Mapping[str, tuple[int, int | None]]) -> dict[str, int]:
    """The Workload's templates and their gang minimums, from each role's ``(replicas, gang_min)``: one
    template of every replica (:data:`TEMPLATE`) when no role states a minimum, else one per role with
    replicas, its minimum the role's ``gang_min`` or all its replicas."""
    if all(low is None for _, low in roles.values()):
        return {TEMPLATE: sum(n for n, _ in roles.values())}
    return {role: (n if low is None else low) for role, (n, low) in roles.items() if n}


def workload_manifest(job: str, namespace: str, labels: Mapping[str, str],
                      templates: Mapping[str, int]) -> dict[str, Any]:
    """The job's Workload: a gang template per entry of ``templates`` (:func:`gangs`: name -> minimum),
    pointing back at the job's Service, which owns it (``controllerRef``: for the people and tools reading it)."""
    return {"apiVersion": API_VERSION, "kind": "Workload",
            "metadata": {"name": job, "namespace": namespace, "labels": dict(labels)},
            "spec": {"controllerRef": {"apiGroup": "", "kind": "Service", "name": naming.service_name(job)},
                     "podGroupTemplates": [{"name": name, "schedulingPolicy": {"gang": {"minCount": low}}}
                                           for name, low in templates.items()]}}


def pod_group_manifest(job: str, namespace: str, labels: Mapping[str, str], size: int,
                       attempt: int = 1, template: str = TEMPLATE) -> dict[str, Any]:
    """The PodGroup of an attempt, made from the Workload's ``template``: at least ``size`` of its pods placed
    together or none (setup's: the template's minimum; a recovery attempt's: as many of the replicas it
    recreates, at most that minimum)."""
    return {"apiVersion": API_VERSION, "kind": "PodGroup",
            "metadata": {"name": group_name(job, attempt, template), "namespace": namespace,
                         "labels": dict(labels)},
            "spec": {"workloadRef": {"workloadName": job, "templateName": template},
                     "schedulingPolicy": {"gang": {"minCount": size}}}}


def gang_of(group: Mapping[str, Any]) -> tuple[str, int | None]:
    """(template name, gang minimum or None) of a PodGroup as the API returns it."""
    spec = group.get("spec") or {}
    template = (spec.get("workloadRef") or {}).get("templateName") or TEMPLATE
    low = ((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount")
    return str(template), low if isinstance(low, int) and not isinstance(low, bool) else None


def in_pod_group(pod: Mapping[str, Any], group: str) -> dict[str, Any]:
    """A copy of ``pod`` that names ``group`` as its scheduling group."""
    out = copy.deepcopy(dict(pod))
    out.setdefault("spec", {})["schedulingGroup"] = {"podGroupName": group}
    return out


def pod_group_of(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup a pod manifest (camelCase, as the API's JSON) names, or None."""
    spec = pod.get("spec")
    group = spec.get("schedulingGroup") if isinstance(spec, Mapping) else None
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) and name else None


def waits_for_group(message: str | None) -> bool:
    """Whether a pod's ``PodScheduled=False`` message says its group as a whole cannot be placed yet (the
    scheduler then holds every pod of it: the job waits whole, as behind a queue)."""
    return bool(message) and _GROUP_UNSCHEDULABLE in str(message)


def held_by(group: str, message: str) -> str:
    """How a replica that waits for its group is shown: ``PodGroup <name> (<why>)``, the why being the
    scheduler's first clause (``minCount (6) cannot be satisfied``)."""
    why = str(message).split(_GROUP_UNSCHEDULABLE, 1)[-1].lstrip(" ,").split(":", 1)[0].strip()
    return f"{HELD_BY} {group}" + (f" ({why[:120]})" if why else "")


def is_group_hold(held: str) -> bool:
    """Whether one of a replica's ``held_by`` entries is its pod group's (:func:`held_by`)."""
    return held.startswith(f"{HELD_BY} ")
