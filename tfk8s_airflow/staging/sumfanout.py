"""Staging files already on GlusterFS with a fan-out of checksum pods: the plan, the checks, the manifest.

With ``copy_executor="kubernetes"`` the GlusterFS staging operator lists the input as the local pass
does (:func:`tfk8s_airflow.staging.stage.list_volume`), then, instead of reading every byte in the
Airflow worker to checksum it:

1. :func:`begin` plans ``pods`` parts balanced by bytes (:func:`tfk8s_airflow.staging.fanout.plan_parts`,
   whole files: a digest of byte ranges does not compose into the file's) and creates the task's
   hidden records directory beside the input's directory (``.<name>.tfk8s-parts-<key>``, the copy
   pods' own rule, :func:`tfk8s_airflow.staging.fanout.records_dir`).
2. Each part runs in a pod of :func:`tfk8s_airflow.staging.fanout.copy_pod`'s spec (the deployment's
   image and settings, the volume mounted as the copy pods mount it) with the program
   :mod:`tfk8s_airflow.pod.stagesum`: it digests its files and writes ``part-<n>.json``.
3. :func:`check_record` checks each record against the plan (the part's files, in order, each with a
   well-formed digest of the asked algorithm, and the size and modification time of the listing: a
   difference means the file changed after the listing, or the record is not a pod's, and fails the
   task naming the file); a part whose pod failed is started again by itself (the same part-retry
   budget as the copy pods).
4. :func:`finish` checks once more that every file still has the size and modification time of the
   listing, and writes the manifest with :func:`tfk8s_airflow.staging.stage.write_volume_manifest`,
   the local pass's own code (the same shards, the same content).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfk8s_airflow.exceptions import DataError, SpecError
from tfk8s_airflow.nofollow import SafeDir
from tfk8s_airflow.staging import fanout
from tfk8s_airflow.staging.fanout import Item, PartOutcome
from tfk8s_airflow.staging.hdfscopy import Logger
from tfk8s_airflow.staging.listing import FileEntry
from tfk8s_airflow.staging.stage import VolumeListing, write_volume_manifest

__all__ = ["PROGRAM", "begin", "state_files", "pod_specs", "check_record", "judge", "finish", "discard"]

#: The pod side of the checksum fan-out.
PROGRAM = "tfk8s_airflow.pod.stagesum"


def _records(volume: Any, base: Path) -> Path:
    if base == volume.mount:
        raise SpecError("the checksum pods write their records beside the input's directory: stage a "
                        "directory below the volume's mount, not the mount itself, or use copy_executor='local'",
                        field="input_path")
    return base


def begin(volume: Any, listing: VolumeListing, workers: int, *, pods: int, algorithm: str, key: str,
          logger: Logger) -> dict[str, Any]:
    """Plan the parts and make the records directory of task ``key``. Returns the state :func:`finish`
    needs (plain JSON: it travels through the trigger)."""
    base = _records(volume, listing.base)
    files = listing.files
    plan = fanout.plan_parts(files, pods, whole_files=True)
    with SafeDir.open_under(volume.mount, base.parent) as parent:
        parent.subdir(fanout.records_dir(base, key).name, create=True).close()
    logger.info("checksums (%s) through %d pod(s): %d file(s), %.1f MiB", algorithm, len(plan), len(files),
                sum(f.size for f in files) / 2**20)
    return {"input_path": listing.input_path, "pattern": listing.pattern, "root": str(listing.root),
            "dest": str(base), "manifest": str(listing.target), "workers": workers, "algorithm": algorithm,
            "files": [[f.path, f.relpath, f.size, None] for f in files], "mtimes": [f.mtime for f in files],
            "pod_paths": [volume.pod_path(f.path) for f in files],
            "plan": [[[it.index, it.offset, it.length, False] for it in items] for items in plan],
            "attempts": [0] * len(plan), "plan_id": fanout.plan_id(files, plan), "key": key}


def state_files(state: Mapping[str, Any]) -> list[FileEntry]:
    """The listing, with the modification times it was made with."""
    return [FileEntry(p, r, int(s), float(m) if m is not None else None)
            for (p, r, s, _), m in zip(state["files"], state["mtimes"], strict=True)]


def pod_specs(state: Mapping[str, Any], volume: Any) -> list[dict[str, Any]]:
    """Every part's ``TFK8S_COPY_PART`` document (paths as the pods see the volume)."""
    files, pod_paths = state_files(state), state["pod_paths"]
    records = volume.pod_path(fanout.records_dir(Path(state["dest"]), state["key"]))
    out = []
    for part, items in enumerate(fanout.state_plan(state)):
        out.append({"part": part, "root": str(volume.pod_mount), "records": records,
                    "algorithm": state["algorithm"], "plan_id": state["plan_id"],
                    "items": [{"path": pod_paths[it.index],
                               "rel": Path(files[it.index].path).relative_to(volume.mount).as_posix(),
                               "size": files[it.index].size, "mtime": files[it.index].mtime} for it in items]})
    return out


