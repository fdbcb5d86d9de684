"""What an AppArmor annotation means to a real API server, and that the policy refuses the spec that asks it.

The annotation form is not a dead letter: kube-apiserver 1.30+ turns
``container.apparmor.security.beta.kubernetes.io/<c>: unconfined`` into the container's
``appArmorProfile: Unconfined`` (seen here on a dry run of the pod the spec renders without the
policy). With ``restricted_security_context`` the spec is refused before anything is created; a
``runtime/default`` annotation is admitted and its pod passes the same dry run.
"""
from __future__ import annotations

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec

pytestmark = pytest.mark.k8s

KEY = "container.apparmor.security.beta.kubernetes.io/tensorflow"


def first_pod(doc, policy):
    spec = parse_spec(doc, policy=policy)
    return plan_job(spec, JobNames.for_run(spec, "aa"), policy).pods[0]


def test_an_unconfined_apparmor_annotation_is_what_the_api_server_runs_and_the_policy_refuses(k8s_cluster,
                                                                                              k8s_namespace):
    core = k8s_cluster.core_v1
    doc = {"name": "aa", "namespace": k8s_namespace, "image": "tfk8s/trainer:0.1", "worker": 1,
           "annotations": {KEY: "unconfined"}}
    open_policy = DeploymentPolicy(restricted_security_context=False)
    pod = core.create_namespaced_pod(k8s_namespace, first_pod(doc, open_policy), dry_run="All")
    container = next(c for c in pod.spec.containers if c.name == "tensorflow")
    assert container.security_context.app_armor_profile.type == "Unconfined"
    with pytest.raises(SpecError) as err:
        parse_spec(doc, policy=DeploymentPolicy())
    assert [p.field for p in err.value.problems] == [f"annotations[{KEY}]"]
    confined = {**doc, "annotations": {KEY: "runtime/default"}}
    pod = core.create_namespaced_pod(k8s_namespace, first_pod(confined, DeploymentPolicy()), dry_run="All")
    container = next(c for c in pod.spec.containers if c.name == "tensorflow")
    assert container.security_context.app_armor_profile.type == "RuntimeDefault"
