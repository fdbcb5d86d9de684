"""Setup of a TF job: validate, pre-flight the quota, create the Service (+ shards ConfigMap).

Why the first task does all checking: a bad spec or a job that cannot fit must
fail before anything exists in the cluster, permanently (no retries), naming the
field or the numbers. Creation is idempotent (409 = already there), so a retry of
setup or a cleared run converges instead of failing; if creation fails midway,
what setup created is deleted again before the error is raised.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from tfk8s_airflow.exceptions import PermanentError, QuotaExceededError
from tfk8s_airflow.job import quota
from tfk8s_airflow.job.objects import JobNames, configmap_manifest, plan_replicas, pod_manifest, service_manifest
from tfk8s_airflow.job.resolve import as_spec_input, job_record, resolve_spec
from tfk8s_airflow.k8s.client import JobClient


def launch_kwargs(spec, names: JobNames, shards) -> list[dict[str, Any]]:
    """One KubernetesPodOperator kwargs dict per replica, in TF_CONFIG order (for expand_kwargs)."""
    return [{"pod_template_dict": pod_manifest(spec, names, replica)}
            for replica in plan_replicas(spec, names, shards)]


def normalize_shards(shards: Any) -> Mapping[str, Sequence[str]] | None:
    """Accept a {"worker-0": [...]} mapping or a staging result holding one under 'shards'."""
    if shards in (None, "", {}):
        return None
    if isinstance(shards, Mapping) and "shards" in shards and isinstance(shards["shards"], Mapping):
        shards = shards["shards"]
    if not isinstance(shards, Mapping):
        raise AirflowFailException(f"shards must be a mapping like {{'worker-0': [paths]}}, got "
                                   f"{type(shards).__name__} (fix: pass the staging task's output)")
    return {str(k): [str(p) for p in val] for k, val in shards.items()}


class TFJobSetupOperator(BaseOperator):
    """Validates the spec and creates the job's headless Service and shard ConfigMap.

    Returns the launch kwargs of every replica (the launch task maps over them)
    and pushes the job record (names, policy, spec) under the XCom key ``job``.

    :param spec: TFJobSpec, dict (templated), or a YAML/JSON path or text.
    :param shards: shard assignments ``{"worker-0": [...]}`` or a staging task's output.
    :param overrides: dict merged into the spec, e.g. ``{"worker": {"replicas": "{{ params.workers }}"}}``.
    :param job_group: the group the names derive from (default: the task group id).
    :param check_quota: sum the job's requests against the namespace's ResourceQuotas first.
    """

    template_fields: Sequence[str] = ("spec", "shards", "overrides")
    template_ext: Sequence[str] = ()
    ui_color = "#ffe8b3"

    def __init__(self, *, spec: Any, shards: Any = None, overrides: Mapping[str, Any] | None = None,
                 kubernetes_conn_id: str = "kubernetes_default", job_group: str | None = None,
                 max_replicas: int | None = None, check_quota: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = as_spec_input(spec)
        self.shards = shards
        self.overrides = overrides or {}
        self.kubernetes_conn_id = kubernetes_conn_id
        self.job_group = job_group
        self.max_replicas = max_replicas
        self.check_quota = check_quota

    def execute(self, context: Any) -> list[dict[str, Any]]:
        dag = context["dag"]
        base_dir = os.path.dirname(dag.fileloc) if getattr(dag, "fileloc", None) else None
        try:
            spec = resolve_spec(self.spec, base_dir=base_dir, max_replicas=self.max_replicas,
                                overrides=self.overrides)
        except PermanentError as exc:
            raise AirflowFailException(str(exc)) from exc
        shards = normalize_shards(self.shards)
        group = self.job_group if self.job_group is not None else (
            self.task_group.group_id if self.task_group and self.task_group.group_id else "")
        names = JobNames.for_run(spec, context["run_id"], group or "", dag.dag_id)
        self.log.info("TF job %s in namespace %s: %s", names.job, names.namespace,
                      ", ".join(f"{r.role}={r.replicas}" for r in spec.active_roles))
        client = JobClient.from_conn(self.kubernetes_conn_id)
        if spec.service_account and not client.service_account_exists(names.namespace, spec.service_account):
            raise AirflowFailException(
                f"service_account: {spec.service_account!r} does not exist in namespace {names.namespace}; "
                "nothing was created (fix: create the ServiceAccount or remove service_account)")
        if self.check_quota:
            problems = quota.check(spec, client.resource_quotas(names.namespace))
            if problems:
                raise AirflowFailException(str(QuotaExceededError(
                    f"job {names.job} does not fit the quota of namespace {names.namespace}; nothing "
                    "was created:\n  - " + "\n  - ".join(problems))))
        objs = [service_manifest(spec, names)]
        if shards is not None:
            objs.append(configmap_manifest(spec, names, shards))
        created: list[dict[str, Any]] = []
        try:
            for obj in objs:
                if client.create_if_absent(obj):
                    created.append(obj)
                    self.log.info("created %s %s", obj["kind"], obj["metadata"]["name"])
                else:
                    self.log.info("%s %s already exists (retry or cleared run): reused",
                                  obj["kind"], obj["metadata"]["name"])
        except Exception:
            if created:  # leave nothing half-made behind
                client.delete_job_objects(names.namespace, names.selector)
            raise
        record = job_record(spec, names)
        record["shards"] = bool(shards)
        context["ti"].xcom_push(key="job", value=record)
        return launch_kwargs(spec, names, shards)
