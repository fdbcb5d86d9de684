"""The one pod admission (job/builders/admission.py), Secrets by namespace, and recovery state read back bounded."""
import json

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.admission import admit_pod, pod_problems
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.run.records import JobRecord, ReplicaRef
from tfk8s_airflow.job.run.recovery_policy import RecoveryPolicy
from tfk8s_airflow.job.run.recoverystate import read_attempts
from tfk8s_airflow.job.spec import parse_spec

GLUSTER = "/mnt/tfk8s-gluster"


def _pods(doc, policy):
    spec = parse_spec({"name": "j", "image": "i", "worker": 1, **doc})
    return [o for o in plan_job(spec, JobNames.for_run(spec, "r", "g", "d"), policy).objects() if o["kind"] == "Pod"]


def test_every_pod_the_builders_make_passes_the_admission_of_its_policy():
    for policy in (DeploymentPolicy(), DeploymentPolicy(run_as_non_root=True)):
        for pod in _pods({"ps": 1, "tensorboard": {"log_dir": "/m"},
                          "volumes": [{"name": "m", "mount_path": "/m", "host_path": f"{GLUSTER}/m"}]}, policy):
            assert pod_problems(pod, policy) == []


def test_read_only_host_paths_are_mounted_read_only_by_every_container_sidecars_included(tmp_path):
    # A real tree: with read-only roots set, host paths are walked on this machine (fail closed where unseen).
    gluster = str(tmp_path)
    (tmp_path / "serving" / "v1").mkdir(parents=True)
    policy = DeploymentPolicy(allowed_host_paths=(gluster,), read_only_host_paths=(f"{gluster}/serving",))
    # The pods as a plan without the read-only root makes them (writable mounts), admitted under the policy with it.
    (pod,) = _pods({"volumes": [{"name": "s", "mount_path": "/s", "host_path": f"{gluster}/serving/v1"}],
                    "pod_template": {"spec": {"containers": [
                        {"name": "side", "image": "x", "volumeMounts": [{"name": "s", "mountPath": "/w"}]}]}}},
                   DeploymentPolicy(allowed_host_paths=(gluster,)))
    assert not any(m.get("readOnly") for c in pod["spec"]["containers"] for m in c.get("volumeMounts", [])
                   if m["name"] == "s")
    admitted = admit_pod(pod, policy)
    mounts = [m for c in admitted["spec"]["containers"] for m in c.get("volumeMounts", []) if m["name"] == "s"]
    assert len(mounts) == 2 and all(m["readOnly"] for m in mounts)
    # A writable mount of the directory above it would write into it: refused.
    (above,) = _pods({"volumes": [{"name": "all", "mount_path": "/all", "host_path": gluster}]},
                     DeploymentPolicy(allowed_host_paths=(gluster,)))
    with pytest.raises(SpecError) as info:
        admit_pod(above, policy)
    assert "volumeMounts[all]" in str(info.value) and "read-only" in str(info.value)
    assert DeploymentPolicy.from_env({"TFK8S_READ_ONLY_HOST_PATHS": "/srv/a"}).read_only_host_paths == ("/srv/a",)


def test_the_admission_takes_the_pod_as_it_is_no_default_merged_in():
    policy = DeploymentPolicy()
    (pod,) = _pods({}, policy)
    del pod["spec"]["containers"][0]["securityContext"]
    pod["spec"]["automountServiceAccountToken"] = None
    pod["spec"]["serviceAccountName"] = "tf-admin"
    fields = {p.field for p in pod_problems(pod, policy)}
    assert {"pod: spec.automountServiceAccountToken", "pod: spec.serviceAccountName",
            "pod: spec.containers[tensorflow].securityContext.allowPrivilegeEscalation",
            "pod: spec.containers[tensorflow].securityContext.capabilities.drop"} <= fields