def _valid_digest(value: Any, algorithm: str) -> bool:
    size = hashlib.new(algorithm).digest_size
    return (isinstance(value, dict) and value.get("algorithm") == algorithm.upper() and value.get("length") == size
            and isinstance(value.get("bytes"), str) and len(value["bytes"]) == 2 * size
            and all(c in "0123456789abcdef" for c in value["bytes"]))


def check_record(part: int, record: Any, items: Sequence[Item], files: Sequence[FileEntry],
                 pod_paths: Sequence[str], algorithm: str) -> str | None:
    """Why ``record`` is not a complete, well-formed result of ``items`` (None when it is; the part is
    then started again). :class:`DataError` naming the file when the record holds another size or
    modification time than the listing: the file changed after it was listed (or the record is not a
    pod's), and no new pod helps."""
    if not isinstance(record, dict) or record.get("part") != part:
        return "the record is not this part's"
    if record.get("algorithm") != algorithm:
        return f"the record holds {record.get('algorithm')!r} digests, not {algorithm!r}"
    got = record.get("items")
    if not isinstance(got, list) or len(got) != len(items):
        return f"the record lists {len(got) if isinstance(got, list) else 'no'} files, the part has {len(items)}"
    for i, (item, rec) in enumerate(zip(items, got, strict=True)):
        entry = files[item.index]
        if not isinstance(rec, dict) or rec.get("i") != i or rec.get("path") != pod_paths[item.index]:
            return f"file {i} of the part ({entry.path}) is missing from the record"
        if not _valid_digest(rec.get("checksum"), algorithm):
            return f"{entry.path} has no valid {algorithm} digest in the record"
        if rec.get("size") != entry.size or rec.get("mtime") != entry.mtime:
            raise DataError(f"{entry.path} changed since the listing: its checksum pod read {rec.get('size')} bytes "
                            f"modified at {rec.get('mtime')}, the listing has {entry.size} bytes modified at "
                            f"{entry.mtime} (stage it again once it is complete)")
    return None


def judge(state: Mapping[str, Any], volume: Any, parts: Sequence[int]) -> PartOutcome:
    """Read and check the records of ``parts`` (:func:`tfk8s_airflow.staging.fanout.judge`'s rules)."""
    files, pod_paths, algorithm = state_files(state), state["pod_paths"], state["algorithm"]
    return fanout.judge(state, volume, parts,
                        lambda part, rec, items, _: check_record(part, rec, items, files, pod_paths, algorithm))


def unchanged(volume: Any, files: Sequence[FileEntry]) -> None:
    """:class:`DataError` naming the first file that is not (any more) a regular file of the listed
    size and modification time (each directory opened without following a link)."""
    by_dir: dict[str, list[FileEntry]] = {}
    for f in files:
        by_dir.setdefault(os.path.dirname(f.path), []).append(f)
    for where, entries in by_dir.items():
        with SafeDir.open_under(volume.mount, where) as d:
            for f in entries:
                st = d.lstat(os.path.basename(f.path))
                if st is None or not stat.S_ISREG(st.st_mode):
                    raise DataError(f"{f.path} changed since the listing: it is gone or no longer a regular file")
                if st.st_size != f.size or st.st_mtime != f.mtime:
                    raise DataError(f"{f.path} changed since the listing: {st.st_size} bytes modified at "
                                    f"{st.st_mtime}, the listing has {f.size} bytes modified at {f.mtime} "
                                    "(stage it again once it is complete)")


def finish(volume: Any, state: Mapping[str, Any], records: Mapping[int, Any], logger: Logger,
           seconds: float) -> dict[str, Any]:
    """Every part is done: check the files once more, write the manifest (the local pass's code), remove
    the records directory. Returns the XCom result."""
    files = state_files(state)
    sums: dict[int, dict[str, Any]] = {}
    for part, items in enumerate(fanout.state_plan(state)):
        for item, rec in zip(items, records[part]["items"], strict=True):
            sums[item.index] = dict(rec["checksum"])
    unchanged(volume, files)
    entries = [FileEntry(f.path, f.relpath, f.size, f.mtime, None, sums[i]) for i, f in enumerate(files)]
    listing = VolumeListing(state["input_path"], state["pattern"], Path(state["root"]), Path(state["dest"]),
                            Path(state["manifest"]), files)
    total = sum(f.size for f in files)
    logger.info("digested %d file(s) (%.1f MiB, %s) through %d pod(s) in %.1fs (%.1f MiB/s)", len(files),
                total / 2**20, state["algorithm"], len(state["plan"]), seconds,
                total / 2**20 / seconds if seconds > 0 else 0.0)
    result = write_volume_manifest(volume, listing, entries, int(state["workers"]), logger)
    discard(volume, state)
    return result


def discard(volume: Any, state: Mapping[str, Any]) -> None:
    """Remove the task's records directory (never following a link); the data is not touched."""
    base = Path(state["dest"])
    with SafeDir.open_under(volume.mount, base.parent) as parent:
        parent.rmtree(fanout.records_dir(base, state["key"]).name)
