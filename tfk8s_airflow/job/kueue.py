"""Kueue's plain-pod groups: the labels a job's pods carry, and what a Workload says about them.

Why a module of its own: a job with ``queue:`` is admitted whole by Kueue (the cluster's batch
admission, when it runs one) instead of by setup's own gate alone. Its pods form one Kueue pod
group: every pod carries the queue's name, the group's name (which is the name of the Workload
Kueue makes for it) and the group's size; Kueue's webhook then adds its own label, finalizer and
scheduling gate, and removes the gate from every pod together once the ClusterQueue's quota
admits the whole group. What those names are, how a pod shows that Kueue manages it, and how a
Workload's conditions read as "queued", "can never be admitted" or "preempted" are written once
here, pure (no Kubernetes client), so setup, the job's watch, recovery and teardown agree.

Names as Kueue v0.19 spells them (``sigs.k8s.io/kueue`` ``pkg/controller/jobs/pod``,
``apis/kueue/v1beta2``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tfk8s_airflow.job import naming

#: The LocalQueue a pod is submitted to.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: The pod group, and so the name of the group's Workload.
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
#: How many pods the group has (Kueue admits none before that many exist).
GROUP_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
#: Topology-aware scheduling of the pod group (the spec's ``topology``), by its mode: the node label whose
#: domain (a block, a rack) must hold, or should hold, every pod of the group.
TOPOLOGY_ANNOTATIONS = {"required": "kueue.x-k8s.io/podset-required-topology",
                        "preferred": "kueue.x-k8s.io/podset-preferred-topology"}
#: A WorkloadPriorityClass of the cluster (the spec's ``priority_class``).
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: Added by Kueue's webhook to every pod it manages, with the finalizer of the same name.
MANAGED_LABEL = "kueue.x-k8s.io/managed"
FINALIZER = "kueue.x-k8s.io/managed"
#: Kueue's scheduling gate: the pod waits for its group's admission.
ADMISSION_GATE = "kueue.x-k8s.io/admission"
#: Kueue's gates on a pod (its admission, and topology-aware scheduling's).
KUEUE_GATES = (ADMISSION_GATE, "kueue.x-k8s.io/topology")
#: The Workload API.
GROUP, VERSION, PLURAL = "kueue.x-k8s.io", "v1beta2", "workloads"
VISIBILITY_GROUP, VISIBILITY_VERSION = "visibility.kueue.x-k8s.io", "v1beta2"
#: How often the watch asks Kueue's visibility API for the job's position (it is computed on each
#: call by Kueue's queue manager, so not every poll).
POSITION_INTERVAL_S = 60.0
#: Reasons of a Workload's QuotaReserved=False condition that no waiting cures: the LocalQueue or
#: ClusterQueue does not exist, or the job asks for more than the ClusterQueue can ever lend it.
NEVER_REASONS = ("Inadmissible", "Misconfigured", "ExceedsMaxQuota")
#: Kueue's message when a request exceeds a ClusterQueue's maximum (with borrowing) capacity.
NEVER_MESSAGE = "> maximum capacity"
#: Kueue's Evicted reason when a higher-priority Workload took the quota.
PREEMPTED_REASON = "Preempted"


def group_name(job: str, attempt: int = 1) -> str:
    """The pod group (and Workload) name of a job's attempt (:func:`~tfk8s_airflow.job.naming.attempt_group_name`)."""
    return naming.attempt_group_name(job, attempt)


def attempt_pod_name(pod: str, attempt: int) -> str:
    """A replica's pod name in a recovery attempt under Kueue: a new name, since a pod recreated under
    its old name would wait forever for the old one, which Kueue's finalizer keeps until its group is
    done. The replica's DNS name is its hostname and subdomain, never the pod name: it does not change."""
    if attempt <= 1:
        return pod
    name = f"{pod}-a{attempt}"
    if len(name) <= 253:
        return name
    return f"{pod[:240]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def group_labels(queue: str, group: str, priority_class: str | None = None) -> dict[str, str]:
    """The labels every pod of the group carries."""
    out = {QUEUE_LABEL: queue, GROUP_LABEL: group}
    if priority_class:
        out[PRIORITY_LABEL] = priority_class
    return out


