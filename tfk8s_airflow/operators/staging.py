"""Staging operators: an HDFS partition or files on GlusterFS -> manifest + worker shards.

Thin on purpose: every decision lives in :mod:`tfk8s_airflow.staging.stage` (testable without
Airflow); these classes only hold templated arguments, look up the connection, and turn
our errors into Airflow's retry-or-fail. Permanent problems (missing or empty partition,
permission denied, a path outside the allowed roots, a bad argument) raise
``AirflowFailException`` so the task fails at once; a NameNode that does not answer or a
copy that broke off is raised as is, for Airflow's retries (the copy resumes where it
stopped).

The return value (XCom) is a dict with ``shards`` (``{"worker-0": [paths], ...}``),
``manifest`` (its location), ``files``, ``bytes``, ``shard_bytes``, ``imbalance_bound``,
``source``, ``data_root`` and, after a copy, ``copied``/``skipped``/``seconds``; pass it
straight to ``tf_job(..., shards=stage.output)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from tfk8s_airflow.connections import webhdfs
from tfk8s_airflow.operators.base import describe_outlets, fail_permanently, partition_key
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.stage import DEFAULT_VERIFY, parse_verify, stage_hdfs, stage_volume

__all__ = ["HdfsStageOperator", "GlusterFSStageOperator"]


def _announce(context: Any, outlets: Any, input_path: str, result: dict[str, Any]) -> dict[str, Any]:
    """The staged partition as the extra of the task's Asset events (``outlets=[Asset(...)]``)."""
    describe_outlets(context, outlets or (), {
        "partition": partition_key(input_path), "input": input_path, "manifest": result.get("manifest"),
        "files": result.get("files"), "bytes": result.get("bytes"), "source": result.get("source"),
        "data_root": result.get("data_root")}, partition_key(input_path))
    return result


def _opt(value: Any) -> Any:
    """Rendered templates give '' or 'None' for unset optional values."""
    return None if value in ("", "None", None) else value


