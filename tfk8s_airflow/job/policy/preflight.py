"""Pre-flight verdict: can the whole job be placed on the cluster's nodes, now, later, or never?

Why before anything exists: a PS/worker job is useless until every member runs, and a job
that can never fit (8 GPUs per worker on nodes of 4, a node selector nothing matches, a taint
no pod tolerates) would otherwise be found out only when a pod has stayed Unschedulable for
``schedule_timeout``, while its peers hold nodes. Here the job's pods, exactly as setup builds
them (:func:`tfk8s_airflow.job.builders.objects.pod_manifest`), are bin-packed onto the nodes as the
API server reports them: allocatable minus the requests of the pods already bound there.

The verdict (:class:`Verdict`) is one of:

- ``runs now``: a placement of every pod exists on the free capacity; it comes with one
  (pod -> node) that respects every constraint judged here.
- ``waits``: no placement was found on the free capacity, but the job is not proven
  impossible; the reason says what is missing ("needs 8 nvidia.com/gpu, 3 free").
- ``never``: proven impossible on the nodes that exist, even if every other pod went away:
  a role's pods match no node (the reason names the node selector, the required node
  affinity or the taint), no node they may use is large enough for one of them ("no node
  has 8 nvidia.com/gpu; the largest has 4"), or the nodes they may use are too small for all
  of them together.

What is judged, as kube-scheduler's filters do: requests (containers summed, init containers
as their maximum, restartable init containers (sidecars) added, pod overhead, requests
defaulted from limits), every resource a node lists (cpu, memory, ephemeral-storage, pods,
extended resources such as ``nvidia.com/gpu``; one the node does not list is 0 there), node
selectors, required node affinity (``matchExpressions`` and ``matchFields``), NoSchedule and
NoExecute taints against tolerations, cordoned nodes and nodes that are not Ready.

What is guaranteed: ``never`` comes only with a proof from the node list (so it is never
wrong for those nodes), ``runs now`` only with a placement. What is not: the packing is a
deterministic first-fit-decreasing (largest pods first, each on the fullest node where it
still fits), which can miss a placement that exists, so a job may ``wait`` although it
would fit (bin packing is NP-hard); kube-scheduler places pods one by one with its own
scoring and may not find the placement found here; and not judged are inter-pod
(anti-)affinity, topology spread, host ports, volume topology, dynamic resource claims,
preferred affinity, pods not yet bound (nominated or pending) and priority preemption.
Conditions that pass (not Ready, cordoned, the node controller's condition taints such as
``node.kubernetes.io/not-ready``) make a job wait, never fail.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from tfk8s_airflow.exceptions import Problem, RecordError, SpecError
from tfk8s_airflow.job.spec.quantity import parse_quantity

__all__ = ["RUNS_NOW", "WAITS", "NEVER", "SKIPPED", "MODES", "OFF", "WARN", "ENFORCE", "PREFLIGHT_KEY",
           "Taint", "Node", "PodDemand", "Verdict", "PreflightRecord", "node_from_api", "pod_demand",
           "bound_usage", "judge", "preflight_applies", "parse_mode", "show_amount"]

RUNS_NOW, WAITS, NEVER = "runs now", "waits", "never"
#: The record's verdict when the pre-flight did not judge the job (mode off, Kueue admits it, no permission).
SKIPPED = "skipped"
OFF, WARN, ENFORCE = "off", "warn", "enforce"
MODES = (OFF, WARN, ENFORCE)
#: Setup's XCom key of the :class:`PreflightRecord`.
PREFLIGHT_KEY = "preflight"
RECORD_VERSION = 1

#: Taints the node controllers add and remove with the node's conditions: they make a job wait, not fail.
CONDITION_TAINTS = frozenset({
    "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable", "node.cloudprovider.kubernetes.io/uninitialized",
    "node.kubernetes.io/out-of-service"})
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")
PODS = "pods"


# ------------------------------------------------------------------------------------------ modes
def parse_mode(raw: Any) -> str | Problem:
    """A pre-flight mode: off, warn or enforce."""
    text = str(raw).strip().lower()
    if text in MODES:
        return text
    return Problem("", f"must be off, warn or enforce, got {raw!r}",
                   "correct the setting (docs/jobs.md#pre-flight-runs-now-waits-never)")


def preflight_applies(queue: str | None, mode: str) -> bool:
    """Whether setup judges the job by the pre-flight: not when it is off, and not when the job has a
    Kueue ``queue`` (its spec's or the deployment's ``default_queue``: Kueue then decides its admission,
    with the cluster's quotas, as one group)."""
    return mode != OFF and not queue


# ------------------------------------------------------------------------------------ amounts
def _milli(value: Any) -> int | None:
    """A quantity in thousandths of its base unit (millicores, millibytes), rounded up; None if unreadable."""
    return _milli_of(value) if isinstance(value, (str, int)) else _milli_uncached(value)


@functools.lru_cache(maxsize=4096)
def _milli_of(value: str | int) -> int | None:
    # A cluster's pods repeat a few quantities ("500m", "1Gi"): each is parsed once.
    return _milli_uncached(value)


def _milli_uncached(value: Any) -> int | None:
    amount = parse_quantity(value)
    if isinstance(amount, str) or amount < 0:
        return None
    return math.ceil(amount * 1000)


def show_amount(resource: str, milli: int) -> str:
    """A human amount of ``resource``: ``500m`` and ``4`` cpu, ``12Gi`` memory, ``8`` GPUs."""
    value = Fraction(milli, 1000)
    if resource == "cpu":
        return str(int(value)) if value.denominator == 1 else f"{milli}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size:
                shown = f"{float(value / size):.2f}".rstrip("0").rstrip(".")
                return f"{shown}{unit}"
        return f"{float(value):g}"
    return f"{float(value):g}"


def _amounts(resources: Mapping[str, str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in (resources or {}).items():
        milli = _milli(value)
        if milli is not None:
            out[str(name)] = milli
    return out


# ------------------------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"

    @property
    def passes(self) -> bool:
        """Added and removed by the node controllers with the node's conditions."""
        return self.key in CONDITION_TAINTS


@dataclass(frozen=True)
class Node:
    """What the pre-flight reads of one node."""

    name: str
    allocatable: Mapping[str, int]  # milli units
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True


def node_from_api(obj: Mapping[str, Any]) -> Node:
    """A node from the API's JSON (camelCase)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
    taints = tuple(Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
                   for t in spec.get("taints") or ())
    return Node(name=str(meta.get("name") or ""), allocatable=_amounts(status.get("allocatable")),
                labels=dict(meta.get("labels") or {}), taints=taints,
                unschedulable=bool(spec.get("unschedulable")), ready=ready)


# -------------------------------------------------------------------------------------- pods
@dataclass(frozen=True)
class PodDemand:
    """One pod of the job as the scheduler judges it."""

    name: str
    role: str
    requests: Mapping[str, int]  # milli units, with ``pods``: 1000
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[Mapping[str, Any], ...] | None = None  # required nodeSelectorTerms (ORed); None: any
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def constraints_key(self) -> tuple[Any, ...]:
        return (tuple(sorted(self.requests.items())), tuple(sorted(self.node_selector.items())),
                repr(self.affinity_terms), repr(self.tolerations))


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's requests; a resource with a limit and no request requests its limit (API defaulting)."""
    res = container.get("resources") or {}
    return {**_amounts(res.get("limits")), **_amounts(res.get("requests"))}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """A pod's effective requests as the scheduler computes them (milli units, ``pods`` included)."""
    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        _add(total, _container_requests(c))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":  # a sidecar: runs beside everything after it
            _add(sidecars, req)
            _max(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, req)
            _max(init_peak, running)
    _add(total, sidecars)
    _max(total, init_peak)
    pod_level = _amounts((spec.get("resources") or {}).get("requests"))
    total.update(pod_level)
    _add(total, _amounts(spec.get("overhead")))
    total = {k: v for k, v in total.items() if v > 0}
    total[PODS] = 1000
    return total


def pod_demand(pod: Mapping[str, Any]) -> PodDemand:
    """One of the job's pods, from its manifest (what setup creates)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = tuple(required.get("nodeSelectorTerms") or ()) if required else None
    labels = meta.get("labels") or {}
    return PodDemand(name=str(meta.get("name") or ""), role=str(labels.get("tfk8s.io/role") or "pod"),
                     requests=pod_requests(spec), node_selector=dict(spec.get("nodeSelector") or {}),
                     affinity_terms=terms, tolerations=tuple(spec.get("tolerations") or ()))


def bound_usage(pods: Iterable[Mapping[str, Any]], *, skip_label: tuple[str, str] | None = None
                ) -> dict[str, dict[str, int]]:
    """Requests of the pods bound to each node (``spec.nodeName``) and not ended: node -> milli units.

    ``skip_label``: pods with this label (the job's own, from an earlier try of setup) are not counted.
    """
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        if skip_label is not None and ((pod.get("metadata") or {}).get("labels") or {}).get(
                skip_label[0]) == skip_label[1]:
            continue
        _add(used.setdefault(str(node), {}), pod_requests(spec))
    return used


# ------------------------------------------------------------------------------- constraints
def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    exprs = term.get("matchExpressions") or ()
    fields_ = term.get("matchFields") or ()
    if not exprs and not fields_:
        return False  # an empty term matches no node
    if not all(_expression_matches(e, node.labels.get(str(e.get("key")))) for e in exprs):
        return False
    return all(_expression_matches(f, node.name if f.get("key") == "metadata.name" else None) for f in fields_)


def _affinity_matches(terms: tuple[Mapping[str, Any], ...] | None, node: Node) -> bool:
    return terms is None or any(_term_matches(t, node) for t in terms)


def _selector_matches(selector: Mapping[str, str], node: Node) -> bool:
    return all(node.labels.get(k) == v for k, v in selector.items())


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Taint) -> bool:
    for t in tolerations:
        effect = t.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        key = t.get("key") or ""
        op = t.get("operator") or "Equal"
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.key:
            continue
        if op == "Exists" or (op == "Equal" and str(t.get("value") or "") == taint.value):
            return True
    return False


def _untolerated(demand: PodDemand, node: Node, *, passing: bool) -> list[Taint]:
    """The node's NoSchedule/NoExecute taints the pod does not tolerate: the lasting ones, or (``passing``)
    the condition taints."""
    return [t for t in node.taints if t.effect in _FILTERED_EFFECTS and t.passes == passing
            and not _tolerates(demand.tolerations, t)]


def _available_now(demand: PodDemand, node: Node) -> bool:
    """Not cordoned (unless tolerated), Ready, no untolerated condition taint."""
    if node.unschedulable and not _tolerates(demand.tolerations, Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule")):
        return False
    return node.ready and not _untolerated(demand, node, passing=True)


def _fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(v <= free.get(k, 0) for k, v in request.items())


# ---------------------------------------------------------------------------------- verdict
@dataclass(frozen=True)
class Verdict:
    """The pre-flight's answer; ``placement`` (pod -> node) only with ``runs now``."""

    verdict: str
    reason: str
    placement: Mapping[str, str] = field(default_factory=dict)
    nodes: int = 0  # nodes some pod of the job may use (selector, affinity, lasting taints)


@dataclass
class _Class:
    """Pods of the job with the same requests and constraints (a role's replicas, usually)."""

    pods: list[PodDemand]
    eligible: list[Node] = field(default_factory=list)  # selector, affinity, lasting taints
    now: list[Node] = field(default_factory=list)  # and available now

    @property
    def first(self) -> PodDemand:
        return self.pods[0]

    @property
    def label(self) -> str:
        roles = sorted({p.role for p in self.pods})
        n = len(self.pods)
        return f"the {' and '.join(roles)} pod{'s' if n > 1 else ''} ({n})" if n > 1 else f"{self.pods[0].name}"


def _describe_selector(selector: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _never_unmatched(cls: _Class, nodes: Sequence[Node]) -> str:
    """Why no node is eligible for a class, naming the first constraint that leaves none."""
    d = cls.first
    if not nodes:
        return "the cluster has no nodes"
    pool = [n for n in nodes if _selector_matches(d.node_selector, n)]
    if not pool:
        missing = [f"{k}={v}" for k, v in sorted(d.node_selector.items())
                   if not any(n.labels.get(k) == v for n in nodes)]
        which = f" (no node has {', '.join(missing)})" if missing else " (no single node has all of these labels)"
        return (f"no node matches the node selector {_describe_selector(d.node_selector)} of {cls.label}{which}; "
                f"{len(nodes)} node(s) checked")
    pool2 = [n for n in pool if _affinity_matches(d.affinity_terms, n)]
    if not pool2:
        return (f"no node matches the required node affinity of {cls.label} "
                f"({_short(d.affinity_terms)}); {len(pool)} node(s) checked")
    counts: dict[str, int] = {}
    for n in pool2:
        for t in _untolerated(d, n, passing=False):
            counts[str(t)] = counts.get(str(t), 0) + 1
    worst = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    names = ", ".join(f"{t} (on {c} node(s))" for t, c in worst[:3])
    where = ("" if len(pool2) == len(nodes)
             else f" of the {len(pool2)} matching their node selector and affinity")
    return f"every node{where} has a taint that {cls.label} do not tolerate: {names}"


def _short(terms: Any) -> str:
    text = repr(terms)
    return text if len(text) <= 200 else text[:200] + "..."


def _never_size(cls: _Class) -> str | None:
    """Proof that even empty, no node (or all of them together) holds the class's pods."""
    d = cls.first
    if any(_fits(d.requests, n.allocatable) for n in cls.eligible):
        return _never_total([cls], cls.eligible, cls.label)
    scope = f"{len(cls.eligible)} node(s) they may use"
    for res, amount in sorted(d.requests.items()):
        largest = max((n.allocatable.get(res, 0) for n in cls.eligible), default=0)
        if amount > largest:
            return (f"no node has {show_amount(res, amount)} {res} for {cls.label}; the largest has "
                    f"{show_amount(res, largest)} (of the {scope})")
    needs = ", ".join(f"{show_amount(r, a)} {r}" for r, a in sorted(d.requests.items()) if r != PODS)
    return f"no node has room for one of {cls.label} even when empty (each needs {needs}; {scope})"


def _never_total(classes: Sequence[_Class], nodes: Sequence[Node], label: str) -> str | None:
    need: dict[str, int] = {}
    for c in classes:
        for p in c.pods:
            _add(need, p.requests)
    for res, amount in sorted(need.items()):
        have = sum(n.allocatable.get(res, 0) for n in nodes)
        if amount > have:
            what = "pods" if res == PODS else res
            return (f"{label} need {show_amount(res, amount)} {what} in all; the {len(nodes)} node(s) they may "
                    f"use have {show_amount(res, have)} even when empty")
    return None


def _dominant(request: Mapping[str, int], scale: Mapping[str, int]) -> float:
    return max((v / scale[k] if scale.get(k) else math.inf for k, v in request.items() if v), default=0.0)


def _pack(classes: Sequence[_Class], free: Mapping[str, Mapping[str, int]], scale: Mapping[str, int]
          ) -> tuple[dict[str, str], list[PodDemand]]:
    """First-fit decreasing: the largest classes first (most constrained first among equals); the nodes of
    each class in order of their free capacity, fullest first; ``(placement, pods not placed)``.

    The pods of a class are identical, and free capacity only shrinks, so a node that could not take one
    pod of a class takes none of the next: each class scans its nodes once."""
    left = {name: dict(f) for name, f in free.items()}
    placement: dict[str, str] = {}
    unplaced: list[PodDemand] = []
    order = sorted(classes, key=lambda c: (-_dominant(c.first.requests, scale), len(c.now), c.first.name))
    for cls in order:
        req = cls.first.requests
        nodes = sorted(cls.now, key=lambda n: (_dominant(left[n.name], scale), n.name))
        i = 0
        for pod in cls.pods:
            while i < len(nodes) and not _fits(req, left[nodes[i].name]):
                i += 1
            if i == len(nodes):
                unplaced.append(pod)
                continue
            name = nodes[i].name
            room = left[name]
            for k, v in req.items():
                room[k] = room.get(k, 0) - v
            placement[pod.name] = name
    return placement, unplaced


def _missing(classes: Sequence[_Class], unplaced: Sequence[PodDemand], free: Mapping[str, Mapping[str, int]]
             ) -> str:
    """What the job waits for: a resource short in total, else the largest free amount on one node."""
    usable = {n.name: n for c in classes for n in c.now}
    need: dict[str, int] = {}
    for c in classes:
        for p in c.pods:
            _add(need, p.requests)
    short = []
    for res, amount in sorted(need.items()):
        have = sum(max(free[n].get(res, 0), 0) for n in usable)
        if amount > have:
            what = "pods" if res == PODS else res
            short.append(f"needs {show_amount(res, amount)} {what}, {show_amount(res, have)} free")
    unavailable = len({n.name for c in classes for n in c.eligible} - set(usable))
    tail = f" ({unavailable} more node(s) it may use are cordoned or not Ready)" if unavailable else ""
    if short:
        where = f"on the {len(usable)} node(s) it may use now" if usable else "(no node it may use is available now)"
        return f"the job {'; '.join(short)} {where}{tail}"
    first = unplaced[0]
    cls = next(c for c in classes if first in c.pods)
    parts = []
    for res, amount in sorted(first.requests.items()):
        if res == PODS:
            continue
        best = max(((free[n.name].get(res, 0), n.name) for n in cls.now), default=(0, ""))
        if amount > best[0]:
            parts.append(f"{show_amount(res, amount)} {res} on one node, the most free is "
                         f"{show_amount(res, max(best[0], 0))}" + (f" (on {best[1]})" if best[1] else ""))
    detail = "; ".join(parts) or "room on one node (its resources are free, but spread over several nodes)"
    return f"{len(unplaced)} pod(s) do not fit now: {first.name} needs {detail}{tail}"


def judge(nodes: Sequence[Node], used: Mapping[str, Mapping[str, int]], pods: Sequence[PodDemand]) -> Verdict:
    """The verdict for placing all of ``pods`` on ``nodes`` whose bound pods request ``used`` (node -> milli)."""
    if not pods:
        return Verdict(RUNS_NOW, "the job has no pods", {}, 0)
    groups: dict[tuple[Any, ...], _Class] = {}
    for p in sorted(pods, key=lambda p: p.name):
        groups.setdefault(p.constraints_key(), _Class([])).pods.append(p)
    classes = list(groups.values())
    for cls in classes:
        d = cls.first
        cls.eligible = [n for n in nodes if _selector_matches(d.node_selector, n)
                        and _affinity_matches(d.affinity_terms, n) and not _untolerated(d, n, passing=False)]
        cls.now = [n for n in cls.eligible if _available_now(d, n)]
    eligible_names = {n.name for c in classes for n in c.eligible}
    for cls in classes:
        if not cls.eligible:
            return Verdict(NEVER, _never_unmatched(cls, nodes), {}, len(eligible_names))
    for cls in classes:
        reason = _never_size(cls)
        if reason:
            return Verdict(NEVER, reason, {}, len(eligible_names))
    if len(classes) > 1:
        reason = _never_total(classes, [n for n in nodes if n.name in eligible_names], "the job's pods")
        if reason:
            return Verdict(NEVER, reason, {}, len(eligible_names))
    scale: dict[str, int] = {}
    for n in nodes:
        if n.name in eligible_names:
            _max(scale, n.allocatable)
    free = {n.name: {k: v - (used.get(n.name) or {}).get(k, 0) for k, v in n.allocatable.items()} for n in nodes}
    placement, unplaced = _pack(classes, free, scale)
    if not unplaced:
        on = len(set(placement.values()))
        return Verdict(RUNS_NOW, f"all {len(pods)} pod(s) fit the free capacity of {on} node(s) "
                                 f"({len(eligible_names)} node(s) they may use)", placement, len(eligible_names))
    reason = _missing(classes, unplaced, free)
    empty = {n.name: dict(n.allocatable) for n in nodes}
    for cls in classes:  # would it fit on empty nodes? (only said: it is no proof of never)
        cls.now = list(cls.eligible)
    if _pack(classes, empty, scale)[1]:
        reason += ("; no placement was found even on empty nodes (first-fit-decreasing): the job may never fit "
                   "as the nodes are")
    return Verdict(WAITS, reason, {}, len(eligible_names))


# ----------------------------------------------------------------------------------- record
@dataclass(frozen=True)
class PreflightRecord:
    """Setup's XCom ``preflight``: the verdict the job was created (or refused) with."""

    verdict: str  # runs now | waits | never | skipped
    reason: str
    mode: str
    nodes: int = 0  # nodes the job's pods may use
    pods: int = 0  # the job's pods judged
    waited_s: float = 0.0  # how long setup waited for capacity
    seconds: float = 0.0  # the last verdict's time: its two LISTs and the packing

    def to_xcom(self) -> dict[str, Any]:
        return {"version": RECORD_VERSION, "verdict": self.verdict, "reason": self.reason, "mode": self.mode,
                "nodes": self.nodes, "pods": self.pods, "waited_s": round(self.waited_s, 3),
                "seconds": round(self.seconds, 4)}

    @classmethod
    def from_xcom(cls, data: Any) -> PreflightRecord:
        if not isinstance(data, Mapping) or data.get("version") != RECORD_VERSION:
            raise RecordError(f"preflight record: expected a mapping of version {RECORD_VERSION}, got {data!r:.200} "
                              "(fix: clear the task group so every task of the run uses one release)")
        if data.get("verdict") not in (RUNS_NOW, WAITS, NEVER, SKIPPED):
            raise RecordError(f"preflight record: unknown verdict {data.get('verdict')!r}")
        return cls(verdict=str(data["verdict"]), reason=str(data.get("reason") or ""), mode=str(data.get("mode")),
                   nodes=int(data.get("nodes") or 0), pods=int(data.get("pods") or 0),
                   waited_s=float(data.get("waited_s") or 0), seconds=float(data.get("seconds") or 0))


def check_mode(mode: Any, fld: str = "preflight") -> str:
    """An operator's ``preflight`` argument, or SpecError naming it."""
    value = parse_mode(mode)
    if isinstance(value, Problem):
        raise SpecError(Problem(fld, value.message, "pass off, warn or enforce, or None for the deployment's"))
    return value
