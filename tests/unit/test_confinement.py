"""AppArmor (both forms), SELinux options and volume kinds past the cluster's claims, under the deployment's policy.

Before: ``container.apparmor.security.beta.kubernetes.io/tensorflow: unconfined`` passed
``restricted_security_context`` (the API server turns it into the container's Unconfined profile:
tests/security/test_confinement_dry_run.py), SELinux options were not looked at, and ``csi`` inline
and ``nfs`` volumes passed the policy.
"""
from __future__ import annotations

import copy

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import TFJobSpec, parse_spec

BASE = {"name": "conf", "image": "tfk8s/trainer:0.1", "ps": 1, "worker": 2}
UNCONFINED = {"container.apparmor.security.beta.kubernetes.io/tensorflow": "unconfined"}


def refused(doc, policy=None) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        parse_spec({**copy.deepcopy(BASE), **copy.deepcopy(doc)}, policy=policy or DeploymentPolicy())
    return {p.field: str(p) for p in err.value.problems}


def admitted(doc, policy=None) -> TFJobSpec:
    return parse_spec({**copy.deepcopy(BASE), **copy.deepcopy(doc)}, policy=policy or DeploymentPolicy())


@pytest.mark.parametrize(("doc", "fld"), [
    ({"annotations": UNCONFINED}, "annotations[container.apparmor.security.beta.kubernetes.io/tensorflow]"),
    ({"worker": {"replicas": 1, "annotations": UNCONFINED}},
     "worker.annotations[container.apparmor.security.beta.kubernetes.io/tensorflow]"),
    ({"pod_template": {"metadata": {"annotations": UNCONFINED}}},
     "pod_template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/tensorflow]"),
    ({"pod_template": {"spec": {"containers": [{"name": "tensorflow", "securityContext": {
        "appArmorProfile": {"type": "Unconfined"}}}]}}},
     "pod_template.spec.containers[tensorflow].securityContext.appArmorProfile.type"),
    ({"pod_template": {"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}}},
     "pod_template.spec.securityContext.appArmorProfile.type"),
])
def test_apparmor_unconfined_is_refused_in_both_forms(doc, fld):
    problems = refused(doc)
    assert fld in problems, problems
    assert "restricted_security_context = false" in problems[fld]
    admitted(doc, DeploymentPolicy(restricted_security_context=False))


@pytest.mark.parametrize("value", ["runtime/default", "localhost/tf-profile"])
def test_a_confined_apparmor_annotation_is_admitted(value):
    admitted({"annotations": {"container.apparmor.security.beta.kubernetes.io/tensorflow": value}})


@pytest.mark.parametrize("value", ["Unconfined", "localhost/", "", "runtime/default "])
def test_any_other_apparmor_annotation_is_refused(value):
    assert any("apparmor" in f for f in refused(
        {"annotations": {"container.apparmor.security.beta.kubernetes.io/tensorflow": value}}))


@pytest.mark.parametrize(("options", "key"), [({"user": "system_u"}, "user"), ({"role": "sysadm_r"}, "role"),
                                              ({"type": "spc_t"}, "type"), ({"type": "unconfined_t"}, "type")])
@pytest.mark.parametrize("where", ["pod", "container"])
def test_selinux_options_beyond_the_container_types_are_refused(options, key, where):
    sc = {"seLinuxOptions": options}
    if where == "pod":
        doc, fld = {"pod_template": {"spec": {"securityContext": sc}}}, "pod_template.spec.securityContext"
    else:
        doc = {"pod_template": {"spec": {"containers": [{"name": "tensorflow", "securityContext": sc}]}}}
        fld = "pod_template.spec.containers[tensorflow].securityContext"
    assert f"{fld}.seLinuxOptions.{key}" in refused(doc)
    admitted(doc, DeploymentPolicy(restricted_security_context=False))


def test_a_container_selinux_type_and_level_are_admitted():
    admitted({"pod_template": {"spec": {"securityContext": {"seLinuxOptions": {"type": "container_t",
                                                                               "level": "s0:c123,c456"}}}}})


@pytest.mark.parametrize(("vol", "kind"), [
    ({"name": "data", "csi": {"driver": "example.csi.k8s.io", "volumeAttributes": {"share": "x"}}}, "csi"),
    ({"name": "data", "nfs": {"server": "10.0.0.1", "path": "/"}}, "nfs"),
])
def test_volumes_past_the_cluster_claims_need_the_deployment_allowance(vol, kind):
    doc = {"pod_template": {"spec": {"volumes": [vol]}}}
    problems = refused(doc)
    assert f"pod_template.spec.volumes[data].{kind}" in problems, problems
    assert "allowed_volume_types" in problems[f"pod_template.spec.volumes[data].{kind}"]
    admitted(doc, DeploymentPolicy(allowed_volume_types=(kind,)))
    admitted(doc, DeploymentPolicy(allowed_volume_types=("*",)))


def test_the_allowance_is_a_setting():
    policy = DeploymentPolicy.from_env({"TFK8S_ALLOWED_VOLUME_TYPES": "csi, nfs"})
    assert policy.allowed_volume_types == ("csi", "nfs")
    assert DeploymentPolicy().allowed_volume_types == ()
    admitted({"pod_template": {"spec": {"volumes": [{"name": "data", "emptyDir": {}},
                                                    {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}}]}}})
