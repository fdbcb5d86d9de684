"""pod_template: kubectl's strategic-merge rules, the fields it may not set, and the policy seeing all it adds."""
from __future__ import annotations

import copy

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.job.spec import podtemplate as pt

BASE = {"name": "tpl", "image": "tfk8s/trainer:0.1", "ps": 1, "worker": 2}
SIDECAR = {"name": "shipper", "image": "busybox:1.36", "args": ["tail", "-F", "/scratch/log"],
           "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}
TEMPLATE = {
    "metadata": {"labels": {"team": "ads"}, "annotations": {"example.com/owner": "ads"}},
    "spec": {
        "priorityClassName": "high",
        "imagePullSecrets": [{"name": "registry-creds"}],
        "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok"]}]}]}}},
        "initContainers": [{"name": "warm-cache", "image": "busybox:1.36", "args": ["true"]}],
        "containers": [
            {"name": "tensorflow", "readinessProbe": {"tcpSocket": {"port": 2222}},
             "env": [{"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
             "ports": [{"name": "metrics", "containerPort": 9090}],
             "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                              {"name": "creds", "mountPath": "/etc/creds", "readOnly": True}],
             "securityContext": {"runAsGroup": 1000}},
            SIDECAR],
        "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "creds", "secret": {"secretName": "db"}}],
    },
}
POLICY = DeploymentPolicy(allowed_secrets=("db", "registry-creds"))


def spec(**extra):
    return parse_spec({**copy.deepcopy(BASE), **copy.deepcopy(extra)})


def pods(s, policy=None):
    return list(plan_job(s, JobNames.for_run(s, "r1"), policy or DeploymentPolicy()).pods)


def refused(doc, policy=None) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        parse_spec({**copy.deepcopy(BASE), **copy.deepcopy(doc)}, policy=policy)
    return {p.field: str(p) for p in err.value.problems}


