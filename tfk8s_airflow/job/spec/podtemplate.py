"""Pod templates: a Kubernetes PodTemplateSpec fragment merged into every replica's pod.

Why a fragment and not a whole pod: the spec's own keys say what every TensorFlow job needs
(image, command, resources, volumes...), but real training pods also need affinity, a
priority class, image pull secrets, a security context, sidecars, probes. A ``pod_template``
(``{metadata: {labels, annotations}, spec: {...}}``, Kubernetes' own camelCase) adds them,
merged with the rules users know from ``kubectl patch --type strategic``: maps are merged key
by key, the lists Kubernetes declares with a merge key (containers, init containers,
volumes, env, image pull secrets by ``name``; ports by ``containerPort``; volume mounts by
``mountPath``...) are merged item by item, every other list is replaced. A role's template is
merged over the job's the same way (:func:`merge_templates`).

What the pods get from tfk8s-airflow itself is not the template's to change (TF_CONFIG and
``TFK8S_*``, the job's labels, hostname and subdomain, the port ``tfjob-port``, the restart
policy, the gang gate), and what the spec already says has one place, the spec key: the
parser (:mod:`tfk8s_airflow.job.spec.parse.podtemplate`) refuses both, naming the path. So
applying a template to a replica never overrides anything of ours, and can be split into
parts that the builders and the Jinja template add alike (:func:`parts`); a test proves the
result equals the strategic merge of the template into the pod without it.

The template is kept frozen (:func:`freeze`: read-only mappings and tuples) and handed to the
builders as plain data (:func:`thaw`). ``null`` means "not set" (kubectl's output writes
``creationTimestamp: null``); it never deletes what the job's template sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Union

__all__ = ["CONTAINER_LISTS", "POD_LISTS", "TEMPLATE_SCHEMA", "freeze", "thaw", "merge", "merge_templates",
           "strategic_merge", "TemplateParts", "parts", "containers", "find", "item_key"]

#: A schema says how a mapping's fields merge: a nested mapping's own schema, or, for a list
#: merged item by item, its merge key and the items' schema. Fields not named merge as plain
#: maps (recursively) or are replaced (lists and scalars).
Schema = Mapping[str, Union["Schema", tuple[str, "Schema"]]]

#: A container's lists with a merge key (Kubernetes' ``patchMergeKey``).
CONTAINER_LISTS: Schema = MappingProxyType({
    "env": ("name", {}), "ports": ("containerPort", {}), "volumeMounts": ("mountPath", {}),
    "volumeDevices": ("devicePath", {}),
})
#: The pod spec's lists with a merge key; ``tolerations``, ``args``, ``command`` and the rest are replaced.
POD_LISTS: Schema = MappingProxyType({
    "containers": ("name", CONTAINER_LISTS), "initContainers": ("name", CONTAINER_LISTS),
    "volumes": ("name", {}), "imagePullSecrets": ("name", {}), "hostAliases": ("ip", {}),
    "topologySpreadConstraints": ("topologyKey", {}), "resourceClaims": ("name", {}),
    "schedulingGates": ("name", {}),
})
#: A PodTemplateSpec (or a Pod): metadata maps, and the pod spec.
TEMPLATE_SCHEMA: Schema = MappingProxyType({"spec": POD_LISTS})


# --------------------------------------------------------------------------- frozen plain data
def freeze(value: Any) -> Any:
    """Read-only plain data: mappings become MappingProxyType, lists tuples; ``None`` map values are dropped."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items() if v is not None})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Frozen data as new dicts and lists (JSON-ready, safe to change)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


# --------------------------------------------------------------------------- the strategic merge
def item_key(item: Any, key: str) -> Any:
    """An item's merge key value (None when the item is not a mapping or lacks it)."""
    return item.get(key) if isinstance(item, Mapping) else None


