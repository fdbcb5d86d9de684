"""``volumes``: the named mounts of every replica.

Each volume is exactly one kind (:data:`~tfk8s_airflow.job.spec.VOLUME_KINDS`): a host path
(a node-mounted GlusterFS; which host paths are allowed is the deployment's policy, not the
spec's), a PVC, a Secret's or ConfigMap's keys as files, or an emptyDir.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import CODE_DIR_ENV, RESERVED_VOLUMES, SHARDS_MOUNT, volume_dir_env
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec import quantity as q
from tfk8s_airflow.job.spec.model import VOLUME_KINDS, CodeSource, EmptyDir, Volume
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.pathrules import has_parent_segment, is_safe_relative

_VOLUME_KEYS = tuple(f for f in Volume.__dataclass_fields__)
_KINDS_FIX = ("write host_path: /mnt/tfk8s-gluster/data (a node-mounted GlusterFS), pvc: claim-name, "
              "secret: secret-name, config_map: name or empty_dir: {}")


def volumes(r: Reader, d: Mapping[str, Any]) -> tuple[Volume, ...]:
    raw = d.get("volumes")
    if raw is None:
        return ()
    if isinstance(raw, Mapping):  # {data: {...}, logs: {...}}
        raw = [{"name": k, **(val if isinstance(val, Mapping) else {"_bad": val})} for k, val in raw.items()]
    if not isinstance(raw, list):
        r.add("volumes", "must be a list of {name, mount_path, host_path|pvc|secret|config_map|empty_dir}",
              "write volumes: [{name: data, mount_path: /data, host_path: /mnt/gluster/data}]")
        return ()
    out: list[Volume] = []
    names: set[str] = set()
    paths: set[str] = set()
    for i, item in enumerate(raw):
        path = f"volumes[{i}]"
        if not isinstance(item, Mapping) or "_bad" in item:
            r.add(path, "must be a mapping", "write {name: data, mount_path: /data, host_path: /srv/data}")
            continue
        r.unknown(item, _VOLUME_KEYS, path + ".")
        vname = r.string(item, "name", path + ".name") or ""
        if not vname:
            r.add(path + ".name", "is required", "add name: data")
        else:
            r.extend(v.check_dns_label(vname, path + ".name"))
            if vname in RESERVED_VOLUMES:
                r.add(path + ".name", f"{vname} is the name of a volume tfk8s-airflow adds to the pods itself",
                      "give the volume another name")
            elif vname in names:
                r.add(path + ".name", f"duplicate volume name {v.show(vname)}", "give each volume its own name")
            names.add(vname)
        mount = r.string(item, "mount_path", path + ".mount_path") or ""
        if mount_path_problem(r, mount, path + ".mount_path", "/data"):
            pass
        elif posixpath.normpath(mount) in paths:
            r.add(path + ".mount_path", f"{v.show(mount)} is mounted twice", "give each volume its own mount_path")
        elif posixpath.normpath(mount) == SHARDS_MOUNT:
            r.add(path + ".mount_path", f"{SHARDS_MOUNT} is where the pods get their shard assignments",
                  "mount the volume somewhere else")
        paths.add(posixpath.normpath(mount))
        kinds = [k for k in VOLUME_KINDS if item.get(k) is not None]
        if len(kinds) != 1:
            r.add(path, "needs exactly one of " + ", ".join(VOLUME_KINDS), _KINDS_FIX)
        host = r.string(item, "host_path", path + ".host_path")
        if host is not None and (not host.startswith("/") or has_parent_segment(host)):
            r.add(path + ".host_path", f"must be an absolute path without '..', got {v.show(host)}",
                  "write host_path: /mnt/...")
        named = {}
        for kind in ("pvc", "secret", "config_map"):
            named[kind] = r.string(item, kind, f"{path}.{kind}")
            if named[kind] is not None:
                r.extend(v.check_dns_subdomain(named[kind] or "", f"{path}.{kind}"))
        sub = r.string(item, "sub_path", path + ".sub_path")
        if sub is not None and not is_safe_relative(sub):
            r.add(path + ".sub_path", "must be a relative path without '..'", "write sub_path: models/run1")
        out.append(Volume(vname, mount, host_path=host, pvc=named["pvc"], secret=named["secret"],
                          config_map=named["config_map"], empty_dir=_empty_dir(r, item, path + ".empty_dir"),
                          read_only=r.boolean(item, "read_only", path + ".read_only", False), sub_path=sub))
    return tuple(out)


def _empty_dir(r: Reader, item: Mapping[str, Any], fld: str) -> EmptyDir | None:
    raw = item.get("empty_dir")
    if raw is None or raw is False:
        return None
    if raw is True:
        return EmptyDir()
    fix = "write empty_dir: {} or empty_dir: {medium: Memory, size_limit: 1Gi}"
    if not isinstance(raw, Mapping):
        r.add(fld, "must be a mapping", fix)
        return None
    r.unknown(raw, ("medium", "size_limit"), fld + ".")
    medium = r.string(raw, "medium", fld + ".medium", "") or ""
    if medium not in ("", "Memory"):
        r.add(fld + ".medium", f"must be Memory (a tmpfs) or empty (the node's disk), got {v.show(medium)}", fix)
    size = raw.get("size_limit")
    if size is not None:
        problem = q.quantity_problem(size, fld + ".size_limit")
        if problem:
            r.extend([problem])
            size = None
        else:
            size = (v.as_text(size) or "").strip()
    return EmptyDir(medium, size)


def mount_path_problem(r: Reader, mount: str, fld: str, example: str) -> bool:
    """Record what is wrong with a mount path inside the container; True when something is."""
    if not mount.startswith("/") or has_parent_segment(mount) or posixpath.normpath(mount) == "/":
        r.add(fld, f"must be an absolute path other than / and without '..', got {v.show(mount)}",
              f"write mount_path: {example}")
        return True
    return False


def check_code_mount(r: Reader, vols: tuple[Volume, ...], code: CodeSource | None) -> None:
    """The code's emptyDir is mounted beside the volumes: each mount path once (the API's rule)."""
    if code is None:
        return
    mount = posixpath.normpath(code.mount_path)
    for i, vol in enumerate(vols):
        if posixpath.normpath(vol.mount_path) == mount:
            r.add(f"volumes[{i}].mount_path", f"{v.show(vol.mount_path)} is where code is unpacked",
                  "mount the volume somewhere else, or set code.mount_path")
        if volume_dir_env(vol.name) == CODE_DIR_ENV:
            r.add(f"volumes[{i}].name", f"a volume named {vol.name} would set {CODE_DIR_ENV}, which says where "
                  "code is unpacked", "give the volume another name")
