"""``volumes``: the named mounts of every replica (host paths and PVCs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.job import fields as v
from tfk8s_airflow.job.parse.reader import Reader
from tfk8s_airflow.job.spec import Volume
from tfk8s_airflow.pathrules import is_safe_relative

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
            if vname in names:
                r.add(path + ".name", f"duplicate volume name {vname!r}", "give each volume its own name")
            names.add(vname)
        mount = r.string(item, "mount_path", path + ".mount_path") or ""
        if not mount.startswith("/"):
            r.add(path + ".mount_path", f"must be an absolute path, got {mount!r}", "write mount_path: /data")
        elif mount in paths:
            r.add(path + ".mount_path", f"{mount} is mounted twice", "give each volume its own mount_path")
        paths.add(mount)
        host = r.string(item, "host_path", path + ".host_path")
        pvc = r.string(item, "pvc", path + ".pvc")
        if bool(host) == bool(pvc):
            r.add(path, "needs exactly one of host_path or pvc",
                  "write host_path: /mnt/tfk8s-gluster/data (a node-mounted GlusterFS) or pvc: claim-name")
        if host and not host.startswith("/"):
            r.add(path + ".host_path", f"must be an absolute path, got {host!r}", "write host_path: /mnt/...")
        if pvc:
            r.extend(v.check_dns_subdomain(pvc, path + ".pvc"))
        sub = r.string(item, "sub_path", path + ".sub_path")
        if sub and not is_safe_relative(sub):
            r.add(path + ".sub_path", "must be a relative path without '..'", "write sub_path: models/run1")
        out.append(Volume(vname, mount, host or None, pvc or None,
                          r.boolean(item, "read_only", path + ".read_only", False), sub or None))
    return tuple(out)
