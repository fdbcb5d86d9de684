"""The deployment's policy: settings, what it refuses (naming the field and the setting), what pods get."""
import os

import kubernetes_validate
import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml
from tfk8s_airflow.job.policy import DEFAULT_GLUSTER_MOUNT, DeploymentPolicy
from tfk8s_airflow.job.run.resolve import resolve_spec
from tfk8s_airflow.job.spec import parse_spec

MINIMAL = {"name": "job", "image": "tfk8s/trainer:0.1", "worker": 1}
DEFAULT = DeploymentPolicy()


def refusals(doc, policy=DEFAULT):
    with pytest.raises(SpecError) as info:
        parse_spec({**MINIMAL, **doc}, policy=policy)
    return {p.field: str(p) for p in info.value.problems}


def test_defaults():
    assert DEFAULT.allowed_host_paths == (DEFAULT_GLUSTER_MOUNT,)
    assert DEFAULT.allowed_service_accounts == () and DEFAULT.allowed_secrets == ()
    assert not DEFAULT.allow_service_account_token and DEFAULT.restricted_security_context
    assert not DEFAULT.run_as_non_root and DEFAULT.default_active_deadline == 86400
    assert DeploymentPolicy.from_env({}) == DEFAULT


def test_settings_from_the_environment():
    policy = DeploymentPolicy.from_env({
        "TFK8S_GLUSTER_MOUNT": "/mnt/vol/", "TFK8S_ROOT": "/srv/tfk8s", "TFK8S_ALLOWED_SERVICE_ACCOUNTS": "a, b",
        "TFK8S_ALLOWED_SECRETS": "*", "TFK8S_ALLOW_SERVICE_ACCOUNT_TOKEN": "yes", "TFK8S_RUN_AS_NON_ROOT": "true",
        "TFK8S_RESTRICTED_SECURITY_CONTEXT": "0", "TFK8S_DEFAULT_ACTIVE_DEADLINE": "2h"})
    assert policy.allowed_host_paths == ("/mnt/vol", "/srv/tfk8s")  # the volume and the DAGs' root
    assert policy.allowed_service_accounts == ("a", "b") and policy.allowed_secrets == ("*",)
    assert policy.allow_service_account_token and policy.run_as_non_root and not policy.restricted_security_context
    assert policy.default_active_deadline == 7200
    explicit = DeploymentPolicy.from_env({"TFK8S_ALLOWED_HOST_PATHS": "/data,/models", "TFK8S_ROOT": "/srv"})
    assert explicit.allowed_host_paths == ("/data", "/models")


@pytest.mark.parametrize("name,value,text", [
    ("ALLOWED_HOST_PATHS", "/", "whole file system"),
    ("ALLOWED_HOST_PATHS", "/mnt/a,relative", "absolute path"),
    ("ALLOWED_HOST_PATHS", "/mnt/../etc", "without '..'"),
    ("RUN_AS_NON_ROOT", "maybe", "true or false"),
    ("DEFAULT_ACTIVE_DEADLINE", "forever", "positive duration"),
    ("DEFAULT_ACTIVE_DEADLINE", "99999999999", "positive duration"),
])
def test_bad_settings_name_the_setting(name, value, text):
    with pytest.raises(SpecError) as info:
        DeploymentPolicy.from_env({f"TFK8S_{name}": value})
    assert info.value.fields == (f"[tfk8s] {name.lower()}",) and text in str(info.value)


def test_host_paths_outside_the_allowed_ones_are_refused_naming_field_and_setting():
    got = refusals({"volumes": [{"name": "root", "mount_path": "/host", "host_path": "/"},
                                {"name": "etc", "mount_path": "/etc2", "host_path": "/etc"},
                                {"name": "near", "mount_path": "/n", "host_path": "/mnt/tfk8s-glusterfs"},
                                {"name": "ok", "mount_path": "/ok", "host_path": "/mnt/tfk8s-gluster/data"},
                                {"name": "top", "mount_path": "/top", "host_path": "/mnt/tfk8s-gluster"}]})
    assert set(got) == {"volumes[0].host_path", "volumes[1].host_path", "volumes[2].host_path"}
    assert "/ is the node's whole file system" in got["volumes[0].host_path"]
    assert got["volumes[1].host_path"] == (
        "volumes[1].host_path: '/etc' is outside the allowed host paths /mnt/tfk8s-gluster (fix: use a path under "
        "them, or an administrator adds it to [tfk8s] allowed_host_paths (or AIRFLOW__TFK8S__ALLOWED_HOST_PATHS))")


