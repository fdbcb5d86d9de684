"""Staging as a fan-out of copy pods: the plan, the copy pods' spec, and the verified, atomic publication.

With ``executor="kubernetes"`` the staging operator lists the partition as the local copy does,
then, instead of streaming every byte through the Airflow worker:

1. :func:`prepare` takes the destination's lock, sees what is already there (a re-run keeps what
   is verified), creates the hidden staging directory (``.<name>.tfk8s-partial``, the local
   copy's) and the records directory beside it (``.<name>.tfk8s-parts``), and :func:`plan_parts`
   splits the copy into ``pods`` parts balanced by bytes: a file larger than a part's share is
   split at HDFS block boundaries (so each piece's block MD5s are HDFS's own and compose into the
   file checksum), small files are grouped; largest first onto the least loaded part.
2. :func:`copy_pod` is one part's pod (the image, namespace, resources and scheduling come from the
   deployment's ``[tfk8s] staging_*`` settings, :class:`CopySettings`, never from a DAG's form);
   the program in it is :mod:`tfk8s_airflow.pod.stagecopy` (standard library only).
3. :func:`collect` reads each part's record (``part-<n>.json``, written by the pod) from the volume
   with :mod:`tfk8s_airflow.nofollow` (no link followed, a regular file, bounded, strict JSON),
   checks it against the plan (every item, every block), and compares every file's checksum with
   HDFS's ``GETFILECHECKSUM`` (one request per file: the one a pod recorded for a whole file, the one
   composed from the block MD5s of a file split across parts; a record is the volume's, so a pod's
   word is never taken for HDFS's), and :func:`publish` then puts the copy in place: a first
   copy by one rename of the staging directory, into a cache that held files by one rename per
   copied file. Only then is the manifest written (by :func:`tfk8s_airflow.staging.stage.stage_hdfs`'s
   same code). A part whose pod failed (killed, evicted, a NameNode down) is started again by itself
   and resumes from its journal; a checksum error fails the task and publishes nothing.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfk8s_airflow.configspec import read, setting
from tfk8s_airflow.exceptions import DataError, PathSafetyError, Problem, SpecError, StagingError
from tfk8s_airflow.hdfschecksum import DEFAULT_BYTES_PER_CRC, checksums_match, compose
from tfk8s_airflow.nofollow import SafeDir
from tfk8s_airflow.pathrules import is_safe_relative
from tfk8s_airflow.staging.hdfscopy import CopyStats, lock_path
from tfk8s_airflow.staging.listing import FileEntry
from tfk8s_airflow.untrusted import clean_text

__all__ = ["CopySettings", "Item", "PreparedCopy", "choose_executor", "begin", "finish", "judge", "verify",
           "copy_pod", "plan_parts", "prepare", "publish", "records_dir", "pods_staging_dir", "EXECUTORS"]

EXECUTORS = ("local", "kubernetes", "auto")
#: A part's record lists every item with its block MD5s: ~40 bytes a block, ~100 an item. The most any
#: record is read to (:func:`record_limit` bounds each by its part's plan, far below this).
RECORD_LIMIT = 64 << 20
DEFAULT_BLOCK = 128 << 20
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30,
          "ti": 2**40}


def pods_staging_dir(dest: Path, key: str) -> Path:
    """Where the copy pods of one staging task (``key``) write the files: a hidden sibling of ``dest``
    of that task's own (another task staging into the same cache, e.g. a held-out file copied
    locally meanwhile, never touches it), stable across the task's retries (they resume it)."""
    return dest.with_name(f".{dest.name}.tfk8s-pods-{key}")


def records_dir(dest: Path, key: str) -> Path:
    """Where the copy pods of ``key`` write their journals and records: a hidden sibling of ``dest``."""
    return dest.with_name(f".{dest.name}.tfk8s-parts-{key}")


_FIX = "correct the deployment's setting (docs/staging.md)"


def _size(raw: Any) -> int | Problem:
    text = str(raw).strip().lower()
    for unit in sorted(_UNITS, key=len, reverse=True):
        if unit and text.endswith(unit):
            number = text[: -len(unit)]
            break
    else:
        unit, number = "", text
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        return Problem("", f"must be a size such as 10Gi or 5000000000, got {raw!r}", _FIX)
    if value < 0:
        return Problem("", f"must not be negative, got {raw!r}", _FIX)
    return int(value)