@pytest.mark.parametrize("allowed,namespace,secret,ok", [
    (("db",), "default", "db", True),
    (("db",), "team-a", "db", False),  # a plain name is the default namespace's only
    (("*",), "team-a", "db", False),
    (("team-a/db",), "team-a", "db", True),
    (("team-a/db",), "default", "db", False),
    (("team-a/*",), "team-a", "anything", True),
    (("team-a/*",), "team-b", "anything", False),
])
def test_secrets_by_namespace(allowed, namespace, secret, ok):
    policy = DeploymentPolicy(allowed_secrets=allowed)
    assert policy.secret_allowed(namespace, secret) is ok
    doc = {"name": "j", "image": "i", "worker": 1, "namespace": namespace,
           "env": {"P": {"value_from": {"secret_key_ref": {"name": secret, "key": "k"}}}}}
    if ok:
        parse_spec(doc, policy=policy)
    else:
        with pytest.raises(SpecError) as info:
            parse_spec(doc, policy=policy)
        assert f"{namespace}/{secret}" in str(info.value) or namespace == "default"


def test_secret_settings_are_checked():
    assert DeploymentPolicy.from_env({"TFK8S_ALLOWED_SECRETS": "db, ml/creds, ml/*"}).allowed_secrets == \
        ("db", "ml/creds", "ml/*")
    with pytest.raises(SpecError):
        DeploymentPolicy.from_env({"TFK8S_ALLOWED_SECRETS": "Bad_NS/x"})


def _record(recovery):
    return JobRecord(job="j", namespace="ns", service="j", configmap="j-shards", selector="tfk8s.io/job=j",
                     policy={}, replicas=(ReplicaRef("worker-0", "worker", 0, "j-worker-0", True),), created_at=0.0,
                     recovery=RecoveryPolicy.from_dict(recovery))


def test_recovery_state_read_back_from_the_service_is_bounded():
    rec = _record({"oom_memory_factor": 2.0, "max_memory": 8 * 2**30})
    ok = json.dumps({"attempts": [{"number": 2, "failure_class": "oom", "reason": "OOMKilled", "at": 1.0,
                                   "action": "replace", "replicas": ["worker-0"]}],
                     "overrides": {"worker-0": {"memory": 4 * 2**30, "avoid_nodes": ["node-1"]}}})
    attempts, overrides = read_attempts(ok, rec)
    assert attempts[0].number == 2 and overrides == {"worker-0": {"memory": 4 * 2**30, "avoid_nodes": ["node-1"]}}
    for bad in ({"overrides": {"worker-0": {"memory": 1e15}}},
                {"overrides": {"ps-7": {"memory": 1}}},
                {"overrides": {"worker-0": {"image": "x"}}},
                {"attempts": [{"number": "two"}]},
                {"attempts": [{"number": 2, "replicas": ["someone-else"]}]},
                {"attempts": [{"number": 3}, {"number": 2}]},
                {"attempts": [{"number": n} for n in range(2, 1100)]}):
        with pytest.raises(ValueError):
            read_attempts(json.dumps(bad), rec)
    with pytest.raises(ValueError):
        read_attempts('{"overrides": {"worker-0": {"memory": Infinity}}}', rec)
    with pytest.raises(ValueError):  # no oom_memory_factor: no memory is ever overridden
        read_attempts(json.dumps({"overrides": {"worker-0": {"memory": 2**30}}}), _record({}))
    assert read_attempts(None, rec) == ([], {})


