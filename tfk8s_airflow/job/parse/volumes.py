"""``volumes``: the named mounts of every replica (host paths and PVCs)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import RESERVED_VOLUMES, SHARDS_MOUNT
from tfk8s_airflow.job import fields as v
from tfk8s_airflow.job.parse.reader import Reader
from tfk8s_airflow.job.spec import CodeSource, Volume
from tfk8s_airflow.pathrules import has_parent_segment, is_safe_relative

_VOLUME_KEYS = tuple(f for f in Volume.__dataclass_fields__)


def volumes(r: Reader, d: Mapping[str, Any]) -> tuple[Volume, ...]:
    raw = d.get("volumes")
    if raw is None:
        return ()
    if isinstance(raw, Mapping):  # {data: {...}, logs: {...}}
        raw = [{"name": k, **(val if isinstance(val, Mapping) else {"_bad": val})} for k, val in raw.items()]
    if not isinstance(raw, list):
        r.add("volumes", "must be a list of {name, mount_path, host_path|pvc}",
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
        host = r.string(item, "host_path", path + ".host_path")
        pvc = r.string(item, "pvc", path + ".pvc")
        if bool(host) == bool(pvc):
            r.add(path, "needs exactly one of host_path or pvc",
                  "write host_path: /mnt/tfk8s-gluster/data (a node-mounted GlusterFS) or pvc: claim-name")
        if host and (not host.startswith("/") or has_parent_segment(host)):
            r.add(path + ".host_path", f"must be an absolute path without '..', got {v.show(host)}",
                  "write host_path: /mnt/...")
        if pvc:
            r.extend(v.check_dns_subdomain(pvc, path + ".pvc"))
        sub = r.string(item, "sub_path", path + ".sub_path")
        if sub and not is_safe_relative(sub):
            r.add(path + ".sub_path", "must be a relative path without '..'", "write sub_path: models/run1")
        out.append(Volume(vname, mount, host or None, pvc or None,
                          r.boolean(item, "read_only", path + ".read_only", False), sub or None))
    return tuple(out)


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
