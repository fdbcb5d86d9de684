"""The data manifest: what a staged partition holds and which worker reads what.

Why a file and not only XCom: the training pods, a later evaluation, and a human debugging
a bad model all need to know exactly which bytes a run trained on, long after the XCom
is gone. Why it is written last and atomically (temporary name in the same directory,
fsync, rename): its existence is the signal that the data is complete and verified; a
reader either sees no manifest or a whole one, never a half-written file or a manifest
for a copy that was interrupted.

Format (JSON, ``version`` 1)::

    {
      "version": 1,
      "created": "2026-01-02T03:04:05Z",
      "source":   {"kind": "hdfs", "input": "/data/clicks/dt=2026-01-01", "root": "...",
                   "pattern": null, "namenodes": ["http://nn:9870"]},
      "location": {"kind": "glusterfs", "root": "/mnt/tfk8s-gluster/cache/...",
                   "pod_root": "/data/cache/..."},
      "num_workers": 4,
      "total_files": 120, "total_bytes": 123456789,
      "files": [{"path": "<as the pods open it>", "source": "<origin path>", "size": 1234,
                 "checksum": {"algorithm": "MD5-of-0MD5-of-512CRC32C", "bytes": "...",
                              "length": 28}}],
      "shards": {"worker-0": ["<path>", ...], ...},
      "shard_bytes": {"worker-0": 30864197, ...},
      "imbalance_bound": 4096000
    }
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfk8s_airflow.exceptions import DataError, PathSafetyError
from tfk8s_airflow.nofollow import SafeDir
from tfk8s_airflow.staging.listing import FileEntry
from tfk8s_airflow.staging.shards import ShardPlan

__all__ = ["MANIFEST_NAME", "FORMAT_VERSION", "build_manifest", "write_local_atomic",
           "read_local", "remove_local"]

MANIFEST_NAME = "_tfk8s_manifest.json"  # hidden by Hadoop's rule: never listed as data
FORMAT_VERSION = 1
#: A manifest lists every file with its checksum: about 300 bytes a file.
MANIFEST_READ_LIMIT = 256 << 20


def build_manifest(files: Sequence[FileEntry], paths: Sequence[str], plan: ShardPlan, *,
                   source: Mapping[str, Any], location: Mapping[str, Any],
                   created: float | None = None) -> dict[str, Any]:
    """The manifest document. ``paths[i]`` is where ``files[i]`` is read from (the shard
    lists use the same strings)."""
    if len(paths) != len(files):
        raise ValueError("one path per file")
    entries = []
    for entry, path in zip(files, paths, strict=True):
        item: dict[str, Any] = {"path": path, "source": entry.path, "size": entry.size}
        if entry.checksum:
            item["checksum"] = dict(entry.checksum)
        entries.append(item)
    return {
        "version": FORMAT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created or time.time())),
        "source": dict(source),
        "location": dict(location),
        "num_workers": len(plan.shards),
        "total_files": len(entries),
        "total_bytes": sum(e.size for e in files),
        "files": entries,
        "shards": plan.shards,
        "shard_bytes": plan.shard_bytes,
        "imbalance_bound": plan.bound,
    }


def _parent(path: str | os.PathLike[str], trusted: str | os.PathLike[str] | None, create: bool) -> SafeDir:
    """The manifest's directory: walked without following links below ``trusted`` (the volume's
    mount, or any directory the caller trusts), or opened as given when there is none."""
    parent = Path(path).parent
    if trusted is None:
        return SafeDir.open(parent, create=create)
    return SafeDir.open_under(trusted, parent, create=create)


def write_local_atomic(path: str | os.PathLike[str], doc: Any, *,
                       trusted: str | os.PathLike[str] | None = None) -> Path:
    """Write JSON to ``path`` via a temporary file in the same directory, fsync and a rename (see
    :meth:`tfk8s_airflow.nofollow.SafeDir.write_atomic`: what a pod left at the name is replaced,
    never written through)."""
    target = Path(path)
    with _parent(target, trusted, create=True) as d:
        d.write_json_atomic(target.name, doc, mode=0o644)
    return target


def read_local(path: str | os.PathLike[str], *, trusted: str | os.PathLike[str] | None = None,
               limit: int = MANIFEST_READ_LIMIT) -> dict[str, Any]:
    """Read a manifest (a regular file, at most ``limit`` bytes); :class:`DataError` when it is
    missing or not a manifest."""
    try:
        with _parent(path, trusted, create=False) as d:
            doc = d.read_json(Path(path).name, limit)
    except FileNotFoundError:
        raise DataError(f"no manifest at {path}: the data was never staged completely") from None
    except PathSafetyError:
        raise
    except DataError as exc:
        raise DataError(f"{path} is not a JSON manifest: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise DataError(f"{path} is not a version {FORMAT_VERSION} tfk8s data manifest")
    return doc


def remove_local(path: str | os.PathLike[str], *, trusted: str | os.PathLike[str] | None = None) -> bool:
    """Delete a manifest before its data changes (it would describe data in flux)."""
    try:
        with _parent(path, trusted, create=False) as d:
            return d.unlink(Path(path).name)
    except FileNotFoundError:
        return False
