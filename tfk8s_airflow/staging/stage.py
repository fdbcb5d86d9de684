"""Staging: list a partition, optionally copy it from HDFS onto GlusterFS, shard it, write
the manifest. The orchestration of the backends, the copy engine (:mod:`tfk8s_airflow.staging.hdfscopy`)
and the pure parts (shards, manifest).
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfk8s_airflow.exceptions import DataError, PathSafetyError, SpecError
from tfk8s_airflow.nofollow import SafeDir
from tfk8s_airflow.pathrules import has_parent_segment
from tfk8s_airflow.pod.stagesum import READ_CHUNK, digest_doc
from tfk8s_airflow.staging import manifest as mf
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.hdfscopy import (
    DEFAULT_CHUNK,
    DEFAULT_VERIFY,
    CopyStats,
    Logger,
    copy_to_volume,
    parse_verify,
)
from tfk8s_airflow.staging.listing import FileEntry
from tfk8s_airflow.staging.shards import assign_shards, parse_num_workers
from tfk8s_airflow.staging.webhdfs import WebHdfs

log = logging.getLogger(__name__)

__all__ = ["stage_hdfs", "stage_volume", "VolumeListing", "list_volume", "write_volume_manifest",
           "check_checksum", "stage_result", "log_shards"]


def stage_result(plan, manifest_at: str, files: Sequence[FileEntry], source: str,
            data_root: str, stats: CopyStats | None = None) -> dict[str, Any]:
    """The staging operators' XCom value (``normalize_shards`` reads ``shards``)."""
    out: dict[str, Any] = {
        "shards": plan.shards, "manifest": manifest_at, "files": len(files),
        "bytes": sum(f.size for f in files), "shard_bytes": plan.shard_bytes,
        "imbalance_bound": plan.bound, "source": source, "data_root": data_root,
    }
    if stats is not None:
        out.update(copied=stats.copied, skipped=stats.skipped, seconds=round(stats.seconds, 3),
                   bytes_copied=stats.bytes_copied)
    return out


def _refuse_empty(files: Sequence[FileEntry], where: str, pattern: str | None) -> None:
    if not files:
        match = f" matching {pattern!r}" if pattern else ""
        raise DataError(f"input {where} is empty: no data files{match} (names starting with "
                        "'_' or '.', such as _SUCCESS, are not data)")


def _hdfs_path(value: str) -> str | None:
    """``hdfs:///p`` or ``hdfs://nn:8020/p`` -> ``/p``; other strings -> ``None``."""
    if value.startswith(("hdfs://", "webhdfs://")):
        rest = value.split("://", 1)[1]
        return "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    return None