def _text(raw: Any) -> str:
    return str(raw).strip()


def _at_least(minimum: int) -> Callable[[Any], int | Problem]:
    def parse(raw: Any) -> int | Problem:
        try:
            value = int(str(raw).strip())
        except ValueError:
            return Problem("", f"must be an integer, got {raw!r}", _FIX)
        if value < minimum:
            return Problem("", f"must be at least {minimum}, got {raw!r}", _FIX)
        return value
    return parse


def _pod_template(raw: Any) -> dict[str, Any] | Problem:
    try:
        tpl = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        return Problem("", f"must be a JSON object (a pod spec fragment: nodeSelector, tolerations, env), "
                           f"got {raw!r}: {exc}", _FIX)
    if not isinstance(tpl, dict):
        return Problem("", "must be a JSON object", _FIX)
    return tpl


@dataclass(frozen=True)
class CopySettings:
    """The deployment's settings for staging copy pods (``[tfk8s] staging_*``), each declared once
    (:func:`tfk8s_airflow.configspec.setting`: docs/staging.md's table and the provider's metadata)."""

    image: str = field(default="", metadata=setting(
        "image of the copy pods: Python 3 and this package (the training image, "
        "`deploy/training-image.Dockerfile`, has both); the programs are `python -m tfk8s_airflow.pod.stagecopy` "
        "(copy pods) and `python -m tfk8s_airflow.pod.stagesum` (checksum pods)", "unset (pods never used)", _text,
        name="staging_image", example="tfk8s/trainer:0.1"))
    namespace: str = field(default="default", metadata=setting(
        "where the copy pods run", "default", _text, name="staging_namespace"))
    threshold: int = field(default=10 * 2**30, metadata=setting(
        "bytes from which `copy_executor=\"auto\"` copies through pods", "10Gi", _size, name="staging_threshold",
        value="10Gi", kind="string"))
    pods: int = field(default=4, metadata=setting(
        "parts (and pods) of a copy", "4", _at_least(1), name="staging_pods"))
    memory: str = field(default="256Mi", metadata=setting(
        "memory request and limit of each pod (a pod streams in 4 MiB pieces; ~40 MiB used)", "256Mi", _text,
        name="staging_pod_memory"))
    cpu: str = field(default="1", metadata=setting(
        "CPU request (no limit: a throttled pod computes CRCs slower)", "1", _text, name="staging_pod_cpu"))
    deadline: int = field(default=6 * 3600, metadata=setting(
        "the pods' `activeDeadlineSeconds`: a pod outlives no lost Airflow", "21600", _at_least(1),
        name="staging_pod_deadline"))
    lease: int = field(default=300, metadata=setting(
        "seconds the pods outlive a task that nobody waits for any more (docs/staging.md, \"The lease\")", "300",
        _at_least(1), name="staging_lease"))
    part_retries: int = field(default=3, metadata=setting(
        "new pods for a part whose pod failed", "3", _at_least(0), name="staging_part_retries"))
    kubernetes_conn_id: str | None = field(default=None, metadata=setting(
        "the Kubernetes connection", "kubernetes_default", _text, name="staging_kubernetes_conn_id"))
    pod_template: Mapping[str, Any] = field(default_factory=dict, metadata=setting(
        "JSON: `nodeSelector`, `tolerations`, `affinity`, `priorityClassName`, `imagePullSecrets` of the pods, "
        "and `env` added to their container", "{}", _pod_template, name="staging_pod_template",
        example='{"nodeSelector": {"pool": "staging"}}'))

    @classmethod
    def from_settings(cls, get: Callable[[str], Any]) -> CopySettings:
        """From ``get("staging_image")`` ... (Airflow's ``[tfk8s]``, then ``TFK8S_STAGING_*``)."""
        return cls(**read(cls, get))


def check_token_namespace(staging_namespace: str, jobs_namespace: str) -> None:
    """A Kerberos copy's delegation-token Secret lives in ``staging_namespace``: never the jobs' default
    namespace, where specs are written to read Secrets (:class:`SpecError` naming the setting)."""
    if staging_namespace == jobs_namespace:
        raise SpecError(Problem("[tfk8s] staging_namespace",
                                f"is {staging_namespace!r}, the jobs' default namespace ([tfk8s] default_namespace): "
                                "a Kerberos copy through pods keeps its HDFS delegation token in a Secret there",
                                "give the staging pods a namespace of their own (staging_namespace), or copy "
                                "locally (copy_executor='local')"))


