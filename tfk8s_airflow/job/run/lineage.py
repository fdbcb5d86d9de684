"""What a job tells lineage: its spec as a run facet, and the model directory it writes
(:func:`~tfk8s_airflow.job.run.resolve.model_dir`, the job record's rule).

Why a chosen part of the spec and never all of it: a lineage backend is read by more people than the
job's namespace, and the spec's ``env``, ``command``, ``args`` and ``pod_template`` may hold credentials
(a token in an argument, a password in a variable). The facet keeps what says which job ran how: names,
images, replica counts, resources, volumes, policies; of the environment only the variables' names, of a
code source its redacted URI. Pure (no Airflow): :mod:`tfk8s_airflow.lineage` wraps it in OpenLineage's
classes.
"""

from __future__ import annotations

from typing import Any

from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.run.resolve import model_dir
from tfk8s_airflow.job.spec.model import TFJobSpec
from tfk8s_airflow.redaction import redact_uri

__all__ = ["job_facet", "model_dir"]


def job_facet(spec: TFJobSpec, names: JobNames) -> dict[str, Any]:
    """The job as the ``tfk8s_job`` run facet holds it: never an environment value, a command or arguments."""
    roles = {r.role: {"replicas": r.replicas, "image": r.image, "resources": r.resources.to_dict(),
                      "env_names": sorted(r.env), "tracked": r.tracked}
             for r in spec.active_roles}
    out: dict[str, Any] = {
        "name": spec.name, "job": names.job, "namespace": names.namespace, "image": spec.image,
        "roles": roles, "volumes": [v.to_dict() for v in spec.volumes],
        "success_policy": spec.success_policy, "restart_policy": spec.restart_policy,
        "max_restarts": spec.max_restarts, "active_deadline": spec.active_deadline, "queue": spec.queue,
        "priority_class": spec.priority_class, "tf_wiring": spec.tf_wiring,
    }
    if spec.code is not None:
        out["code"] = {"uri": redact_uri(spec.code.uri), "sha256": spec.code.sha256}
    if spec.tensorboard is not None:
        out["tensorboard"] = {"log_dir": spec.tensorboard.log_dir}
    return out

