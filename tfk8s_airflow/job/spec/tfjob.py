"""A Kubeflow ``TFJob`` manifest (``kubeflow.org/v1``) as a native spec document.

Why convert instead of supporting a second format: one rule set applies. A TFJob becomes the
spec a user would have written (:func:`to_native`), which is then parsed, admitted by the
deployment's policy and rendered like any other, so ``tfk8s import`` can print it and a
test can prove both give the same pods. What a TFJob says and we can honour is mapped
field by field; what we cannot is refused, naming the TFJob field; where our behaviour
differs on purpose, a note says how (docs/migration-tfjob.md has the whole table).

The mapping, in short:

- ``metadata.name``/``namespace``/``labels`` -> ``name``/``namespace``/``labels``, but Kueue's
  ``kueue.x-k8s.io/queue-name`` and ``priority-class`` labels -> ``queue`` and ``priority_class``
  (the pods then form one Kueue pod group instead of one Workload each);
- ``tfReplicaSpecs`` (``PS``, ``Worker``, ``Chief``, ``Master``, ``Evaluator``, any case) -> the
  role blocks; ``Master`` is the chief with ``chief_name: master`` (TF_CONFIG says ``master``,
  as under TFJob); ``replicas`` -> ``replicas``; ``restartPolicy`` (default ``Never``) ->
  ``restart_policy``, ``Always`` refused (a replica that restarts after it succeeded never
  finishes);
- each ``template`` -> the role's ``pod_template``, with what a spec key says lifted out of it:
  the ``tensorflow`` container's ``image``, ``command``, ``args``, ``env`` (text and Secret,
  ConfigMap or pod-field values), ``envFrom``, ``resources``, ``imagePullPolicy`` and port
  ``tfjob-port`` (-> ``port``), and the pod's ``nodeSelector``, ``tolerations``,
  ``serviceAccountName``, ``automountServiceAccountToken``;
- ``runPolicy``: ``activeDeadlineSeconds`` -> ``active_deadline``, ``backoffLimit`` ->
  ``max_restarts`` (per replica here, job-wide in TFJob), ``schedulingPolicy.priorityClass`` ->
  ``pod_template.spec.priorityClassName``, ``scheduleTimeoutSeconds`` -> ``schedule_timeout``,
  ``minAvailable`` only equal to the replica count (every pod is created together);
  ``cleanPodPolicy`` ``Running``/``None`` -> ``clean_pod_policy`` (teardown keeps the finished pods
  for ``finished_pod_ttl``, from ``ttlSecondsAfterFinished`` when given; running pods are deleted
  at once even under ``None``), unset or ``All`` deletes every pod when the job ends;
- ``successPolicy``: ``""`` -> ``default``; ``AllWorkers`` -> ``all_workers`` without a chief,
  ``default`` with one (TFJob then decides by the chief alone);
- a job of one replica gets no TF_CONFIG (``tf_wiring: none``), as TFJob does;
- ``metadata.generateName`` names the job by its prefix (every run's objects are unique anyway);
  the run policy fields written directly under ``spec`` (v1beta2's placement, still in published
  v1 manifests) are read as ``spec.runPolicy``; v1beta2, v1beta1 and v1alpha2 are read as v1.

Every problem names the TFJob field as the manifest wrote it: :class:`Conversion` records where
each native key came from (``origins``), and :meth:`Conversion.renamed` rewrites the native
spec's and the deployment's problems with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfk8s_airflow.contract import CONTAINER_NAME, PORT_NAME
from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job.kueue import PRIORITY_LABEL as KUEUE_PRIORITY_LABEL
from tfk8s_airflow.job.kueue import QUEUE_LABEL as KUEUE_QUEUE_LABEL
from tfk8s_airflow.job.spec.fields import parse_int, show

__all__ = ["API_VERSION", "CONVERTED_VERSIONS", "KIND", "REPLICA_TYPES", "Conversion", "is_tfjob", "to_native"]

API_VERSION = "kubeflow.org/v1"
#: Older versions whose fields map one to one onto v1's (their run policy sat directly under ``spec``).
CONVERTED_VERSIONS = ("kubeflow.org/v1beta2", "kubeflow.org/v1beta1", "kubeflow.org/v1alpha2")
#: Run policy fields that older versions (and many published v1 manifests) write directly under ``spec``.
_SPEC_LEVEL_RUN_POLICY = ("cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit",
                          "schedulingPolicy")
#: Keys written one level off, and where they belong: (where found, key) -> the path to write.
_MOVES = {("", "tfReplicaSpecs"): "spec.tfReplicaSpecs", ("", "runPolicy"): "spec.runPolicy",
          ("", "successPolicy"): "spec.successPolicy", ("spec.runPolicy", "tfReplicaSpecs"): "spec.tfReplicaSpecs",
          ("spec.runPolicy", "successPolicy"): "spec.successPolicy"}
KIND = "TFJob"
#: TFJob's replica types (matched without regard to case) -> our roles.
REPLICA_TYPES = {"chief": "chief", "master": "chief", "evaluator": "evaluator", "ps": "ps", "worker": "worker"}
_ROLE_ORDER = ("chief", "evaluator", "ps", "worker")
_RESTART_POLICIES = ("Never", "OnFailure", "ExitCode")
_MANAGED_BY = "kubeflow.org/training-operator"
#: Object metadata the API server writes (a manifest exported with kubectl get -o yaml has them).
_SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
                    "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "ownerReferences")
#: Schedulers that start a pod only once its PodGroup admits it (Volcano, Kubernetes' scheduler-plugins).
_GANG_SCHEDULERS = ("volcano", "scheduler-plugins-scheduler")
#: The pod metadata those schedulers read the group from (Volcano's annotation, scheduler-plugins' label).
_GANG_KEYS = ("scheduling.k8s.io/group-name", "scheduling.x-k8s.io/pod-group")
_VALUE_REFS = {"secretKeyRef": "secret_key_ref", "configMapKeyRef": "config_map_key_ref", "fieldRef": "field_ref"}
_ENV_FROM_REFS = {"secretRef": "secret_ref", "configMapRef": "config_map_ref"}


@dataclass(frozen=True)
class Conversion:
    """The native spec document of a TFJob, notes on what behaves differently here, and where each
    native key came from (``origins``: native key -> the TFJob field as the manifest wrote it)."""

    spec: dict[str, Any]
    notes: tuple[str, ...] = ()
    origins: tuple[tuple[str, str], ...] = ()

    def tfjob_field(self, native: str) -> str:
        """The TFJob field a native key (or a path under it) stands for; the native key when none does."""
        best = ""
        for key, _ in self.origins:
            if len(key) > len(best) and (native == key or native.startswith((key + ".", key + "["))):
                best = key
        if not best:
            return native
        return dict(self.origins)[best] + _camel(native[len(best):])

    def renamed(self, problems: list[Problem]) -> list[Problem]:
        """The problems of the native spec, each naming the TFJob field as the manifest wrote it."""
        out = []
        for p in problems:
            fld = self.tfjob_field(p.field)
            message = p.message if fld == p.field else f"{p.message} (the native spec's {p.field})"
            out.append(Problem(fld, message, p.fix))
        return out


def _camel(path: str) -> str:
    """A native path's snake_case segments (value_from.secret_key_ref) as Kubernetes writes them."""
    return re.sub(r"(?<=[.])([a-z]+(?:_[a-z]+)+)(?=$|[.\[])",
                  lambda m: re.sub(r"_([a-z])", lambda x: x.group(1).upper(), m.group(1)), path)


