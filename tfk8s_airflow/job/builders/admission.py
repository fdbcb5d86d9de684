"""The one admission of a pod, whoever makes it: setup, recovery, evaluation, TensorBoard, staging.

Why a pod and not a spec: :meth:`DeploymentPolicy.problems
<tfk8s_airflow.job.policy.DeploymentPolicy.problems>` checks a spec before anything is built,
naming its fields; but pods are also made later and from other sources: recovery recreates
them from the stored templates (possibly hours after setup, after the job's own pods wrote to
their volumes), evaluation and TensorBoard build pods of their own. Each of them passes
:func:`admit_pod` with the deployment's policy, just before the pod is created:

* every ``hostPath`` is resolved **now** (``realpath``): a symbolic link planted through a
  writable mount since the last admission (``<allowed>/x -> /``) is refused when the pod is
  recreated, not only at setup;
* a host path at or under one of ``read_only_host_paths`` is mounted read-only by every
  container of the pod (sidecars and init containers included): the pod is given back with
  ``readOnly: true`` on those mounts; a writable mount of a directory *above* one is refused.
  A mount's host path is its volume's joined with its ``subPath``, so a writable ``subPath`` of a
  volume that holds a read-only root is admitted when it is neither at nor above that root (the
  copy pods of staging mount their own directories so). With read-only roots set, each host path
  is walked on this machine from its allowed root without following a link
  (:mod:`tfk8s_airflow.volume.hostpath`): a writable mount through a symbolic link is refused (the
  kubelet follows it, e.g. ``<allowed>/link -> ../serving``), and a path whose root this process
  cannot see is refused rather than trusted as written;
* the ServiceAccount, its token, the Secrets (by namespace) and the security contexts are
  checked as the pod has them, with no default merged in: what is absent is absent;
* every volume is of a plain kind (emptyDir, secret, configMap, persistentVolumeClaim, hostPath,
  projected, downwardAPI, ephemeral) or one ``[tfk8s] allowed_volume_types`` names: ``nfs``, ``csi``
  and every other network or node volume type are refused otherwise;
* under ``restricted_security_context`` an AppArmor annotation on the pod
  (``container.apparmor.security.beta.kubernetes.io/<c>``) may ask only ``runtime/default`` or
  ``localhost/<profile>`` (``unconfined`` is refused), as an ``appArmorProfile`` of type
  ``Unconfined`` is.

Nothing here reads the cluster; the pod is not changed but for the read-only mounts.
"""

from __future__ import annotations

import copy
import functools
import os
import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job.policy import (
    DeploymentPolicy,
    apparmor_annotation_problems,
    host_namespace_problems,
    restricted_problems,
    volume_kind_problems,
)

__all__ = ["admit_pod", "admit_pods", "pod_problems"]

_KINDS = ("initContainers", "containers", "ephemeralContainers")
_ADMIN = "an administrator sets [tfk8s] restricted_security_context = false"


def admit_pod(pod: Mapping[str, Any], policy: DeploymentPolicy, *, what: str = "",
              realpath: Callable[[str], str] = os.path.realpath) -> dict[str, Any]:
    """``pod`` as it may be created (read-only host paths mounted read-only), or SpecError listing
    every refusal, each field prefixed by ``what`` (default: ``pod <name>``)."""
    return admit_pods([pod], policy, what=what, realpath=realpath)[0]


def admit_pods(pods: Iterable[Mapping[str, Any]], policy: DeploymentPolicy, *, what: str = "",
               realpath: Callable[[str], str] = os.path.realpath) -> list[dict[str, Any]]:
    """:func:`admit_pod` for many pods, each host path resolved once for the batch; SpecError lists the
    refusals of every pod."""
    resolve = functools.lru_cache(maxsize=4096)(realpath)
    out: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for pod in pods:
        admitted = read_only_mounts(pod, policy)
        name = (pod.get("metadata") or {}).get("name") or "?"
        problems += pod_problems(admitted, policy, what=what or f"pod {name}", realpath=resolve)
        out.append(admitted)
    if problems:
        raise SpecError(problems)
    return out


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in _KINDS:
        for c in spec.get(kind) or ():
            if isinstance(c, Mapping):
                yield kind, c


def _host_paths(spec: Mapping[str, Any]) -> dict[str, str]:
    """volume name -> its normalized hostPath path."""
    out = {}
    for vol in spec.get("volumes") or ():
        if isinstance(vol, Mapping) and isinstance(vol.get("hostPath"), Mapping) and \
                isinstance(vol["hostPath"].get("path"), str):
            out[str(vol.get("name"))] = posixpath.normpath(vol["hostPath"]["path"])
    return out


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _mounted(paths: Mapping[str, str], m: Mapping[str, Any]) -> str | None:
    """The host path a volume mount reaches: its hostPath volume's path joined with its ``subPath``."""
    base = paths.get(str(m.get("name")))
    sub = m.get("subPath")
    if base is None or not isinstance(sub, str) or not sub.strip("/"):
        return base
    return posixpath.normpath(posixpath.join(base, sub.lstrip("/")))


def read_only_mounts(pod: Mapping[str, Any], policy: DeploymentPolicy) -> dict[str, Any]:
    """A copy of ``pod`` whose every mount of a host path at or under a read-only root is read-only."""
    out = copy.deepcopy(dict(pod))
    roots = policy.read_only_host_paths
    if not roots:
        return out
    spec = out.get("spec") or {}
    paths = _host_paths(spec)
    for _kind, c in _containers(spec):
        for m in c.get("volumeMounts") or ():
            path = _mounted(paths, m) if isinstance(m, dict) else None
            if path is not None and any(_under(path, r) for r in roots):
                m["readOnly"] = True
    return out