# ------------------------------------------------------------------------------ the merge rules
def test_maps_merge_keyed_lists_merge_by_their_key_other_lists_are_replaced():
    base = {"spec": {"containers": [{"name": "tensorflow", "image": "a", "args": ["1", "2"],
                                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                                     "ports": [{"containerPort": 80, "name": "http"}],
                                     "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                     "tolerations": [{"key": "a", "operator": "Exists"}],
                     "volumes": [{"name": "v", "emptyDir": {}}],
                     "imagePullSecrets": [{"name": "one"}],
                     "securityContext": {"runAsUser": 1, "fsGroup": 2}}}
    patch = {"spec": {"containers": [{"name": "side", "image": "s"},
                                     {"name": "tensorflow", "args": ["3"],
                                      "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                                      "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                      "volumeMounts": [{"name": "w", "mountPath": "/v"}]}],
                      "tolerations": [{"key": "b", "operator": "Exists"}],
                      "volumes": [{"name": "w", "emptyDir": {}}],
                      "imagePullSecrets": [{"name": "two"}],
                      "securityContext": {"fsGroup": 3}}}
    out = pt.merge(base, patch, pt.TEMPLATE_SCHEMA)["spec"]
    tf, side = out["containers"]
    assert side == {"name": "side", "image": "s"}  # new items follow the base's, in the patch's order
    assert tf["image"] == "a" and tf["args"] == ["3"]  # scalars and plain lists: the patch's
    assert tf["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}]
    assert tf["ports"] == [{"containerPort": 80, "name": "http", "protocol": "TCP"}]  # by containerPort
    assert tf["volumeMounts"] == [{"name": "w", "mountPath": "/v"}]  # by mountPath
    assert out["tolerations"] == [{"key": "b", "operator": "Exists"}]  # no merge key: replaced
    assert [v["name"] for v in out["volumes"]] == ["v", "w"]
    assert out["imagePullSecrets"] == [{"name": "one"}, {"name": "two"}]
    assert out["securityContext"] == {"runAsUser": 1, "fsGroup": 3}
    assert base["spec"]["containers"][0]["args"] == ["1", "2"]  # neither input changed


def test_a_roles_template_is_merged_over_the_jobs_and_round_trips():
    s = spec(pod_template={"spec": {"priorityClassName": "low", "containers": [
        {"name": "tensorflow", "env": [{"name": "X", "value": "job"}]}]}},
        worker={"replicas": 2, "pod_template": {"spec": {"priorityClassName": "high", "containers": [
            {"name": "tensorflow", "env": [{"name": "X", "value": "role"}, {"name": "Y", "value": "y"}]}]}}})
    worker = pt.thaw(s.roles["worker"].pod_template)
    assert worker["spec"]["priorityClassName"] == "high"
    assert worker["spec"]["containers"][0]["env"] == [{"name": "X", "value": "role"}, {"name": "Y", "value": "y"}]
    assert pt.thaw(s.roles["ps"].pod_template)["spec"]["priorityClassName"] == "low"
    assert parse_spec(s.to_dict()) == s
    assert pt.merge_templates(s.pod_template, s.roles["worker"].pod_template) == s.roles["worker"].pod_template


def test_null_means_not_set_and_the_template_is_frozen():
    s = spec(pod_template={"metadata": {"creationTimestamp": None, "labels": {"a": "b"}},
                           "spec": {"affinity": None, "priorityClassName": "high"}})
    assert pt.thaw(s.pod_template) == {"metadata": {"labels": {"a": "b"}}, "spec": {"priorityClassName": "high"}}
    with pytest.raises(TypeError):
        s.pod_template["spec"]["priorityClassName"] = "x"


def test_builders_add_exactly_the_strategic_merge_of_the_template():
    """The pods with a template == the pods without it, strategically merged with it (kubectl's rules).

    With the deployment's security defaults off, the builders add nothing of their own to the
    template's containers, so the equality is exact."""
    policy = DeploymentPolicy(restricted_security_context=False, allowed_secrets=("*",))
    with_tpl = pods(spec(pod_template=TEMPLATE), policy)
    without = pods(spec(), policy)
    assert with_tpl == [pt.strategic_merge(p, TEMPLATE) for p in without]


def test_security_defaults_reach_sidecars_and_init_containers_under_the_templates_own():
    pod = pods(spec(pod_template=TEMPLATE), POLICY)[1]["spec"]
    default = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    side = next(c for c in pod["containers"] if c["name"] == "shipper")
    assert side["securityContext"] == default
    assert pod["initContainers"][0]["securityContext"] == default
    assert pod["containers"][0]["securityContext"] == {**default, "runAsGroup": 1000}
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": 1000,
                                      "fsGroup": 1000}


def test_render_prints_the_plans_templated_pods():
    for extra in ({"pod_template": TEMPLATE}, {"worker": {"replicas": 2, "pod_template": TEMPLATE}}):
        s = spec(**extra)
        plan = plan_job(s, JobNames.for_run(s, "r1"), POLICY)
        assert parse_yaml(render_yaml(plan)) == plan.objects()


def test_rendered_pods_carry_what_the_template_adds():
    s = spec(worker={"replicas": 2, "pod_template": TEMPLATE})
    ps, w0, _ = pods(s, POLICY)
    assert "priorityClassName" not in ps["spec"]  # the PS has no template
    p = w0["spec"]
    assert p["priorityClassName"] == "high" and p["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert p["affinity"]["nodeAffinity"]
    assert [c["name"] for c in p["containers"]] == ["tensorflow", "shipper"]
    assert [c["name"] for c in p["initContainers"]] == ["warm-cache"]
    assert {"name": "scratch", "emptyDir": {}} in p["volumes"]
    assert {"name": "creds", "secret": {"secretName": "db"}} in p["volumes"]
    tf = p["containers"][0]
    assert tf["readinessProbe"] == {"tcpSocket": {"port": 2222}}
    assert [e["name"] for e in tf["env"]][-1] == "CPU_LIMIT" and tf["env"][0]["name"] == "TF_CONFIG"
    assert tf["ports"] == [{"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"},
                           {"name": "metrics", "containerPort": 9090}]
    assert w0["metadata"]["labels"]["team"] == "ads" and w0["metadata"]["labels"]["tfk8s.io/role"] == "worker"
    assert w0["metadata"]["annotations"] == {"example.com/owner": "ads"}


# ------------------------------------------------------------------------------ what it may not set
@pytest.mark.parametrize("template, path", [
    ({"spec": {"containers": [{"name": "tensorflow", "env": [{"name": "TF_CONFIG", "value": "{}"}]}]}},
     "worker.pod_template.spec.containers[tensorflow].env[TF_CONFIG]"),
    ({"spec": {"containers": [{"name": "tensorflow", "env": [{"name": "TFK8S_ROLE", "value": "chief"}]}]}},
     "worker.pod_template.spec.containers[tensorflow].env[TFK8S_ROLE]"),
    ({"metadata": {"labels": {"tfk8s.io/job": "other"}}}, "worker.pod_template.metadata.labels.tfk8s.io/job"),
    ({"metadata": {"labels": {"app.kubernetes.io/instance": "x"}}},
     "worker.pod_template.metadata.labels.app.kubernetes.io/instance"),
    ({"metadata": {"labels": {"task_id": "x"}}}, "worker.pod_template.metadata.labels.task_id"),
    ({"metadata": {"name": "mine"}}, "worker.pod_template.metadata.name"),
    ({"spec": {"hostname": "w"}}, "worker.pod_template.spec.hostname"),
    ({"spec": {"subdomain": "s"}}, "worker.pod_template.spec.subdomain"),
    ({"spec": {"restartPolicy": "Always"}}, "worker.pod_template.spec.restartPolicy"),
    ({"spec": {"schedulingGates": [{"name": "mine"}]}}, "worker.pod_template.spec.schedulingGates"),
    ({"spec": {"nodeName": "kwok-node-0"}}, "worker.pod_template.spec.nodeName"),
    ({"spec": {"containers": [{"name": "tensorflow", "ports": [{"name": "tfjob-port", "containerPort": 3333}]}]}},
     "worker.pod_template.spec.containers[tensorflow].ports[3333]"),
    ({"spec": {"containers": [{"name": "tensorflow", "ports": [{"name": "tf", "containerPort": 2222}]}]}},
     "worker.pod_template.spec.containers[tensorflow].ports[2222]"),
    ({"spec": {"initContainers": [{"name": "fetch-code", "image": "x"}]}},
     "worker.pod_template.spec.initContainers[fetch-code]"),
    ({"spec": {"initContainers": [{"name": "tensorflow", "image": "x"}]}},
     "worker.pod_template.spec.initContainers[tensorflow]"),
    ({"spec": {"volumes": [{"name": "tfk8s-shards", "emptyDir": {}}]}},
     "worker.pod_template.spec.volumes[tfk8s-shards]"),
    ({"spec": {"$patch": "replace"}}, "worker.pod_template.spec.$patch"),
])
def test_fields_we_own_are_refused_naming_the_path(template, path):
    problems = refused({"worker": {"replicas": 2, "pod_template": template}})
    assert path in problems, problems


@pytest.mark.parametrize("field, value, key", [
    ("image", "other:1", "image"), ("command", ["python"], "command"), ("args", ["--x"], "args"),
    ("resources", {"limits": {"cpu": "1"}}, "resources"), ("envFrom", [{"secretRef": {"name": "db"}}], "env_from"),
    ("imagePullPolicy", "Always", "image_pull_policy"),
])
def test_what_a_spec_key_says_is_written_in_the_spec_key(field, value, key):
    problems = refused({"pod_template": {"spec": {"containers": [{"name": "tensorflow", field: value}]}}})
    fld = f"pod_template.spec.containers[tensorflow].{field}"
    assert fld in problems and f"write {key}:" in problems[fld], problems


@pytest.mark.parametrize("field, key", [("serviceAccountName", "service_account"), ("nodeSelector", "node_selector"),
                                        ("tolerations", "tolerations"), ("activeDeadlineSeconds", "active_deadline"),
                                        ("automountServiceAccountToken", "automount_service_account_token")])
def test_pod_fields_a_spec_key_says_are_refused(field, key):
    problems = refused({"pod_template": {"spec": {field: {"a": "b"} if field == "nodeSelector" else "x"}}})
    assert key in problems[f"pod_template.spec.{field}"]


def test_said_twice_is_refused_where_it_is_written():
    problems = refused({
        "env": {"LOG": "info"},
        "volumes": [{"name": "data", "mount_path": "/data", "empty_dir": {}}],
        "pod_template": {"spec": {"containers": [{"name": "tensorflow", "env": [{"name": "LOG", "value": "x"}]}]}},
        "worker": {"replicas": 1, "pod_template": {"spec": {
            "containers": [{"name": "tensorflow", "volumeMounts": [{"name": "data2", "mountPath": "/data"}]},
                           {"name": "side", "image": "b", "volumeMounts": [{"name": "nope", "mountPath": "/n"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "data2", "emptyDir": {}}]}}}})
    assert "pod_template.spec.containers[tensorflow].env[LOG]" in problems  # the job's template, named once
    assert not any(f.startswith("ps.pod_template.spec.containers[tensorflow].env") for f in problems)
    assert "worker.pod_template.spec.containers[tensorflow].volumeMounts[/data]" in problems
    assert "worker.pod_template.spec.volumes[data]" in problems
    assert "worker.pod_template.spec.containers[side].volumeMounts[/n]" in problems


def test_items_without_their_merge_key_or_twice_and_odd_volume_sources_are_refused():
    problems = refused({"pod_template": {"spec": {
        "containers": [{"image": "x"}, {"name": "a", "image": "x"}, {"name": "a", "image": "y"}, {"name": "b"}],
        "volumes": [{"name": "g", "glusterfs": {"endpoints": "e", "path": "p"}}, {"name": "two", "emptyDir": {},
                                                                                    "secret": {"secretName": "s"}}]}}})
    assert "has no name" in problems["pod_template.spec.containers[0]"]
    assert "appears twice" in problems["pod_template.spec.containers[a]"]
    assert "pod_template.spec.containers[b].image" in problems
    assert "pod_template.spec.volumes[g].glusterfs" in problems
    assert "exactly one volume source" in problems["pod_template.spec.volumes[two]"]


# ------------------------------------------------------------------------------ the policy sees it all
BYPASSES = [
    ({"volumes": [{"name": "root", "hostPath": {"path": "/etc"}}]}, "pod_template.spec.volumes[root].hostPath.path"),
    ({"volumes": [{"name": "up", "hostPath": {"path": "/mnt/tfk8s-gluster/../../etc"}}]},
     "pod_template.spec.volumes[up].hostPath.path"),
    ({"volumes": [{"name": "s", "secret": {"secretName": "admin-token"}}]},
     "pod_template.spec.volumes[s].secret.secretName"),
    ({"volumes": [{"name": "p", "projected": {"sources": [{"secret": {"name": "admin-token"}}]}}]},
     "pod_template.spec.volumes[p].projected.sources[0].secret.name"),
    ({"volumes": [{"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]},
     "pod_template.spec.volumes[p].projected.sources[0].serviceAccountToken"),
    ({"volumes": [{"name": "c", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "admin-token"}}}]},
     "pod_template.spec.volumes[c].csi.nodePublishSecretRef.name"),
    ({"containers": [{"name": "side", "image": "b", "env": [
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "admin-token", "key": "t"}}}]}]},
     "pod_template.spec.containers[side].env[T].valueFrom.secretKeyRef.name"),
    ({"initContainers": [{"name": "init", "image": "b", "envFrom": [{"secretRef": {"name": "admin-token"}}]}]},
     "pod_template.spec.initContainers[init].envFrom[0].secretRef.name"),
    ({"containers": [{"name": "tensorflow", "env": [
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "admin-token", "key": "t"}}}]}]},
     "pod_template.spec.containers[tensorflow].env[T].valueFrom.secretKeyRef.name"),
    ({"containers": [{"name": "side", "image": "b", "securityContext": {"privileged": True}}]},
     "pod_template.spec.containers[side].securityContext.privileged"),
    ({"initContainers": [{"name": "init", "image": "b", "securityContext": {"privileged": True}}]},
     "pod_template.spec.initContainers[init].securityContext.privileged"),
    ({"containers": [{"name": "tensorflow", "securityContext": {"allowPrivilegeEscalation": True}}]},
     "pod_template.spec.containers[tensorflow].securityContext.allowPrivilegeEscalation"),
    ({"containers": [{"name": "tensorflow", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]},
     "pod_template.spec.containers[tensorflow].securityContext.capabilities.add"),
    ({"containers": [{"name": "tensorflow", "securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}]},
     "pod_template.spec.containers[tensorflow].securityContext.capabilities.drop"),
    ({"containers": [{"name": "side", "image": "b", "securityContext": {"procMount": "Unmasked"}}]},
     "pod_template.spec.containers[side].securityContext.procMount"),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
     "pod_template.spec.securityContext.seccompProfile.type"),
    ({"containers": [{"name": "side", "image": "b", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]},
     "pod_template.spec.containers[side].securityContext.seccompProfile.type"),
    ({"hostNetwork": True}, "pod_template.spec.hostNetwork"),
    ({"hostPID": True}, "pod_template.spec.hostPID"),
    ({"hostIPC": True}, "pod_template.spec.hostIPC"),
    ({"containers": [{"name": "side", "image": "b", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
     "pod_template.spec.containers[side].ports[80].hostPort"),
]


@pytest.mark.parametrize("pod_spec, path", BYPASSES, ids=[p for _, p in BYPASSES])
def test_a_template_cannot_get_past_the_deployments_policy(pod_spec, path):
    problems = refused({"pod_template": {"spec": pod_spec}}, DeploymentPolicy())
    assert path in problems, problems
    # the same template in a role block is named there
    role = refused({"worker": {"replicas": 1, "pod_template": {"spec": pod_spec}}}, DeploymentPolicy())
    assert f"worker.{path}" in role, role


def test_image_pull_secrets_have_their_own_setting_allowed_by_default():
    """The kubelet reads an image pull secret to pull; no container can read it, so allowed_secrets does not
    bound it. A deployment may still bound it (allowed_image_pull_secrets)."""
    pull = {"pod_template": {"spec": {"imagePullSecrets": [{"name": "registry-creds"}]}}}
    spec = parse_spec({**BASE, **pull}, policy=DeploymentPolicy())  # allowed_secrets: none
    pods = plan_job(spec, JobNames.for_run(spec, "r1"), DeploymentPolicy()).pods
    assert pods and all(p["spec"]["imagePullSecrets"] == [{"name": "registry-creds"}] for p in pods)
    narrow = DeploymentPolicy(allowed_image_pull_secrets=("other",), allowed_secrets=("registry-creds",))
    problems = refused(pull, narrow)
    assert "allowed_image_pull_secrets" in problems["pod_template.spec.imagePullSecrets[registry-creds]"]
    assert "allowed_image_pull_secrets" in refused(
        {"worker": {"replicas": 1, **pull}}, narrow)["worker.pod_template.spec.imagePullSecrets[registry-creds]"]
    assert DeploymentPolicy.from_env({"TFK8S_ALLOWED_IMAGE_PULL_SECRETS": "a, b"}).allowed_image_pull_secrets == (
        "a", "b")


def test_what_the_policy_allows_it_admits():
    policy = DeploymentPolicy(allowed_secrets=("admin-token",), allow_service_account_token=True,
                              restricted_security_context=False, allowed_volume_types=("csi",))
    for pod_spec, _path in BYPASSES:
        if "/etc" in str(pod_spec):
            continue
        parse_spec({**BASE, "pod_template": {"spec": pod_spec}}, policy=policy)


@pytest.mark.parametrize("sc, path", [
    ({"runAsNonRoot": False}, "pod_template.spec.securityContext.runAsNonRoot"),
    ({"runAsUser": 0}, "pod_template.spec.securityContext.runAsUser"),
])
def test_run_as_non_root_cannot_be_undone_by_a_template(sc, path):
    assert path in refused({"pod_template": {"spec": {"securityContext": sc}}}, DeploymentPolicy(run_as_non_root=True))
    side = {"containers": [{"name": "side", "image": "b", "securityContext": sc}]}
    key = path.replace("pod_template.spec.securityContext", "pod_template.spec.containers[side].securityContext")
    assert key in refused({"pod_template": {"spec": side}}, DeploymentPolicy(run_as_non_root=True))


def test_a_job_wide_problem_is_named_once():
    problems = refused({"pod_template": {"spec": {"hostNetwork": True}}, "chief": 1}, DeploymentPolicy())
    assert [f for f in problems if f.endswith("hostNetwork")] == ["pod_template.spec.hostNetwork"]


def test_a_sidecars_quantities_are_checked_offline_naming_the_field():
    # The API server refuses a bad quantity without naming the field ("quantities must match the regular expression").
    side = {"name": "side", "image": "busybox:1", "resources": {"limits": {"cpu": "x", "memory": "1Gi"},
                                                                "requests": {"memory": -1}}}
    got = refused({"pod_template": {"spec": {"containers": [side], "volumes": [
        {"name": "v", "emptyDir": {"sizeLimit": "lots"}}]}}})
    assert set(got) >= {"pod_template.spec.containers[0].resources.limits.cpu",
                        "pod_template.spec.containers[0].resources.requests.memory",
                        "pod_template.spec.volumes[0].emptyDir.sizeLimit"}, got


def test_template_label_and_annotation_values_are_text_on_the_pods():
    s = spec(pod_template={"metadata": {"labels": {"version": 2, "canary": True}, "annotations": {"a.io/n": 1.5}}})
    meta = pods(s)[0]["metadata"]
    assert meta["labels"]["version"] == "2" and meta["labels"]["canary"] == "true"
    assert meta["annotations"]["a.io/n"] == "1.5"
