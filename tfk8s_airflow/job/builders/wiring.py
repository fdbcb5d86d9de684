"""TensorFlow wiring: the cluster spec, TF_CONFIG and the legacy flags.

Why TFJob's exact format: programs written for Kubeflow's TFJob read
``TF_CONFIG`` = ``{"cluster": ..., "task": {"type", "index"}, "environment": "cloud"}``
and must run unchanged. Peer addresses use the job's headless Service
(``<role>-<i>.<service>.<namespace>.svc:<port>``), which publishes DNS before
pods are Ready, so workers do not crash on unresolvable peers at start-up.
Older programs (the tensorflow/ecosystem template) take
``--ps_hosts --worker_hosts --job_name --task_index`` instead; ``flags`` gives them that.

The chief is ``chief`` in TF_CONFIG unless the spec's ``chief_name`` is ``master``: TFJob
names each role after its replica type, lowercased, and programs written for a ``Master``
replica look for ``master``. The cluster's roles are in TFJob's order (its JSON encoder
sorts them by name), each role's addresses in index order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from tfk8s_airflow.job.naming import replica_hostname
from tfk8s_airflow.job.spec import ROLES, TFJobSpec


def replica_address(role: str, index: int, service: str, namespace: str, port: int) -> str:
    return f"{replica_hostname(role, index)}.{service}.{namespace}.svc:{port}"


def task_type(spec: TFJobSpec, role: str) -> str:
    """A role's name in TF_CONFIG and the flags (the chief's is the spec's ``chief_name``)."""
    return spec.chief_name if role == "chief" else role


def cluster_spec(spec: TFJobSpec, service: str, *, include_evaluator: bool = True) -> dict[str, list[str]]:
    """TF_CONFIG role -> peer addresses in index order, roles sorted by name, empty roles omitted."""
    out: dict[str, list[str]] = {}
    for role in ROLES:
        n = spec.replicas(role)
        if n <= 0 or (role == "evaluator" and not include_evaluator):
            continue
        out[task_type(spec, role)] = [replica_address(role, i, service, spec.namespace, spec.port)
                                      for i in range(n)]
    return dict(sorted(out.items()))


def tf_config_dict(spec: TFJobSpec, service: str, role: str, index: int,
                   cluster: Mapping[str, list[str]] | None = None) -> dict:
    """TF_CONFIG for one replica.

    With ``hide_evaluator`` the evaluator is left out of every replica's cluster,
    its own included: a TF2 ParameterServerStrategy coordinator hangs on an
    evaluator in its cluster (kubeflow/training-operator#1213), and TensorFlow's
    sidecar evaluator expects a cluster without itself.
    """
    if cluster is None:
        cluster = cluster_spec(spec, service, include_evaluator=not spec.hide_evaluator)
    return {"cluster": dict(cluster), "task": {"type": task_type(spec, role), "index": index},
            "environment": "cloud"}


def tf_config_json(spec: TFJobSpec, service: str, role: str, index: int,
                   cluster: Mapping[str, list[str]] | None = None) -> str:
    return json.dumps(tf_config_dict(spec, service, role, index, cluster), separators=(",", ":"))


def legacy_flags(spec: TFJobSpec, service: str, role: str, index: int) -> list[str]:
    """``--ps_hosts --worker_hosts --job_name --task_index`` for pre-TF_CONFIG programs.

    The tensorflow/ecosystem template knew only PS and workers; a chief is passed
    as ``--chief_hosts`` (``--master_hosts`` with ``chief_name: master``) so programs that
    want it can have it.
    """
    cluster = cluster_spec(spec, service, include_evaluator=False)
    flags = []
    for r in (spec.chief_name, "ps", "worker"):
        if r in cluster or r != spec.chief_name:
            flags.append(f"--{r}_hosts={','.join(cluster.get(r, []))}")
    flags += [f"--job_name={task_type(spec, role)}", f"--task_index={index}"]
    return flags