def pod_problems(pod: Mapping[str, Any], policy: DeploymentPolicy, *, what: str = "pod",
                 realpath: Callable[[str], str] = os.path.realpath) -> list[Problem]:
    """Why the deployment refuses ``pod`` as it is; [] when it admits it."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = str(meta.get("namespace") or "default")
    p = f"{what}: spec"
    out: list[Problem] = []
    out += _volume_problems(spec, policy, p, realpath)
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account and account != "default" and not policy.service_account_allowed(str(account)):
        out.append(Problem(f"{p}.serviceAccountName", f"{account} is not among the allowed ServiceAccounts "
                                                      f"({', '.join(policy.allowed_service_accounts) or 'none'})",
                           "remove it, or an administrator adds it to [tfk8s] allowed_service_accounts"))
    if spec.get("automountServiceAccountToken") is not False and not policy.allow_service_account_token:
        out.append(Problem(f"{p}.automountServiceAccountToken",
                           "the deployment does not give pods their ServiceAccount's API token (absent means true)",
                           "set it to false, or an administrator sets [tfk8s] allow_service_account_token = true"))
    out += policy.template_secret_problems(pod, p, namespace)
    out += _security_problems(spec, meta, policy, p, what)
    return out


def _volume_problems(spec: Mapping[str, Any], policy: DeploymentPolicy, p: str,
                     realpath: Callable[[str], str]) -> list[Problem]:
    out: list[Problem] = []
    paths = _host_paths(spec)
    refused = set()
    for name, path in paths.items():
        found = policy.host_path_problems(f"{p}.volumes[{name}].hostPath.path", path, realpath)
        refused |= {name} if found else set()
        out += found
    for vol in spec.get("volumes") or ():
        if not isinstance(vol, Mapping):
            continue
        out += volume_kind_problems(vol, f"{p}.volumes[{vol.get('name')}]", policy.allowed_volume_types)
        for i, source in enumerate((vol.get("projected") or {}).get("sources") or ()):
            if isinstance(source, Mapping) and source.get("serviceAccountToken") is not None \
                    and not policy.allow_service_account_token:
                out.append(Problem(f"{p}.volumes[{vol.get('name')}].projected.sources[{i}].serviceAccountToken",
                                   "the deployment does not give pods a ServiceAccount's API token",
                                   "remove it, or an administrator sets [tfk8s] allow_service_account_token = true"))
    # A writable mount of a directory holding a read-only root would write into it; one through a link could too.
    for kind, c in _containers(spec):
        for m in c.get("volumeMounts") or ():
            where = _mounted(paths, m) if isinstance(m, Mapping) else None
            if where is None or m.get("readOnly") or m.get("name") in refused:
                continue
            fld = f"{p}.{kind}[{c.get('name')}].volumeMounts[{m.get('name')}]"
            above = next((r for r in policy.read_only_host_paths if r != where and _under(r, where)), None)
            if above is not None or (m.get("subPathExpr") and any(_under(r, paths[str(m["name"])])
                                                                  for r in policy.read_only_host_paths)):
                out.append(Problem(fld, f"{where} holds {above or 'a read-only root'}, which the deployment allows "
                                        "read-only; a writable mount of it would write there",
                                   "mount the subdirectories the job writes (a subPath), or mount it read_only"))
                continue
            out += policy.writable_path_problems(fld, where)
    return out


def _security_problems(spec: Mapping[str, Any], meta: Mapping[str, Any], policy: DeploymentPolicy, p: str,
                       what: str) -> list[Problem]:
    out: list[Problem] = []
    pod_sc = spec.get("securityContext") or {}
    if policy.restricted_security_context:
        out += apparmor_annotation_problems(meta.get("annotations"), f"{what}: metadata.annotations", _ADMIN)
        out += host_namespace_problems(spec, p, _ADMIN)
        out += restricted_problems(pod_sc, f"{p}.securityContext", _ADMIN)
    out += policy.non_root_problems(pod_sc, f"{p}.securityContext")
    for kind, c in _containers(spec):
        cp = f"{p}.{kind}[{c.get('name')}]"
        sc = c.get("securityContext") or {}
        if policy.restricted_security_context:
            # The pod's seccomp profile applies where the container sets none.
            merged = {**({"seccompProfile": pod_sc["seccompProfile"]} if "seccompProfile" in pod_sc else {}), **sc}
            out += restricted_problems(merged, f"{cp}.securityContext", _ADMIN, container=True)
            for port in c.get("ports") or ():
                if isinstance(port, Mapping) and port.get("hostPort"):
                    out.append(Problem(f"{cp}.ports[{port.get('containerPort')}].hostPort",
                                       "the deployment's pods do not bind the node's ports", f"remove it, or {_ADMIN}"))
        if policy.run_as_non_root:
            merged_nr = {k: v for k, v in pod_sc.items() if k in ("runAsNonRoot", "runAsUser")}
            merged_nr.update({k: v for k, v in sc.items() if k in ("runAsNonRoot", "runAsUser")})
            if merged_nr.get("runAsNonRoot") is not True:
                out.append(Problem(f"{cp}.securityContext.runAsNonRoot", "the deployment runs every pod as non-root",
                                   "set runAsNonRoot: true, or an administrator sets [tfk8s] run_as_non_root = false"))
            out += policy.non_root_problems(sc, f"{cp}.securityContext")
    return out