def choose_executor(executor: str, total_bytes: int, settings: CopySettings) -> str:
    """``local`` or ``kubernetes`` for ``executor`` (``auto``: kubernetes at or above the threshold,
    when the deployment names a copy image). A Kerberos connection copies through pods too, the task
    handing them a delegation token through a Secret (:mod:`tfk8s_airflow.k8s.tokensecret`)."""
    if executor not in EXECUTORS:
        raise SpecError(f"must be one of {', '.join(map(repr, EXECUTORS))}, got {executor!r}",
                        field="copy_executor")
    if executor == "auto":
        if not settings.image or total_bytes < settings.threshold:
            return "local"
        return "kubernetes"
    if executor == "kubernetes" and not settings.image:
        raise SpecError(Problem("copy_executor", "the deployment names no image for staging copy pods",
                                "an administrator sets [tfk8s] staging_image, or use copy_executor='local'"))
    return executor


# ------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Item:
    """A byte range of one listed file (``index`` into the listing) copied by one pod."""

    index: int
    offset: int
    length: int
    present: bool = False

    def spec(self, entry: FileEntry) -> dict[str, Any]:
        return {"src": entry.path, "rel": posixpath.normpath(entry.relpath), "offset": self.offset,
                "length": self.length, "size": entry.size, "block_size": entry.block_size or DEFAULT_BLOCK,
                "bytes_per_crc": DEFAULT_BYTES_PER_CRC, "present": self.present}


