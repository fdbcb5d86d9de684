"""The TF job spec: a frozen, typed description of one distributed TensorFlow job.

Why frozen and separate from Airflow: the same spec arrives from Python, a YAML
file, a UI parameter form or ``dag_run.conf``; it is validated once, before any
object exists in a cluster, and then only read. Parsing (:mod:`tfk8s_airflow.job.spec.parse`)
collects every problem instead of stopping at the first, so a user fixes a spec in one
round trip. ``to_dict`` round-trips through ``parse_spec`` so a spec can travel through XCom.
The parser imports this module, never the other way round (docs/architecture.md).

The spec's fields are written once, here: every dataclass field with ``key()`` metadata is
a key of the spec document. The parser's list of known keys, ``to_dict`` and the field
table of docs/spec.md are all derived from these declarations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tfk8s_airflow.contract import DEFAULT_CODE_DIR, DEFAULT_PORT
from tfk8s_airflow.job import defaults
from tfk8s_airflow.job.defaults import MAX_REPLICAS as DEFAULT_MAX_REPLICAS
from tfk8s_airflow.job.defaults import duration_text
from tfk8s_airflow.job.spec.document import apply_overrides, load_spec_file

__all__ = ["ROLES", "DEFAULT_MAX_REPLICAS", "WIRINGS", "SUCCESS_POLICIES", "RESTART_POLICIES", "PULL_POLICIES",
           "CHIEF_NAMES", "CLEAN_POD_POLICIES", "ADMISSIONS", "TOPOLOGY_MODES", "Topology", "SPEC_KEYS", "ROLE_KEYS",
           "VALUE_SOURCES",
           "ENV_FROM_SOURCES", "VOLUME_KINDS", "ValueFrom",
           "EnvFrom", "EmptyDir", "Resources", "Volume", "CodeSource", "RoleSpec", "TFJobSpec", "key", "spec_fields",
           "plain", "apply_overrides", "load_spec_file"]

#: Role names in TF_CONFIG order (TFJob sorts cluster keys the same way).
ROLES = ("chief", "evaluator", "ps", "worker")
WIRINGS = ("tf_config", "flags", "both", "none")
#: What the chief is called in TF_CONFIG and the flags: chief, or master (TFJob's Master replicas).
CHIEF_NAMES = ("chief", "master")
SUCCESS_POLICIES = ("default", "all_workers")
RESTART_POLICIES = ("Never", "OnFailure", "ExitCode")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
#: What teardown does with the job's finished pods: All deletes them with the rest; Running and None keep the
#: finished ones (phase Succeeded or Failed) for ``finished_pod_ttl``. Running pods are always deleted.
CLEAN_POD_POLICIES = ("All", "Running", "None")
#: Who decides that the whole job may start (docs/jobs.md, "Admission").
ADMISSIONS = ("auto", "gate", "kueue", "workload")
#: How strictly Kueue keeps a job's pods within one topology domain (``topology:``).
TOPOLOGY_MODES = ("required", "preferred")

#: How a role block treats a job-wide key: replaces the job's value, adds to it, or is merged over it
#: with the strategic-merge rules (:func:`tfk8s_airflow.job.spec.podtemplate.merge_templates`).
OVERRIDE, MERGE, PATCH = "override", "merge", "patch"


def key(doc: str, *, role: str | None = None, default: str = "", empty_is_a_value: bool = False) -> dict[str, Any]:
    """Metadata of a dataclass field that is a key of the spec document.

    ``doc``: the one line docs/spec.md's field table shows; ``role``: whether a role block
    may set the key too (``override`` replaces the job-wide value, ``merge`` adds to it, ``patch``
    merges the role's over it as kubectl's strategic merge does);
    ``default``: the default as the table shows it; ``empty_is_a_value``: the key left out (None)
    and the key given empty (``command: []``) mean different things, so ``to_dict`` keeps the empty one.
    """
    meta: dict[str, Any] = {"doc": doc, "default": default}
    if role:
        meta["role"] = role
    if empty_is_a_value:
        meta["empty_is_a_value"] = True
    return meta


def spec_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    """The fields of a spec dataclass that are keys of the spec document, in declaration order."""
    return tuple(f for f in dataclasses.fields(cls) if "doc" in f.metadata)


def plain(value: Any) -> Any:
    """A spec value as plain data (lists, dicts, scalars) for ``to_dict``."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def _empty(value: Any) -> bool:
    """Left out of ``to_dict``: None, empty text, empty collections and empty Resources."""
    return value is None or (not isinstance(value, (bool, int)) and not value)