def merge(base: Mapping[str, Any], patch: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """``patch`` merged into ``base`` (neither changed), with the strategic-merge rules of ``schema``."""
    out = {k: thaw(v) for k, v in base.items()}
    for k, pv in patch.items():
        if pv is None:
            continue
        bv = out.get(k)
        sub = schema.get(k)
        if isinstance(sub, tuple) and isinstance(pv, (list, tuple)) and isinstance(bv, list):
            out[k] = _merge_list(bv, pv, sub[0], sub[1])
        elif isinstance(pv, Mapping) and isinstance(bv, Mapping):
            out[k] = merge(bv, pv, sub if isinstance(sub, Mapping) else {})
        else:
            out[k] = thaw(pv)
    return out


def _merge_list(base: list[Any], patch: Sequence[Any], key: str, schema: Schema) -> list[Any]:
    """Items of ``patch`` merged into the ``base`` item with the same key, the others appended in order."""
    by_key = {item_key(p, key): p for p in patch if item_key(p, key) is not None}
    out = [merge(b, by_key[item_key(b, key)], schema) if item_key(b, key) in by_key else b for b in base]
    known = {item_key(b, key) for b in base}
    out += [thaw(p) for p in patch if item_key(p, key) is None or item_key(p, key) not in known]
    return out


def merge_templates(job: Mapping[str, Any], role: Mapping[str, Any]) -> Mapping[str, Any]:
    """A role's template merged over the job's, frozen. Idempotent: merging the result over the
    job's again gives the result, so a role block written as the merged template round-trips."""
    if not role:
        return job
    if not job:
        return role
    return freeze(merge(job, role, TEMPLATE_SCHEMA))


def strategic_merge(pod: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    """A whole Pod with a template merged in, as ``kubectl patch --type strategic`` would merge it."""
    out = thaw(pod)
    if template.get("metadata"):
        out["metadata"] = merge(out.get("metadata", {}), template["metadata"], {})
    if template.get("spec"):
        out["spec"] = merge(out.get("spec", {}), template["spec"], POD_LISTS)
    return out


# --------------------------------------------------------------------------- reading a template
def containers(template: Mapping[str, Any], kind: str = "containers") -> tuple[Mapping[str, Any], ...]:
    """The template's containers (or ``initContainers``) that are mappings."""
    spec = template.get("spec") or {}
    items = spec.get(kind) if isinstance(spec, Mapping) else None
    return tuple(c for c in items or () if isinstance(c, Mapping)) if isinstance(items, (list, tuple)) else ()


def find(items: Any, key: str, value: Any) -> Mapping[str, Any] | None:
    """The item of a keyed list whose ``key`` is ``value``."""
    if not isinstance(items, (list, tuple)):
        return None
    return next((i for i in items if item_key(i, key) == value), None)


@dataclass(frozen=True)
class TemplateParts:
    """What a role's template adds to each of its pods, split by where it goes.

    The parser has refused every field the template may not set (ours, and the spec's own),
    so each part is added to the pod without replacing anything; the security contexts are
    the deployment's defaults with the template's merged over them.
    """

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    pod_security: dict[str, Any] = field(default_factory=dict)
    pod_extra: dict[str, Any] = field(default_factory=dict)  # other pod spec fields (affinity, priorityClassName...)
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    sidecars: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    env: list[dict[str, Any]] = field(default_factory=list)  # of the tensorflow container, after ours
    ports: list[dict[str, Any]] = field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = field(default_factory=list)
    security: dict[str, Any] = field(default_factory=dict)
    container_extra: dict[str, Any] = field(default_factory=dict)  # probes, lifecycle, workingDir...


#: Pod spec fields a template's parts handle themselves (the rest are ``pod_extra``).
_POD_PARTS = ("securityContext", "initContainers", "containers", "volumes")
#: Fields of the training container the parts handle themselves (the rest are ``container_extra``).
_CONTAINER_PARTS = ("name", "env", "ports", "volumeMounts", "securityContext")


def parts(template: Mapping[str, Any], container_name: str, pod_security: Mapping[str, Any],
          container_security: Mapping[str, Any]) -> TemplateParts:
    """Split a (merged, checked) role template into what each part of the pod gets.

    ``pod_security``/``container_security``: the deployment's defaults
    (:meth:`~tfk8s_airflow.job.policy.DeploymentPolicy.pod_security`); every container of the
    template, sidecars and init containers included, starts from the container defaults.
    """
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}

    def secured(c: Mapping[str, Any]) -> dict[str, Any]:
        out = thaw(c)
        sc = merge(container_security, c.get("securityContext") or {}, {})
        if sc:
            out["securityContext"] = sc
        return out

    main = find(spec.get("containers"), "name", container_name) or {}
    return TemplateParts(
        labels=thaw(meta.get("labels") or {}),
        annotations=thaw(meta.get("annotations") or {}),
        pod_security=merge(pod_security, spec.get("securityContext") or {}, {}),
        pod_extra={k: thaw(v) for k, v in spec.items() if k not in _POD_PARTS},
        init_containers=[secured(c) for c in containers(template, "initContainers")],
        sidecars=[secured(c) for c in containers(template) if c.get("name") != container_name],
        volumes=thaw(spec.get("volumes") or []),
        env=thaw(main.get("env") or []),
        ports=thaw(main.get("ports") or []),
        volume_mounts=thaw(main.get("volumeMounts") or []),
        security=merge(container_security, main.get("securityContext") or {}, {}),
        container_extra={k: thaw(v) for k, v in main.items() if k not in _CONTAINER_PARTS},
    )