def plan_parts(files: Sequence[FileEntry], pods: int, present: frozenset[int] = frozenset(), *,
               whole_files: bool = False) -> list[list[Item]]:
    """``files`` as at most ``pods`` parts balanced by bytes, deterministic.

    A file larger than a part's share (total / pods) is cut at HDFS block boundaries into pieces
    of about that share, unless it is already in the cache (``present``: its pod checks it whole)
    or ``whole_files`` (a digest of byte ranges does not compose: the checksum pods).
    Items go, largest first, to the part with the fewest bytes (then the fewest items; lowest
    index on ties); parts that got nothing are dropped."""
    pods = max(1, int(pods))
    total = sum(f.size for f in files)
    share = max(1, -(-total // pods))
    items: list[Item] = []
    for i, f in enumerate(files):
        block = f.block_size or DEFAULT_BLOCK
        if f.size > share and i not in present and f.size > block and not whole_files:
            piece = max(block, -(-share // block) * block)
            items.extend(Item(i, off, min(piece, f.size - off)) for off in range(0, f.size, piece))
        else:
            items.append(Item(i, 0, f.size, i in present))
    parts: list[list[Item]] = [[] for _ in range(pods)]
    loads = [0] * pods
    for item in sorted(items, key=lambda it: (-it.length, it.index, it.offset)):
        k = min(range(pods), key=lambda p: (loads[p], len(parts[p]), p))
        parts[k].append(item)
        loads[k] += item.length
    return [sorted(p, key=lambda it: (it.index, it.offset)) for p in parts if p]


# ------------------------------------------------------------------------------ the volume
@dataclass
class PreparedCopy:
    """What :func:`prepare` found and made: where the pods write, and what is kept."""

    dest: Path
    key: str
    fresh: bool
    present: frozenset[int]


def prepare(files: Sequence[FileEntry], dest: Path, key: str, trusted_root: str | os.PathLike[str]) -> PreparedCopy:
    """Make the staging and records directories of task ``key`` for a pod copy into ``dest``, under
    ``dest``'s lock. What an interrupted attempt of the same task left there is resumed (the pods'
    journals say what was verified); the files already at their final names in ``dest`` are marked
    ``present`` (their pod keeps them when their checksum matches HDFS's)."""
    for entry in files:
        if not is_safe_relative(entry.relpath):
            raise PathSafetyError(f"refusing to copy {entry.path} to {entry.relpath}: it would leave {dest}")
    with SafeDir.open_under(trusted_root, dest.parent, create=True) as parent, \
            parent.lock(lock_path(dest).name, timeout=300.0, posix=True):
        fresh = parent.is_empty(dest.name) and not os.path.ismount(dest)
        present: set[int] = set()
        if not fresh:
            with parent.subdir(dest.name) as root:
                for i, entry in enumerate(files):
                    st = root.lstat(posixpath.normpath(entry.relpath))
                    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_size == entry.size:
                        present.add(i)
        parent.subdir(pods_staging_dir(dest, key).name, create=True).close()
        parent.subdir(records_dir(dest, key).name, create=True).close()
    return PreparedCopy(dest, key, fresh, frozenset(present))


def part_spec(part: int, items: Sequence[Item], files: Sequence[FileEntry], key: str, pod_dest: Path,
              hdfs_config: Any, *, chunk_size: int, attempts: int = 3) -> dict[str, Any]:
    """The ``TFK8S_COPY_PART`` document of one part (paths as the pods see the volume)."""
    return {"part": part, "namenodes": list(hdfs_config.urls), "user": hdfs_config.user,
            "proxy_user": hdfs_config.proxy_user, "timeout": hdfs_config.timeout,
            "staging": str(pods_staging_dir(pod_dest, key)), "records": str(records_dir(pod_dest, key)),
            "dest": str(pod_dest), "chunk": chunk_size, "attempts": attempts,
            "items": [it.spec(files[it.index]) for it in items]}


def copy_pod(name: str, labels: Mapping[str, str], spec_doc: Mapping[str, Any], settings: CopySettings,
             volume_host_path: str, pod_mount: str, security: tuple[dict[str, Any], dict[str, Any]], *,
             program: str = "tfk8s_airflow.pod.stagecopy") -> dict[str, Any]:
    """One copy pod: ``python -m <program>`` (the copier, or the checksum pod
    :mod:`tfk8s_airflow.pod.stagesum`) with its part in the environment, bounded memory,
    ``restartPolicy: Never`` (a failed part gets a new pod from the operator, which resumes from the
    part's journal).

    The volume's host path is mounted where the pods see it **read-only** (the files to checksum, the
    ones already in place); only the task's own directories that the part's document names
    (``staging``, ``records``) are mounted writable over it, each as a hostPath volume of its own. So a
    copy pod writes nowhere else on the volume, and ``[tfk8s] read_only_host_paths`` under the volume (a
    served model tree) admits it."""
    tpl = dict(settings.pod_template)
    env: list[dict[str, Any]] = [{"name": "TFK8S_COPY_PART", "value": json.dumps(spec_doc, separators=(",", ":"))},
           {"name": "PYTHONUNBUFFERED", "value": "1"}]
    env += [dict(e) for e in tpl.get("env") or () if isinstance(e, Mapping) and e.get("name") != "TFK8S_COPY_PART"]
    pod_sc, container_sc = security
    container: dict[str, Any] = {
        "name": "copy", "image": settings.image, "command": ["python", "-m", program],
        "env": env,
        "resources": {"requests": {"cpu": settings.cpu, "memory": settings.memory},
                      "limits": {"memory": settings.memory}},
        "volumeMounts": [{"name": "data", "mountPath": pod_mount, "readOnly": True}],
    }
    volumes: list[dict[str, Any]] = [{"name": "data", "hostPath": {"path": volume_host_path, "type": "Directory"}}]
    for i, where in enumerate(spec_doc[k] for k in ("staging", "records") if spec_doc.get(k)):
        rel = posixpath.relpath(posixpath.normpath(str(where)), posixpath.normpath(pod_mount))
        if not is_safe_relative(rel) or rel == ".":
            raise PathSafetyError(f"{where} is not a directory under the volume's mount {pod_mount} in the pods")
        volumes.append({"name": f"task-{i}", "hostPath": {"path": posixpath.join(volume_host_path, rel),
                                                          "type": "Directory"}})
        container["volumeMounts"].append({"name": f"task-{i}", "mountPath": posixpath.normpath(str(where))})
    if container_sc:
        container["securityContext"] = container_sc
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "activeDeadlineSeconds": settings.deadline,
        "automountServiceAccountToken": False, "enableServiceLinks": False,
        "containers": [container],
        "volumes": volumes,
    }
    if pod_sc:
        spec["securityContext"] = pod_sc
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"):
        if tpl.get(key):
            spec[key] = tpl[key]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": settings.namespace, "labels": dict(labels)},
            "spec": spec}


# ------------------------------------------------------------------------------ results
@dataclass
class PartOutcome:
    """What :func:`collect` made of the parts' records."""

    done: dict[int, dict[str, Any]] = field(default_factory=dict)    # part -> record (ok)
    failed: dict[int, str] = field(default_factory=dict)              # part -> why (retry it)
    checksum_errors: list[str] = field(default_factory=list)         # the data is wrong: fail
    engines: set[str] = field(default_factory=set)


def record_limit(items: Sequence[Item], files: Sequence[FileEntry]) -> int:
    """The largest record a part of ``items`` writes, in bytes: a few KiB of its own, per item its path
    and checksum (at most 8 KiB) and per block one MD5 (~40 bytes); at most :data:`RECORD_LIMIT`. A
    record is read from the volume, and the Python objects of a JSON document take ~25 times its bytes:
    a record larger than its plan allows is refused before it is parsed."""
    blocks = sum(max(1, -(-it.length // (files[it.index].block_size or DEFAULT_BLOCK))) for it in items)
    return min(RECORD_LIMIT, 16 * 1024 + 8 * 1024 * len(items) + 40 * blocks)


def read_records(dest: Path, key: str, trusted_root: str | os.PathLike[str], parts: Sequence[int],
                 limits: Mapping[int, int] | None = None) -> dict[int, Any]:
    """Each finished part's record, as the pod left it (read safely, bounded by ``limits[part]``,
    default :data:`RECORD_LIMIT`; a missing one is absent, an unreadable one a failed part's)."""
    out: dict[int, Any] = {}
    with SafeDir.open_under(trusted_root, records_dir(dest, key)) as d:
        for part in parts:
            try:
                out[part] = d.read_json(f"part-{part}.json", (limits or {}).get(part, RECORD_LIMIT))
            except FileNotFoundError:
                continue
            except (DataError, PathSafetyError, OSError) as exc:
                out[part] = {"ok": False, "error": f"unreadable record: {exc}", "kind": "io"}
    return out


def _valid_checksum(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("algorithm"), str)
            and isinstance(value.get("bytes"), str) and isinstance(value.get("length"), int))


def check_record(part: int, record: Any, items: Sequence[Item], files: Sequence[FileEntry]) -> str | None:
    """Why ``record`` is not a complete, well-formed result of ``items`` (None when it is)."""
    if not isinstance(record, dict) or record.get("part") != part:
        return "the record is not this part's"
    got = record.get("items")
    if not isinstance(got, list) or len(got) != len(items):
        return f"the record lists {len(got) if isinstance(got, list) else 'no'} items, the part has {len(items)}"
    for i, (item, rec) in enumerate(zip(items, got, strict=True)):
        if not isinstance(rec, dict) or rec.get("i") != i:
            return f"item {i} is missing from the record"
        if rec.get("kept") or "checksum" in rec:
            if not _valid_checksum(rec.get("checksum")):
                return f"item {i} has no valid checksum"
            continue
        entry = files[item.index]
        block = entry.block_size or DEFAULT_BLOCK
        blocks = max(1, -(-item.length // block)) if item.length else 0
        md5s = rec.get("md5s")
        if not isinstance(md5s, list) or len(md5s) != blocks or not all(
                isinstance(m, str) and len(m) == 32 and all(c in "0123456789abcdef" for c in m) for m in md5s):
            return f"item {i} ({entry.path}) has not {blocks} block MD5s"
    return None


def verify(plan: Sequence[Sequence[Item]], records: Mapping[int, Any], files: Sequence[FileEntry],
           hdfs_checksum: Callable[[str], Mapping[str, Any]]) -> list[FileEntry]:
    """Every file with its HDFS checksum, once every part's record is complete. HDFS is asked for
    every file (``hdfs_checksum``: one ``GETFILECHECKSUM`` each) and compared here with what the
    records say: the checksum a pod recorded for a whole file (copied, resumed from its journal, or
    kept in the cache), and for a file split across parts the checksum composed from their block MD5s.
    A record is the volume's, and anyone who may write the volume may have written it: nothing is
    taken from it that HDFS's own checksum does not confirm. :class:`StagingError` naming the file
    when one does not match (before anything is published)."""
    pieces: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
    for part, items in enumerate(plan):
        for item, rec in zip(items, records[part]["items"], strict=True):
            pieces.setdefault(item.index, []).append((item.offset, part, rec))
    out: list[FileEntry] = []
    for i, entry in enumerate(files):
        got = sorted(pieces[i], key=lambda p: p[0])
        if len(got) == 1 and "checksum" in got[0][2]:
            checksum = dict(got[0][2]["checksum"])
            said = f"the record of part {got[0][1]} says {checksum}"
        else:
            md5s = [m for _, _, rec in got for m in rec["md5s"]]
            checksum = compose(md5s, entry.size, entry.block_size or DEFAULT_BLOCK, DEFAULT_BYTES_PER_CRC)
            said = f"received {checksum} (copied in {len(got)} parts)"
        remote = dict(hdfs_checksum(entry.path))
        if not checksums_match(checksum, remote):
            raise StagingError(f"checksum mismatch copying {entry.path}: HDFS {remote}, {said}; "
                               "nothing was published")
        out.append(FileEntry(entry.path, entry.relpath, entry.size, entry.mtime, entry.block_size, checksum))
    return out


def publish(prepared: PreparedCopy, files: Sequence[FileEntry], kept: frozenset[int],
            trusted_root: str | os.PathLike[str], manifest: tuple[str, Any] | None = None) -> bool:
    """Put a verified pod copy in place, under the destination's lock: when ``dest`` is (still)
    missing or empty, by one rename of the staging directory over it; into a cache that holds files
    (a re-run, or another task that staged into the same directory meanwhile), each copied file by
    a rename from the staging directory over its final name (what stands there is replaced, never
    written through). Only regular files of one link, of the listed size, are moved: anything else
    in the staging directory is refused. The records directory is removed last.

    ``manifest`` (its name in ``dest`` and its document): when ``dest`` is published by the one
    rename, the manifest is written into the staging directory first, so the files and their
    manifest appear together. Returns whether it was written; if not, the caller writes it last."""
    dest = prepared.dest
    with SafeDir.open_under(trusted_root, dest.parent) as parent, \
            parent.lock(lock_path(dest).name, timeout=300.0, posix=True):
        staging = pods_staging_dir(dest, prepared.key).name
        with parent.subdir(staging) as stage_root:
            for i, entry in enumerate(files):
                if i in kept:
                    continue
                rel = posixpath.normpath(entry.relpath)
                st = stage_root.lstat(rel)
                if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != entry.size:
                    raise StagingError(f"{stage_root.where(rel)} is not the verified copy of {entry.path} "
                                       "(missing, not a regular file of one link, or of another size)")
        written = False
        if parent.lstat(dest.name) is None or parent.is_empty(dest.name):
            if manifest is not None:
                with parent.subdir(staging) as stage_root:
                    stage_root.write_json_atomic(manifest[0], manifest[1], mode=0o644)
                written = True
            parent.rmdir(dest.name)
            parent.replace(staging, dest.name)
        else:
            with parent.subdir(staging) as src, parent.subdir(dest.name, create=True) as dst:
                for i, entry in enumerate(files):
                    if i not in kept:
                        _move(src, dst, posixpath.normpath(entry.relpath))
            parent.rmtree(staging)
        parent.rmtree(records_dir(dest, prepared.key).name)
    return written


def _move(src: SafeDir, dst: SafeDir, rel: str) -> None:
    """``src/rel`` renamed over ``dst/rel`` (directories opened without following links)."""
    head, name = posixpath.split(rel)
    if not head:
        os.rename(name, name, src_dir_fd=src.fd, dst_dir_fd=dst.fd)
        return
    with src.subdir(head) as a, dst.subdir(head, create=True) as b:
        os.rename(name, name, src_dir_fd=a.fd, dst_dir_fd=b.fd)


def discard(dest: Path, key: str, trusted_root: str | os.PathLike[str]) -> None:
    """Remove what a failed or cancelled pod copy left (staging and records directories); the
    published ``dest`` is not touched. Never follows a link."""
    with SafeDir.open_under(trusted_root, dest.parent) as parent:
        parent.rmtree(pods_staging_dir(dest, key).name)
        parent.rmtree(records_dir(dest, key).name)



# ------------------------------------------------------------------------------ the two halves
def begin(hdfs: Any, volume: Any, input_path: str, num_workers: Any, *, cache_dir: str,
          manifest_path: str | None, pattern: str | None, include_hidden: bool, parallelism: int,
          pods: int, key: str, logger: Any, files: Sequence[FileEntry] | None = None,
          root: str | None = None) -> dict[str, Any]:
    """The Airflow side before the pods: check, list (unless ``files`` are given), remove the old
    manifest, prepare the volume, plan the parts. Returns the state :func:`finish` needs (plain
    JSON: it travels through the trigger)."""
    from tfk8s_airflow.pathrules import has_parent_segment
    from tfk8s_airflow.staging import manifest as mf
    from tfk8s_airflow.staging.shards import parse_num_workers

    workers = parse_num_workers(num_workers)
    if not input_path or not str(input_path).startswith("/"):
        raise SpecError(f"must be an absolute HDFS path, got {input_path!r}", field="input_path")
    if has_parent_segment(input_path):
        raise PathSafetyError(f"input path {input_path!r} contains a '..' segment")
    if not cache_dir:
        raise SpecError("is required with executor='kubernetes': the pods copy into it", field="cache_dir")
    dest = volume.safe_path(cache_dir, "cache_dir")
    volume.check_mounted()
    manifest_at = volume.safe_path(manifest_path or str(dest / mf.MANIFEST_NAME), "manifest_path")
    if files is None or root is None:
        root, files = hdfs.list_files(input_path, pattern=pattern, include_hidden=include_hidden,
                                      with_checksums=False, parallelism=parallelism)
    if not files:
        match = f" matching {pattern!r}" if pattern else ""
        raise DataError(f"input hdfs:{input_path} is empty: no data files{match} (names starting with "
                        "'_' or '.', such as _SUCCESS, are not data)")
    mf.remove_local(manifest_at, trusted=volume.mount)
    prepared = prepare(files, dest, key, volume.mount)
    plan = plan_parts(files, pods, prepared.present)
    logger.info("copy through %d pod(s): %d file(s), %.1f MiB, %d already in the cache%s", len(plan), len(files),
                sum(f.size for f in files) / 2**20, len(prepared.present),
                "" if prepared.fresh else " (a re-run: kept where their checksum matches HDFS's)")
    return {"input_path": input_path, "root": root, "pattern": pattern, "workers": workers, "dest": str(dest),
            "manifest": str(manifest_at), "fresh": prepared.fresh, "present": sorted(prepared.present),
            "files": [[f.path, f.relpath, f.size, f.block_size] for f in files],
            "plan": [[[it.index, it.offset, it.length, it.present] for it in items] for items in plan],
            "attempts": [0] * len(plan), "plan_id": plan_id(files, plan), "key": key}


def plan_id(files: Sequence[FileEntry], plan: Sequence[Sequence[Item]]) -> str:
    """A short hash of the listing and the parts: a pod's journal is resumed only by the same plan."""
    import hashlib

    doc = json.dumps([[[f.path, f.relpath, f.size, f.block_size] for f in files],
                      [[[it.index, it.offset, it.length] for it in items] for items in plan]])
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def state_files(state: Mapping[str, Any]) -> list[FileEntry]:
    return [FileEntry(p, r, int(s), None, int(b) if b else None) for p, r, s, b in state["files"]]


def state_plan(state: Mapping[str, Any]) -> list[list[Item]]:
    return [[Item(int(i), int(o), int(n), bool(p)) for i, o, n, p in items] for items in state["plan"]]


def state_specs(state: Mapping[str, Any], volume: Any, hdfs_config: Any, chunk_size: int) -> list[dict[str, Any]]:
    """Every part's ``TFK8S_COPY_PART`` document."""
    files, dest = state_files(state), Path(state["dest"])
    pod_dest = Path(volume.pod_path(dest))
    return [dict(part_spec(k, items, files, state["key"], pod_dest, hdfs_config, chunk_size=chunk_size),
                 plan_id=state["plan_id"]) for k, items in enumerate(state_plan(state))]


#: Record kinds that fail the task at once (no new pod helps): the data is wrong, or changed under us.
FATAL_KINDS = ("checksum", "corrupt", "changed")


def judge(state: Mapping[str, Any], volume: Any, parts: Sequence[int],
          check: Callable[[int, Any, Sequence[Item], Sequence[FileEntry]], str | None] = check_record
          ) -> PartOutcome:
    """Read and check the records of ``parts`` (those whose pods ended) with ``check`` (the copy
    pods' :func:`check_record`, or the checksum pods'); a check that raises :class:`DataError`
    fails the task at once, as a record of a :data:`FATAL_KINDS` kind does."""
    plan, files = state_plan(state), state_files(state)
    records = read_records(Path(state["dest"]), state["key"], volume.mount, parts,
                           {part: record_limit(plan[part], files) for part in parts})
    out = PartOutcome()
    for part in parts:
        rec = records.get(part)
        if rec is None:
            out.failed[part] = "the pod ended without a record (killed, evicted or deleted)"
            continue
        if isinstance(rec, dict) and isinstance(rec.get("engine"), str):
            out.engines.add(clean_text(rec["engine"], 64))
        if not isinstance(rec, dict) or rec.get("ok") is not True:
            error = clean_text(str(rec.get("error") if isinstance(rec, dict) else rec)[:8000], 2000)
            if isinstance(rec, dict) and rec.get("kind") in FATAL_KINDS:
                out.checksum_errors.append(f"part {part}: {error}")
            else:
                out.failed[part] = error
            continue
        try:
            why = check(part, rec, plan[part], files)
        except DataError as exc:
            out.checksum_errors.append(f"part {part}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - a record is the volume's: whatever it holds fails its part, never us
            why = f"its record could not be checked ({type(exc).__name__}: {str(exc)[:200]})"
        if why:
            out.failed[part] = f"its record is incomplete: {why}"
        else:
            out.done[part] = rec
    return out


def finish(hdfs: Any, volume: Any, state: Mapping[str, Any], records: Mapping[int, Any], logger: Any,
           seconds: float) -> dict[str, Any]:
    """The Airflow side after every part is done: verify, publish, shard, write the manifest last."""
    from tfk8s_airflow.staging import manifest as mf
    from tfk8s_airflow.staging.shards import assign_shards
    from tfk8s_airflow.staging.stage import log_shards, stage_result

    files, plan, dest = state_files(state), state_plan(state), Path(state["dest"])
    entries = verify(plan, records, files, hdfs.checksum)
    kept = frozenset(it.index for part, items in enumerate(plan)
                     for it, rec in zip(items, records[part]["items"], strict=True) if rec.get("kept"))
    pod_root = volume.pod_path(dest)
    paths = [posixpath.join(pod_root, f.relpath) for f in entries]
    plan_w = assign_shards(zip(paths, (f.size for f in entries), strict=True), int(state["workers"]))
    source = {"kind": "hdfs", "input": state["input_path"], "root": state["root"], "pattern": state["pattern"],
              "namenodes": list(hdfs.config.urls), "user": hdfs.config.user}
    doc = mf.build_manifest(entries, paths, plan_w, source=source,
                            location={"kind": "glusterfs", "root": str(dest), "pod_root": pod_root})
    target = Path(state["manifest"])
    inside = (target.name, doc) if target.parent == dest else None  # the default: <cache>/_tfk8s_manifest.json
    if not publish(PreparedCopy(dest, state["key"], bool(state["fresh"]), frozenset(state["present"])), entries,
                   kept, volume.mount, inside):
        mf.write_local_atomic(target, doc, trusted=volume.mount)
    stats = CopyStats(files=len(entries), copied=len(entries) - len(kept), skipped=len(kept),
                      bytes_total=sum(f.size for f in entries),
                      bytes_copied=sum(f.size for i, f in enumerate(entries) if i not in kept), seconds=seconds)
    logger.info("copied %d file(s) (%.1f MiB) through %d pod(s) in %.1fs (%.1f MiB/s), kept %d already "
                "present and verified", stats.copied, stats.bytes_copied / 2**20, len(plan), seconds,
                stats.mib_per_s, stats.skipped)
    log_shards(logger, plan_w, state["manifest"])
    return stage_result(plan_w, state["manifest"], entries, f"hdfs:{state['input_path']}", pod_root, stats)