def test_a_symbolic_link_out_of_the_allowed_paths_is_refused(tmp_path):
    root = tmp_path / "vol"
    (root / "data").mkdir(parents=True)
    (root / "escape").symlink_to("/etc")
    policy = DeploymentPolicy(allowed_host_paths=(str(root),))
    ok = parse_spec({**MINIMAL, "volumes": [{"name": "d", "mount_path": "/d", "host_path": f"{root}/data"}]},
                             policy=policy)
    assert ok.volumes[0].host_path == f"{root}/data"
    got = refusals({"volumes": [{"name": "d", "mount_path": "/d", "host_path": f"{root}/escape/ssl"}]}, policy)
    assert "resolves (through a symbolic link) to '/etc/ssl'" in got["volumes[0].host_path"]


def test_service_accounts_and_their_token():
    got = refusals({"service_account": "tf-trainer", "automount_service_account_token": True})
    assert "tf-trainer is not among the allowed ServiceAccounts (none" in got["service_account"]
    assert "[tfk8s] allowed_service_accounts" in got["service_account"]
    assert "[tfk8s] allow_service_account_token" in got["automount_service_account_token"]
    parse_spec({**MINIMAL, "service_account": "default"}, policy=DEFAULT)
    policy = DeploymentPolicy(allowed_service_accounts=("tf-trainer",), allow_service_account_token=True)
    spec = parse_spec({**MINIMAL, "service_account": "tf-trainer", "automount_service_account_token": True},
                               policy=policy)
    assert all(r.automount_service_account_token for r in plan_replicas(spec, JobNames.for_run(spec), policy=policy))
    assert not any(r.automount_service_account_token for r in plan_replicas(spec, JobNames.for_run(spec)))
    assert parse_spec({**MINIMAL, "service_account": "x"}, policy=DeploymentPolicy(
        allowed_service_accounts=("*",))).service_account == "x"


def test_secrets_are_bounded_wherever_the_spec_reads_them():
    doc = {"env": {"A": {"value_from": {"secret_key_ref": {"name": "db", "key": "k"}}}},
           "env_from": [{"secret_ref": "shared"}, {"config_map_ref": "cfg"}],
           "volumes": [{"name": "c", "mount_path": "/c", "secret": "creds"}],
           "worker": {"replicas": 1, "env": {"B": {"value_from": {"secret_key_ref": {"name": "other", "key": "k"}}}},
                      "env_from": [{"secret_ref": "mine"}]}}
    got = refusals(doc)
    assert set(got) == {"env.A.value_from.secret_key_ref.name", "env_from[0].secret_ref", "volumes[0].secret",
                        "worker.env.B.value_from.secret_key_ref.name", "worker.env_from[0].secret_ref"}
    assert "Secret db is not among the allowed secrets (none)" in got["env.A.value_from.secret_key_ref.name"]
    assert "[tfk8s] allowed_secrets" in got["volumes[0].secret"]
    partly = DeploymentPolicy(allowed_secrets=("db", "shared", "creds", "other"))
    assert set(refusals(doc, partly)) == {"worker.env_from[0].secret_ref"}
    parse_spec({**MINIMAL, **doc}, policy=DeploymentPolicy(allowed_secrets=("*",)))


@pytest.mark.parametrize("policy,pod,container", [
    (DEFAULT, {"seccompProfile": {"type": "RuntimeDefault"}},
     {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}),
    (DeploymentPolicy(run_as_non_root=True), {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
     {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}),
    (DeploymentPolicy(restricted_security_context=False), None, None),
])
def test_every_pod_and_container_gets_the_policy_security_context(policy, pod, container):
    spec = parse_spec({**MINIMAL, "ps": 1, "code": {"uri": "https://h/a.tgz", "sha256": "a" * 64}})
    names = JobNames.for_run(spec, "r")
    plan = plan_job(spec, names, policy)
    objs = plan.objects()
    for p in plan.pods:
        assert p["spec"].get("securityContext") == pod
        assert p["spec"]["automountServiceAccountToken"] is False
        assert p["spec"]["activeDeadlineSeconds"] == policy.default_active_deadline
        for c in p["spec"]["containers"] + p["spec"]["initContainers"]:
            assert c.get("securityContext") == container
        kubernetes_validate.validate(p, "1.37.0", strict=True)
    assert parse_yaml(render_yaml(plan)) == objs  # render prints them


def test_resolve_spec_admits_through_the_policy(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("name: job\nimage: tfk8s/trainer:0.1\nworker: 1\nservice_account: tf-trainer\n")
    assert resolve_spec(str(path)).service_account == "tf-trainer"  # no policy: the spec alone
    with pytest.raises(SpecError, match="allowed_service_accounts"):
        resolve_spec(str(path), policy=DEFAULT)
    with pytest.raises(SpecError, match="allowed_service_accounts"):
        resolve_spec(path.read_text(), policy=DEFAULT)
    assert os.path.isabs(DEFAULT.allowed_host_paths[0])