def stage_hdfs(hdfs: WebHdfs, input_path: str, num_workers: Any, *,
               pattern: str | None = None, include_hidden: bool = False,
               volume: GlusterVolume | None = None, cache_dir: str | None = None,
               manifest_path: str | None = None, parallelism: int = 4,
               path_prefix: str = "", chunk_size: int = DEFAULT_CHUNK, fsync: bool = True,
               verify: Any = DEFAULT_VERIFY,
               logger: Logger | None = None) -> dict[str, Any]:
    """Stage an HDFS partition: list (+checksums), optionally copy into ``cache_dir`` on
    ``volume``, shard, write the manifest last. Returns the XCom result.

    Without a cache the shard lists hold HDFS paths (with ``path_prefix``, e.g.
    ``hdfs://nn:8020``, prepended) and ``manifest_path`` is required (``hdfs:///path`` for
    HDFS, otherwise a local path). With a cache the lists hold the paths the pods see
    (``volume.pod_mount``) and the manifest defaults to ``<cache_dir>/_tfk8s_manifest.json``.
    ``verify``: ``"stream"``, ``"hdfs"`` or ``"size"``, what the copy compares with HDFS
    (see :func:`copy_to_volume`). Without a cache every listed file carries HDFS's checksum.
    """
    logger = logger or log
    workers = parse_num_workers(num_workers)
    parse_verify(verify)  # a bad value fails before anything is listed or created
    if not input_path or not str(input_path).startswith("/"):
        raise SpecError(f"must be an absolute HDFS path, got {input_path!r}", field="input_path")
    if has_parent_segment(input_path):
        raise PathSafetyError(f"input path {input_path!r} contains a '..' segment")
    dest: Path | None = None
    if cache_dir:
        volume = volume or GlusterVolume()
        dest = volume.safe_path(cache_dir, "cache_dir")
        volume.check_mounted()
    manifest_at = manifest_path or (str(dest / mf.MANIFEST_NAME) if dest else None)
    if not manifest_at:
        raise SpecError("is required when the data is not copied to a cache (hdfs:///path "
                        "or a local path)", field="manifest_path")
    hdfs_manifest = _hdfs_path(manifest_at)
    local_manifest: Path | None = None
    if hdfs_manifest is None:
        if has_parent_segment(manifest_at):
            raise PathSafetyError(f"manifest_path {manifest_at!r} contains a '..' segment")
        # A local manifest is confined like cache_dir: on the GlusterFS volume, under its allowed roots,
        # never through a link; a form's value can never name a file of the worker's own.
        volume = volume or GlusterVolume()
        local_manifest = volume.safe_path(manifest_at, "manifest_path")
        volume.check_mounted()

    root, files = hdfs.list_files(input_path, pattern=pattern, include_hidden=include_hidden,
                                  with_checksums=dest is None, parallelism=parallelism)
    _refuse_empty(files, f"hdfs:{input_path}", pattern)
    logger.info("HDFS input %s: %d file(s), %.1f MiB", input_path, len(files),
                sum(f.size for f in files) / 2**20)

    stats = None
    trusted = volume.mount if volume is not None else None
    if dest is not None and volume is not None:
        if local_manifest is not None:
            mf.remove_local(local_manifest, trusted=trusted)
        stats = copy_to_volume(hdfs, files, dest, parallelism=parallelism,
                               chunk_size=chunk_size, fsync=fsync, verify=verify,
                               trusted_root=volume.mount, logger=logger)
        files = stats.entries
        pod_root = volume.pod_path(dest)
        # The copy wrote every file itself under dest: joined, not resolved one by one
        # (a realpath is a lookup per path component through the FUSE client).
        paths = [posixpath.join(pod_root, f.relpath) for f in files]
        location = {"kind": "glusterfs", "root": str(dest), "pod_root": pod_root}
        data_root = pod_root
    else:
        paths = [path_prefix + f.path for f in files]
        location = {"kind": "hdfs", "root": root, "prefix": path_prefix}
        data_root = path_prefix + root
    plan = assign_shards(zip(paths, (f.size for f in files), strict=True), workers)
    source = {"kind": "hdfs", "input": input_path, "root": root, "pattern": pattern,
              "namenodes": list(hdfs.config.urls), "user": hdfs.config.user}
    doc = mf.build_manifest(files, paths, plan, source=source, location=location)
    if hdfs_manifest is not None:
        hdfs.write_json_atomic(hdfs_manifest, doc)
    else:
        mf.write_local_atomic(local_manifest, doc, trusted=trusted)  # type: ignore[arg-type]
    log_shards(logger, plan, manifest_at)
    return stage_result(plan, manifest_at, files, f"hdfs:{input_path}", data_root, stats)


def _file_digest(volume: GlusterVolume, path: str, algorithm: str) -> dict[str, Any]:
    """The digest of a listed file: its resolved path, opened from the mount without following
    a link (one retargeted since the listing is refused) and only when it is a regular file
    (a hard link is fine: it is data the DAG named, under a second name)."""
    digest = hashlib.new(algorithm)
    with SafeDir.open_under(volume.mount, os.path.dirname(path)) as d, \
            d.open_read(os.path.basename(path), single_link=False) as fh:
        while chunk := fh.read(READ_CHUNK):
            digest.update(chunk)
    return digest_doc(algorithm, digest)