def test_the_network_policy_admits_the_jobs_pods_and_tensorboard_from_where_the_deployment_says():
    from tfk8s_airflow.job.builders.network import network_policy_manifest

    spec = parse_spec({"name": "j", "image": "i", "worker": 1, "ps": 1, "tensorboard": {"log_dir": "/m"},
                                "volumes": [{"name": "m", "mount_path": "/m", "host_path": f"{GLUSTER}/m"}]})
    names = JobNames.for_run(spec, "r", "g", "d")
    policy = DeploymentPolicy.from_env({"TFK8S_TENSORBOARD_INGRESS": "10.1.2.3/16, namespace:proxy"})
    assert policy.tensorboard_ingress == ("10.1.0.0/16", "namespace:proxy")
    np = network_policy_manifest(spec, names, policy)
    job = {"podSelector": {"matchLabels": {"tfk8s.io/job": names.job}}}
    assert np["spec"]["podSelector"] == job["podSelector"] and np["spec"]["policyTypes"] == ["Ingress"]
    tf, tb = np["spec"]["ingress"]
    assert tf == {"from": [job], "ports": [{"port": 2222, "protocol": "TCP"}]}
    assert tb["from"] == [job, {"ipBlock": {"cidr": "10.1.0.0/16"}},
                          {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "proxy"}}}]
    assert tb["ports"] == [{"port": 6006, "protocol": "TCP"}]
    with pytest.raises(SpecError):
        DeploymentPolicy.from_env({"TFK8S_TENSORBOARD_INGRESS": "anywhere"})


def _pod_with(volume=None, annotations=None, policy=None):
    (pod,) = _pods({}, policy or DeploymentPolicy())
    if volume is not None:
        pod["spec"].setdefault("volumes", []).append(volume)
    if annotations:
        pod["metadata"].setdefault("annotations", {}).update(annotations)
    return pod


@pytest.mark.parametrize("volume", [
    {"name": "n", "nfs": {"server": "10.0.0.9", "path": "/exports"}},
    {"name": "c", "csi": {"driver": "secrets-store.csi.k8s.io"}},
    {"name": "i", "iscsi": {"targetPortal": "10.0.0.9:3260", "iqn": "iqn.x", "lun": 0}},
    {"name": "r", "rbd": {"monitors": ["10.0.0.9"], "image": "x"}},
    {"name": "g", "glusterfs": {"endpoints": "e", "path": "v"}},
    {"name": "f", "flexVolume": {"driver": "vendor/x"}},
    {"name": "git", "gitRepo": {"repository": "https://example.com/x.git"}},
])
def test_admission_refuses_network_and_node_volumes_the_deployment_does_not_allow(volume):
    """Issue 37: recovery, evaluation, TensorBoard and staging pods pass admit_pod only, which checked
    neither nfs/csi nor any other network or node volume kind."""
    kind = next(k for k in volume if k != "name")
    policy = DeploymentPolicy()
    with pytest.raises(SpecError) as info:
        admit_pod(_pod_with(volume), policy, what="pod")
    fields = {p.field for p in info.value.problems}
    assert fields == {f"pod: spec.volumes[{volume['name']}].{kind}"}, fields
    assert "[tfk8s] allowed_volume_types" in str(info.value)
    assert admit_pod(_pod_with(volume), DeploymentPolicy(allowed_volume_types=(kind,)))
    assert admit_pod(_pod_with(volume), DeploymentPolicy(allowed_volume_types=("*",)))


@pytest.mark.parametrize("profile,ok", [("unconfined", False), ("runtime/default", True),
                                        ("localhost/tf-profile", True), ("localhost/", False)])
def test_admission_refuses_an_unconfined_apparmor_annotation_unless_the_deployment_allows_it(profile, ok):
    key = "container.apparmor.security.beta.kubernetes.io/tensorflow"
    pod = _pod_with(annotations={key: profile})
    if ok:
        assert admit_pod(pod, DeploymentPolicy())
        return
    with pytest.raises(SpecError) as info:
        admit_pod(pod, DeploymentPolicy(), what="pod")
    assert {p.field for p in info.value.problems} == {f"pod: metadata.annotations[{key}]"}
    assert "restricted_security_context" in str(info.value)
    assert admit_pod(pod, DeploymentPolicy(restricted_security_context=False))


def test_admission_refuses_an_unconfined_apparmor_profile_field():
    pod = _pod_with()
    pod["spec"]["containers"][0]["securityContext"]["appArmorProfile"] = {"type": "Unconfined"}
    with pytest.raises(SpecError, match="appArmorProfile"):
        admit_pod(pod, DeploymentPolicy())
