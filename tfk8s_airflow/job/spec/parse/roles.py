"""The role blocks (``chief``, ``evaluator``, ``ps``, ``worker``) and the rules between roles."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec.model import MERGE, PATCH, ROLE_KEYS, ROLES, RoleSpec, TFJobSpec, spec_fields
from tfk8s_airflow.job.spec.parse import metadata
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.job.spec.parse.shared import READERS
from tfk8s_airflow.job.spec.podtemplate import merge_templates

#: The job-wide keys a role block may set, and how it treats the job's value.
_INHERITED = {f.name: f.metadata["role"] for f in spec_fields(TFJobSpec) if "role" in f.metadata}


def roles(r: Reader, d: Mapping[str, Any], job: Mapping[str, Any]) -> dict[str, RoleSpec]:
    """Every role block present; ``job`` holds the job-wide values of the inherited keys."""
    out: dict[str, RoleSpec] = {}
    for role in ROLES:
        block = d.get(role)
        if block is None:
            continue
        if isinstance(block, int) and not isinstance(block, bool):
            block = {"replicas": block}
        if not isinstance(block, Mapping):
            r.add(role, f"must be a mapping, got {type(block).__name__}", f"write {role}: {{replicas: 1}}")
            continue
        out[role] = role_block(r, role, block, job)
    return out


def role_block(r: Reader, role: str, block: Mapping[str, Any], job: Mapping[str, Any]) -> RoleSpec:
    p = f"{role}."
    r.unknown(block, ROLE_KEYS, p)
    values: dict[str, Any] = {}
    for name, how in _INHERITED.items():
        if block.get(name) is None:  # left out or null (YAML's `args:` alone): the job's, whatever the key
            values[name] = job[name]
            continue
        own = READERS[name](r, block, name, p + name)
        if how == PATCH:  # the role's template merged over the job's (kubectl's strategic merge)
            values[name] = merge_templates(job[name], own)
        elif how == MERGE:  # a mapping is merged key by key; a list gets the role's items after the job's
            values[name] = {**job[name], **own} if isinstance(own, Mapping) else (*job[name], *own)
        elif own is None or own == "":
            values[name] = job[name]
        else:
            values[name] = own
    if role == "ps" and block.get("restart_policy") is None:
        values["restart_policy"] = "Never"
    replicas = r.integer(block, "replicas", p + "replicas", 1 if role != "ps" else 0)
    tracked = r.boolean(block, "tracked", p + "tracked", role != "ps")
    if role == "ps" and tracked:
        r.add(p + "tracked", "parameter servers never exit, so they cannot be tracked", "remove tracked from ps")
    gang_min = None
    if block.get("gang_min") is not None:
        gang_min = r.integer(block, "gang_min", p + "gang_min", max(replicas, 1), low=1, high=max(replicas, 1))
        if not replicas:
            r.add(p + "gang_min", "the role has no replicas", f"remove gang_min from {role}")
    metadata.check_annotation_size(r, values["annotations"], p + "annotations" if block.get("annotations") is not None
                                   else "annotations")
    for name in ("env", "node_selector", "annotations"):
        values[name] = MappingProxyType(dict(values[name]))
    return RoleSpec(role=role, replicas=replicas, tracked=tracked, gang_min=gang_min, **values)


def check_roles(r: Reader, roles: dict[str, RoleSpec], success: str, hide_evaluator: bool, image: str,
                max_replicas: int) -> None:
    worker = roles.get("worker")
    if worker is None:
        r.add("worker", "is required", "add worker: {replicas: 2}")
    elif worker.replicas < 1:
        r.add("worker.replicas", f"must be at least 1, got {worker.replicas}", "write worker: {replicas: 1}")
    for role, limit in (("chief", 1), ("evaluator", 1)):
        rs = roles.get(role)
        if rs and not 0 <= rs.replicas <= limit:
            r.add(f"{role}.replicas", f"must be 0 or 1, got {rs.replicas}",
                  f"write {role}: {{replicas: 1}}; TensorFlow has one {role}")
    ps = roles.get("ps")
    if ps and ps.replicas < 0:
        r.add("ps.replicas", f"must be >= 0, got {ps.replicas}", "write ps: {replicas: 1}")
    total = sum(max(rs.replicas, 0) for rs in roles.values())
    if total > max_replicas:
        r.add("replicas", f"the job has {total} replicas, more than the maximum {max_replicas}",
              "use fewer replicas or raise the maximum (--max-replicas / TFK8S_MAX_REPLICAS)")
    _check_images(r, roles, image)
    has_chief = bool(roles.get("chief") and roles["chief"].replicas)
    if worker and worker.replicas >= 1 and not worker.tracked:
        if not has_chief:
            r.add("worker.tracked", "untracked workers need a chief to decide success",
                  "add chief: {replicas: 1} (TF2 ParameterServerStrategy) or remove tracked: false")
        if success == "all_workers":
            r.add("success_policy", "all_workers conflicts with worker.tracked: false",
                  "use success_policy: default, or track the workers")
    chief = roles.get("chief")
    if chief and chief.replicas and not chief.tracked:
        r.add("chief.tracked", "the chief decides success and must be tracked", "remove tracked: false")
    if hide_evaluator and not (roles.get("evaluator") and roles["evaluator"].replicas):
        r.add("hide_evaluator", "is set but the job has no evaluator",
              "add evaluator: {replicas: 1} or remove hide_evaluator")


def _check_images(r: Reader, roles: dict[str, RoleSpec], image: str) -> None:
    if not image and not any(rs.image for rs in roles.values()):
        r.add("image", "is required", "add image: registry.example.com/team/trainer:1.0")
    checked: set[tuple[str, str]] = {("image", "")}
    if image:
        checked.add(("image", image))
        r.extend(v.check_image(image, "image"))
    for rs in roles.values():
        if rs.replicas <= 0:
            continue
        fld = "image" if rs.image == image else f"{rs.role}.image"
        if (fld, rs.image) in checked:
            continue
        checked.add((fld, rs.image))
        if not rs.image:
            r.add(fld, "is required", "add image: registry.example.com/team/trainer:1.0")
        else:
            r.extend(v.check_image(rs.image, fld))