def _frozen_map(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(data or {}))


#: Where an env value may come from (``value_from``): a Secret's key, a ConfigMap's key, a pod field.
VALUE_SOURCES = ("secret_key_ref", "config_map_key_ref", "field_ref")
#: What ``env_from`` may import whole: a Secret or a ConfigMap.
ENV_FROM_SOURCES = ("secret_ref", "config_map_ref")
#: The kinds of volume a spec may mount (exactly one per volume).
VOLUME_KINDS = ("host_path", "pvc", "secret", "config_map", "empty_dir")


@dataclass(frozen=True)
class ValueFrom:
    """An environment variable's value taken from a Secret, a ConfigMap or the pod (``value_from``).

    The value itself never passes through tfk8s-airflow: the kubelet reads it when the
    container starts, so it is in no XCom, log or rendered manifest.
    """

    source: str  # one of VALUE_SOURCES
    name: str = ""  # the Secret or ConfigMap
    key: str = ""  # its key
    field_path: str = ""  # field_ref: metadata.name, status.podIP, metadata.labels['x'] ...
    optional: bool = False

    def to_dict(self) -> dict[str, Any]:
        if self.source == "field_ref":
            ref: dict[str, Any] = {"field_path": self.field_path}
        else:
            ref = {"name": self.name, "key": self.key}
            if self.optional:
                ref["optional"] = True
        return {"value_from": {self.source: ref}}


@dataclass(frozen=True)
class EnvFrom:
    """Every key of a Secret or ConfigMap as an environment variable (``env_from``), optionally prefixed."""

    source: str  # one of ENV_FROM_SOURCES
    name: str
    prefix: str = ""
    optional: bool = False

    def to_dict(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"name": self.name}
        if self.optional:
            ref["optional"] = True
        out: dict[str, Any] = {self.source: ref}
        if self.prefix:
            out["prefix"] = self.prefix
        return out


@dataclass(frozen=True)
class EmptyDir:
    """A scratch directory that lives as long as the pod; ``medium: Memory`` for a tmpfs."""

    medium: str = ""
    size_limit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.medium:
            out["medium"] = self.medium
        if self.size_limit:
            out["size_limit"] = self.size_limit
        return out


@dataclass(frozen=True)
class Volume:
    """A named mount (data, logs, model, credentials...): exactly one of :data:`VOLUME_KINDS`.

    GlusterFS reaches pods through a hostPath (the node mounts it) or a PVC of a CSI driver:
    the in-tree ``glusterfs`` volume was removed in Kubernetes 1.26. ``secret`` and
    ``config_map`` mount a Secret's or ConfigMap's keys as files; ``empty_dir`` is scratch space.
    """

    name: str
    mount_path: str
    host_path: str | None = None
    pvc: str | None = None
    read_only: bool = False
    sub_path: str | None = None
    secret: str | None = None
    config_map: str | None = None
    empty_dir: EmptyDir | None = None

    @property
    def kind(self) -> str:
        return next((k for k in VOLUME_KINDS if getattr(self, k) is not None), "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "mount_path": self.mount_path}
        for name in ("host_path", "pvc", "secret", "config_map", "sub_path"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.empty_dir is not None:
            out["empty_dir"] = self.empty_dir.to_dict()
        if self.read_only:
            out["read_only"] = True
        return out


@dataclass(frozen=True)
class CodeSource:
    """Training code fetched into every replica by an init container (seed/TonY style)."""

    uri: str
    entrypoint: str = "run.sh"
    sha256: str | None = None
    image: str | None = None  # image of the fetch init container; defaults to the job's
    mount_path: str = DEFAULT_CODE_DIR

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "entrypoint": self.entrypoint,
                               "mount_path": self.mount_path}
        if self.sha256:
            out["sha256"] = self.sha256
        if self.image:
            out["image"] = self.image
        return out


@dataclass(frozen=True)
class Topology:
    """Kueue's topology-aware placement of a queued job's pods (``topology:``): every pod within one domain of
    the node label ``level`` (a block, a rack), ``required`` (the job waits for a domain with room) or
    ``preferred`` (as few domains as fit)."""

    mode: str  # "required" or "preferred"
    level: str  # a node label key, a level of the cluster's Kueue Topology

    def to_dict(self) -> dict[str, Any]:
        return {self.mode: self.level}


@dataclass(frozen=True)
class TensorBoard:
    """A TensorBoard for the job (``tensorboard:``): one pod serving the summaries under ``log_dir``.

    It mounts the volume that holds ``log_dir`` read-only, is reached on the job's Service at
    ``port``, and is deleted with the job. ``image`` defaults to the job's (a TensorFlow image
    ships the ``tensorboard`` program).
    """

    log_dir: str  # a path inside the pods, under one of the job's volumes
    image: str | None = None
    port: int = 6006

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"enabled": True, "log_dir": self.log_dir, "port": self.port}
        if self.image:
            out["image"] = self.image
        return out


