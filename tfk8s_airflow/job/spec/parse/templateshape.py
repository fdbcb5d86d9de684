"""The types of a pod template's fields that tfk8s-airflow reads itself (policy, merge, render).

Why: the template is Kubernetes' own pod spec, left for the API server to validate, but the
deployment's policy, the merge and the renderer read some of its fields before the API server
sees them. A wrong-typed item there (``volumes: [x]``, a YAML date as an image, a list as a
securityContext) used to pass the parser and crash a later step with a traceback (and setup
retried it). Each such field is checked here, and a problem names its path and the type it needs.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import CONTAINER_NAME
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.job.spec.quantity import quantity_problem

__all__ = ["check_json", "check_shapes"]

MAP, LIST, STR, INT, BOOL = "a mapping", "a list", "a string", "a whole number", "true or false"
_SC_MAPS = ("seccompProfile", "appArmorProfile", "seLinuxOptions", "windowsOptions")
_POD_SC = {**{k: MAP for k in _SC_MAPS}, "sysctls": LIST, "supplementalGroups": LIST, "runAsNonRoot": BOOL,
           "runAsUser": INT, "runAsGroup": INT, "fsGroup": INT}
_CONTAINER_SC = {**{k: MAP for k in _SC_MAPS}, "capabilities": MAP, "privileged": BOOL,
                 "allowPrivilegeEscalation": BOOL, "readOnlyRootFilesystem": BOOL, "runAsNonRoot": BOOL,
                 "runAsUser": INT, "runAsGroup": INT, "procMount": STR}
#: (the fields the template may not set at all, such as nodeSelector or the training container's image,
#: are refused by the template parser and not looked at here)
_POD = {"securityContext": MAP, "affinity": MAP, "hostNetwork": BOOL, "hostPID": BOOL, "hostIPC": BOOL,
        "priorityClassName": STR, "runtimeClassName": STR, "topologySpreadConstraints": LIST, "dnsConfig": MAP,
        "hostAliases": LIST}
_CONTAINER = {"image": STR, "command": LIST, "args": LIST, "securityContext": MAP, "resources": MAP, "envFrom": LIST,
              "workingDir": STR, "imagePullPolicy": STR}
_VOLUME_SOURCES = ("hostPath", "secret", "configMap", "persistentVolumeClaim", "projected", "downwardAPI",
                   "ephemeral", "csi", "nfs")


def check_json(value: Any, fld: str) -> tuple[str, str, str] | None:
    """(field, message, fix) of the first node of a template that is not JSON data, or None.

    A template is a Kubernetes object: text, whole and finite numbers, booleans, null, lists and
    mappings with text keys. A YAML date, timestamp or binary, a NaN or an infinity, a number as a
    key would pass through the parser into the pods and fail the render (or the API server) instead.
    """
    stack: list[tuple[Any, str]] = [(value, fld)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, Mapping):
            for k, child in node.items():
                if not isinstance(k, str):
                    return (f"{where}[{k!r}]"[:200], f"has a key of type {type(k).__name__}: keys are text",
                            "quote the key")
                stack.append((child, f"{where}.{k}"))
        elif isinstance(node, (list, tuple)):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node))
        elif isinstance(node, float) and node != node or node in (float("inf"), float("-inf")):
            return where, f"is {node!r}, not a number Kubernetes takes", "write a finite number"
        elif node is not None and not isinstance(node, (str, int, float, bool)):
            return (where, f"is a {type(node).__name__}, not JSON data (YAML reads an unquoted date or timestamp "
                           "as one)", "quote it")
    return None


def _is(value: Any, kind: str) -> bool:
    if kind == MAP:
        return isinstance(value, Mapping)
    if kind == LIST:
        return isinstance(value, (list, tuple))
    if kind == STR:
        return isinstance(value, str)
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, bool)


def _fields(r: Reader, d: Mapping[str, Any], table: Mapping[str, str], fld: str) -> None:
    for key, kind in table.items():
        value = d.get(key)
        if value is not None and not _is(value, kind):
            r.add(f"{fld}.{key}", f"must be {kind}, got {type(value).__name__}",
                  f"write {key} as {kind}" + (" (quote it: YAML reads some text as dates or numbers)"
                                              if kind == STR else ""))


def _items(r: Reader, d: Mapping[str, Any], key: str, fld: str, kind: str = MAP,
           report: bool = True) -> list[tuple[str, Any]]:
    """(path, item) of a list field whose items must be of ``kind``; wrong ones are named (unless the
    template parser's merge-keyed lists name them already: ``report`` False)."""
    items = d.get(key)
    if not isinstance(items, (list, tuple)):
        return []
    out = []
    for i, item in enumerate(items):
        if not _is(item, kind):
            if report:
                r.add(f"{fld}.{key}[{i}]", f"must be {kind}, got {type(item).__name__}",
                      f"write each item as {kind}")
        else:
            out.append((f"{fld}.{key}[{i}]", item))
    return out


def _security_context(r: Reader, sc: Any, table: Mapping[str, str], fld: str) -> None:
    if not isinstance(sc, Mapping):
        return
    _fields(r, sc, table, fld)
    caps = sc.get("capabilities")
    if isinstance(caps, Mapping):
        for key in ("add", "drop"):
            if caps.get(key) is not None and not _is(caps[key], LIST):
                r.add(f"{fld}.capabilities.{key}", f"must be a list, got {type(caps[key]).__name__}",
                      f"write {key}: [ALL]")
            else:
                _items(r, caps, key, f"{fld}.capabilities", STR)
    for key in _SC_MAPS:
        sub = sc.get(key)
        if isinstance(sub, Mapping):
            for k, val in sub.items():
                if val is not None and not isinstance(val, (str, bool)):
                    r.add(f"{fld}.{key}.{k}", f"must be a string, got {type(val).__name__}", "quote it")


def _container(r: Reader, c: Mapping[str, Any], fld: str, training: str) -> None:
    if c.get("name") == training:  # the spec's keys say these; the template parser refuses them
        _fields(r, c, {"securityContext": MAP, "workingDir": STR}, fld)
    else:
        _fields(r, c, _CONTAINER, fld)
        for key in ("command", "args"):
            _items(r, c, key, fld, STR)
    _security_context(r, c.get("securityContext"), _CONTAINER_SC, fld + ".securityContext")
    res = c.get("resources")
    if isinstance(res, Mapping) and c.get("name") != training:
        _fields(r, res, {"limits": MAP, "requests": MAP}, fld + ".resources")
        for kind in ("limits", "requests"):  # the API server's own refusal of a quantity names no field
            amounts = res.get(kind)
            if isinstance(amounts, Mapping):
                r.extend(p for p in (quantity_problem(q, f"{fld}.resources.{kind}.{name}")
                                     for name, q in amounts.items()) if p is not None)
    for path, e in _items(r, c, "env", fld):
        _fields(r, e, {"name": STR, "value": STR, "valueFrom": MAP}, path)
        source = e.get("valueFrom")
        if isinstance(source, Mapping):
            _fields(r, source, {k: MAP for k in ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef")},
                    path + ".valueFrom")
            for ref in ("secretKeyRef", "configMapKeyRef"):
                if isinstance(source.get(ref), Mapping):
                    _fields(r, source[ref], {"name": STR, "key": STR, "optional": BOOL}, f"{path}.valueFrom.{ref}")
    for path, e in (_items(r, c, "envFrom", fld) if c.get("name") != training else ()):
        _fields(r, e, {"secretRef": MAP, "configMapRef": MAP, "prefix": STR}, path)
        for ref in ("secretRef", "configMapRef"):
            if isinstance(e.get(ref), Mapping):
                _fields(r, e[ref], {"name": STR, "optional": BOOL}, f"{path}.{ref}")
    for path, port in _items(r, c, "ports", fld):
        _fields(r, port, {"containerPort": INT, "hostPort": INT, "name": STR, "protocol": STR}, path)
    for path, m in _items(r, c, "volumeMounts", fld):
        _fields(r, m, {"name": STR, "mountPath": STR, "readOnly": BOOL, "subPath": STR}, path)


def _volume(r: Reader, vol: Mapping[str, Any], fld: str) -> None:
    _fields(r, vol, {"name": STR, **{k: MAP for k in _VOLUME_SOURCES}}, fld)
    if vol.get("emptyDir") is not None and not isinstance(vol["emptyDir"], Mapping):
        r.add(f"{fld}.emptyDir", f"must be a mapping, got {type(vol['emptyDir']).__name__}", "write emptyDir: {}")
    elif isinstance(vol.get("emptyDir"), Mapping) and vol["emptyDir"].get("sizeLimit") is not None:
        problem = quantity_problem(vol["emptyDir"]["sizeLimit"], f"{fld}.emptyDir.sizeLimit")
        if problem is not None:
            r.add(problem.field, problem.message, "write e.g. sizeLimit: 1Gi")
    named = {"secret": {"secretName": STR, "optional": BOOL}, "configMap": {"name": STR, "optional": BOOL},
             "persistentVolumeClaim": {"claimName": STR, "readOnly": BOOL}, "hostPath": {"path": STR, "type": STR},
             "csi": {"driver": STR, "readOnly": BOOL, "nodePublishSecretRef": MAP, "volumeAttributes": MAP},
             "nfs": {"server": STR, "path": STR, "readOnly": BOOL}}
    for source, table in named.items():
        if isinstance(vol.get(source), Mapping):
            _fields(r, vol[source], table, f"{fld}.{source}")
    ref = (vol.get("csi") or {}).get("nodePublishSecretRef") if isinstance(vol.get("csi"), Mapping) else None
    if isinstance(ref, Mapping):
        _fields(r, ref, {"name": STR}, f"{fld}.csi.nodePublishSecretRef")
    projected = vol.get("projected")
    if isinstance(projected, Mapping):
        _fields(r, projected, {"sources": LIST}, f"{fld}.projected")
        for path, source in _items(r, projected, "sources", f"{fld}.projected"):
            _fields(r, source, {k: MAP for k in ("secret", "configMap", "serviceAccountToken", "downwardAPI",
                                                 "clusterTrustBundle")}, path)
            for k in ("secret", "configMap"):
                if isinstance(source.get(k), Mapping):
                    _fields(r, source[k], {"name": STR, "optional": BOOL}, f"{path}.{k}")


def check_shapes(r: Reader, spec: Mapping[str, Any], fld: str) -> None:
    """Name every field of a template's pod spec that tfk8s-airflow reads and that is not of its type."""
    _fields(r, spec, _POD, fld)
    _security_context(r, spec.get("securityContext"), _POD_SC, fld + ".securityContext")
    _items(r, spec, "topologySpreadConstraints", fld)
    _items(r, spec, "hostAliases", fld)
    for kind in ("containers", "initContainers"):
        for path, c in _items(r, spec, kind, fld, report=False):
            _container(r, c, path, CONTAINER_NAME)
    for path, vol in _items(r, spec, "volumes", fld, report=False):
        _volume(r, vol, path)
    for path, item in _items(r, spec, "imagePullSecrets", fld, report=False):
        _fields(r, item, {"name": STR}, path)
