"""``pod_template``: the Kubernetes PodTemplateSpec fragment of the job and of each role.

What this module refuses, each with the path (``worker.pod_template.spec.containers[tensorflow].env[TF_CONFIG]``)
and the fix:

- what the pods get from tfk8s-airflow: ``TF_CONFIG`` and ``TFK8S_*`` in the ``tensorflow``
  container, the job's labels (``tfk8s.io/*``, ``app.kubernetes.io/*``, the replica tasks'
  labels), ``hostname``, ``subdomain``, the port ``tfjob-port`` (and the spec's port),
  ``restartPolicy``, the scheduling gates, ``nodeName``, ``enableServiceLinks``, the pods' names;
- what a spec key says, in the spec key only (one place, which the deployment's policy, the
  quota pre-flight and recovery read): the ``tensorflow`` container's ``image``,
  ``imagePullPolicy``, ``command``, ``args``, ``envFrom``, ``resources``, and the pod's
  ``serviceAccountName``, ``automountServiceAccountToken``, ``activeDeadlineSeconds``,
  ``nodeSelector``, ``tolerations``; an env variable, volume or mount path the spec sets too;
- what cannot be merged or created: strategic-merge directives (``$patch``...), list items
  without their merge key or with a duplicate one, volume sources other than
  :data:`TEMPLATE_VOLUME_SOURCES`.

Everything else passes to the API server, which checks it (setup dry-runs one pod per role
before creating anything) and the deployment's policy (host paths, Secrets, privileges).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tfk8s_airflow.contract import (
    APP_LABELS,
    CODE_VOLUME,
    CONTAINER_NAME,
    ENV_PREFIX,
    FETCH_CONTAINER,
    LABEL_PREFIX,
    PORT_NAME,
    RESERVED_ENV,
    RESERVED_VOLUMES,
    SHARDS_MOUNT,
    SHARDS_VOLUME,
    TASK_LABELS,
)
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec import podtemplate as pt
from tfk8s_airflow.job.spec.parse import metadata
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.job.spec.parse.templateshape import check_json, check_shapes
from tfk8s_airflow.pathrules import has_parent_segment

__all__ = ["EMPTY", "TEMPLATE_VOLUME_SOURCES", "pod_template", "check_templates"]

EMPTY: Mapping[str, Any] = MappingProxyType({})

#: Volume sources a template may use: scratch, Kubernetes objects, claims, a host path (bounded by the
#: deployment's allowed_host_paths), NFS, and CSI drivers (their Secret bounded by allowed_secrets).
TEMPLATE_VOLUME_SOURCES = ("emptyDir", "secret", "configMap", "persistentVolumeClaim", "hostPath", "projected",
                           "downwardAPI", "ephemeral", "nfs", "csi")

_NAMING = "tfk8s-airflow names the pods and puts them in the job's namespace"
#: Pod spec fields the template may not set: (why, fix).
_OWNED_POD: dict[str, tuple[str, str]] = {
    "hostname": ("every replica's hostname is <role>-<index>, its DNS name in TF_CONFIG", "remove it"),
    "subdomain": ("the pods' subdomain is the job's headless Service, which publishes their DNS names",
                  "remove it"),
    "restartPolicy": ("the restart policy is the role's restart_policy (ExitCode's pods are Never)",
                      "remove it and write restart_policy: Never | OnFailure | ExitCode in the role"),
    "schedulingGates": ("every pod is held by the gate tfk8s.io/gang until the whole job exists", "remove it"),
    "nodeName": ("a pod bound to a node skips the scheduler and the job's gate",
                 "remove it; use node_selector or affinity"),
    "enableServiceLinks": ("always false: service links would add variables for every Service of the namespace",
                           "remove it"),
    "ephemeralContainers": ("ephemeral containers are added to running pods (kubectl debug), never at creation",
                            "remove it"),
    "serviceAccountName": ("is the spec's service_account", "write service_account: NAME in the spec"),
    "serviceAccount": ("is the spec's service_account", "write service_account: NAME in the spec"),
    "automountServiceAccountToken": ("is the spec's automount_service_account_token",
                                     "write automount_service_account_token: true in the spec"),
    "activeDeadlineSeconds": ("is the spec's active_deadline", "write active_deadline: 2h in the spec"),
    "nodeSelector": ("is the spec's node_selector", "write node_selector: {KEY: VALUE} in the spec or the role"),
    "tolerations": ("is the spec's tolerations", "write tolerations: [...] in the spec or the role"),
}
#: Fields of the tensorflow container that are spec keys.
_SPEC_CONTAINER = {"image": "image", "imagePullPolicy": "image_pull_policy", "command": "command", "args": "args",
                   "envFrom": "env_from", "resources": "resources"}
_TEMPLATE_KEYS = ("metadata", "spec")
_META_KEYS = ("labels", "annotations")
_SHAPE_FIX = ("write pod_template: {metadata: {labels: {...}, annotations: {...}}, "
              "spec: {affinity: ..., containers: [...]}}")


def pod_template(r: Reader, d: Mapping[str, Any], key: str, fld: str) -> Mapping[str, Any]:
    """The template as frozen data; every problem of its own (without the rest of the spec) recorded."""
    raw = d.get(key)
    if raw is None:
        return EMPTY
    if not isinstance(raw, Mapping):
        r.add(fld, f"must be a mapping, got {type(raw).__name__}", _SHAPE_FIX)
        return EMPTY
    before = len(r.problems)
    not_json = check_json(raw, fld)
    if not_json is not None:
        r.add(*not_json)
        return EMPTY
    _directives(r, raw, fld)
    r.unknown(raw, _TEMPLATE_KEYS, fld + ".")
    meta = _metadata(r, raw.get("metadata"), fld + ".metadata")
    spec = raw.get("spec")
    if spec is not None:
        if not isinstance(spec, Mapping):
            r.add(fld + ".spec", f"must be a mapping (a pod spec), got {type(spec).__name__}", _SHAPE_FIX)
        else:
            _pod_spec(r, spec, fld + ".spec")
            check_shapes(r, spec, fld + ".spec")
    if len(r.problems) > before:
        return EMPTY  # refused already: nothing of it reaches the checks that read a well-formed template
    out = {k: raw[k] for k in _TEMPLATE_KEYS if k in raw and isinstance(raw[k], Mapping)}
    if meta is not None:
        out["metadata"] = meta  # label and annotation values as the text the pods get (1 -> "1", true -> "true")
    return pt.freeze(out)


def _directives(r: Reader, value: Any, fld: str) -> None:
    stack = [(value, fld)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, Mapping):
            for k, child in node.items():
                if k.startswith("$"):
                    r.add(f"{where}.{k}", "strategic-merge directives are not supported in a pod template",
                          "write the fields the pod should have; a role's template can add to or change the "
                          "job's, not remove from it")
                else:
                    stack.append((child, f"{where}.{k}"))
        elif isinstance(node, (list, tuple)):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node))


def _metadata(r: Reader, meta: Any, fld: str) -> dict[str, Any] | None:
    """The template's labels and annotations, their values as text (what the API server takes); None without."""
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        r.add(fld, f"must be a mapping, got {type(meta).__name__}", "write metadata: {labels: {...}}")
        return None
    for k, val in meta.items():
        if k in _META_KEYS or val is None:  # kubectl writes creationTimestamp: null
            continue
        r.add(f"{fld}.{k}", f"cannot be set: {_NAMING}" if k in ("name", "generateName", "namespace")
              else "is not a pod template's to set", "remove it; a template's metadata has labels and annotations")
    labels = metadata.label_map(r, meta, "labels", fld + ".labels")
    for lk in labels:
        if lk.startswith(LABEL_PREFIX) or lk in APP_LABELS:
            r.add(f"{fld}.labels.{lk}", "is one of the job's own labels", "use a label of your own prefix")
        elif lk in TASK_LABELS:
            r.add(f"{fld}.labels.{lk}", "is a label the replica tasks find their pods by",
                  "use another label name")
        elif lk in metadata.KUEUE_POD_LABELS:
            r.add(f"{fld}.labels.{lk}", "on the pods it would make each pod (or each role) a Kueue Workload of its "
                  "own, not one pod group", "write queue: <LocalQueue> (and priority_class:) at the job's top level")
    annotations = metadata.annotation_map(r, meta, "annotations", fld + ".annotations")
    return {k: v for k, v in (("labels", labels), ("annotations", annotations)) if k in meta}


