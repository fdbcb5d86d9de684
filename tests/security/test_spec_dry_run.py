"""What the spec accepts, the API server accepts: a generated corpus of specs, dry-run on the real server.

Hypothesis builds specs that are valid or nearly so (odd unicode in values, quantities at
Kubernetes' bounds, every kind of toleration, volume and env source, both resource forms,
random deployment policies); the parser keeps the ones it accepts. Every object of their plan
(what setup creates and ``tfk8s render`` prints) is then created with a server-side dry run (nothing is stored),
in one parallel batch, with ``fieldValidation=Strict`` (an unknown or duplicate field is an error, not
dropped). A spec the parser accepts but the API server refuses would make
setup create half a job and then fail on every pod with 422: each such case is listed.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.builders.plan import plan_job
from tfk8s_airflow.job.builders.render import parse_yaml, render_yaml
from tfk8s_airflow.job.policy import DeploymentPolicy
from tfk8s_airflow.job.spec import parse_spec

pytestmark = pytest.mark.k8s

GENERATED = 400  # documents drawn; about half are accepted
#: The corpus must be substantial: 229 are accepted when this module runs alone, 194 after the
#: whole suite ran in the same process (the derandomized draw is not the same there).
MIN_ACCEPTED = 150
ACCOUNT = "tf-dry"
MOUNT = "/mnt/tfk8s-gluster"

dns_label = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
dns_name = st.one_of(dns_label, st.builds(lambda a, b: f"{a}.{b}", dns_label, dns_label))
label_value = st.from_regex(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,20})?[A-Za-z0-9])?", fullmatch=True)
label_key = st.one_of(st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?", fullmatch=True),
                      st.builds(lambda d, n: f"{d}/{n}", dns_name, dns_label))
text = st.text(max_size=40)  # any unicode but surrogates: controls, line separators, emoji
env_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,12}", fullmatch=True).filter(
    lambda n: not n.startswith("TFK8S_") and n != "TF_CONFIG")
cpu = st.sampled_from(["100m", "0.5", "1", "2", "1.5", "250m", "1e3m", "+1", ".5", "5.", "1n", "3k",
                       "9223372036854775807", "0"])
memory = st.sampled_from(["128Mi", "1Gi", "1G", "500M", "2Gi", "1e9", "1000000000", "7Ei", "0.5",
                          "9223372036854775807", "1Ki"])
whole = st.one_of(st.integers(0, 4), st.sampled_from(["1", "2", "1000m", "9223372036854775807"]))
amounts = st.fixed_dictionaries({}, optional={"cpu": cpu, "memory": memory, "ephemeral-storage": memory,
                                              "nvidia.com/gpu": whole, "example.com/fpga": whole})


@st.composite
def resources(draw):
    limits = draw(amounts)
    if draw(st.booleans()):
        return limits  # the short form
    requests = {k: v for k, v in limits.items() if draw(st.booleans()) or "/" in k}
    requests.update(draw(st.fixed_dictionaries({}, optional={"cpu": st.just("10m"), "memory": st.just("1Mi")})))
    return {"requests": requests, "limits": limits} if draw(st.booleans()) else {"requests": requests}


value_from = st.one_of(
    st.builds(lambda n, k, o: {"secret_key_ref": {"name": n, "key": k, "optional": o}},
              dns_name, st.from_regex(r"[-._a-zA-Z0-9]{1,12}", fullmatch=True), st.booleans()),
    st.builds(lambda n, k: {"config_map_key_ref": {"name": n, "key": k}}, dns_name, st.sampled_from(["a", "b.json"])),
    st.builds(lambda p: {"field_ref": {"field_path": p}}, st.sampled_from(
        ["metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
         "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs", "metadata.labels['tfk8s.io/role']",
         "metadata.annotations['example.com/x']"])),
)
env = st.dictionaries(env_name, st.one_of(text, st.booleans(), st.integers(-10**6, 10**6),
                                          st.builds(lambda vf: {"value_from": vf}, value_from)), max_size=4)
env_from = st.lists(st.builds(
    lambda kind, name, prefix: {kind: name, **({"prefix": prefix} if prefix else {})},
    st.sampled_from(["secret_ref", "config_map_ref"]), dns_name,
    st.one_of(st.none(), st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True))), max_size=2)
toleration = st.builds(
    lambda key, op, value, effect, secs: {k: v for k, v in
                                          {"key": key, "operator": op, "value": value, "effect": effect,
                                           "toleration_seconds": secs}.items() if v is not None},
    st.one_of(st.none(), st.just(""), label_key), st.sampled_from([None, "Equal", "Exists"]),
    st.one_of(st.none(), label_value), st.sampled_from([None, "NoSchedule", "PreferNoSchedule", "NoExecute"]),
    st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(0, 600)))


@st.composite
def volumes(draw):
    out = []
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["host_path", "pvc", "secret", "config_map", "empty_dir"]))
        source = {"host_path": draw(st.sampled_from([MOUNT, f"{MOUNT}/data", f"{MOUNT}/tfk8s/models/x"])),
                  "pvc": draw(dns_name), "secret": draw(dns_name), "config_map": draw(dns_name),
                  "empty_dir": draw(st.sampled_from([{}, True, {"medium": "Memory"}, {"size_limit": "1Gi"},
                                                     {"medium": "Memory", "size_limit": "64Mi"}]))}[kind]
        vol = {"name": f"v{i}-{draw(dns_label)}"[:63].rstrip("-"), "mount_path": f"/mnt/v{i}", kind: source,
               "read_only": draw(st.booleans())}
        if draw(st.booleans()):
            vol["sub_path"] = draw(st.sampled_from(["a", "a/b", "models/run-1"]))
        out.append(vol)
    return out


role = st.fixed_dictionaries({}, optional={
    "image": st.just("registry.example.com:5000/ml/trainer@sha256:" + "b" * 64), "env": env, "env_from": env_from,
    "resources": resources(), "node_selector": st.dictionaries(label_key, label_value, max_size=2),
    "tolerations": st.lists(toleration, max_size=2), "annotations": st.dictionaries(label_key, text, max_size=2),
    "args": st.lists(text, max_size=3), "command": st.lists(text, min_size=1, max_size=2)})

specs = st.fixed_dictionaries({
    "name": dns_label, "image": st.sampled_from(["tfk8s/trainer:0.1", "localhost:5000/a/b-c_d.e:v1.2",
                                                 "registry.example.com/ml/trainer:2.21"]),
    "worker": st.builds(lambda n, extra, restart: {"replicas": n, "restart_policy": restart, **extra},
                        st.integers(1, 3), role, st.sampled_from(["Never", "OnFailure", "ExitCode"])),
}, optional={
    "ps": st.integers(0, 2), "chief": st.integers(0, 1), "evaluator": st.builds(lambda e: {"replicas": 1, **e}, role),
    "env": env, "env_from": env_from, "resources": resources(), "args": st.lists(text, max_size=3),
    "labels": st.dictionaries(st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True), label_value, max_size=2),
    "annotations": st.dictionaries(label_key, text, max_size=3),
    "node_selector": st.dictionaries(label_key, label_value, max_size=2),
    "tolerations": st.lists(toleration, max_size=3),
    "port": st.integers(1, 65535), "tf_wiring": st.sampled_from(["tf_config", "flags", "both"]),
    "image_pull_policy": st.sampled_from(["Always", "IfNotPresent", "Never"]),
    "active_deadline": st.integers(1, 2**31 - 1), "volumes": volumes(),
    "service_account": st.sampled_from(["default", ACCOUNT]), "automount_service_account_token": st.booleans(),
    "code": st.builds(lambda entry, uri: {"uri": uri, "entrypoint": entry, "sha256": "c" * 64},
                      st.sampled_from(["run.sh", "train.py", "bin/x"]),
                      st.sampled_from(["https://u:p@code.example.com/a.tgz", "http://h/a.tgz", "hdfs://nn/a.tgz"])),
})
policies = st.builds(lambda restricted, non_root: DeploymentPolicy(
    allowed_service_accounts=(ACCOUNT,), allowed_secrets=("*",), allow_service_account_token=True,
    restricted_security_context=restricted, run_as_non_root=non_root), st.booleans(), st.booleans())
shard_maps = st.one_of(st.none(), st.dictionaries(st.sampled_from(["worker-0", "worker-1", "chief-0"]),
                                                  st.lists(text.filter(bool), max_size=3), min_size=1))


def corpus(namespace: str) -> tuple[list[tuple[dict, list[dict]]], int]:
    """(spec document, its plan's objects) for every generated spec the parser accepts; and how many it refused."""
    accepted: list[tuple[dict, list[dict]]] = []
    refused = [0]

    @settings(max_examples=GENERATED, database=None, derandomize=True, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(doc=specs, policy=policies, shards=shard_maps)
    def collect(doc, policy, shards):
        doc = {**doc, "namespace": namespace}
        try:
            spec = parse_spec(doc, policy=policy)
        except SpecError:
            refused[0] += 1
            return
        run = f"dry-{len(accepted)}"
        plan = plan_job(spec, JobNames.for_run(spec, run, "train", "dag"), policy, shards, dag_id="dag", run_id=run,
                        task_id="train.replica")
        objs = parse_yaml(render_yaml(plan))
        assert objs == plan.objects()  # render prints the plan
        accepted.append((doc, objs))

    collect()
    return accepted, refused[0]


def test_every_accepted_spec_renders_objects_the_api_server_accepts(k8s_cluster, k8s_namespace):
    from kubernetes.client import NetworkingV1Api

    core = k8s_cluster.core_v1
    core.create_namespaced_service_account(k8s_namespace, {"metadata": {"name": ACCOUNT}})
    accepted, refused = corpus(k8s_namespace)
    assert len(accepted) >= MIN_ACCEPTED, (len(accepted), refused)
    create = {"Pod": core.create_namespaced_pod, "Service": core.create_namespaced_service,
              "ConfigMap": core.create_namespaced_config_map,
              "NetworkPolicy": NetworkingV1Api(k8s_cluster.api_client).create_namespaced_network_policy}

    def dry_run(item):
        doc, obj = item
        try:
            create[obj["kind"]](k8s_namespace, obj, dry_run="All", field_validation="Strict")
        except Exception as exc:  # noqa: BLE001 - every refusal is reported with its spec
            return {"spec": doc, "kind": obj["kind"], "error": str(getattr(exc, "body", exc))[:600]}
        return None

    items = [(doc, obj) for doc, objs in accepted for obj in objs]
    with ThreadPoolExecutor(max_workers=6) as pool:
        failures = [f for f in pool.map(dry_run, items) if f]
    print(f"\n[dry run] {len(accepted)} specs accepted ({refused} refused by the parser), {len(items)} objects")
    assert not failures, json.dumps(failures[:5], indent=1, ensure_ascii=True, default=str)
    assert core.list_namespaced_pod(k8s_namespace).items == []  # a dry run stores nothing

