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
``source``, ``data_root`` and, after a copy, ``copied``/``skipped``/``seconds``/``bytes_copied``; pass it
straight to ``tf_job(..., shards=stage.output)``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import TaskDeferred

from tfk8s_airflow.assetnames import location_uri
from tfk8s_airflow.connections import webhdfs, webhdfs_config
from tfk8s_airflow.exceptions import DataError, SpecError, StagingError
from tfk8s_airflow.lineage import operator_lineage
from tfk8s_airflow.metricnames import Point
from tfk8s_airflow.metrics import emit
from tfk8s_airflow.operators.base import (
    check_trigger_queue,
    describe_outlets,
    fail_permanently,
    on_trigger_queue,
    partition_key,
)
from tfk8s_airflow.staging import fanout, sumfanout
from tfk8s_airflow.staging.glusterfs import GlusterVolume
from tfk8s_airflow.staging.hdfscopy import DEFAULT_VERIFY, parse_verify
from tfk8s_airflow.staging.shards import parse_num_workers
from tfk8s_airflow.staging.stage import (
    VolumeListing,
    check_checksum,
    list_volume,
    stage_hdfs,
    stage_volume,
)

__all__ = ["HdfsStageOperator", "GlusterFSStageOperator"]


def _announce(context: Any, task: Any, input_path: str, result: dict[str, Any],
              executor: str = "local") -> dict[str, Any]:
    """The staged partition as the extra of the task's Asset events (``outlets=[Asset(...)]``), the
    staging metrics (``tfk8s.staging.*``), and the result kept for the task's lineage (its OpenLineage
    facets are asked for after it returns)."""
    task._tfk8s_result = result
    outlets = task.outlets
    ti = context.get("ti") if hasattr(context, "get") else None
    tags = tuple((k, str(v)[:63]) for k, v in (("dag", getattr(ti, "dag_id", None)),
                                               ("task", getattr(ti, "task_id", None)), ("executor", executor)) if v)
    copied = int(result.get("bytes_copied", result.get("bytes") or 0))
    points = [Point("tfk8s.staging.bytes", copied, tags)]
    if result.get("seconds"):
        points.append(Point("tfk8s.staging.mib_per_second", copied / 2**20 / float(result["seconds"]), tags))
    emit(points)
    uris = _lineage(task, result)
    describe_outlets(context, outlets or (), {
        "partition": partition_key(input_path), "input": input_path, "manifest": result.get("manifest"),
        "files": result.get("files"), "bytes": result.get("bytes"), "source": result.get("source"),
        "data_root": result.get("data_root"),
        "input_uri": next(iter(uris[0]), None), "uri": next(iter(uris[1]), None)}, partition_key(input_path))
    return result


def _namenode(task: Any) -> str | None:
    """The NameNode a staging task's connection names first (the authority of its ``hdfs://`` URIs)."""
    conn_id = getattr(task, "webhdfs_conn_id", None)
    return webhdfs_config(conn_id).urls[0] if conn_id else None