def is_tfjob(doc: Any) -> bool:
    """A TFJob manifest (of any kubeflow.org version: :func:`to_native` accepts v1 only)."""
    return (isinstance(doc, Mapping) and doc.get("kind") == KIND
            and str(doc.get("apiVersion", "")).startswith("kubeflow.org/"))


class _Converter:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.origins: dict[str, str] = {}

    def origin(self, native: str, tfjob_field: str) -> None:
        self.origins.setdefault(native, tfjob_field)

    def add(self, fld: str, message: str, fix: str = "") -> None:
        self.problems.append(Problem(fld, message, fix))

    def mapping(self, value: Any, fld: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(fld, f"must be a mapping, got {type(value).__name__}")
            return {}
        return value

    def unknown(self, d: Mapping[str, Any], known: tuple[str, ...], fld: str) -> None:
        for k in d:
            if k in known:
                continue
            where = f"{fld}.{k}" if fld else str(k)
            move = _MOVES.get((fld, k))
            if move:
                self.add(where, f"is not where a TFJob has it (it belongs at {move})", f"move it to {move}")
            else:
                self.add(where, "is not a TFJob field", "remove it or correct its name (docs/migration-tfjob.md "
                         "lists every field)")

    def integer(self, d: Mapping[str, Any], key: str, fld: str, low: int = 0) -> int | None:
        if d.get(key) is None:
            return None
        num = parse_int(d[key])
        if num is None or num < low:
            self.add(f"{fld}.{key}", f"must be an integer >= {low}, got {show(d[key])}")
            return None
        return num


def to_native(doc: Mapping[str, Any]) -> Conversion:
    """The native spec document of a TFJob manifest. Raises SpecError naming the TFJob's fields."""
    c = _Converter()
    version = doc.get("apiVersion")
    if version in CONVERTED_VERSIONS:
        c.notes.append(f"apiVersion {version} is read as {API_VERSION}: its fields map one to one (its run policy "
                       "under spec is v1's spec.runPolicy)")
    elif version != API_VERSION:
        why = (": its replica specs are not v1's (a list of replicaSpecs with tfReplicaType and tfPort)"
               if version == "kubeflow.org/v1alpha1" else "")
        c.add("apiVersion", f"{show(version)} is not a TFJob version tfk8s-airflow converts ({API_VERSION}, "
              f"{', '.join(CONVERTED_VERSIONS)}){why}", f"rewrite it as {API_VERSION}: spec.tfReplicaSpecs with "
              "one entry per replica type (docs/migration-tfjob.md)")
    c.unknown(doc, ("apiVersion", "kind", "metadata", "spec", "status"), "")
    out: dict[str, Any] = {}
    _metadata(c, c.mapping(doc.get("metadata"), "metadata"), out)
    spec = c.mapping(doc.get("spec"), "spec")
    c.unknown(spec, ("tfReplicaSpecs", "runPolicy", "successPolicy", "enableDynamicWorker", *_SPEC_LEVEL_RUN_POLICY),
              "spec")
    roles, master = _replica_specs(c, spec)
    total = sum(int(block.get("replicas", 0)) for block in roles.values())
    run, where = _merged_run_policy(c, spec, version)
    _run_policy(c, run, where, out, total)
    _success_policy(c, spec, out, has_chief="chief" in roles)
    if spec.get("enableDynamicWorker"):
        c.add("spec.enableDynamicWorker", "sparse TF_CONFIG for dynamically added workers is not supported",
              "remove it: every replica gets the whole cluster")
    if master:
        out["chief_name"] = "master"
    out["kubeflow_labels"] = True  # the operator's labels, which programs written for TFJob read
    if total == 1:
        out["tf_wiring"] = "none"
        c.notes.append("the job has one replica: like TFJob, it gets no TF_CONFIG (tf_wiring: none)")
    _hoist(c, out, roles)
    if c.problems:
        raise SpecError(c.problems)
    ordered = {k: out[k] for k in _KEY_ORDER if k in out}
    ordered.update((role, roles[role]) for role in _ROLE_ORDER if role in roles)
    return Conversion(ordered, tuple(c.notes), tuple(c.origins.items()))


def _merged_run_policy(c: _Converter, spec: Mapping[str, Any], version: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """``spec.runPolicy`` with the run policy fields written directly under ``spec`` (the older placement),
    and where each field was written."""
    run = dict(c.mapping(spec.get("runPolicy"), "spec.runPolicy"))
    where = {key: f"spec.runPolicy.{key}" for key in run}
    for key in _SPEC_LEVEL_RUN_POLICY:
        if key not in spec:
            continue
        if key in run:
            c.add(f"spec.{key}", f"is given twice, here and at spec.runPolicy.{key}", f"keep spec.runPolicy.{key}")
            continue
        run[key] = spec[key]
        where[key] = f"spec.{key}"
        if version == API_VERSION:
            c.notes.append(f"spec.{key} is read as spec.runPolicy.{key}, where kubeflow.org/v1 has it (the v1 "
                           "CRD has no spec-level field: kubectl's strict validation refuses it, and an API server "
                           "that accepts it drops it)")
    return run, where


def _metadata(c: _Converter, meta: Mapping[str, Any], out: dict[str, Any]) -> None:
    generate = meta.get("generateName")
    if meta.get("name") is not None:
        out["name"] = meta["name"]
        c.origin("name", "metadata.name")
    elif isinstance(generate, str) and generate.strip("-"):
        # Every object of a run is named uniquely anyway (the job's name + a hash of the run), which
        # is what generateName asks for; its prefix is the readable part.
        out["name"] = generate.rstrip("-")
        c.origin("name", "metadata.generateName")
        c.notes.append(f"metadata.generateName {generate}: the job is named {out['name']}; every run's objects "
                       "get a unique name of their own (the name and a hash of the DAG run)")
    else:
        c.add("metadata.generateName" if generate is not None else "metadata.name",
              "is required: Kubernetes names every object by name or generateName"
              + (f", got {show(generate)}" if generate is not None else ""),
              "add name: my-job (or generateName: my-job-)")
    if meta.get("namespace") is not None:
        out["namespace"] = meta["namespace"]
        c.origin("namespace", "metadata.namespace")
    if meta.get("labels"):
        labels = dict(c.mapping(meta["labels"], "metadata.labels"))
        # Kueue's queue and priority labels become the job's queue (one pod group): copied onto every pod
        # as labels, each pod would be a Workload of its own, admitted one by one.
        for label, native in ((KUEUE_QUEUE_LABEL, "queue"), (KUEUE_PRIORITY_LABEL, "priority_class")):
            if label in labels:
                out[native] = labels.pop(label)
                c.origin(native, f"metadata.labels.{label}")
        if labels:
            out["labels"] = labels
            c.origin("labels", "metadata.labels")
    if meta.get("annotations"):
        c.notes.append("metadata.annotations: the TFJob object's own annotations are not copied to the pods "
                       "(write pod annotations in the replica templates)")
    c.unknown(meta, ("name", "namespace", "labels", "annotations", "generateName", *_SERVER_METADATA), "metadata")


def _replica_specs(c: _Converter, spec: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], bool]:
    fld = "spec.tfReplicaSpecs"
    replica_specs = c.mapping(spec.get("tfReplicaSpecs"), fld)
    if not replica_specs:
        c.add(fld, "is required", "add tfReplicaSpecs: {Worker: {replicas: 2, template: ...}}")
    roles: dict[str, dict[str, Any]] = {}
    master = False
    seen: dict[str, str] = {}
    for rtype, rspec in replica_specs.items():
        path = f"{fld}.{rtype}"
        kind = str(rtype).lower()
        role = REPLICA_TYPES.get(kind)
        if role is None:
            c.add(path, "is not a TFJob replica type", "use PS, Worker, Chief, Master or Evaluator")
            continue
        if role in seen:
            c.add(path, f"is the same role as {seen[role]}", "TFJob allows one Chief or Master, each type once")
            continue
        seen[role] = str(rtype)
        master = master or kind == "master"
        c.origin(role, path)
        roles[role] = _replica(c, c.mapping(rspec, path), path, role)
    return roles, master


def _replica(c: _Converter, rspec: Mapping[str, Any], path: str, role: str) -> dict[str, Any]:
    c.unknown(rspec, ("replicas", "restartPolicy", "template"), path)
    block: dict[str, Any] = {}
    replicas = c.integer(rspec, "replicas", path)
    block["replicas"] = 1 if replicas is None else replicas
    policy = rspec.get("restartPolicy") or "Never"  # TFJob's default
    if policy == "Always":
        c.add(f"{path}.restartPolicy", "Always restarts a replica even after it succeeded, so the job would never "
              "finish", "write OnFailure (restart after a failure) or Never")
    elif policy not in _RESTART_POLICIES:
        c.add(f"{path}.restartPolicy", f"must be Never, OnFailure, ExitCode or Always, got {show(policy)}")
    else:
        block["restart_policy"] = policy
        c.origin(f"{role}.restart_policy", f"{path}.restartPolicy")
        if role == "ps" and policy != "Never":
            c.notes.append(f"{path}.restartPolicy {policy}: a parameter server that fails is restarted, as under "
                           "TFJob, and has then lost every variable it held (write Never to fail the job instead, "
                           "and group_restarts to restart the whole job from its checkpoint)")
    c.origin(f"{role}.replicas", f"{path}.replicas")
    template = c.mapping(rspec.get("template"), f"{path}.template")
    block.update(_template(c, template, f"{path}.template", role))
    return block


def _template(c: _Converter, template: Mapping[str, Any], fld: str, role: str) -> dict[str, Any]:
    """The role's keys lifted out of its PodTemplateSpec, and ``pod_template`` with the rest."""
    out: dict[str, Any] = {}
    cpath = f"{fld}.spec.containers[{CONTAINER_NAME}]"
    for native, where in (("image", f"{cpath}.image"), ("command", f"{cpath}.command"), ("args", f"{cpath}.args"),
                          ("image_pull_policy", f"{cpath}.imagePullPolicy"), ("resources", f"{cpath}.resources"),
                          ("env", f"{cpath}.env"), ("env_from", f"{cpath}.envFrom"),
                          ("port", f"{cpath}.ports[{PORT_NAME}]"), ("node_selector", f"{fld}.spec.nodeSelector"),
                          ("tolerations", f"{fld}.spec.tolerations"),
                          ("service_account", f"{fld}.spec.serviceAccountName"),
                          ("automount_service_account_token", f"{fld}.spec.automountServiceAccountToken"),
                          ("pod_template.metadata", f"{fld}.metadata"), ("pod_template.spec", f"{fld}.spec"),
                          ("pod_template", fld)):
        c.origin(f"{role}.{native}", where)
    meta = {k: v for k, v in c.mapping(template.get("metadata"), f"{fld}.metadata").items()
            if k in ("labels", "annotations") and v}
    pod = dict(c.mapping(template.get("spec"), f"{fld}.spec"))
    containers = pod.get("containers")
    if not isinstance(containers, list):
        c.add(f"{fld}.spec.containers", "is required", f"add a container named {CONTAINER_NAME}")
        containers = []
    main = next((x for x in containers if isinstance(x, Mapping) and x.get("name") == CONTAINER_NAME), None)
    if main is None:
        c.add(f"{fld}.spec.containers", f"has no container named {CONTAINER_NAME} (TFJob requires one)",
              f"name the training container {CONTAINER_NAME}")
        main = {}
    main = dict(main)
    for key, native in (("image", "image"), ("command", "command"), ("args", "args"),
                        ("imagePullPolicy", "image_pull_policy")):
        if main.get(key) is not None:
            out[native] = main.pop(key)
    if main.get("resources"):  # not a mapping: the native spec's resources names it
        res = main.pop("resources")
        out["resources"] = dict(res) if isinstance(res, Mapping) else res
    else:
        main.pop("resources", None)
    for key in ("env", "envFrom", "ports"):
        if main.get(key) is not None and not isinstance(main[key], list):
            c.add(f"{cpath}.{key}", f"must be a list, got {type(main[key]).__name__}", f"write {key}: [...]")
            main.pop(key)
    if "env" in main:
        env, rest = _env(main.pop("env") or [])
        for name in env:
            c.origin(f"{role}.env.{name}", f"{cpath}.env[{name}]")
        if env:
            out["env"] = env
        if rest:
            main["env"] = rest
    if "envFrom" in main:
        out["env_from"] = _env_from(c, main.pop("envFrom") or [], f"{cpath}.envFrom")
    ports = []
    for p in main.pop("ports", None) or []:
        if isinstance(p, Mapping) and p.get("name") == PORT_NAME:
            out["port"] = p.get("containerPort")
        else:
            ports.append(p)
    if ports:
        main["ports"] = ports
    if pod.get("nodeSelector"):  # not a mapping (or a list): the native spec's key names it
        selector = pod.pop("nodeSelector")
        out["node_selector"] = dict(selector) if isinstance(selector, Mapping) else selector
    if pod.get("tolerations"):
        tolerations = pod.pop("tolerations")
        out["tolerations"] = [_toleration(t) for t in tolerations] if isinstance(tolerations, list) else tolerations
    for key in ("serviceAccountName", "serviceAccount"):
        if pod.get(key):
            out["service_account"] = pod.pop(key)
    if pod.get("automountServiceAccountToken") is not None:
        out["automount_service_account_token"] = pod.pop("automountServiceAccountToken")
    if pod.pop("restartPolicy", None) is not None:
        c.notes.append(f"{fld}.spec.restartPolicy is replaced by the replica's restartPolicy, as under TFJob")
    scheduler = pod.get("schedulerName")
    if scheduler in _GANG_SCHEDULERS:
        c.add(f"{fld}.spec.schedulerName", f"{scheduler} starts a pod only once its PodGroup admits it, and no "
              "PodGroup is made for this job (the training-operator makes one; tfk8s-airflow holds every pod behind "
              "its own gate until all exist, then releases them together), so the pods would wait forever",
              "remove schedulerName: the job's pods start together without a gang scheduler")
    for where, keyed in (("metadata.annotations", meta.get("annotations")), ("metadata.labels", meta.get("labels"))):
        for key in _GANG_KEYS:
            if isinstance(keyed, Mapping) and key in keyed and scheduler not in _GANG_SCHEDULERS:
                c.notes.append(f"{fld}.{where}.{key}: read only by a gang scheduler, which the pods do not name; "
                               "the pods are created held by the gate tfk8s.io/gang and released together once all "
                               "exist")
    if pod.get("activeDeadlineSeconds") is not None:
        c.add(f"{fld}.spec.activeDeadlineSeconds", "every pod's deadline is the job's",
              "remove it and write spec.runPolicy.activeDeadlineSeconds")
    rest = [main] if len(main) > 1 else []
    pod["containers"] = rest + [x for x in containers
                                if not (isinstance(x, Mapping) and x.get("name") == CONTAINER_NAME)]
    if not pod["containers"]:
        del pod["containers"]
    template_out = {k: v for k, v in (("metadata", meta), ("spec", pod)) if v}
    if template_out:
        out["pod_template"] = template_out
    return out


def _env(items: Any) -> tuple[dict[str, Any], list[Any]]:
    """The env entries the spec's ``env`` says (text, Secret/ConfigMap keys, pod fields), and the rest."""
    env: dict[str, Any] = {}
    rest: list[Any] = []
    for e in items if isinstance(items, list) else []:
        if not isinstance(e, Mapping) or not isinstance(e.get("name"), str) or e["name"] in env:
            rest.append(e)
            continue
        source = e.get("valueFrom")
        if source is None:
            env[e["name"]] = e.get("value", "")
            continue
        ref = _value_from(source)
        if ref is None:
            rest.append(e)
        else:
            env[e["name"]] = {"value_from": ref}
    return env, rest


def _value_from(source: Any) -> dict[str, Any] | None:
    if not isinstance(source, Mapping) or len(source) != 1:
        return None
    kind, ref = next(iter(source.items()))
    if kind not in _VALUE_REFS or not isinstance(ref, Mapping):
        return None
    if kind == "fieldRef":
        if set(ref) - {"fieldPath", "apiVersion"} or ref.get("apiVersion", "v1") != "v1":
            return None
        return {"field_ref": {"field_path": ref.get("fieldPath")}}
    if set(ref) - {"name", "key", "optional"}:
        return None
    return {_VALUE_REFS[kind]: dict(ref)}


def _env_from(c: _Converter, items: Any, fld: str) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        refs = [k for k in _ENV_FROM_REFS if isinstance(item, Mapping) and k in item]
        if len(refs) != 1 or set(item) - {refs[0], "prefix"}:
            c.add(f"{fld}[{i}]", "must be {configMapRef: {name}} or {secretRef: {name}}, with a prefix")
            continue
        entry: dict[str, Any] = {_ENV_FROM_REFS[refs[0]]: dict(c.mapping(item[refs[0]], f"{fld}[{i}]"))}
        if item.get("prefix"):
            entry["prefix"] = item["prefix"]
        out.append(entry)
    return out


def _toleration(t: Any) -> Any:
    if not isinstance(t, Mapping):
        return t
    return {("toleration_seconds" if k == "tolerationSeconds" else k): v for k, v in t.items()}


def _run_policy(c: _Converter, run: Mapping[str, Any], where: Mapping[str, str], out: dict[str, Any],
                total: int) -> None:
    fld = "spec.runPolicy"
    c.unknown({k: v for k, v in run.items() if where.get(k, "").startswith(fld)},
              ("cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit",
               "schedulingPolicy", "suspend", "managedBy"), fld)

    def at(key: str) -> str:
        return where.get(key, f"{fld}.{key}")

    def parent(key: str) -> str:
        return at(key).rsplit(".", 1)[0]

    clean = run.get("cleanPodPolicy")
    ttl = c.integer(run, "ttlSecondsAfterFinished", parent("ttlSecondsAfterFinished"))
    if clean not in (None, "All", "Running", "None"):
        c.add(at("cleanPodPolicy"), f"must be All, Running or None, got {show(clean)}", "write cleanPodPolicy: None")
    elif clean in ("Running", "None"):
        out["clean_pod_policy"] = clean
        c.origin("clean_pod_policy", at("cleanPodPolicy"))
        if ttl is not None:
            out["finished_pod_ttl"] = ttl
            c.origin("finished_pod_ttl", at("ttlSecondsAfterFinished"))
        kept = f"{ttl}s" if ttl is not None else "finished_pod_ttl (default 10m)"
        c.notes.append(f"{at('cleanPodPolicy')} {clean}: teardown archives every replica's log, deletes the running "
                       f"pods (parameter servers never exit on their own), the Service and the ConfigMaps, keeps the "
                       f"finished pods for {kept}, then deletes them")
    if ttl is not None and clean not in ("Running", "None"):
        c.notes.append(f"{at('ttlSecondsAfterFinished')}: with cleanPodPolicy {clean or 'All'} no pod is kept; "
                       "teardown deletes everything as soon as the job ends, after archiving the logs")
    deadline = c.integer(run, "activeDeadlineSeconds", parent("activeDeadlineSeconds"), low=1)
    if deadline is not None:
        out["active_deadline"] = deadline
        c.origin("active_deadline", at("activeDeadlineSeconds"))
    backoff = c.integer(run, "backoffLimit", parent("backoffLimit"))
    if backoff is not None:
        out["max_restarts"] = backoff
        c.origin("max_restarts", at("backoffLimit"))
        c.notes.append(f"{at('backoffLimit')} {backoff} -> max_restarts {backoff}: here each replica may restart "
                       "that often (TFJob counts the restarts of all replicas together)")
    if run.get("suspend"):
        c.add(f"{fld}.suspend", "a suspended job is not started by tfk8s-airflow", "remove it; the DAG decides when")
    if run.get("managedBy") not in (None, _MANAGED_BY):
        c.add(f"{fld}.managedBy", f"{show(run.get('managedBy'))} would run the job elsewhere",
              "remove it: tfk8s-airflow creates the pods itself")
    sp = at("schedulingPolicy")
    sched = c.mapping(run.get("schedulingPolicy"), sp)
    c.unknown(sched, ("minAvailable", "queue", "minResources", "priorityClass", "scheduleTimeoutSeconds"), sp)
    min_available = c.integer(sched, "minAvailable", sp)
    if min_available is not None and min_available != total:
        c.add(f"{sp}.minAvailable", f"{min_available} is not the job's {total} replicas: every pod is created "
              "together and none is scheduled before all exist", f"remove it or write {total}")
    if sched.get("queue"):
        c.add(f"{sp}.queue", "tfk8s-airflow submits to no queue (Volcano, Kueue)",
              "remove it; a queue label your admission reads goes in the replica templates' metadata.labels")
    if sched.get("minResources"):
        c.add(f"{sp}.minResources", "there is no gang scheduler to reserve them; setup checks the namespace's "
              "ResourceQuota against the whole job instead", "remove it")
    if sched.get("priorityClass"):
        out["pod_template"] = {"spec": {"priorityClassName": sched["priorityClass"]}}
        c.origin("pod_template.spec.priorityClassName", f"{sp}.priorityClass")
    timeout = c.integer(sched, "scheduleTimeoutSeconds", sp, low=1)
    if timeout is not None:
        out["schedule_timeout"] = timeout
        c.origin("schedule_timeout", f"{sp}.scheduleTimeoutSeconds")


def _success_policy(c: _Converter, spec: Mapping[str, Any], out: dict[str, Any], has_chief: bool) -> None:
    policy = spec.get("successPolicy")
    if policy in (None, ""):
        return
    if policy != "AllWorkers":
        c.add("spec.successPolicy", f"must be \"\" or AllWorkers, got {show(policy)}")
    elif has_chief:
        c.notes.append("spec.successPolicy AllWorkers: with a Chief or Master, TFJob decides by the chief alone, "
                       "and so does this job (success_policy: default)")
    else:
        out["success_policy"] = "all_workers"
        c.origin("success_policy", "spec.successPolicy")


#: The order of the native document's job-wide keys (as a user would write them).
_KEY_ORDER = ("name", "namespace", "labels", "queue", "priority_class", "image", "image_pull_policy", "command",
              "args", "resources", "port",
              "tf_wiring", "chief_name", "kubeflow_labels", "success_policy", "max_restarts", "active_deadline",
              "schedule_timeout", "clean_pod_policy", "finished_pod_ttl", "service_account",
              "automount_service_account_token", "pod_template")
#: Role keys a TFJob states per replica type that become job-wide when every type has the same.
_HOISTED = ("image", "command", "args", "resources")
#: Spec keys that exist job-wide only, and where a replica template says them.
_JOB_ONLY = {"image_pull_policy": f"containers[{CONTAINER_NAME}].imagePullPolicy",
             "port": f"containers[{CONTAINER_NAME}].ports[{PORT_NAME}]",
             "service_account": "serviceAccountName",
             "automount_service_account_token": "automountServiceAccountToken"}


def _hoist(c: _Converter, out: dict[str, Any], roles: Mapping[str, dict[str, Any]]) -> None:
    """What every role has alike becomes job-wide; the keys that exist job-wide only must agree."""
    blocks = list(roles.values())
    for key in (*_HOISTED, *_JOB_ONLY):  # a job-wide key names the first replica type that states it
        stating = [role for role, b in roles.items() if b.get(key) is not None]
        if stating:
            c.origin(key, c.origins[f"{stating[0]}.{key}"])
    for key in _HOISTED:
        values = [b.get(key) for b in blocks]
        if values and values[0] is not None and all(x == values[0] for x in values):
            out[key] = values[0]
            for b in blocks:
                b.pop(key)
    for key, where in _JOB_ONLY.items():
        values = [b.pop(key, None) for b in blocks]
        if key == "port":  # TFJob's default port
            values = [2222 if x is None else x for x in values]
        if not any(x is not None for x in values):
            continue
        stated = {json.dumps(x, sort_keys=True, default=repr) for x in values if x is not None}
        if key == "image_pull_policy" and len(stated) == 1 and None in values:
            policy = next(x for x in values if x is not None)
            c.notes.append(f"imagePullPolicy {policy} applies to every replica type here (one image_pull_policy "
                           "per job)")
            values = [policy] * len(values)
        if all(x == values[0] for x in values):
            if key != "port" or values[0] != 2222:
                out[key] = values[0]
        else:
            c.add(f"spec.tfReplicaSpecs.*.template.spec.{where}", "differs between the replica types: tfk8s-airflow "
                  f"has one {key} per job", "give every replica type the same one")
