"""Resolving a spec given to an operator, and the job record that travels in XCom.

Why: one DAG serves the schedule, the UI form and backfills, so the spec may be
a TFJobSpec, a dict with Jinja in it, a YAML/JSON file path or text, or what
``{{ params }}``/``{{ dag_run.conf }}`` rendered. Everything becomes a validated
TFJobSpec here, in ``execute()``, and a job record (names, replica plan, policy) is what
the replica tasks, the sensor and teardown read back: they never re-derive names.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfk8s_airflow.contract import LOGS_VOLUME, MODEL_VOLUME
from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job import naming
from tfk8s_airflow.job.builders.objects import JobNames, Replica
from tfk8s_airflow.job.defaults import max_replicas as limit_in_force
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.policy.tensorboard_url import static_url
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import JobRecord, ReplicaRef
from tfk8s_airflow.job.run.recovery_policy import RecoveryPolicy
from tfk8s_airflow.job.spec import TFJobSpec, parse_spec, parse_spec_file
from tfk8s_airflow.job.spec.document import load_yaml


def as_spec_input(spec: Any) -> Any:
    """What an operator stores at parse time: TFJobSpec becomes plain (templatable) data."""
    return spec.to_dict() if isinstance(spec, TFJobSpec) else spec


def resolve_spec(value: Any, *, base_dir: str | None = None, max_replicas: int | None = None,
                 overrides: Mapping[str, Any] | None = None, policy: DeploymentPolicy | None = None) -> TFJobSpec:
    """Any accepted form of a spec, validated, and admitted by ``policy`` when given. Raises SpecError."""
    if max_replicas is None:
        max_replicas = limit_in_force()
    if isinstance(value, TFJobSpec):
        data: Any = value.to_dict()
    elif isinstance(value, str):
        text = value.strip()
        path = Path(text) if len(text) < 4096 and "\n" not in text else None
        if path is not None and path.suffix in (".yaml", ".yml", ".json"):
            if not path.is_absolute() and base_dir:
                path = Path(base_dir) / path
            if not path.is_file():
                raise SpecError(Problem("spec", f"spec file {path} does not exist",
                                        "give an absolute path or one relative to the DAG file"))
            return parse_spec_file(path, max_replicas=max_replicas, overrides=_flatten(overrides),
                                   policy=policy)
        data = load_yaml(text, "spec")
    else:
        data = value
    if not isinstance(data, Mapping):
        raise SpecError(Problem("spec", f"must be a mapping, got {type(data).__name__}",
                                "pass a TFJobSpec, a dict, or a YAML/JSON file path"))
    return parse_spec(data, max_replicas=max_replicas, overrides=_flatten(overrides), policy=policy)


def _flatten(overrides: Mapping[str, Any] | None, prefix: str = "") -> list[str]:
    """{"worker": {"replicas": 4}} -> ["worker.replicas=4"] for apply_overrides."""
    out: list[str] = []
    for key, val in (overrides or {}).items():
        if isinstance(val, Mapping) and val:
            out += _flatten(val, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}={json.dumps(val)}")
    return out


def model_dir(spec: TFJobSpec) -> str | None:
    """Where the job writes its model: the host path of its ``model`` volume (with its ``sub_path``), or None.
    The chief's checkpoints are read there (progress), and lineage names it as the job's output."""
    model = next((v for v in spec.volumes if v.name == MODEL_VOLUME and v.host_path), None)
    if model is None or not model.host_path:
        return None
    return f"{model.host_path.rstrip('/')}/{model.sub_path}" if model.sub_path else model.host_path


def job_record(spec: TFJobSpec, names: JobNames, replicas: Sequence[Replica], *, policy: JobPolicy,
               has_shards: bool, kubernetes_conn_id: str | None, poll_interval: float,
               created_at: float | None = None, tensorboard_url: str | None = None,
               log_dir: str | None = None, templates_digest: str | None = None,
               queue: str | None = None, uids: Mapping[str, str] | None = None,
               service_uid: str | None = None) -> JobRecord:
    """The XCom record of one job run: names, the replica plan (in map-index order), the policy.

    ``tensorboard_url``: the deployment's template (``[tfk8s] tensorboard_url``), kept with what is
    known now filled in, when the spec has a TensorBoard. ``log_dir``: the job's log directory
    (the DAG's ``archive_dir``); default: the ``logs`` volume's host path. ``queue``: the Kueue LocalQueue
    the pods were submitted to (the spec's, else the deployment's default_queue). ``uids``: each pod's UID by
    name, from setup's creation responses; ``service_uid``: the job's Service's (the owner of the rest).
    """
    log_dir = log_dir or next((v.host_path for v in spec.volumes if v.name == LOGS_VOLUME and v.host_path), None)
    tb = spec.tensorboard
    return JobRecord(
        job=names.job, namespace=names.namespace, service=names.service, configmap=names.configmap,
        selector=names.selector, policy=policy,
        replicas=tuple(ReplicaRef(key=f"{r.role}-{r.index}", role=r.role, index=r.index, pod=r.pod_name,
                                  tracked=r.tracked, uid=(uids or {}).get(r.pod_name) or None) for r in replicas),
        created_at=time.time() if created_at is None else created_at, has_shards=has_shards,
        log_dir=log_dir, identity=dict(names.identity), kubernetes_conn_id=kubernetes_conn_id,
        poll_interval=poll_interval, templates=naming.templates_name(names.job), templates_digest=templates_digest,
        recovery=RecoveryPolicy.from_spec(spec), model_dir=model_dir(spec),
        tensorboard_pod=naming.tensorboard_pod_name(names.job) if tb else None,
        tensorboard_port=tb.port if tb else None,
        tensorboard_url=static_url(tensorboard_url, names.job, names.namespace, names.service, tb.port) if tb else None,
        clean_pod_policy=spec.clean_pod_policy, finished_pod_ttl=spec.finished_pod_ttl, queue=queue,
        service_uid=service_uid)