@dataclass(frozen=True)
class VolumeListing:
    """What :func:`list_volume` found: the input's root, the directory the manifest and the pod
    paths are relative to (``base``), the manifest's place, and the files (sorted by path)."""

    input_path: str
    pattern: str | None
    root: Path
    base: Path
    target: Path
    files: list[FileEntry]


def check_checksum(checksum: str | None) -> None:
    """``checksum`` names an algorithm of :mod:`hashlib` (or is ``None``: sizes only)."""
    if checksum and checksum not in hashlib.algorithms_available:
        raise SpecError(f"unknown checksum algorithm {checksum!r}", field="checksum")


def list_volume(volume: GlusterVolume, input_path: str, *, pattern: str | None = None,
                include_hidden: bool = False, manifest_path: str | None = None) -> VolumeListing:
    """List files already on the volume (refusing an empty input) and place their manifest
    (default ``<input root>/_tfk8s_manifest.json``)."""
    root, files = volume.list_files(input_path, pattern=pattern, include_hidden=include_hidden)
    _refuse_empty(files, str(input_path), pattern)
    base = root if root.is_dir() else root.parent
    target = volume.safe_path(manifest_path or (base / mf.MANIFEST_NAME), "manifest_path")
    return VolumeListing(str(input_path), pattern, root, base, target, files)


def write_volume_manifest(volume: GlusterVolume, listing: VolumeListing, files: Sequence[FileEntry],
                          workers: int, logger: Logger) -> dict[str, Any]:
    """Shard ``files`` (the listing's, with their checksums when computed) by bytes over ``workers``
    and write their manifest, atomically; the XCom result. One rule for the local checksum pass
    and the checksum pods (:mod:`tfk8s_airflow.staging.sumfanout`)."""
    logger.info("volume input %s: %d file(s), %.1f MiB", listing.input_path, len(files),
                sum(f.size for f in files) / 2**20)
    paths = [volume.pod_path(f.path) for f in files]
    plan = assign_shards(zip(paths, (f.size for f in files), strict=True), workers)
    doc = mf.build_manifest(
        files, paths, plan,
        source={"kind": "glusterfs", "input": listing.input_path, "root": str(listing.root),
                "pattern": listing.pattern},
        location={"kind": "glusterfs", "root": str(listing.base), "pod_root": volume.pod_path(listing.base)})
    mf.write_local_atomic(listing.target, doc, trusted=volume.mount)
    log_shards(logger, plan, str(listing.target))
    return stage_result(plan, str(listing.target), files, listing.input_path, volume.pod_path(listing.base))


def stage_volume(volume: GlusterVolume, input_path: str, num_workers: Any, *,
                 pattern: str | None = None, include_hidden: bool = False,
                 manifest_path: str | None = None, checksum: str | None = "sha256",
                 parallelism: int = 4, logger: Logger | None = None,
                 listing: VolumeListing | None = None) -> dict[str, Any]:
    """Stage files already on the volume: list (unless ``listing`` is given), checksum
    (``sha256``/``md5``/``None``), shard, write the manifest (default
    ``<input root>/_tfk8s_manifest.json``)."""
    logger = logger or log
    workers = parse_num_workers(num_workers)
    check_checksum(checksum)
    if listing is None:
        listing = list_volume(volume, input_path, pattern=pattern, include_hidden=include_hidden,
                              manifest_path=manifest_path)
    files = listing.files
    if checksum:
        with ThreadPoolExecutor(max_workers=max(1, parallelism)) as pool:
            sums = list(pool.map(lambda f: _file_digest(volume, f.path, checksum), files))
        files = [FileEntry(f.path, f.relpath, f.size, f.mtime, None, s) for f, s in zip(files, sums, strict=True)]
    return write_volume_manifest(volume, listing, files, workers, logger)


def log_shards(logger: Logger, plan, where: str) -> None:
    logger.info("manifest written: %s", where)
    for key, paths in plan.shards.items():
        logger.info("shard %s: %d file(s), %.1f MiB", key, len(paths),
                    plan.shard_bytes[key] / 2**20)
    logger.info("imbalance %d bytes (bound: the largest file, %d bytes)", plan.imbalance, plan.bound)