@dataclass(frozen=True)
class Resources:
    """A container's requests and limits (``resources:`` in either of its two forms).

    The short form ``{cpu: 2, memory: 4Gi}`` means requests = limits; Kubernetes' own form
    ``{requests: {...}, limits: {...}}`` may request less than it limits. A resource given only
    a limit is requested at the limit, as the API server defaults it.
    """

    requests: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", _frozen_map(self.requests))
        object.__setattr__(self, "limits", _frozen_map(self.limits))

    def __bool__(self) -> bool:
        return bool(self.requests or self.limits)

    def to_dict(self) -> dict[str, Any]:
        if dict(self.requests) == dict(self.limits):
            return dict(self.requests)
        out: dict[str, Any] = {}
        if self.requests:
            out["requests"] = dict(self.requests)
        if self.limits:
            out["limits"] = dict(self.limits)
        return out

    def to_kubernetes(self) -> dict[str, dict[str, str]]:
        """The container's ``resources``: requests and limits, each only when not empty."""
        out = {}
        if self.requests:
            out["requests"] = dict(self.requests)
        if self.limits:
            out["limits"] = dict(self.limits)
        return out


@dataclass(frozen=True)
class RoleSpec:
    """One role's replicas and its overrides of the job-wide settings (already merged).

    Its keys are ``replicas``, ``tracked`` and ``gang_min`` (declared here) and every job-wide key declared
    with ``role=`` (see :data:`ROLE_KEYS`).
    """

    role: str
    replicas: int = field(metadata=key("replicas of the role: `worker` >= 1, `chief` and `evaluator` 0 or 1, "
                                       "`ps` >= 0", default="1 (ps: 0)"))
    image: str
    command: tuple[str, ...] | None
    args: tuple[str, ...]
    env: Mapping[str, str | ValueFrom]
    env_from: tuple[EnvFrom, ...]
    resources: Resources
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    restart_policy: str
    tracked: bool = field(metadata=key(
        "whether the replicas' outcome counts for the job's success; a PS is never tracked",
        default="true (ps: false)"))
    annotations: Mapping[str, str] = field(default_factory=dict)
    pod_template: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    gang_min: int | None = field(default=None, metadata=key(
        "with `admission: workload`: how many of the role's replicas kube-scheduler must place together before "
        "it binds any of them; stating it on any role gives every role a PodGroup of its own (docs/jobs.md, "
        "\"Admission\")", default="all the role's replicas, in one PodGroup of the whole job"))

    @property
    def pod_restart_policy(self) -> str:
        """ExitCode is TFJob's: the pod is Never (the kubelet never runs the program again in place); the
        job's recovery recreates it for a retryable exit code (>= 128), within ``max_restarts``."""
        return "Never" if self.restart_policy == "ExitCode" else self.restart_policy

    def to_dict(self, job: TFJobSpec) -> dict[str, Any]:
        """The role block: its own keys, and the job-wide ones where this role differs."""
        out: dict[str, Any] = {}
        for name in ROLE_KEYS:
            value = getattr(self, name)
            how = _JOB_ROLE_KEYS.get(name)
            if how is None:
                if value is not None:  # gang_min left out
                    out[name] = plain(value)
                continue
            job_value = getattr(job, name)
            if how == PATCH:  # the merged template: merging it over the job's again gives itself
                if value != job_value:
                    out[name] = plain(value)
            elif how == MERGE:
                if isinstance(value, Mapping):
                    extra: Any = {k: v for k, v in value.items() if job_value.get(k) != v}
                else:  # a list: the role's items follow the job's
                    extra = value[len(job_value):]
                if extra:
                    out[name] = plain(extra)
            elif value != job_value and value is not None:
                out[name] = plain(value)
        return out