def _pod_spec(r: Reader, spec: Mapping[str, Any], fld: str) -> None:
    for k, (why, fix) in _OWNED_POD.items():
        if spec.get(k) is not None:
            r.add(f"{fld}.{k}", why if why.startswith("is ") else f"cannot be set: {why}", fix)
    names: set[str] = set()
    for kind in ("containers", "initContainers"):
        for path, c in _keyed(r, spec, kind, "name", fld):
            name = c.get("name")
            if not isinstance(name, str):
                continue
            r.extend(v.check_dns_label(name, path + ".name"))
            if name in names:
                r.add(path + ".name", "is the name of another container of the pod", "give each container its own name")
            names.add(name)
            if name == FETCH_CONTAINER:
                r.add(path, f"{FETCH_CONTAINER} is the init container that fetches the spec's code",
                      "give the container another name")
            elif name == CONTAINER_NAME and kind == "initContainers":
                r.add(path, f"{CONTAINER_NAME} is the training container", "give the init container another name")
            elif name == CONTAINER_NAME:
                _training_container(r, c, path)
            elif c.get("image") is None:
                r.add(path + ".image", "is required", "add image: registry.example.com/team/sidecar:1.0")
            _container_lists(r, c, path)
    for path, vol in _keyed(r, spec, "volumes", "name", fld):
        name = vol.get("name")
        if isinstance(name, str):
            r.extend(v.check_dns_label(name, path + ".name"))
            if name in RESERVED_VOLUMES:
                r.add(path, f"{name} is a volume tfk8s-airflow adds to the pods itself", "give it another name")
        sources = [k for k in vol if k != "name"]
        if len(sources) != 1:
            r.add(path, "needs exactly one volume source", f"write one of {', '.join(TEMPLATE_VOLUME_SOURCES)}")
        for source in sources:
            if source not in TEMPLATE_VOLUME_SOURCES:
                r.add(f"{path}.{source}", "is not a volume source a pod template may use",
                      f"use a persistentVolumeClaim (your cluster's storage), or one of "
                      f"{', '.join(TEMPLATE_VOLUME_SOURCES)}")
        host = vol.get("hostPath")
        if isinstance(host, Mapping):
            path_ = host.get("path")
            if not isinstance(path_, str) or not path_.startswith("/") or has_parent_segment(path_):
                r.add(path + ".hostPath.path", f"must be an absolute path without '..', got {v.show(path_)}",
                      "write hostPath: {path: /mnt/tfk8s-gluster/data}")
    for _path, _secret in _keyed(r, spec, "imagePullSecrets", "name", fld):
        pass