def in_group(pod: Mapping[str, Any], queue: str, group: str, total: int,
             priority_class: str | None = None, topology: tuple[str, str] | None = None) -> dict[str, Any]:
    """A copy of a pod manifest as a member of the group ``group`` of ``total`` pods in ``queue``;
    ``topology``: (``required`` or ``preferred``, the node label of the level) for Kueue's topology-aware
    scheduling (every pod carries it: Kueue reads a plain-pod group's pod sets from its pods)."""
    meta = dict(pod["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), **group_labels(queue, group, priority_class)}
    placement = {TOPOLOGY_ANNOTATIONS[topology[0]]: topology[1]} if topology else {}
    meta["annotations"] = {**(meta.get("annotations") or {}), GROUP_TOTAL_ANNOTATION: str(total), **placement}
    return {**pod, "metadata": meta}


def unmanaged_reason(pod: Mapping[str, Any], queue: str) -> str | None:
    """Why a pod as the API server created it is not managed by Kueue (None when it is): Kueue's
    webhook labels and gates every pod of a namespace it manages; elsewhere the queue label is
    silently ignored and the pod would run unadmitted."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
    missing = [what for what, ok in ((f"the label {MANAGED_LABEL}", labels.get(MANAGED_LABEL) == "true"),
                                     (f"the scheduling gate {ADMISSION_GATE}", ADMISSION_GATE in gates)) if not ok]
    if not missing:
        return None
    return (f"Kueue does not manage namespace {meta.get('namespace')}: pod {meta.get('name')} was created without "
            f"{' and '.join(missing)}, so queue: {queue} would not hold it")


def kueue_gates(gates: Sequence[str]) -> tuple[str, ...]:
    return tuple(g for g in gates if g in KUEUE_GATES)


# ----------------------------------------------------------------------------- reading a Workload
@dataclass(frozen=True)
class Admission:
    """What a job's Workload says, as the watch reads it once per poll while pods hold Kueue's gate."""

    workload: str
    queue: str
    state: str  # queued | admitted | never | evicted | missing
    since: float | None = None  # when it was queued (the Workload's creation)
    message: str = ""  # Kueue's own words
    reason: str = ""
    position: int | None = None  # in its LocalQueue, from the visibility API (None: not known)

    @property
    def never(self) -> bool:
        return self.state == NEVER

    def describe(self) -> str:
        """One line: ``queued in <queue>, position N, since T: <Kueue's message>``."""
        if self.state == MISSING:
            return f"waiting for Kueue to create Workload {self.workload} (queue {self.queue})"
        if self.state == ADMITTED:
            return f"admitted by Kueue in {self.queue}"
        where = f"queued in {self.queue}"
        if self.position is not None:
            where += f", position {self.position}"
        if self.since is not None:
            where += f", since {datetime.fromtimestamp(self.since, UTC).strftime('%H:%M:%SZ')}"
        if self.state == NEVER:
            where = f"never admitted in {self.queue}"
        if self.state == EVICTED:
            where = f"evicted by Kueue from {self.queue} ({self.reason})"
        return f"{where}: {self.message}" if self.message else where


QUEUED, ADMITTED, NEVER, EVICTED, MISSING = "queued", "admitted", "never", "evicted", "missing"


def _ts(value: Any) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _condition(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def read_workload(workload: Mapping[str, Any] | None, name: str, queue: str) -> Admission:
    """A Workload (as the API returns it, or None when there is none yet) as an :class:`Admission`."""
    if not workload:
        return Admission(name, queue, MISSING)
    meta = workload.get("metadata") or {}
    status = workload.get("status") or {}
    conditions = status.get("conditions") or []
    since = _ts(meta.get("creationTimestamp"))
    evicted = _condition(conditions, "Evicted")
    if evicted is not None and evicted.get("status") == "True":
        return Admission(name, queue, EVICTED, since, str(evicted.get("message") or ""),
                         str(evicted.get("reason") or ""))
    admitted = _condition(conditions, "Admitted")
    if admitted is not None and admitted.get("status") == "True":
        return Admission(name, queue, ADMITTED, since, str(admitted.get("message") or ""), "Admitted")
    reserved = _condition(conditions, "QuotaReserved")
    message = str((reserved or {}).get("message") or "")
    reason = str((reserved or {}).get("reason") or "")
    if reserved is not None and reserved.get("status") == "False" and (
            reason in NEVER_REASONS or NEVER_MESSAGE in message):
        return Admission(name, queue, NEVER, since, message, reason)
    return Admission(name, queue, QUEUED, since, message or "waiting for Kueue to evaluate it", reason)


def position_in(pending: Mapping[str, Any] | None, workload: str) -> int | None:
    """The Workload's position in its LocalQueue (1 is next) from the visibility API's
    ``pendingworkloads`` answer; None when it is not listed."""
    for item in (pending or {}).get("items") or []:
        if (item.get("metadata") or {}).get("name") == workload:
            pos = item.get("positionInLocalQueue")
            return int(pos) + 1 if isinstance(pos, int) else None
    return None


__all__ = ["ADMISSION_GATE", "ADMITTED", "Admission", "EVICTED", "FINALIZER", "GROUP_LABEL", "GROUP_TOTAL_ANNOTATION",
           "KUEUE_GATES", "MANAGED_LABEL", "MISSING", "NEVER", "PREEMPTED_REASON", "PRIORITY_LABEL", "QUEUED",
           "QUEUE_LABEL", "attempt_pod_name", "group_labels", "group_name", "in_group", "kueue_gates",
           "position_in", "read_workload", "unmanaged_reason"]
