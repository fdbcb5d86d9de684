"""What the deployment's policy checks of a pod's confinement and storage beyond the securityContext basics.

* **AppArmor**, in both forms the API server takes: ``securityContext.appArmorProfile`` (checked with
  the other restricted fields) and the annotation ``container.apparmor.security.beta.kubernetes.io/<c>``,
  which the API server still turns into the container's profile: ``unconfined`` through an annotation
  was admitted before, and the pod ran Unconfined. With ``restricted_security_context`` an annotation
  may ask only ``runtime/default`` or a ``localhost/<profile>`` the node's administrator loaded.
* **SELinux** (``seLinuxOptions`` of the pod or a container): as the Pod Security Standards'
  restricted profile, no ``user`` or ``role``, and a ``type`` among the container types only.
* **Volumes** that reach storage past the cluster's claims: ``csi`` inline and ``nfs`` (the two a pod
  template may name; every other such kind is refused by the template's own rules), and at a pod's
  admission every kind that is not one of :data:`PLAIN_VOLUME_KINDS` (``iscsi``, ``rbd``, ``cephfs``,
  ``glusterfs``, ``flexVolume``, ``gitRepo``, ``image``...): only of a kind the deployment allows
  (``[tfk8s] allowed_volume_types``, none by default). ``hostPath`` is checked against the allowed
  host paths elsewhere.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.exceptions import Problem

__all__ = ["APPARMOR_ANNOTATION", "PLAIN_VOLUME_KINDS", "POLICED_VOLUME_KINDS", "apparmor_annotation_problems",
           "selinux_problems", "volume_kind_problems"]

APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
#: Volume sources of a pod template that mount storage past the cluster's claims: allowed by the setting only.
POLICED_VOLUME_KINDS = ("csi", "nfs")
#: Volume sources every pod may use: scratch, the namespace's objects and claims, a host path (bounded by
#: allowed_host_paths); any other kind only where ``allowed_volume_types`` names it.
PLAIN_VOLUME_KINDS = ("emptyDir", "secret", "configMap", "persistentVolumeClaim", "hostPath", "projected",
                      "downwardAPI", "ephemeral")
#: SELinux types a container may ask (the restricted Pod Security Standard's).
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")


def apparmor_annotation_problems(annotations: Any, fld: str, admin: str) -> list[Problem]:
    """An AppArmor annotation that asks for anything but the runtime's default or a node's loaded profile."""
    if not isinstance(annotations, Mapping):
        return []
    out = []
    for key, value in annotations.items():
        if not isinstance(key, str) or not key.startswith(APPARMOR_ANNOTATION):
            continue
        ok = isinstance(value, str) and (value == "runtime/default" or
                                         (value.startswith("localhost/") and len(value) > len("localhost/")))
        if not ok:
            out.append(Problem(f"{fld}[{key}]", f"AppArmor profile {str(value)[:40]!r}: the deployment's pods run "
                                                "confined (runtime/default, or localhost/<profile>)",
                               f"remove it, or {admin}"))
    return out


def selinux_problems(sc: Mapping[str, Any], fld: str, admin: str) -> list[Problem]:
    """``seLinuxOptions`` of a (merged) pod or container securityContext, as the restricted standard allows."""
    opts = sc.get("seLinuxOptions")
    if opts is None:
        return []
    where = f"{fld}.seLinuxOptions"
    if not isinstance(opts, Mapping):
        return [Problem(where, "is not a mapping of user, role, type and level", "remove it")]
    out = []
    for k in ("user", "role"):
        if opts.get(k):
            out.append(Problem(f"{where}.{k}", "the deployment's pods take the runtime's SELinux user and role",
                               f"remove it, or {admin}"))
    if opts.get("type") not in (None, *SELINUX_TYPES):
        out.append(Problem(f"{where}.type", f"SELinux type {str(opts.get('type'))[:40]!r} is not a container type "
                                            f"({', '.join(t for t in SELINUX_TYPES if t)})",
                           f"remove it, or {admin}"))
    return out


def volume_kind_problems(vol: Mapping[str, Any], fld: str, allowed: tuple[str, ...]) -> list[Problem]:
    """A volume (of a template, or of a pod at its admission) of a kind beyond :data:`PLAIN_VOLUME_KINDS`
    that the deployment does not allow: ``csi``, ``nfs``, and every other network or node volume type."""
    if not isinstance(vol, Mapping) or "*" in allowed:
        return []
    return [Problem(f"{fld}.{kind}", f"a {kind} volume mounts storage past the cluster's volume claims, which "
                                     "the deployment does not allow",
                    f"use a persistentVolumeClaim, or an administrator adds {kind} to [tfk8s] allowed_volume_types")
            for kind in vol if kind != "name" and kind not in PLAIN_VOLUME_KINDS and kind not in allowed]