class HdfsStageOperator(BaseOperator):
    """List an HDFS partition, optionally copy it onto the GlusterFS cache, shard it by
    bytes and write the manifest (last, atomically).

    :param input_path: HDFS file, directory or glob (templated), e.g.
        ``/data/clicks/dt={{ ds }}`` or ``/data/clicks/dt={{ ds }}/part-*``.
    :param num_workers: number of shards (templated: ``"{{ params.workers }}"``).
    :param pattern: file-name glob applied while listing recursively (templated).
    :param webhdfs_conn_id: the WebHDFS connection (host, port, login = HDFS user, extra).
    :param cache_dir: copy the data here on the GlusterFS volume (templated; absolute or
        relative to ``volume_path``); ``None`` shards the HDFS paths themselves.
    :param volume_path: the GlusterFS mount on the Airflow worker (default
        ``$TFK8S_GLUSTER_MOUNT`` or ``/mnt/tfk8s-gluster``).
    :param allowed_roots: directories (under the volume) the cache must lie in.
    :param pod_mount_path: where the pods mount the volume (default: same as ``volume_path``).
    :param manifest_path: where to write the manifest (templated); default
        ``<cache_dir>/_tfk8s_manifest.json``; required without a cache (``hdfs:///...`` for HDFS).
    :param parallelism: parallel streams for checksums and the copy.
    :param path_prefix: prepended to HDFS paths in shard lists when not copying
        (e.g. ``hdfs://namenode:8020``).
    :param include_hidden: also take ``_*``/``.*`` files as data (Hadoop skips them).
    :param chunk_size: bytes per read of a stream (memory per stream).
    :param verify: what the copy compares with HDFS: ``"stream"`` (default: each copied
        file's checksum computed from the stream and recorded, its length checked; a cached
        file kept only if size and checksum equal HDFS's), ``"hdfs"`` (also every copied
        file against HDFS's GETFILECHECKSUM, one more request per file) or ``"size"`` (no
        lookups; cached files trusted by size). ``True``/``False`` mean ``"hdfs"``/``"size"``.
    """

    template_fields: Sequence[str] = ("input_path", "pattern", "num_workers", "cache_dir",
                                      "manifest_path", "path_prefix")
    ui_color = "#e0f0ff"

    def __init__(self, *, input_path: str, num_workers: int | str = 1, pattern: str | None = None,
                 webhdfs_conn_id: str = "webhdfs_default", cache_dir: str | None = None,
                 volume_path: str | None = None, allowed_roots: Sequence[str] | None = None,
                 pod_mount_path: str | None = None, manifest_path: str | None = None,
                 parallelism: int = 4, path_prefix: str = "", include_hidden: bool = False,
                 chunk_size: int = 4 << 20, verify: bool | str = DEFAULT_VERIFY,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.input_path = input_path
        self.num_workers = num_workers
        self.pattern = pattern
        self.webhdfs_conn_id = webhdfs_conn_id
        self.cache_dir = cache_dir
        self.volume_path = volume_path
        self.allowed_roots = list(allowed_roots) if allowed_roots else None
        self.pod_mount_path = pod_mount_path
        self.manifest_path = manifest_path
        self.parallelism = parallelism
        self.path_prefix = path_prefix
        self.include_hidden = include_hidden
        self.chunk_size = chunk_size
        self.verify = parse_verify(verify)  # a bad value fails when the DAG is parsed

    def execute(self, context: Any) -> dict[str, Any]:
        with fail_permanently():
            cache_dir = _opt(self.cache_dir)
            volume = (GlusterVolume(self.volume_path, self.allowed_roots, self.pod_mount_path)
                      if cache_dir else None)
            hdfs = webhdfs(self.webhdfs_conn_id)
            return _announce(context, self.outlets, self.input_path, stage_hdfs(hdfs, self.input_path, self.num_workers,
                              pattern=_opt(self.pattern), include_hidden=self.include_hidden,
                              volume=volume, cache_dir=cache_dir,
                              manifest_path=_opt(self.manifest_path),
                              parallelism=self.parallelism, path_prefix=self.path_prefix or "",
                              chunk_size=self.chunk_size, verify=self.verify,
                              logger=self.log))


class GlusterFSStageOperator(BaseOperator):
    """Shard files already on the GlusterFS volume and write their manifest.

    :param input_path: file, directory or glob on the volume (templated; absolute or
        relative to ``volume_path``); must lie under ``allowed_roots``.
    :param num_workers: number of shards (templated).
    :param pattern: file-name glob applied while listing recursively (templated).
    :param volume_path: the mount on the Airflow worker (default ``$TFK8S_GLUSTER_MOUNT``).
    :param allowed_roots: directories (under the volume) inputs must lie in (default: all).
    :param pod_mount_path: where the pods mount the volume (default: same as ``volume_path``).
    :param manifest_path: default ``<input root>/_tfk8s_manifest.json`` (templated).
    :param checksum: ``"sha256"`` (default), ``"md5"`` or ``None`` (sizes only).
    :param include_hidden: also take ``_*``/``.*`` files as data.
    """

    template_fields: Sequence[str] = ("input_path", "pattern", "num_workers", "manifest_path")
    ui_color = "#e6ffe6"

    def __init__(self, *, input_path: str, num_workers: int | str = 1, pattern: str | None = None,
                 volume_path: str | None = None, allowed_roots: Sequence[str] | None = None,
                 pod_mount_path: str | None = None, manifest_path: str | None = None,
                 checksum: str | None = "sha256", include_hidden: bool = False,
                 parallelism: int = 4, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.input_path = input_path
        self.num_workers = num_workers
        self.pattern = pattern
        self.volume_path = volume_path
        self.allowed_roots = list(allowed_roots) if allowed_roots else None
        self.pod_mount_path = pod_mount_path
        self.manifest_path = manifest_path
        self.checksum = checksum
        self.include_hidden = include_hidden
        self.parallelism = parallelism

    def execute(self, context: Any) -> dict[str, Any]:
        with fail_permanently():
            volume = GlusterVolume(self.volume_path, self.allowed_roots, self.pod_mount_path)
            return _announce(context, self.outlets, self.input_path, stage_volume(
                volume, self.input_path, self.num_workers, pattern=_opt(self.pattern),
                include_hidden=self.include_hidden, manifest_path=_opt(self.manifest_path), checksum=self.checksum,
                parallelism=self.parallelism, logger=self.log))