def _lineage(task: Any, result: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """The URIs a staging task read and wrote (:mod:`tfk8s_airflow.assetnames`): the HDFS partition (or the
    files on the volume) in; the staged directory out after a copy, else the manifest. ``result`` None: before
    the task ran (the inputs it will read)."""
    namenode = _namenode(task)
    if namenode is not None:
        inputs = [location_uri(f"hdfs:{task.input_path}", namenode)]
    else:
        root = (result or {}).get("data_root") or str(task.input_path)
        inputs = [location_uri(root)]
    if result is None:
        return [u for u in inputs if u], []
    copied = "bytes_copied" in result and result.get("data_root")
    written = result.get("data_root") if copied else result.get("manifest")
    outputs = [location_uri(str(written), namenode)] if written else []
    return [u for u in inputs if u], [u for u in outputs if u]


class _StagingLineage:
    """The OpenLineage provider's hooks of the staging operators (:mod:`tfk8s_airflow.lineage`)."""

    def get_openlineage_facets_on_start(self) -> Any:
        inputs, _ = _lineage(self, None)
        return operator_lineage(inputs=inputs)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        inputs, outputs = _lineage(self, getattr(self, "_tfk8s_result", None))
        return operator_lineage(inputs=inputs, outputs=outputs)


def _opt(value: Any) -> Any:
    """Rendered templates give '' or 'None' for unset optional values."""
    return None if value in ("", "None", None) else value


def _lease(settings: fanout.CopySettings, key: str, security: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The owner reference of the task's lease (:mod:`tfk8s_airflow.staging.lease`), created or renewed."""
    from tfk8s_airflow.k8s import copypods

    if security is None:
        from tfk8s_airflow.deployment import deployment_policy

        security = deployment_policy().pod_security(None)[:2]
    return copypods.ensure_lease(copypods.batch(settings.kubernetes_conn_id), settings.namespace, key,
                                 copypods.task_labels(key), settings.lease, settings.image, security)


def _end_lease(settings: fanout.CopySettings, key: str) -> None:
    """The copy ended for good (published, failed or cancelled): its lease goes, with whatever it still
    owns. Called after the delegation token was cancelled (its Secret is one of the lease's)."""
    from tfk8s_airflow.k8s import copypods

    copypods.end_lease(copypods.batch(settings.kubernetes_conn_id), settings.namespace, key)


def _unless_killed(task: BaseOperator, when: str) -> None:
    """:class:`StagingError` once ``task.on_kill`` ran: Airflow calls it from its SIGTERM handler and the task
    goes on where it was, so each step that makes something checks first (the caller releases what exists)."""
    if getattr(task, "_tfk8s_killed", False):
        raise StagingError(f"the task was killed {when}; nothing more is made, what it made is deleted "
                           "(and its HDFS delegation token cancelled)")


def _start_pods(task: BaseOperator, state: dict[str, Any], parts: list[int], specs: Sequence[dict[str, Any]],
                settings: fanout.CopySettings, volume: GlusterVolume, *, program: str, method_name: str,
                unit: str, what: str) -> None:
    """Create the staging pods of ``parts`` (each admitted by the deployment's policy first, each owned by
    the task's lease) and defer ``task`` on :class:`CopyPodsTrigger` until they have ended;
    ``method_name`` resumes it."""
    from tfk8s_airflow.deployment import deployment_policy
    from tfk8s_airflow.job.builders.admission import admit_pod
    from tfk8s_airflow.k8s import copypods
    from tfk8s_airflow.triggers.staging import CopyPodsTrigger

    policy = deployment_policy()
    pod_sc, container_sc, _ = policy.pod_security(None)
    pods, names = [], {}
    for part in parts:
        name = copypods.pod_name(state["key"], part, state["attempts"][part])
        labels = {**copypods.task_labels(state["key"]), copypods.LABEL_PART: str(part)}
        pod = fanout.copy_pod(name, labels, specs[part], settings, str(volume.mount), str(volume.pod_mount),
                              (pod_sc, container_sc), program=program)
        # The deployment's one admission, as for every pod the package makes (host paths resolved now,
        # read-only ones mounted read-only, Secrets, security contexts): SpecError, nothing created.
        admitted = admit_pod(pod, policy, what=f"staging {what} pod {name}")
        if state.get("token_secret"):
            # A Kerberos copy's delegation token, added after admission: the Secret is the task's own (made
            # by HdfsStageOperator, named by the copy's key), not one a DAG or the pod template names.
            from tfk8s_airflow.k8s.tokensecret import env_entry

            container = admitted["spec"]["containers"][0]
            container["env"] = [e for e in container.get("env") or ()
                                if e.get("name") != "TFK8S_HDFS_DELEGATION"] + [env_entry(state["token_secret"])]
        pods.append(admitted)
        names[str(part)] = name
    # Every pod is owned by the task's lease, made (or renewed) before the first of them: whatever ends the
    # task, Kubernetes deletes them once the lease is no longer renewed.
    _unless_killed(task, f"before its {what} pods were created")
    owner = _lease(settings, state["key"], (pod_sc, container_sc))
    if state.get("token_secret") and state.get("lease_uid") not in (None, owner["uid"]):
        # The lease ran out while nobody renewed it (the triggerer away longer than staging_lease): Kubernetes
        # deleted the delegation-token Secret with it. A new try of the task issues a new token.
        raise StagingError(f"the staging lease ran out while the {what} waited (longer than [tfk8s] staging_lease, "
                           f"{settings.lease}s, without a triggerer); its HDFS delegation token went with it "
                           "(retry the task: it resumes what was verified)")
    state["lease_uid"] = str(owner["uid"])
    for pod in pods:
        pod["metadata"]["ownerReferences"] = [owner]
    api = copypods.core(settings.kubernetes_conn_id)
    try:
        copypods.create(api, pods)
        _unless_killed(task, f"while its {what} pods started")
    except BaseException:
        copypods.delete_all(api, settings.namespace, state["key"])
        _end_lease(settings, state["key"])  # after a Kerberos copy's release too: a lease the kill made anew
        raise
    task.log.info("started %d %s pod(s) in %s: %s (lease %ds)", len(pods), what, settings.namespace,
                  ", ".join(names.values()), settings.lease)
    plan = state["plan"]
    on_trigger_queue(task)
    task.defer(trigger=CopyPodsTrigger(
        namespace=settings.namespace, key=state["key"], pods=names,
        part_bytes={str(p): sum(int(it[2]) for it in plan[p]) for p in parts},
        part_items={str(p): len(plan[p]) for p in parts}, kubernetes_conn_id=settings.kubernetes_conn_id,
        started=time.time(), state=state, unit=unit, lease=settings.lease), method_name=method_name)


def _retry_failed(task: BaseOperator, api: Any, state: dict[str, Any], outcome: fanout.PartOutcome,
                  phases: dict[int, str], settings: fanout.CopySettings, what: str) -> list[int]:
    """Delete the pods of the parts that failed and count their attempts; the parts to start again
    (:class:`StagingError` once one of them has used ``[tfk8s] staging_part_retries``)."""
    from tfk8s_airflow.k8s import copypods

    for part, why in sorted(outcome.failed.items()):
        copypods.delete_one(api, settings.namespace, copypods.pod_name(state["key"], part, state["attempts"][part]))
        state["attempts"][part] += 1
        if state["attempts"][part] > settings.part_retries:
            copypods.delete_all(api, settings.namespace, state["key"])
            raise StagingError(f"{what} part {part} failed {state['attempts'][part]} times, last: {why} "
                               "(nothing was published; a retry of the task resumes what was verified)")
        task.log.warning("%s part %d (pod %s) failed: %s; attempt %d of %d resumes what it verified", what,
                         part, phases.get(part), why, state["attempts"][part] + 1, settings.part_retries + 1)
    return sorted(outcome.failed)


class HdfsStageOperator(_StagingLineage, BaseOperator):
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
    :param copy_executor: where the copy runs (not ``executor``: that is Airflow's own parameter,
        the Airflow executor that runs the task): ``"local"`` (this task's process, as before),
        ``"kubernetes"`` (a fan-out of copy pods, :mod:`tfk8s_airflow.staging.fanout`; the task
        waits deferred) or ``"auto"`` (default: ``"kubernetes"`` when the partition holds at least
        the deployment's ``[tfk8s] staging_threshold`` bytes and the deployment names a
        ``staging_image``, else ``"local"``). Pod copies always compare every file with HDFS's
        checksum, whatever ``verify`` says.
    :param copy_pods: parts (and pods) of a pod copy (default ``[tfk8s] staging_pods``, 4).
    :param trigger_queue: the triggerer queue of the pod copy's trigger (``[triggerer] queues_enabled``; a
        triggerer started with ``--queues`` of that name runs it).
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
                 copy_executor: str = "auto", copy_pods: int | None = None, trigger_queue: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trigger_queue = check_trigger_queue(trigger_queue)
        if copy_executor not in fanout.EXECUTORS:  # a bad value fails when the DAG is parsed
            raise SpecError(f"must be one of {', '.join(map(repr, fanout.EXECUTORS))}, got {copy_executor!r}",
                            field="copy_executor")
        self.copy_executor = copy_executor
        self.copy_pods = copy_pods
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
            manifest_path = _opt(self.manifest_path)
            local_manifest = manifest_path is not None and not manifest_path.startswith("hdfs:")
            # The volume confines the cache and a local manifest alike (the deployment's mount and roots).
            volume = (GlusterVolume(self.volume_path, self.allowed_roots, self.pod_mount_path)
                      if cache_dir or local_manifest else None)
            hdfs = webhdfs(self.webhdfs_conn_id)
            if cache_dir and volume is not None and self.copy_executor != "local":
                started = self._maybe_pods(context, hdfs, volume, cache_dir)
                if started:
                    return {}  # not reached: deferred
            return _announce(context, self, self.input_path, stage_hdfs(hdfs, self.input_path, self.num_workers,
                              pattern=_opt(self.pattern), include_hidden=self.include_hidden,
                              volume=volume, cache_dir=cache_dir,
                              manifest_path=_opt(self.manifest_path),
                              parallelism=self.parallelism, path_prefix=self.path_prefix or "",
                              chunk_size=self.chunk_size, verify=self.verify,
                              logger=self.log))

    # ------------------------------------------------------------------ the pod fan-out
    def _maybe_pods(self, context: Any, hdfs: Any, volume: GlusterVolume, cache_dir: str) -> bool:
        """Start a pod copy when the executor (or, for ``auto``, the partition's size) says so."""
        from tfk8s_airflow.deployment import copy_settings

        settings = copy_settings()
        files = root = None
        total = 0
        if self.copy_executor == "auto":
            if not settings.image:
                return False
            root, files = hdfs.list_files(self.input_path, pattern=_opt(self.pattern),
                                          include_hidden=self.include_hidden, with_checksums=False,
                                          parallelism=self.parallelism)
            total = sum(f.size for f in files)
        if fanout.choose_executor(self.copy_executor, total, settings) != "kubernetes":
            self.log.info("staging %.1f MiB locally (below [tfk8s] staging_threshold, %.1f MiB)", total / 2**20,
                          settings.threshold / 2**20)
            return False
        from tfk8s_airflow.k8s.copypods import copy_key

        ti = context["ti"]
        key = copy_key(ti.dag_id, ti.run_id, ti.task_id, getattr(ti, "map_index", -1))
        state = fanout.begin(hdfs, volume, self.input_path, self.num_workers, cache_dir=cache_dir,
                             manifest_path=_opt(self.manifest_path), pattern=_opt(self.pattern),
                             include_hidden=self.include_hidden, parallelism=self.parallelism,
                             pods=self.copy_pods or settings.pods, key=key, logger=self.log, files=files,
                             root=root)
        state["started"] = time.time()
        state["done"] = []
        self._tfk8s_key = state["key"]
        try:
            if hdfs.config.kerberos:
                self._issue_token(settings, state, hdfs)
            self._launch(state, list(range(len(state["plan"]))), settings, volume, hdfs)
        except TaskDeferred:
            raise
        except BaseException:
            self._release(settings, state, hdfs)
            raise
        return True

    def _issue_token(self, settings: fanout.CopySettings, state: dict[str, Any], hdfs: Any) -> None:
        """A Kerberos copy: the pods get a delegation token through a Secret (never the token in the pod spec,
        the trigger's arguments or the log); it is cancelled and deleted when the copy ends. A kill (``on_kill``,
        which Airflow calls from its SIGTERM handler while this goes on) stops it at each step."""
        from airflow.sdk.log import mask_secret

        from tfk8s_airflow.deployment import deployment_policy
        from tfk8s_airflow.k8s import copypods, tokensecret
        from tfk8s_airflow.staging import delegation

        key = state["key"]
        fanout.check_token_namespace(settings.namespace, deployment_policy().default_namespace)
        api = copypods.core(settings.kubernetes_conn_id)
        owner = _lease(settings, key)  # first: the Secret is the lease's from the moment it exists
        state["lease_uid"] = self._tfk8s_lease_uid = str(owner["uid"])
        state["webhdfs_conn_id"] = self.webhdfs_conn_id  # the trigger cancels the token on a cancel
        _unless_killed(self, "before its HDFS delegation token was issued")

        def masked(token: str) -> None:  # redacted from the log; its handle kept (no credential)
            mask_secret(token)
            state["token_handle"] = self._tfk8s_token_handle = delegation.handle(token)

        name = tokensecret.issue(api, settings.namespace, key, hdfs, masked, owner,
                                 check=lambda: _unless_killed(self, "while its HDFS delegation token was issued"))
        state["token_secret"] = name
        self.log.info("HDFS delegation token for the copy pods in Secret %s/%s", settings.namespace, name)

    def _release(self, settings: fanout.CopySettings, state: dict[str, Any], hdfs: Any) -> None:
        """The copy ended for good: cancel its delegation token and delete its Secret (a Kerberos copy: every
        Secret its lease owns, also one made while the task was being killed), then end its lease."""
        if state.get("lease_uid") and hdfs.config.kerberos:
            from tfk8s_airflow.k8s import copypods, tokensecret

            if tokensecret.release(copypods.core(settings.kubernetes_conn_id), settings.namespace, state["key"],
                                   hdfs, state.get("lease_uid"), state.get("token_handle")):
                self.log.info("cancelled the HDFS delegation token and deleted Secret %s/%s", settings.namespace,
                              state.get("token_secret"))
        _end_lease(settings, state["key"])

    def _launch(self, state: dict[str, Any], parts: list[int], settings: fanout.CopySettings,
                volume: GlusterVolume, hdfs: Any) -> None:
        """Create the copy pods of ``parts`` (admitted by the deployment's policy first) and defer."""
        _start_pods(self, state, parts, fanout.state_specs(state, volume, hdfs.config, self.chunk_size), settings,
                    volume, program="tfk8s_airflow.pod.stagecopy", method_name="copy_ended", unit="items", what="copy")

    def copy_ended(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """A round of copy pods ended: publish when every part is verified, else start the failed
        parts again (each resumes from its journal), up to ``[tfk8s] staging_part_retries``."""
        from tfk8s_airflow.deployment import copy_settings

        settings = copy_settings()
        state = dict(event["state"])
        hdfs = webhdfs(self.webhdfs_conn_id)
        try:
            result = self._copy_ended(context, event, settings, state, hdfs)
        except TaskDeferred:  # failed parts started again: the token is still theirs
            raise
        except BaseException:
            self._release(settings, state, hdfs)
            raise
        self._release(settings, state, hdfs)
        return result

    def _copy_ended(self, context: Any, event: dict[str, Any], settings: fanout.CopySettings,
                    state: dict[str, Any], hdfs: Any) -> dict[str, Any]:
        from tfk8s_airflow.k8s import copypods

        with fail_permanently():
            volume = GlusterVolume(self.volume_path, self.allowed_roots, self.pod_mount_path)
            api = copypods.core(settings.kubernetes_conn_id)
            if event.get("status") != "ended":
                copypods.delete_all(api, settings.namespace, state["key"])
                raise StagingError(f"waiting for the copy pods failed: {event.get('message')}")
            phases = {int(p): ph for p, ph in event["phases"].items()}
            outcome = fanout.judge(state, volume, sorted(phases))
            if outcome.checksum_errors:
                copypods.delete_all(api, settings.namespace, state["key"])
                fanout.discard(Path(state["dest"]), state["key"], volume.mount)
                raise StagingError("; ".join(outcome.checksum_errors) + " (nothing was published)")
            state["done"] = sorted(set(state.get("done", [])) | set(outcome.done))
            if outcome.failed:
                self._launch(state, _retry_failed(self, api, state, outcome, phases, settings, "copy"), settings,
                             volume, hdfs)
            final = fanout.judge(state, volume, list(range(len(state["plan"]))))
            if final.failed or final.checksum_errors:
                raise StagingError(f"copy parts not complete: {final.failed or final.checksum_errors}")
            try:
                result = fanout.finish(hdfs, volume, state, final.done, self.log,
                                       time.time() - float(state["started"]))
            except StagingError:  # a record HDFS does not confirm: what the pods left is not resumed either
                copypods.delete_all(api, settings.namespace, state["key"])
                fanout.discard(Path(state["dest"]), state["key"], volume.mount)
                raise
            self.log.info("CRC engine in the copy pods: %s", ", ".join(sorted(final.engines)))
            copypods.delete_all(api, settings.namespace, state["key"])
            return _announce(context, self, self.input_path, result, "kubernetes")

    def on_kill(self) -> None:
        """Cancelled while starting the pods (before the task deferred): delete them (and the token's
        Secret, the token cancelled)."""
        from tfk8s_airflow.deployment import copy_settings
        from tfk8s_airflow.k8s import copypods, tokensecret

        self._tfk8s_killed = True  # what execute still does after this returns stops at its next step
        ctx = getattr(self, "_tfk8s_key", None)
        if ctx is None:
            return
        settings = copy_settings()
        api = copypods.core(settings.kubernetes_conn_id)
        copypods.delete_all(api, settings.namespace, ctx)
        hdfs = webhdfs(self.webhdfs_conn_id)
        tokensecret.release(api, settings.namespace, ctx, hdfs if hdfs.config.kerberos else None,
                            getattr(self, "_tfk8s_lease_uid", None), getattr(self, "_tfk8s_token_handle", None))
        _end_lease(settings, ctx)


class GlusterFSStageOperator(_StagingLineage, BaseOperator):
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
    :param parallelism: files digested at once by the local pass.
    :param copy_executor: where the checksum pass runs: ``"local"`` (this task's process),
        ``"kubernetes"`` (a fan-out of checksum pods, :mod:`tfk8s_airflow.staging.sumfanout`; the
        task waits deferred) or ``"auto"`` (default: ``"kubernetes"`` when the input holds at least
        the deployment's ``[tfk8s] staging_threshold`` bytes and the deployment names a
        ``staging_image``, else ``"local"``), the rule of :class:`HdfsStageOperator`. With
        ``checksum=None`` there is no pass to fan out: the sizes are taken locally.
    :param copy_pods: parts (and pods) of the checksum pass (default ``[tfk8s] staging_pods``, 4).
    :param trigger_queue: the triggerer queue of the checksum pods' trigger, as for :class:`HdfsStageOperator`.
    """

    template_fields: Sequence[str] = ("input_path", "pattern", "num_workers", "manifest_path")
    ui_color = "#e6ffe6"

    def __init__(self, *, input_path: str, num_workers: int | str = 1, pattern: str | None = None,
                 volume_path: str | None = None, allowed_roots: Sequence[str] | None = None,
                 pod_mount_path: str | None = None, manifest_path: str | None = None,
                 checksum: str | None = "sha256", include_hidden: bool = False,
                 parallelism: int = 4, copy_executor: str = "auto", copy_pods: int | None = None,
                 trigger_queue: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trigger_queue = check_trigger_queue(trigger_queue)
        if copy_executor not in fanout.EXECUTORS:  # a bad value fails when the DAG is parsed
            raise SpecError(f"must be one of {', '.join(map(repr, fanout.EXECUTORS))}, got {copy_executor!r}",
                            field="copy_executor")
        check_checksum(checksum)
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
        self.copy_executor = copy_executor
        self.copy_pods = copy_pods

    def _volume(self) -> GlusterVolume:
        return GlusterVolume(self.volume_path, self.allowed_roots, self.pod_mount_path)

    def execute(self, context: Any) -> dict[str, Any]:
        with fail_permanently():
            volume = self._volume()
            parse_num_workers(self.num_workers)  # a bad value fails before anything is listed
            listing = list_volume(volume, self.input_path, pattern=_opt(self.pattern),
                                  include_hidden=self.include_hidden, manifest_path=_opt(self.manifest_path))
            if self.copy_executor != "local" and self.checksum and self._maybe_pods(context, volume, listing):
                return {}  # not reached: deferred
            return _announce(context, self, self.input_path, stage_volume(
                volume, self.input_path, self.num_workers, pattern=_opt(self.pattern),
                include_hidden=self.include_hidden, manifest_path=_opt(self.manifest_path), checksum=self.checksum,
                parallelism=self.parallelism, logger=self.log, listing=listing))

    # ------------------------------------------------------------------ the pod fan-out
    def _maybe_pods(self, context: Any, volume: GlusterVolume, listing: VolumeListing) -> bool:
        """Start the checksum pods when the executor (or, for ``auto``, the input's size) says so."""
        from tfk8s_airflow.deployment import copy_settings
        from tfk8s_airflow.k8s.copypods import copy_key

        settings = copy_settings()
        total = sum(f.size for f in listing.files)
        if fanout.choose_executor(self.copy_executor, total, settings) != "kubernetes":
            self.log.info("checksums of %.1f MiB computed locally (below [tfk8s] staging_threshold, %.1f MiB)",
                          total / 2**20, settings.threshold / 2**20)
            return False
        ti = context["ti"]
        key = copy_key(ti.dag_id, ti.run_id, ti.task_id, getattr(ti, "map_index", -1))
        state = sumfanout.begin(volume, listing, parse_num_workers(self.num_workers),
                                pods=self.copy_pods or settings.pods, algorithm=str(self.checksum), key=key,
                                logger=self.log)
        state["started"] = time.time()
        self._tfk8s_key = key
        self._launch(state, list(range(len(state["plan"]))), settings, volume)
        return True

    def _launch(self, state: dict[str, Any], parts: list[int], settings: fanout.CopySettings,
                volume: GlusterVolume) -> None:
        _start_pods(self, state, parts, sumfanout.pod_specs(state, volume), settings, volume,
                    program=sumfanout.PROGRAM, method_name="sums_ended", unit="files", what="checksum")

    def sums_ended(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """A round of checksum pods ended: write the manifest when every part's record checks out,
        else start the failed parts again (each resumes from its journal), up to
        ``[tfk8s] staging_part_retries``. A file changed since the listing fails the task at once."""
        from tfk8s_airflow.deployment import copy_settings
        from tfk8s_airflow.k8s import copypods

        with fail_permanently():
            settings = copy_settings()
            state = dict(event["state"])
            volume = self._volume()
            api = copypods.core(settings.kubernetes_conn_id)

            def give_up(message: str) -> StagingError:
                copypods.delete_all(api, settings.namespace, state["key"])
                _end_lease(settings, state["key"])
                sumfanout.discard(volume, state)
                return StagingError(message + " (no manifest was written)")

            if event.get("status") != "ended":
                raise give_up(f"waiting for the checksum pods failed: {event.get('message')}")
            phases = {int(p): ph for p, ph in event["phases"].items()}
            outcome = sumfanout.judge(state, volume, sorted(phases))
            if outcome.checksum_errors:
                raise give_up("; ".join(outcome.checksum_errors))
            if outcome.failed:
                self._launch(state, _retry_failed(self, api, state, outcome, phases, settings, "checksum"), settings,
                             volume)
            final = sumfanout.judge(state, volume, list(range(len(state["plan"]))))
            if final.failed or final.checksum_errors:
                raise give_up(f"checksum parts not complete: {final.failed or final.checksum_errors}")
            try:
                result = sumfanout.finish(volume, state, final.done, self.log, time.time() - float(state["started"]))
            except DataError as exc:
                raise give_up(str(exc)) from exc
            copypods.delete_all(api, settings.namespace, state["key"])
            _end_lease(settings, state["key"])
            return _announce(context, self, self.input_path, result, "kubernetes")

    def on_kill(self) -> None:
        """Cancelled while starting the pods (before the task deferred): delete them."""
        from tfk8s_airflow.deployment import copy_settings
        from tfk8s_airflow.k8s import copypods

        self._tfk8s_killed = True  # what execute still does after this returns stops at its next step
        key = getattr(self, "_tfk8s_key", None)
        if key is None:
            return
        settings = copy_settings()
        copypods.delete_all(copypods.core(settings.kubernetes_conn_id), settings.namespace, key)
        _end_lease(settings, key)
