"""The job's NetworkPolicy: its pods reach each other's TensorFlow ports, nothing else reaches them.

Why: a TensorFlow gRPC server (``tf.distribute.Server``) serves any client that connects, and
what a client may ask it is everything the server may do: ``tf.io.read_file("/proc/self/environ")``
run on ``/job:ps/task:0`` reads its environment (Secrets fed through ``env`` among it) and writes
files as it. So setup creates, with the job, a NetworkPolicy selecting the job's pods
(``tfk8s.io/job``) that admits ingress only

* from the job's own pods, to the TensorFlow port and the ports its pod templates add;
* to the TensorBoard port (when the job has one), from the job's pods and from where the
  deployment's ``[tfk8s] tensorboard_ingress`` says (CIDRs, or ``namespace:<name>``).

It is owned by the job's Service, like everything of the job, and goes with it. Egress is not
restricted. Enforced only where the cluster's network plugin enforces NetworkPolicies
(docs/security.md says how to widen it and what is not proven here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfk8s_airflow.contract import LABEL_JOB
from tfk8s_airflow.job import naming
from tfk8s_airflow.job.builders.objects import JobNames, job_labels
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import TFJobSpec

__all__ = ["network_policy_manifest"]

_NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace


def _peer(source: str) -> dict[str, Any]:
    if source.startswith("namespace:"):
        return {"namespaceSelector": {"matchLabels": {_NAMESPACE_NAME_LABEL: source[len("namespace:"):]}}}
    return {"ipBlock": {"cidr": source}}


def network_policy_manifest(spec: TFJobSpec, names: JobNames, policy: DeploymentPolicy,
                            pods: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The job's NetworkPolicy. ``pods``: the job's pods as built (their template ports are admitted
    between the job's pods too)."""
    job = {"podSelector": {"matchLabels": {LABEL_JOB: names.job}}}
    ports = {(spec.port, "TCP")}
    for pod in pods:
        for c in pod.get("spec", {}).get("containers") or ():
            for p in c.get("ports") or ():
                if isinstance(p.get("containerPort"), int):
                    ports.add((p["containerPort"], p.get("protocol") or "TCP"))
    rules: list[dict[str, Any]] = [{"from": [job], "ports": [{"port": n, "protocol": proto}
                                                             for n, proto in sorted(ports)]}]
    if spec.tensorboard is not None:
        rules.append({"from": [job, *(_peer(s) for s in policy.tensorboard_ingress)],
                      "ports": [{"port": spec.tensorboard.port, "protocol": "TCP"}]})
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": naming.network_policy_name(names.job), "namespace": names.namespace,
                     "labels": job_labels(spec, names)},
        "spec": {"podSelector": {"matchLabels": {LABEL_JOB: names.job}}, "policyTypes": ["Ingress"],
                 "ingress": rules},
    }
