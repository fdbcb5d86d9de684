"""Setup of a TF job: validate, pre-flight, then create the whole group together.

Why the first task does all checking and all creating: a bad spec or a job that cannot fit
must fail before anything exists in the cluster, permanently (no retries), naming the field
or the numbers; and a PS/worker job is useless until every member exists, so the group is
created in one batch (parallel, bounded) with every pod held by the scheduling gate
``tfk8s.io/gang``, and the gates are released together once all exist: no member is
scheduled (and holds a node) while a peer is still missing. Creation is idempotent: a
retried setup adopts the pods its earlier try created (same job and run), never
duplicating one; its Service, ConfigMaps and NetworkPolicy carry setup's mark, and one of
their names that setup did not create is refused before anything is created
(:mod:`tfk8s_airflow.job.builders.ownership`). Every pod passes the deployment's admission
(:func:`tfk8s_airflow.job.builders.admission.admit_pods`). If creation fails midway, everything of
the job is deleted again before the error is raised.

Every object setup creates comes from the job's plan (:func:`tfk8s_airflow.job.builders.plan.plan_job`),
the same plan ``tfk8s render`` prints: setup checks it against the cluster, then creates it in
its order, each object but the Service owned by the Service once that exists.

A job with a ``pod_template`` first creates one pod per role with a server-side dry run
(validation and admission, nothing stored): a template is Kubernetes' own pod spec, which
only the API server checks completely, and a refusal must come before the first object
exists. A job without one skips it (its pods are built entirely from checked spec fields).

Under ``admission: gate`` this is not gang scheduling: once released, each pod is scheduled on its own,
and a cluster too small for all of them leaves some Pending (the job then fails after
``schedule_timeout``, naming the scheduler's message). Under ``admission: workload`` it is: the pods form
one PodGroup of Kubernetes' Workload API (created with the job's Workload before the pods), and
kube-scheduler binds all of them together or none; setup first asks the API server whether it serves
that API (:func:`~tfk8s_airflow.job.builders.plan.admission_of`).

With a Kueue ``queue`` (the spec's, or the deployment's ``default_queue``) the pods are one Kueue
pod group (:mod:`tfk8s_airflow.job.kueue`), which Kueue admits whole against its ClusterQueue's
quota: its gates stay after ours is released. Each created pod is checked for Kueue's label and
gate; in a namespace Kueue does not manage, setup fails at once and deletes what it made.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from tfk8s_airflow.assetnames import location_uri
from tfk8s_airflow.deployment import deployment_policy
from tfk8s_airflow.exceptions import PermanentError, Problem, QuotaExceededError, SpecError
from tfk8s_airflow.job import kueue, podgroup
from tfk8s_airflow.job.builders import quota
from tfk8s_airflow.job.builders.objects import JobNames, owner_reference
from tfk8s_airflow.job.builders.plan import WORKLOAD, may_use_workload_api, plan_job, replica_task_id
from tfk8s_airflow.job.builders.shardmap import normalize_shards
from tfk8s_airflow.job.builders.templatemap import check_templates_fit
from tfk8s_airflow.job.defaults import POLL_INTERVAL_S
from tfk8s_airflow.job.policy import package_secret_problems
from tfk8s_airflow.job.policy.deployment import template_secrets
from tfk8s_airflow.job.policy.preflight import PREFLIGHT_KEY, check_mode
from tfk8s_airflow.job.run import lineage
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import JOB_ID_KEY, JobRecord
from tfk8s_airflow.job.run.resolve import as_spec_input, job_record, resolve_spec
from tfk8s_airflow.k8s import capacity
from tfk8s_airflow.k8s.client import DEFAULT_CONCURRENCY, JobClient, Owned
from tfk8s_airflow.k8s.kueue import release_quota
from tfk8s_airflow.k8s.owned import check_absent_or_own, create_own
from tfk8s_airflow.lineage import operator_lineage
from tfk8s_airflow.operators.base import fail_permanently

__all__ = ["TFJobSetupOperator", "normalize_shards"]


def _managed_by_kueue(queue: str) -> Callable[[Mapping[str, Any]], None]:
    """The check of each created pod under a queue: Kueue's webhook labelled and gated it. A namespace
    Kueue does not manage ignores the queue label silently, and the pods would run unadmitted: setup
    fails at once instead (permanently; everything created is deleted again)."""
    def check(pod: Mapping[str, Any]) -> None:
        why = kueue.unmanaged_reason(pod, queue)
        if why:
            raise SpecError(f"{why}; nothing was kept (fix: label the namespace as the cluster's Kueue "
                            "managedJobsNamespaceSelector wants, or use a namespace Kueue manages)", field="queue")
    return check


def refuse_package_secrets(client: JobClient, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
    """SpecError, before anything is created, when a pod would read one of the package's own Secrets (labelled
    ``tfk8s.io/secret``: a staging task's delegation token), whatever ``[tfk8s] allowed_secrets`` says; the
    API server is asked only when a pod reads a Secret at all."""
    if not any(next(template_secrets(pod, ""), None) for pod in pods):
        return
    problems = package_secret_problems(pods, client.package_secrets(namespace))
    if problems:
        raise SpecError(problems)


class TFJobSetupOperator(BaseOperator):
    """Validates the spec and creates the job: headless Service, shard ConfigMap, every pod.

    Every object but the Service is owned by the Service (``ownerReferences``), so deleting
    the Service removes the whole job through Kubernetes' garbage collector.

    Returns one ``{"replica": "<role>-<i>"}`` per replica (the replica tasks map over it) and
    pushes the job record (:class:`~tfk8s_airflow.job.run.records.JobRecord`) under the XCom key
    ``job``.

    :param spec: TFJobSpec, dict (templated), or a YAML/JSON path or text.
    :param shards: shard assignments ``{"worker-0": [...]}`` or a staging task's output.
    :param overrides: dict merged into the spec, e.g. ``{"worker": {"replicas": "{{ params.workers }}"}}``.
    :param job_group: the group the names derive from (default: the task group id).
    :param check_quota: sum the job's requests against the namespace's ResourceQuotas first.
    :param replica_task_id: the replica tasks' id (their pods get its task labels).
    :param poll_interval: seconds between the job watch's LISTs (recorded for the triggers).
    :param create_concurrency: parallel create/patch requests of the batch.
    :param preflight: the pre-flight verdict's mode for this job, ``enforce``, ``warn`` or ``off``
        (docs/jobs.md#pre-flight-runs-now-waits-never); default: the deployment's ``[tfk8s] preflight``.
        The verdict is pushed as :class:`~tfk8s_airflow.job.policy.preflight.PreflightRecord` under the
        XCom key ``preflight``.
    :param log_dir: the job's log directory, where the replica tasks stream each replica's whole log
        and teardown archives (default: the spec's ``logs`` volume's host path). A directory the
        triggerer and the workers see; the pods need not mount it.
    """

    template_fields: Sequence[str] = ("spec", "shards", "overrides", "log_dir")
    template_ext: Sequence[str] = ()
    ui_color = "#ffe8b3"

    def __init__(self, *, spec: Any, shards: Any = None, overrides: Mapping[str, Any] | None = None,
                 kubernetes_conn_id: str = "kubernetes_default", job_group: str | None = None,
                 max_replicas: int | None = None, check_quota: bool = True, replica_task_id: str | None = None,
                 poll_interval: float = POLL_INTERVAL_S, create_concurrency: int = DEFAULT_CONCURRENCY,
                 log_dir: str | None = None, preflight: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = as_spec_input(spec)
        self.shards = shards
        self.overrides = overrides or {}
        self.kubernetes_conn_id = kubernetes_conn_id
        self.job_group = job_group
        self.max_replicas = max_replicas
        self.check_quota = check_quota
        self.replica_task_id = replica_task_id
        self.poll_interval = poll_interval
        self.create_concurrency = create_concurrency
        self.log_dir = log_dir
        self.preflight = preflight

    def execute(self, context: Any) -> list[dict[str, str]]:
        with fail_permanently():  # spec errors and Kubernetes 4xx never retry
            return self._setup(context)

    def _setup(self, context: Any) -> list[dict[str, str]]:
        dag = context["dag"]
        base_dir = os.path.dirname(dag.fileloc) if getattr(dag, "fileloc", None) else None
        policy = deployment_policy()
        try:
            spec = resolve_spec(self.spec, base_dir=base_dir, max_replicas=self.max_replicas,
                                overrides=self.overrides, policy=policy)
        except PermanentError:
            raise
        except (TypeError, AttributeError, ValueError, KeyError, RecursionError) as exc:
            # A spec the validation could not even read (a defect the fuzz corpus did not find yet): the same
            # input fails the same way on every try, so it fails now, without retry, with the traceback chained.
            raise SpecError([Problem("spec", f"could not be read ({type(exc).__name__}: {str(exc)[:200]})",
                                     "check the field types against docs/spec.md; nothing was created")]) from exc
        shards = normalize_shards(self.shards)
        deadline = policy.active_deadline(spec)
        group = self.job_group if self.job_group is not None else (
            self.task_group.group_id if self.task_group and self.task_group.group_id else "")
        names = JobNames.for_run(spec, context["run_id"], group or "", dag.dag_id)
        self._tfk8s_lineage = (lineage.job_facet(spec, names), lineage.model_dir(spec))
        self.log.info("TF job %s in namespace %s: %s (active_deadline %ss%s)", names.job, names.namespace,
                      ", ".join(f"{r.role}={r.replicas}" for r in spec.active_roles), deadline,
                      "" if spec.active_deadline else ", the deployment's default")
        client = JobClient.from_conn(self.kubernetes_conn_id, pool_size=self.create_concurrency)
        if spec.service_account and not client.service_account_exists(names.namespace, spec.service_account):
            raise SpecError(f"{spec.service_account!r} does not exist in namespace {names.namespace}; nothing "
                            "was created (fix: create the ServiceAccount or remove service_account)",
                            field="service_account")
        if self.check_quota:
            problems = quota.check(spec, client.resource_quotas(names.namespace))
            if problems:
                raise QuotaExceededError(f"job {names.job} does not fit the quota of namespace {names.namespace}; "
                                         "nothing was created:\n  - " + "\n  - ".join(problems))
        # Every object the job will have, built once (the same plan tfk8s render prints). The API server is
        # asked about the Workload API only when the job's admission may use it.
        served = may_use_workload_api(spec, policy) and client.serves(podgroup.GROUP, podgroup.VERSION,
                                                                      podgroup.POD_GROUPS)
        plan = plan_job(spec, names, policy, shards, dag_id=dag.dag_id, run_id=context["run_id"],
                        task_id=self.replica_task_id or replica_task_id(group), workload_api=served)
        pods, queue = list(plan.pods), plan.queue
        for pod_group in plan.pod_groups:
            name, low = pod_group["metadata"]["name"], podgroup.gang_of(pod_group)[1]
            members = sum(podgroup.pod_group_of(p) == name for p in pods)
            self.log.info("admission workload: %d pods form the PodGroup %s (Workload %s, gang minCount %s); "
                          "kube-scheduler binds none of them before %s can be placed together", members, name,
                          names.job, low, low)
        if queue:
            priority = f" (priority class {spec.priority_class})" if spec.priority_class else ""
            self.log.info("queue %s: the %d pods form the Kueue pod group %s%s; Kueue admits them together", queue,
                          len(pods), plan.kueue_group, priority)
        check_templates_fit(pods)  # recovery's copy of the pods must fit its ConfigMap: refuse before creating
        refuse_package_secrets(client, names.namespace,
                               [*pods, *([plan.tensorboard_pod] if plan.tensorboard_pod is not None else [])])
        if any(rs.pod_template for rs in spec.active_roles):
            self._dry_run(client, plan.replicas, pods)
        # Before anything exists: never fails here, waits waits here (docs/jobs.md, "Pre-flight").
        capacity.preflight(client, spec, names.job, pods, queue=queue, poll_s=self.poll_interval, log=self.log,
                           gang=plan.admission == WORKLOAD,
                           mode=policy.preflight if self.preflight is None else check_mode(self.preflight),
                           publish=lambda r: context["ti"].xcom_push(key=PREFLIGHT_KEY, value=r.to_xcom()))
        # Before anything is created: an object of the job's names that setup did not make is refused, and
        # setup's clean-up below never deletes it.
        check_absent_or_own(client, [plan.service, *plan.support_objects])
        owned: Owned | None = None  # what setup made: its clean-up never deletes anything else
        try:
            # The Service first: every other object of the job is its dependent, so deleting it
            # (teardown, or by hand when teardown never ran) lets Kubernetes remove them all.
            created, svc = create_own(client, plan.service)
            self.log.info("Service %s %s", names.service, "created" if created else "of an earlier try, taken")
            # The pods as created: recovery recreates replicas from them (docs/recovery.md), and only
            # while the ConfigMap holds what the digest in the job record says.
            owned = Owned(svc["metadata"]["uid"])
            plan = plan.owned(owner_reference(names.service, svc["metadata"]["uid"]))
            digest = plan.templates_digest
            for obj in plan.support_objects:
                created, _ = create_own(client, obj)
                self.log.info("%s %s %s", obj["kind"], obj["metadata"]["name"],
                              "created" if created else "of an earlier try, taken")
            self.log.info("the pods' templates: digest %s", digest)
            batch = client.create_pods(list(plan.pods), self.create_concurrency,
                                       inspect=_managed_by_kueue(queue) if queue else None)
            released = client.release_gates(names.namespace, [p["metadata"]["name"] for p in plan.pods],
                                            self.create_concurrency)
            tensorboard = plan.tensorboard
            if tensorboard is not None and plan.tensorboard_pod is not None:
                # Not gated: nothing waits for it. Created after the replicas' gates are released, so
                # the scheduler sees the replicas first; the judge never counts it (no role label).
                created = client.create_if_absent(plan.tensorboard_pod)
                self.log.info("TensorBoard pod %s %s: --logdir %s, tensorboard.%s.%s.svc:%d", tensorboard.pod_name,
                              "created" if created else "reused (retry or cleared run)", tensorboard.args[1],
                              names.service, names.namespace, tensorboard.port)
        except BaseException:
            # Leave nothing half-made behind: a retry (transient errors) starts clean.
            if owned is not None:  # no Service of setup's: nothing was made
                if queue:  # Kueue's Workload first, or the deleted pods would wait behind its finalizer
                    release_quota(client.core.api_client, names.namespace, names.job,
                                  client.list_pods(names.namespace, names.selector), self.log, owned)
                client.delete_job_objects(names.namespace, names.selector, owned=owned)
            raise
        self.log.info("created %d pod(s)%s in %.2fs, all held by the gate; released the gates of all %d in %.2fs",
                      len(batch.created), f", adopted {len(batch.adopted)} of an earlier try" if batch.adopted else "",
                      batch.seconds, len(pods), released)
        if queue:
            self.log.info("the pods wait for Kueue's admission in queue %s (gate %s); the sensor shows their place",
                          queue, kueue.ADMISSION_GATE)
        judged_by = JobPolicy.from_spec(spec, active_deadline=deadline)
        record: JobRecord = job_record(spec, names, plan.replicas, policy=judged_by, has_shards=shards is not None,
                                       kubernetes_conn_id=self.kubernetes_conn_id, poll_interval=self.poll_interval,
                                       tensorboard_url=policy.tensorboard_url, log_dir=self.log_dir or None,
                                       templates_digest=digest, queue=queue, uids=batch.uids,
                                       service_uid=owned.owner_uid if owned is not None else None)
        context["ti"].xcom_push(key="job", value=record.to_xcom())
        context["ti"].xcom_push(key=JOB_ID_KEY, value=record.job_id)  # the triggers pull the record once per job
        return [{"replica": ref.key} for ref in record.replicas]

    # ------------------------------------------------------------------ lineage (the OpenLineage provider's hooks)
    def _lineage_inputs(self) -> list[str]:
        """The staged directory the job trains on: a staging task's output given as ``shards`` (its
        ``data_root``, after a copy onto the volume or a path prefix such as ``hdfs://nn:8020``)."""
        shards = self.shards
        if not isinstance(shards, Mapping) or not isinstance(shards.get("data_root"), str):
            return []
        root = shards["data_root"]
        copied = "bytes_copied" in shards or not str(shards.get("source", "")).startswith("hdfs:")
        uri = location_uri(root) if copied or root.startswith("hdfs://") else None
        return [uri] if uri else []

    def get_openlineage_facets_on_start(self) -> Any:
        return operator_lineage(inputs=self._lineage_inputs())

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Inputs: the staged directory; outputs: the model directory (the spec's ``model`` volume's host
        path); the run facet ``tfk8s_job``: the spec without environment values, commands or arguments."""
        job, model = getattr(self, "_tfk8s_lineage", (None, None))
        outputs = [u for u in (location_uri(model) if model else None,) if u]
        return operator_lineage(inputs=self._lineage_inputs(), outputs=outputs, job=job)

    def _dry_run(self, client: JobClient, replicas: Sequence[Any], pods: Sequence[Mapping[str, Any]]) -> None:
        """One server-side dry-run create per role (its pods differ only in names and index): every refusal,
        each naming the role's pod_template, before anything is created."""
        problems = []
        first: dict[str, Mapping[str, Any]] = {}
        for r, pod in zip(replicas, pods, strict=True):
            first.setdefault(r.role, pod)
        for role, pod in first.items():
            refusal = client.dry_run_pod(pod)
            if refusal:
                problems.append(Problem(f"{role}.pod_template", f"the API server refuses the {role} pods: {refusal}",
                                        "correct the field it names (the pod's, as the template merged into it)"))
        if problems:
            raise SpecError(problems)
        self.log.info("the API server accepts the pods of every role (dry run): %s", ", ".join(first))
