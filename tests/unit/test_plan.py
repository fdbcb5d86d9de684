"""The job's plan (job/builders/plan.py): every object setup creates, in its order, as setup creates it."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfk8s_airflow.contract import GANG_GATE
from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job import kueue, naming
from tfk8s_airflow.job.builders.objects import JobNames, owner_reference
from tfk8s_airflow.job.builders.plan import JobPlan, plan_job, replica_task_id, replica_task_labels
from tfk8s_airflow.job.builders.templatemap import templates_digest
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec
from tfk8s_airflow.k8s.relaunch import read_templates

GLUSTER = "/mnt/tfk8s-gluster"
SHARDS = {"worker-0": ["/data/part-0"], "worker-1": ["/data/part-1"]}
RUN = "manual__2026-12-01T15:12:00.502648+00:00"
BASE = {"name": "plan", "namespace": "ml", "image": "tfk8s/trainer:0.1", "ps": 1, "worker": 2}
WITH_TENSORBOARD = {**BASE, "tensorboard": {"log_dir": "/model/tb"},
                    "volumes": [{"name": "model", "mount_path": "/model", "host_path": f"{GLUSTER}/model"}]}


def planned(doc=None, policy=None, shards=None, **kw) -> JobPlan:
    spec = parse_spec(doc or BASE)
    names = JobNames.for_run(spec, RUN, "train", "tfk8s_dag")
    kw = {"dag_id": "tfk8s_dag", "run_id": RUN, "task_id": "train.replica", **kw}
    return plan_job(spec, names, policy or DeploymentPolicy(), shards, **kw)


def kinds_and_names(objs):
    return [(o["kind"], o["metadata"]["name"]) for o in objs]


def test_the_objects_come_in_the_order_setup_creates_them():
    plan = planned(WITH_TENSORBOARD, shards=SHARDS)
    job = plan.names.job
    assert kinds_and_names(plan.objects()) == [
        ("Service", job), ("ConfigMap", f"{job}-shards"), ("ConfigMap", f"{job}-pods"),
        ("NetworkPolicy", f"{job}-network"), ("Pod", f"{job}-ps-0"), ("Pod", f"{job}-worker-0"),
        ("Pod", f"{job}-worker-1"), ("Pod", f"{job}-tensorboard")]
    # Without shards and TensorBoard: neither the shard ConfigMap nor the TensorBoard pod.
    plain = planned()
    assert [k for k, _ in kinds_and_names(plain.objects())] == ["Service", "ConfigMap", "NetworkPolicy", "Pod", "Pod",
                                                                "Pod"]
    assert plain.shards is None and plain.tensorboard is None and plain.tensorboard_pod is None
    assert plain.support_objects == [plain.templates, plain.network_policy]
    assert [r.pod_name for r in plain.replicas] == [p["metadata"]["name"] for p in plain.pods]


def test_every_replica_pod_is_gated_and_the_tensorboard_is_not():
    plan = planned(WITH_TENSORBOARD)
    assert len(plan.pods) == 3
    for pod in plan.pods:
        assert pod["spec"]["schedulingGates"] == [{"name": GANG_GATE}]
    assert plan.tensorboard_pod is not None and "schedulingGates" not in plan.tensorboard_pod["spec"]


def test_every_replica_pod_carries_its_replica_tasks_labels_as_the_pod_operator_computes_them():
    from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value

    plan = planned()
    for i, pod in enumerate(plan.pods):
        labels = pod["metadata"]["labels"]
        assert {k: labels[k] for k in ("dag_id", "task_id", "run_id", "kubernetes_pod_operator", "map_index",
                                       "try_number")} == {
            "dag_id": "tfk8s_dag", "task_id": "train.replica", "run_id": make_safe_label_value(RUN),
            "kubernetes_pod_operator": "True", "map_index": str(i), "try_number": "1"}
    assert "dag_id" not in plan.service["metadata"]["labels"]
    assert replica_task_id("") == "replica" and replica_task_id("train") == "train.replica"


@pytest.mark.parametrize("value", ["", "d", "tfk8s_retrain_daily", RUN, "scheduled__2026-11-29T00:00:00+00:00",
                                   "-lead.and.trail_", "x" * 63, "y" * 64, "a" * 80 + "!", "ünïcödé-run",
                                   "group.sub.replica", "..", "manual__1"])
def test_the_label_values_are_the_pod_operators_to_the_character(value):
    from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value

    assert naming.pod_operator_label_value(value) == make_safe_label_value(value)
    assert replica_task_labels(value, value, value, 3)["run_id"] == make_safe_label_value(value)


@given(st.text(alphabet=st.sampled_from("aZ09_.-+:/ é\x00"), max_size=90) | st.text(max_size=90))
def test_any_label_value_is_the_pod_operators(value):
    from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value

    assert naming.pod_operator_label_value(value) == make_safe_label_value(value)


def test_a_queued_job_is_one_kueue_pod_group_and_a_job_without_a_queue_is_none():
    queued = planned({**BASE, "queue": "team-a", "priority_class": "high"})
    group = kueue.group_name(queued.names.job)
    assert queued.queue == "team-a" and queued.kueue_group == group
    for pod in queued.pods:
        assert pod["metadata"]["labels"][kueue.QUEUE_LABEL] == "team-a"
        assert pod["metadata"]["labels"][kueue.GROUP_LABEL] == group
        assert pod["metadata"]["labels"][kueue.PRIORITY_LABEL] == "high"
        assert pod["metadata"]["annotations"][kueue.GROUP_TOTAL_ANNOTATION] == "3"
        assert pod["spec"]["schedulingGates"] == [{"name": GANG_GATE}]  # ours too: Kueue's webhook adds its own
    # The deployment's default queue when the spec names none.
    shared = planned(policy=DeploymentPolicy(default_queue="shared"))
    assert shared.queue == "shared"
    assert {p["metadata"]["labels"][kueue.QUEUE_LABEL] for p in shared.pods} == {"shared"}
    assert kueue.PRIORITY_LABEL not in shared.pods[0]["metadata"]["labels"]
    plain = planned()
    assert plain.queue is None and plain.kueue_group is None
    for obj in plain.objects():
        assert not any(k.startswith("kueue.x-k8s.io/") for k in obj["metadata"]["labels"])
        assert not any(k.startswith("kueue.x-k8s.io/") for k in obj["metadata"].get("annotations") or {})


def test_the_network_policy_and_the_templates_configmap_are_in_the_plan():
    plan = planned(WITH_TENSORBOARD)
    net = plan.network_policy
    assert net["kind"] == "NetworkPolicy" and net["metadata"]["name"] == naming.network_policy_name(plan.names.job)
    assert net["spec"]["podSelector"] == {"matchLabels": {"tfk8s.io/job": plan.names.job}}
    assert [r["ports"] for r in net["spec"]["ingress"]] == [[{"port": 2222, "protocol": "TCP"}],
                                                            [{"port": 6006, "protocol": "TCP"}]]
    cm = plan.templates
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == naming.templates_name(plan.names.job)
    assert cm["metadata"]["labels"]["tfk8s.io/job"] == plan.names.job
    # It holds the pods exactly as planned (gated, labelled, admitted), under the digest the plan reports.
    assert read_templates(cm["binaryData"], "the plan", digest=plan.templates_digest) == list(plan.pods)
    assert plan.templates in plan.objects() and plan.network_policy in plan.objects()


def test_owned_puts_the_owner_on_every_object_but_the_service_and_rebuilds_the_templates():
    plan = planned(WITH_TENSORBOARD, shards=SHARDS)
    reference = owner_reference(plan.names.service, "0c7e-uid")
    owned = plan.owned(reference)
    assert kinds_and_names(owned.objects()) == kinds_and_names(plan.objects())
    assert "ownerReferences" not in owned.service["metadata"]
    for obj in owned.objects()[1:]:
        assert obj["metadata"]["ownerReferences"] == [reference], obj["metadata"]["name"]
    assert owned.owner == reference
    # The templates hold the owned pods (recovery recreates them owned), so their digest changes with the owner.
    assert read_templates(owned.templates["binaryData"], "owned", digest=owned.templates_digest) == list(owned.pods)
    assert owned.templates_digest != plan.templates_digest
    assert owned.templates_digest == templates_digest(owned.templates)
    other = plan.owned(owner_reference(plan.names.service, "another-uid"))
    assert other.templates_digest not in (plan.templates_digest, owned.templates_digest)
    # Pure: the plan it was made from is as it was.
    assert all("ownerReferences" not in o["metadata"] for o in plan.objects())
    assert plan.owner is None


def test_the_pods_are_admitted_by_the_deployments_policy(tmp_path):
    # A real tree: with read-only roots set, host paths are walked on this machine (fail closed where unseen).
    (tmp_path / "serving" / "v1").mkdir(parents=True)
    doc = {**BASE, "volumes": [{"name": "s", "mount_path": "/s", "host_path": f"{tmp_path}/serving/v1"}]}
    plan = planned(doc, policy=DeploymentPolicy(allowed_host_paths=(str(tmp_path),),
                                                read_only_host_paths=(f"{tmp_path}/serving",)))
    for pod in plan.pods:
        (mount,) = [m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "s"]
        assert mount["readOnly"] is True
    assert read_templates(plan.templates["binaryData"], "t")[0]["spec"]["containers"][0]["volumeMounts"] == \
        plan.pods[0]["spec"]["containers"][0]["volumeMounts"]
    # A host path that resolves elsewhere (a planted link) is refused: the plan is what may be created, or nothing.
    with pytest.raises(SpecError, match="resolves .through a symbolic link. to '/etc'"):
        planned(doc, policy=DeploymentPolicy(allowed_host_paths=(str(tmp_path),)),
                realpath=lambda p: "/etc" if p.endswith("/v1") else p)


# ----------------------------------------------------------------------------- render prints the plan
def test_render_prints_the_plan_object_for_object_and_no_owner():
    import yaml

    from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml

    plan = planned(WITH_TENSORBOARD, shards=SHARDS)
    text = render_yaml(plan)
    assert parse_yaml(text) == plan.objects()
    assert list(yaml.safe_load_all(text)) == list(yaml.safe_load_all(yaml.safe_dump_all(plan.objects())))
    assert "ownerReferences" not in text


def test_the_tfk8s_command_renders_the_plan_setup_would_create(tmp_path):
    import json

    import yaml

    from tests.unit.test_cli import tfk8s

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(WITH_TENSORBOARD))
    shards = tmp_path / "shards.json"
    shards.write_text(json.dumps(SHARDS))
    args = ("render", str(spec_file), "--shards", str(shards), "--run-id", RUN, "--dag-id", "tfk8s_dag",
            "--group", "train")
    for env in ({}, {"TFK8S_DEFAULT_QUEUE": "shared"}):
        res = tfk8s(*args, env=env, check=True)
        plan = planned(WITH_TENSORBOARD, policy=DeploymentPolicy.from_env(env), shards=SHARDS)
        assert list(yaml.safe_load_all(res.stdout)) == plan.objects()
        pods = [o for o in yaml.safe_load_all(res.stdout) if o["kind"] == "Pod"][:3]
        assert all(p["metadata"]["labels"]["task_id"] == "train.replica" for p in pods)
        assert all((kueue.QUEUE_LABEL in p["metadata"]["labels"]) == bool(env) for p in pods)


def test_a_template_of_ones_own_is_a_view_of_the_plan(tmp_path):
    """The template docs/cli.md shows prints the same objects as the default output."""
    from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml

    tpl = tmp_path / "objects.yaml.jinja"
    tpl.write_text("{% for obj in objects %}---\n{{ obj | json }}\n{% endfor %}")
    plan = planned(WITH_TENSORBOARD, shards=SHARDS)
    assert parse_yaml(render_yaml(plan, tpl)) == plan.objects()
    names = tmp_path / "names.yaml.jinja"
    names.write_text("job: {{ names.job | json }}\nspec: {{ spec.name | json }}\nqueue: {{ plan.queue | json }}\n"
                     "pods: {{ plan.pods | map(attribute='metadata.name') | list | json }}\n")
    assert parse_yaml(render_yaml(plan, names)) == [{"job": plan.names.job, "spec": "plan", "queue": None,
                                                      "pods": [p["metadata"]["name"] for p in plan.pods]}]


def test_admission_workload_adds_the_workload_and_the_podgroup_and_every_pod_names_it():
    from tfk8s_airflow.job import podgroup

    plan = planned({**BASE, "admission": "workload"}, workload_api=True)
    job = plan.names.job
    assert plan.admission == "workload" and plan.queue is None
    assert kinds_and_names(plan.objects())[3:6] == [("Workload", job), ("PodGroup", job), ("Pod", f"{job}-ps-0")]
    assert plan.workload["spec"]["podGroupTemplates"] == [{"name": "replicas",
                                                           "schedulingPolicy": {"gang": {"minCount": 3}}}]
    (group,) = plan.pod_groups
    assert group["spec"] == {"workloadRef": {"workloadName": job, "templateName": "replicas"},
                             "schedulingPolicy": {"gang": {"minCount": 3}}}
    assert {podgroup.pod_group_of(p) for p in plan.pods} == {job}
    assert all(p["spec"]["schedulingGates"] == [{"name": GANG_GATE}] for p in plan.pods)  # created together too
    # Owned by the Service with everything else, and kept in the templates recovery recreates from.
    owned = plan.owned(owner_reference(plan.names.service, "uid-1"))
    assert owned.workload["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert owned.pod_groups[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert {podgroup.pod_group_of(p) for p in read_templates(owned.templates["binaryData"], "plan")} == {job}


def test_gang_min_gives_each_role_a_podgroup_with_its_minimum():
    from tfk8s_airflow.job import podgroup

    plan = planned({**BASE, "admission": "workload", "ps": 2, "worker": {"replicas": 4, "gang_min": 3}},
                   workload_api=True)
    job = plan.names.job
    assert plan.workload["spec"]["podGroupTemplates"] == [
        {"name": "ps", "schedulingPolicy": {"gang": {"minCount": 2}}},  # a role without gang_min: all of it
        {"name": "worker", "schedulingPolicy": {"gang": {"minCount": 3}}}]
    assert [(g["metadata"]["name"], g["spec"]["workloadRef"]["templateName"], podgroup.gang_of(g)[1])
            for g in plan.pod_groups] == [(f"{job}-ps", "ps", 2), (f"{job}-worker", "worker", 3)]
    assert [podgroup.pod_group_of(p) for p in plan.pods] == [f"{job}-ps"] * 2 + [f"{job}-worker"] * 4
    assert kinds_and_names(plan.objects())[3:7] == [("Workload", job), ("PodGroup", f"{job}-ps"),
                                                    ("PodGroup", f"{job}-worker"), ("Pod", f"{job}-ps-0")]


@pytest.mark.parametrize("doc", [{"worker": {"replicas": 2, "gang_min": 1}},
                                 {"queue": "q", "worker": {"replicas": 2, "gang_min": 1}}])
def test_gang_min_is_refused_unless_the_workload_api_admits_the_job(doc):
    with pytest.raises(SpecError) as err:
        planned({**BASE, **doc}, workload_api=True)
    assert err.value.problems[0].field == "worker.gang_min"
    assert "admission: workload" in err.value.problems[0].fix


@pytest.mark.parametrize(("doc", "policy", "served", "expected"), [
    ({}, {}, True, ("gate", None)),  # auto: the deployment has not allowed the Workload API
    ({}, {"auto_workload": True}, True, ("workload", None)),
    ({}, {"auto_workload": True}, False, ("gate", None)),  # not served: the gate
    ({"queue": "team-a"}, {"auto_workload": True}, True, ("kueue", "team-a")),  # a queue: Kueue
    ({}, {"default_queue": "shared", "auto_workload": True}, True, ("kueue", "shared")),
    ({"admission": "gate"}, {"auto_workload": True}, True, ("gate", None)),
    ({}, {"admission": "workload"}, True, ("workload", None)),  # the deployment's default
    ({"admission": "gate"}, {"admission": "workload"}, True, ("gate", None)),  # the spec's wins
    ({"admission": "kueue", "queue": "q"}, {}, False, ("kueue", "q")),
])
def test_auto_and_the_deployments_default_choose_the_admission(doc, policy, served, expected):
    plan = planned({**BASE, **doc}, policy=DeploymentPolicy(**policy), workload_api=served)
    assert (plan.admission, plan.queue) == expected
    assert (plan.workload is not None) == (plan.admission == "workload")


@pytest.mark.parametrize(("doc", "policy", "served", "field", "words"), [
    ({"admission": "workload"}, {}, False, "admission", "does not serve Kubernetes' Workload API"),
    ({}, {"admission": "workload"}, False, "[tfk8s] admission", "GenericWorkload"),
    ({"admission": "kueue"}, {}, True, "admission", "has no queue"),
    ({"admission": "workload"}, {"default_queue": "shared"}, True, "admission", "default_queue shared"),
    ({"admission": "gate"}, {"default_queue": "shared"}, True, "admission", "puts every job in Kueue"),
])
def test_an_admission_that_cannot_be_honoured_is_refused_naming_its_field(doc, policy, served, field, words):
    with pytest.raises(SpecError) as err:
        planned({**BASE, **doc}, policy=DeploymentPolicy(**policy), workload_api=served)
    assert err.value.problems[0].field == field and words in str(err.value), str(err.value)


def test_a_spec_with_a_queue_cannot_ask_for_another_admission():
    with pytest.raises(SpecError, match="admission: is workload but the job has a Kueue queue"):
        parse_spec({**BASE, "queue": "q", "admission": "workload"})


def test_topology_puts_kueues_placement_annotation_on_every_pod_and_needs_kueue():
    required = planned({**BASE, "queue": "team-a", "topology": {"required": "example.com/block"}})
    assert {p["metadata"]["annotations"][kueue.TOPOLOGY_ANNOTATIONS["required"]] for p in required.pods} == {
        "example.com/block"}
    preferred = planned({**BASE, "queue": "team-a", "topology": {"preferred": "example.com/rack"}})
    assert all(p["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] == "example.com/rack"
               and "kueue.x-k8s.io/podset-required-topology" not in p["metadata"]["annotations"]
               for p in preferred.pods)
    assert all(not any(k.endswith("-topology") for k in p["metadata"].get("annotations") or {})
               for p in planned({**BASE, "queue": "team-a"}).pods)
    with pytest.raises(SpecError) as err:
        planned({**BASE, "topology": {"required": "example.com/block"}})
    assert err.value.problems[0].field == "topology" and "admission is gate" in str(err.value)


def test_a_recovery_attempt_names_the_pod_group_of_the_template_setup_gave_the_pod():
    from tfk8s_airflow.job import podgroup

    # Setup's groups: the job's (no gang_min) or the role's; a recovery attempt's is named from the same template.
    assert podgroup.template_of("j", "worker", "j") == podgroup.TEMPLATE
    assert podgroup.template_of("j", "worker", "j-worker") == "worker"
    assert podgroup.group_name("j", 3, podgroup.template_of("j", "worker", "j-worker")) == "j-worker-a3"
    assert podgroup.group_name("j", 3) == "j-a3"
    assert podgroup.gangs({"ps": (1, None), "worker": (4, None)}) == {podgroup.TEMPLATE: 5}
    assert podgroup.gangs({"ps": (1, None), "worker": (4, 2), "evaluator": (0, None)}) == {"ps": 1, "worker": 2}
    assert podgroup.gang_of({"spec": {"workloadRef": {"templateName": "worker"},
                                      "schedulingPolicy": {"gang": {"minCount": 2}}}}) == ("worker", 2)
