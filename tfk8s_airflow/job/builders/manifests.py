"""Every object of one job, in the order setup creates them: the builders of ``objects`` and
``tensorboard`` side by side (``tensorboard`` builds on ``objects``, so their sum lives above both)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfk8s_airflow.job.builders.objects import (
    JobNames,
    configmap_manifest,
    plan_replicas,
    pod_manifest,
    service_manifest,
)
from tfk8s_airflow.job.builders.tensorboard import plan_tensorboard, tensorboard_manifest
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import TFJobSpec

__all__ = ["job_manifests"]


def job_manifests(spec: TFJobSpec, names: JobNames, shards: Mapping[str, Sequence[str]] | None = None,
                  policy: DeploymentPolicy | None = None) -> list[dict[str, Any]]:
    """Service, then the ConfigMap (when shards are given), one Pod per replica, then the
    TensorBoard pod (when the spec has ``tensorboard``)."""
    objs = [service_manifest(spec, names)]
    if shards is not None:
        objs.append(configmap_manifest(spec, names, shards))
    objs += [pod_manifest(spec, names, r) for r in plan_replicas(spec, names, shards, policy)]
    tensorboard = plan_tensorboard(spec, names, policy)
    if tensorboard is not None:
        objs.append(tensorboard_manifest(tensorboard, names))
    return objs