def _training_container(r: Reader, c: Mapping[str, Any], path: str) -> None:
    for k, spec_key in _SPEC_CONTAINER.items():
        if c.get(k) is not None:
            r.add(f"{path}.{k}", f"is the spec's {spec_key}", f"write {spec_key}: in the spec or the role")
    for epath, e in _keyed(r, c, "env", "name", path):
        name = e.get("name")
        if isinstance(name, str) and (name in RESERVED_ENV or name.startswith(ENV_PREFIX)):
            r.add(epath, "is set by tfk8s-airflow itself", "remove it; TF_CONFIG and TFK8S_* are derived from the spec")
    for ppath, port in _keyed(r, c, "ports", "containerPort", path):
        if port.get("name") == PORT_NAME:
            r.add(ppath, f"{PORT_NAME} is the TensorFlow server's port, the spec's port",
                  "remove it and write port: in the spec")


def _container_lists(r: Reader, c: Mapping[str, Any], path: str) -> None:
    if c.get("name") != CONTAINER_NAME:
        list(_keyed(r, c, "env", "name", path))
        list(_keyed(r, c, "ports", "containerPort", path))
    for mpath, mount in _keyed(r, c, "volumeMounts", "mountPath", path):
        mp = mount.get("mountPath")
        if isinstance(mp, str) and (not mp.startswith("/") or has_parent_segment(mp) or posixpath.normpath(mp) == "/"):
            r.add(mpath, "must be an absolute path other than / and without '..'", "write mountPath: /data")


def _keyed(r: Reader, d: Mapping[str, Any], kind: str, key: str, fld: str):
    """(path, item) of a list merged on ``key``: each item a mapping with its key, once."""
    items = d.get(kind)
    if items is None:
        return
    if not isinstance(items, (list, tuple)):
        r.add(f"{fld}.{kind}", f"must be a list, got {type(items).__name__}", f"write {kind}: [{{{key}: ...}}]")
        return
    seen: set[Any] = set()
    for i, item in enumerate(items):
        k = pt.item_key(item, key)
        path = f"{fld}.{kind}[{k}]" if isinstance(k, (str, int)) and not isinstance(k, bool) else f"{fld}.{kind}[{i}]"
        if not isinstance(item, Mapping):
            r.add(path, f"must be a mapping, got {type(item).__name__}", f"write {{{key}: ...}}")
            continue
        if k is None:
            r.add(path, f"has no {key}", f"add {key}: (items of {kind} are merged by {key})")
            continue
        if not isinstance(k, (str, int)) or isinstance(k, bool):
            r.add(f"{path}.{key}", f"must be a string or a number, got {type(k).__name__}",
                  f"write {key}: a name (items of {kind} are merged by {key})")
            continue
        if k in seen:
            r.add(path, f"appears twice (items of {kind} are merged by {key})", "write it once")
            continue
        seen.add(k)
        yield path, item