@dataclass(frozen=True)
class TFJobSpec:
    """A validated distributed TensorFlow job. Build with :func:`~tfk8s_airflow.job.spec.parse_spec`."""

    name: str = field(metadata=key("required; a DNS-1123 label, the readable part of every object's name"))
    namespace: str = field(metadata=key("the job's namespace", default="default"))
    image: str = field(metadata=key("the training image (required here or in every role)", role=OVERRIDE))
    image_pull_policy: str = field(metadata=key(
        "Always, IfNotPresent or Never; unset, Kubernetes decides (Always for an image tagged :latest or untagged, "
        "IfNotPresent otherwise)", default="unset"))
    command: tuple[str, ...] | None = field(metadata=key(
        "the container's command, a list; default: the image's entrypoint (or the code's, with `code`); `[]`: "
        "the image's entrypoint, also with `code` or over the job's command in a role", role=OVERRIDE,
        empty_is_a_value=True))
    args: tuple[str, ...] = field(metadata=key("the container's arguments, a list", role=OVERRIDE))
    env: Mapping[str, str | ValueFrom] = field(metadata=key(
        "environment variables `NAME: value` or `NAME: {value_from: {secret_key_ref: {name, key}}}` "
        "(also config_map_key_ref, field_ref); `TF_CONFIG` and `TFK8S_*` are reserved", role=MERGE))
    env_from: tuple[EnvFrom, ...] = field(metadata=key(
        "`[{secret_ref: NAME, prefix: DB_}]` or `config_map_ref`: every key of a Secret or ConfigMap "
        "as a variable", role=MERGE))
    resources: Resources = field(metadata=key(
        "`{cpu: 2, memory: 4Gi, nvidia.com/gpu: 1}` (requests = limits) or `{requests: {...}, limits: {...}}`",
        role=OVERRIDE))
    node_selector: Mapping[str, str] = field(metadata=key("node labels the pods must match", role=OVERRIDE))
    tolerations: tuple[Mapping[str, Any], ...] = field(metadata=key(
        "`[{key, operator: Equal|Exists, value, effect, toleration_seconds}]`", role=OVERRIDE))
    port: int = field(metadata=key("every replica's TensorFlow server port", default=str(DEFAULT_PORT)))
    tf_wiring: str = field(metadata=key(
        "tf_config (`TF_CONFIG`), flags (`--ps_hosts ...`), both, or none (TFJob's way for a one-replica job)",
        default="tf_config"))
    success_policy: str = field(metadata=key(
        "default (the chief, else worker 0) or all_workers", default="default"))
    restart_policy: str = field(metadata=key(
        "Never, OnFailure or ExitCode (1-127 permanent, >= 128 retried); a PS only by its own key",
        role=OVERRIDE, default="OnFailure (ps: Never)"))
    max_restarts: int = field(metadata=key("restart budget per replica", default=str(defaults.MAX_RESTARTS)))
    schedule_timeout: int = field(metadata=key(
        "a pod Unschedulable this long fails the job (a duration)", default=duration_text(defaults.SCHEDULE_TIMEOUT_S)))
    startup_timeout: int = field(metadata=key(
        "a pod not Running this long (image pull...) fails the job (a duration)",
        default=duration_text(defaults.STARTUP_TIMEOUT_S)))
    admission_timeout: int | None = field(metadata=key(
        "a pod held this long by another controller's scheduling gate (a queue's admission, such as "
        "Kueue's) fails the job (a duration); such a pod is not judged by startup_timeout",
        default="none: until active_deadline"))
    queue: str | None = field(metadata=key(
        "a Kueue LocalQueue of the job's namespace: the pods form one Kueue pod group, admitted whole by the "
        "cluster's quota (docs/jobs.md, \"Gang admission with Kueue\"); a TFJob's `kueue.x-k8s.io/queue-name` label "
        "maps to it", default="the deployment's default_queue, else none"))
    admission: str | None = field(metadata=key(
        "who decides that the whole job may start: gate (setup releases the pods once all exist; each is then "
        "scheduled on its own), kueue (a Kueue queue admits them whole against its quota; needs queue), workload "
        "(kube-scheduler places all of them or none: Kubernetes' Workload API, 1.37+), or auto (kueue with a queue, "
        "workload where the cluster serves it and the deployment's auto_workload allows it, gate otherwise); "
        "docs/jobs.md, \"Admission\"", default="the deployment's admission, else auto"))
    topology: Topology | None = field(metadata=key(
        "with Kueue admission: `{required: <node label>}` or `{preferred: <node label>}`, a level of the cluster's "
        "Kueue Topology (e.g. a block or rack label): Kueue places every pod within one domain of that level "
        "(required: the job waits for one with room) or as few as fit (preferred); docs/jobs.md, \"Gang admission "
        "with Kueue\"",
        default="none"))
    priority_class: str | None = field(metadata=key(
        "with `queue`: a Kueue WorkloadPriorityClass of the cluster (the label `kueue.x-k8s.io/priority-class`); a "
        "higher one may preempt a running job of the same ClusterQueue", default="none"))
    active_deadline: int | None = field(metadata=key(
        "the whole job's deadline (a duration), also the pods' activeDeadlineSeconds",
        default="the deployment's default_active_deadline"))
    group_restarts: int = field(metadata=key(
        "group restarts (every pod recreated, training resumes from the checkpoint) for a `code` or "
        "`stalled` failure", default=str(defaults.GROUP_RESTARTS)))
    infra_restarts: int = field(metadata=key(
        "replacements and group restarts for `infrastructure` failures (preemption, eviction, node loss) "
        "and OOM relaunches; never spends group_restarts or max_restarts", default=str(defaults.INFRA_RESTARTS)))
    restart_backoff: int = field(metadata=key("wait before a group restart or a replacement (a duration)",
                                              default=duration_text(defaults.RESTART_BACKOFF_S)))
    progress_timeout: int | None = field(metadata=key(
        "no new global step for this long fails the replica group as `stalled` (a duration)", default="off"))
    straggler_timeout: int | None = field(metadata=key(
        "once the success policy is met (all_workers: once the lead finished), the tracked replicas still "
        "running get this long: then all_workers fails naming them, default stops them (a duration)",
        default="off"))
    node_lost_grace: int = field(metadata=key(
        "a NotReady or unreachable node's replicas count as lost after this long and are replaced elsewhere "
        "(a duration)", default=duration_text(defaults.NODE_LOST_GRACE_S)))
    oom_memory_factor: float | None = field(metadata=key(
        "relaunch an OOMKilled replica with its memory times this (> 1), up to max_memory", default="off"))
    max_memory: str | None = field(metadata=key(
        "the most memory an OOM relaunch may give a replica (a quantity, e.g. 16Gi)",
        default="none: infra_restarts bounds the relaunches"))
    clean_pod_policy: str = field(metadata=key(
        "what teardown does with the job's finished pods (phase Succeeded or Failed): All deletes them with the rest; "
        "Running or None keeps them for finished_pod_ttl, then deletes them. Running pods (parameter servers, "
        "stragglers, the TensorBoard) are deleted at once under every policy", default="All"))
    finished_pod_ttl: int = field(metadata=key(
        "with clean_pod_policy Running or None: how long the finished pods are kept after teardown deleted the rest "
        "(a duration; 0 keeps none); teardown, and so the DAG run, ends after it",
        default=duration_text(defaults.FINISHED_POD_TTL_S)))
    tensorboard: TensorBoard | None = field(metadata=key(
        "`{enabled: true, log_dir, image, port: 6006}`: a TensorBoard pod for the job's summaries, on the "
        "job's Service; log_dir defaults to the `model` volume's mount path", default="off"))
    labels: Mapping[str, str] = field(metadata=key("labels of every object; `tfk8s.io/` is reserved"))
    annotations: Mapping[str, str] = field(metadata=key("annotations of every pod", role=MERGE))
    pod_template: Mapping[str, Any] = field(metadata=key(
        "a Kubernetes PodTemplateSpec fragment (`metadata` labels and annotations; `spec`: affinity, "
        "priorityClassName, imagePullSecrets, securityContext, sidecars, init containers, volumes, and the "
        "`tensorflow` container's probes, env, mounts...) merged into every pod by kubectl's strategic-merge "
        "rules; a role's is merged over the job's", role=PATCH))
    service_account: str | None = field(metadata=key(
        "the pods' ServiceAccount; the deployment's allowed_service_accounts bound it",
        default="the namespace's default"))
    automount_service_account_token: bool = field(metadata=key(
        "give the pods their ServiceAccount's API token; the deployment's allow_service_account_token must allow it",
        default="false"))
    volumes: tuple[Volume, ...] = field(metadata=key(
        "`[{name, mount_path, host_path | pvc | secret | config_map | empty_dir, read_only, sub_path}]`"))
    hide_evaluator: bool = field(metadata=key("keep the evaluator out of every replica's cluster", default="false"))
    chief_name: str = field(metadata=key(
        "the chief's name in TF_CONFIG and the flags: chief, or master (TFJob's `Master` replicas)", default="chief"))
    code: CodeSource | None = field(metadata=key(
        "`{uri, entrypoint, sha256, image, mount_path}`: code fetched before the container starts"))
    kubeflow_labels: bool = field(metadata=key(
        "the pods also carry the TFJob operator's labels `training.kubeflow.org/job-name`, `replica-type`, "
        "`replica-index` and `job-role` (what programs written for TFJob read); a converted TFJob sets it",
        default="false"))
    roles: Mapping[str, RoleSpec] = field(default_factory=dict)

    # ------------------------------------------------------------------ access
    def replicas(self, role: str) -> int:
        r = self.roles.get(role)
        return r.replicas if r else 0

    @property
    def active_roles(self) -> tuple[RoleSpec, ...]:
        """Roles with at least one replica, in TF_CONFIG order."""
        return tuple(self.roles[r] for r in ROLES if r in self.roles and self.roles[r].replicas > 0)

    @property
    def total_replicas(self) -> int:
        return sum(r.replicas for r in self.roles.values())

    def replica_ids(self) -> list[tuple[str, int]]:
        return [(r.role, i) for r in self.active_roles for i in range(r.replicas)]

    def success_replicas(self) -> list[tuple[str, int]]:
        """Replicas whose success makes the job succeed (with tracked evaluators)."""
        if self.success_policy == "all_workers":
            ids = [("worker", i) for i in range(self.replicas("worker"))
                   if self.roles["worker"].tracked]
            if self.replicas("chief"):
                ids.insert(0, ("chief", 0))
        else:
            ids = [("chief", 0)] if self.replicas("chief") else [("worker", 0)]
        if self.replicas("evaluator") and self.roles["evaluator"].tracked:
            ids.append(("evaluator", 0))
        return ids

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data; ``parse_spec(s.to_dict()) == s``."""
        out: dict[str, Any] = {}
        for f in spec_fields(TFJobSpec):
            value = getattr(self, f.name)
            kept = value is not None if f.metadata.get("empty_is_a_value") else not _empty(value)
            if kept:
                out[f.name] = plain(value)
        for role, rs in self.roles.items():
            out[role] = rs.to_dict(self)
        return out


#: Job-wide keys a role block may set too, and how (override or merge).
_JOB_ROLE_KEYS: dict[str, str] = {f.name: f.metadata["role"] for f in spec_fields(TFJobSpec) if "role" in f.metadata}
#: Every key of a spec document: the job-wide ones and the role blocks.
SPEC_KEYS: tuple[str, ...] = tuple(f.name for f in spec_fields(TFJobSpec)) + ROLES
#: Every key of a role block: its own (replicas, tracked, gang_min) and the job-wide ones it may set.
ROLE_KEYS: tuple[str, ...] = tuple(f.name for f in spec_fields(RoleSpec)) + tuple(_JOB_ROLE_KEYS)
