"""Parsing a spec document into a :class:`~tfk8s_airflow.job.spec.TFJobSpec`, one module per concern.

``reader`` (typed getters that record problems), ``shared`` (the readers of the keys a role
block may set too), ``env``, ``resources``, ``metadata`` (labels and annotations),
``scheduling`` (tolerations), ``volumes``, ``code``, ``recovery`` (restart budgets and
timeouts), ``tensorboard`` and ``roles``. This module reads the
job-wide keys in the order of the spec's declaration and assembles the spec; it raises one
:class:`~tfk8s_airflow.exceptions.SpecError` listing every problem found. A Kubeflow TFJob
manifest is first converted to the native document (:mod:`tfk8s_airflow.job.spec.tfjob`), so
the same rules apply to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from tfk8s_airflow.contract import DEFAULT_PORT
from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job.defaults import (
    FINISHED_POD_TTL_S,
    MAX_REPLICAS,
    MAX_RESTARTS,
    SCHEDULE_TIMEOUT_S,
    STARTUP_TIMEOUT_S,
)
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec import tfjob
from tfk8s_airflow.job.spec.document import apply_overrides, document_problems, load_spec_file
from tfk8s_airflow.job.spec.model import (
    ADMISSIONS,
    CHIEF_NAMES,
    CLEAN_POD_POLICIES,
    PULL_POLICIES,
    SPEC_KEYS,
    SUCCESS_POLICIES,
    TOPOLOGY_MODES,
    WIRINGS,
    TFJobSpec,
    Topology,
)
from tfk8s_airflow.job.spec.parse import code, metadata, podtemplate, recovery, roles, tensorboard, volumes
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.job.spec.parse.shared import READERS

__all__ = ["Admission", "parse_spec", "parse_spec_file"]

log = logging.getLogger(__name__)


class Admission(Protocol):
    """What the parser needs of a deployment's policy (``tfk8s_airflow.job.policy.DeploymentPolicy``,
    a layer above this one): admitting a valid spec, or raising :class:`SpecError`."""

    def admit(self, spec: TFJobSpec) -> TFJobSpec: ...


def parse_spec(data: Any, *, max_replicas: int = MAX_REPLICAS, overrides: Iterable[str] = (),
               policy: Admission | None = None) -> TFJobSpec:
    """Validate a spec document and freeze it; with ``policy`` (the deployment's), a valid spec must
    also be one the deployment admits. Raises :class:`SpecError` listing every problem (a TFJob
    manifest's problems name its fields as the manifest wrote them)."""
    if not isinstance(data, Mapping):
        raise SpecError(Problem("spec", f"must be a mapping, got {type(data).__name__}",
                                "write the spec as a YAML/JSON object with name, image, worker..."))
    problems = document_problems(data)
    if problems:
        raise SpecError(problems)
    if not tfjob.is_tfjob(data):
        spec = _parse(data, max_replicas, overrides)
        return policy.admit(spec) if policy is not None else spec
    conversion = tfjob.to_native(data)
    for note in conversion.notes:
        log.info("TFJob %s: %s", conversion.spec.get("name"), note)
    try:
        spec = _parse(conversion.spec, max_replicas, overrides)
        return policy.admit(spec) if policy is not None else spec
    except SpecError as exc:
        raise SpecError(conversion.renamed(list(exc.problems))) from None


def parse_spec_file(path: str | Path, *, max_replicas: int = MAX_REPLICAS, overrides: Iterable[str] = (),
                    policy: Admission | None = None) -> TFJobSpec:
    """:func:`parse_spec` of a YAML or JSON file (loaded with the document's bounds)."""
    return parse_spec(load_spec_file(path), max_replicas=max_replicas, overrides=overrides, policy=policy)


def _parse(data: Mapping[str, Any], max_replicas: int, overrides: Iterable[str]) -> TFJobSpec:
    overrides = list(overrides)
    d = apply_overrides(data, overrides)
    if overrides and (problems := document_problems(d)):
        raise SpecError(problems)
    r = Reader()
    r.unknown(d, SPEC_KEYS, "")
    name = r.string(d, "name", "name")
    if not name:
        r.add("name", "is required", "add name: my-job (lowercase letters, digits, '-')")
        name = "job"
    else:
        r.extend(v.check_dns_label(name, "name"))
    namespace = r.string(d, "namespace", "namespace", "default") or "default"
    r.extend(v.check_dns_label(namespace, "namespace"))
    inherited = {key: read(r, d, key, key) for key, read in READERS.items()}
    pull = r.string(d, "image_pull_policy", "image_pull_policy", "") or ""
    if pull and pull not in PULL_POLICIES:
        r.add("image_pull_policy", f"must be one of {', '.join(PULL_POLICIES)}, got {pull!r}",
              "write image_pull_policy: IfNotPresent")
    port = r.integer(d, "port", "port", DEFAULT_PORT)
    if not 1 <= port <= 65535:
        r.add("port", f"must be between 1 and 65535, got {port}", f"write port: {DEFAULT_PORT}")
    max_restarts = r.integer(d, "max_restarts", "max_restarts", MAX_RESTARTS)
    if max_restarts < 0:
        r.add("max_restarts", f"must be >= 0, got {max_restarts}", f"write max_restarts: {MAX_RESTARTS}")
    service_account = r.string(d, "service_account", "service_account") or None  # "": the namespace's default
    if service_account:
        r.extend(v.check_dns_subdomain(service_account, "service_account"))
    success = r.choice(d, "success_policy", "success_policy", SUCCESS_POLICIES, "default")
    hide_evaluator = r.boolean(d, "hide_evaluator", "hide_evaluator", False)
    token = r.boolean(d, "automount_service_account_token", "automount_service_account_token", False)
    job = dict(
        name=name, namespace=namespace, image_pull_policy=pull, port=port,
        tf_wiring=r.choice(d, "tf_wiring", "tf_wiring", WIRINGS, "tf_config"),
        success_policy=success, max_restarts=max_restarts,
        schedule_timeout=(r.duration(d, "schedule_timeout", "schedule_timeout", SCHEDULE_TIMEOUT_S)
                          or SCHEDULE_TIMEOUT_S),
        startup_timeout=r.duration(d, "startup_timeout", "startup_timeout", STARTUP_TIMEOUT_S) or STARTUP_TIMEOUT_S,
        admission_timeout=r.duration(d, "admission_timeout", "admission_timeout", None),
        queue=_queue_name(r, d, "queue"), priority_class=_queue_name(r, d, "priority_class"),
        admission=r.choice(d, "admission", "admission", ADMISSIONS, "auto") if d.get("admission") is not None else None,
        topology=_topology(r, d),
        active_deadline=r.duration(d, "active_deadline", "active_deadline", None),
        labels=metadata.job_labels(r, d), service_account=service_account, automount_service_account_token=token,
        volumes=volumes.volumes(r, d), hide_evaluator=hide_evaluator, code=code.code(r, d),
        kubeflow_labels=r.boolean(d, "kubeflow_labels", "kubeflow_labels", False),
        chief_name=r.choice(d, "chief_name", "chief_name", CHIEF_NAMES, "chief"),
        clean_pod_policy=r.choice(d, "clean_pod_policy", "clean_pod_policy", CLEAN_POD_POLICIES, "All"),
        finished_pod_ttl=_finished_pod_ttl(r, d),
        **recovery.recovery(r, d), **inherited,
    )
    volumes.check_code_mount(r, job["volumes"], job["code"])
    job["tensorboard"] = tensorboard.tensorboard(r, d, job["volumes"], port)
    role_specs = roles.roles(r, d, inherited)
    roles.check_roles(r, role_specs, success, hide_evaluator, inherited["image"], max_replicas)
    recovery.check_recovery(r, job, role_specs)
    podtemplate.check_templates(r, d, job, role_specs)
    if job["chief_name"] != "chief" and not (role_specs.get("chief") and role_specs["chief"].replicas):
        r.add("chief_name", f"is {job['chief_name']} but the job has no chief", "add chief: 1 or remove chief_name")
    if job["priority_class"] and not job["queue"]:
        r.add("priority_class", "is Kueue's WorkloadPriorityClass and needs queue", "add queue: <LocalQueue>, or "
              "remove priority_class (a Kubernetes PriorityClass goes in pod_template.spec.priorityClassName)")
    if job["admission"] in ("gate", "workload") and job["queue"]:
        r.add("admission", f"is {job['admission']} but the job has a Kueue queue, which admits it",
              "remove queue, or write admission: kueue")
    if r.problems:
        raise SpecError(r.problems)
    for key in ("env", "node_selector", "annotations", "labels"):
        job[key] = MappingProxyType(dict(job[key]))
    return TFJobSpec(roles=MappingProxyType(role_specs), **job)


def _topology(r: Reader, d: Mapping[str, Any]) -> Topology | None:
    """``topology: {required: <node label>}`` or ``{preferred: ...}``: exactly one, a label key."""
    raw = d.get("topology")
    if raw is None:
        return None
    fix = "write topology: {required: <a node label of the cluster's Kueue Topology>}"
    if not isinstance(raw, Mapping) or len(raw) != 1:
        r.add("topology", f"must be a mapping of one key, required or preferred, got {v.show(raw)}", fix)
        return None
    r.unknown(raw, TOPOLOGY_MODES, "topology.")
    mode, level = next(iter(raw.items()))
    if mode not in TOPOLOGY_MODES:
        return None
    if not isinstance(level, str) or not level:
        r.add(f"topology.{mode}", f"must be a node label key, got {v.show(level)}", fix)
        return None
    problems = v.check_label_key(level, f"topology.{mode}")
    r.extend(problems)
    return None if problems else Topology(mode, level)


def _queue_name(r: Reader, d: Mapping[str, Any], key: str) -> str | None:
    """``queue`` or ``priority_class``: a Kueue object's name, carried in a pod label (a DNS-1123 label)."""
    name = r.string(d, key, key)
    if not name:
        return None
    r.extend(v.check_dns_label(name, key))
    return name


def _finished_pod_ttl(r: Reader, d: Mapping[str, Any]) -> int:
    """``finished_pod_ttl``: a duration, or 0 (no finished pod is kept)."""
    if v.parse_duration(d.get("finished_pod_ttl", FINISHED_POD_TTL_S)) == 0:
        return 0
    return r.duration(d, "finished_pod_ttl", "finished_pod_ttl", FINISHED_POD_TTL_S) or FINISHED_POD_TTL_S