# --------------------------------------------------------------------------- against the rest of the spec
def check_templates(r: Reader, d: Mapping[str, Any], job: Mapping[str, Any], roles: Mapping[str, Any]) -> None:
    """Each role's merged template against the spec: env, volumes, mount paths and the port said once.

    A problem is named where it is written: in the role's own template when it has the item,
    else in the job's.
    """
    top = job.get("pod_template") or EMPTY
    vol_names = {vol.name for vol in job["volumes"]}
    mounts = {posixpath.normpath(vol.mount_path) for vol in job["volumes"]} | {SHARDS_MOUNT}
    if job.get("code") is not None:
        mounts.add(posixpath.normpath(job["code"].mount_path))
    for role, rs in roles.items():
        tpl = rs.pod_template
        if not tpl:
            continue
        block = d.get(role)
        own = block.get("pod_template") if isinstance(block, Mapping) else None
        own = pt.freeze(own) if isinstance(own, Mapping) else EMPTY

        def where(*steps: Any, _own: Mapping[str, Any] = own, _role: str = role) -> str:
            prefix = f"{_role}.pod_template" if _at(_own, steps) is not None or _at(top, steps) is None \
                else "pod_template"
            return prefix + "".join(f".{s}" if isinstance(s, str) else f".{s[0]}[{s[2]}]" for s in steps)

        spec = tpl.get("spec") or {}
        main = pt.find(spec.get("containers"), "name", CONTAINER_NAME) or {}
        tf = ("containers", "name", CONTAINER_NAME)
        for e in main.get("env") or ():
            if e.get("name") in rs.env:
                r.add(where("spec", tf, ("env", "name", e["name"])), "is set in the spec's env too",
                      "set it once: in env, or in the template")
        port = job["port"]
        for p in main.get("ports") or ():
            if p.get("containerPort") == port and p.get("name") != PORT_NAME:
                r.add(where("spec", tf, ("ports", "containerPort", port)),
                      f"{port} is the TensorFlow server's port ({PORT_NAME})", "use another port")
        for m in main.get("volumeMounts") or ():
            mp = m.get("mountPath")
            if isinstance(mp, str) and posixpath.normpath(mp) in mounts:
                r.add(where("spec", tf, ("volumeMounts", "mountPath", mp)), "is mounted by the spec already",
                      "mount it somewhere else")
        tpl_vols = {vol.get("name") for vol in spec.get("volumes") or ()}
        for name in sorted(n for n in tpl_vols if n in vol_names):
            r.add(where("spec", ("volumes", "name", name)), "is a volume of the spec's volumes too",
                  "declare it once: in volumes (mounted in the training container), or in the template")
        known = vol_names | tpl_vols | {SHARDS_VOLUME, CODE_VOLUME}
        for kind in ("containers", "initContainers"):
            for c in pt.containers(tpl, kind):
                for m in c.get("volumeMounts") or ():
                    if m.get("name") not in known:
                        r.add(where("spec", (kind, "name", c.get("name")), ("volumeMounts", "mountPath",
                                                                            m.get("mountPath"))),
                              f"mounts {v.show(m.get('name'))}, which is no volume of the pod",
                              "add the volume to the template's volumes, or mount one of the spec's")
        annotations = {**rs.annotations, **((tpl.get("metadata") or {}).get("annotations") or {})}
        metadata.check_annotation_size(r, annotations, f"{role}.pod_template.metadata.annotations")


def _at(template: Mapping[str, Any], steps: tuple[Any, ...]) -> Any:
    node: Any = template
    for step in steps:
        if isinstance(step, str):
            node = node.get(step) if isinstance(node, Mapping) else None
        else:
            kind, key, value = step
            node = pt.find(node.get(kind) if isinstance(node, Mapping) else None, key, value)
        if node is None:
            return None
    return node
