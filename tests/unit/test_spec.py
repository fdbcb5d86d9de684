"""The spec: parsing, defaults, round trip, and a catalogue of bad specs with their messages."""
import dataclasses
import math

import pytest

from tfk8s_airflow.exceptions import SpecError
from tfk8s_airflow.job.spec import (
    ROLE_KEYS,
    EmptyDir,
    EnvFrom,
    Resources,
    ValueFrom,
    apply_overrides,
    parse_spec,
    parse_spec_file,
)

MINIMAL = {"name": "mnist", "image": "tfk8s/trainer:0.1", "ps": {"replicas": 1}, "worker": {"replicas": 2}}

FULL = {
    "name": "ctr-model", "namespace": "team-a", "image": "registry.example.com:5000/ml/trainer:2.21",
    "image_pull_policy": "Always", "command": ["python", "-m", "tfk8s_airflow.pod.trainer"],
    "args": ["--steps", "1000"], "env": {"LOG_LEVEL": "info"},
    "resources": {"cpu": "2", "memory": "4Gi"}, "port": 2223, "tf_wiring": "both",
    "success_policy": "all_workers", "restart_policy": "ExitCode", "max_restarts": 5,
    "schedule_timeout": "5m", "startup_timeout": 900, "active_deadline": "2h",
    "labels": {"team": "ads"}, "annotations": {"example.com/owner": "ads-ml"},
    "service_account": "tf-trainer",
    "volumes": [{"name": "data", "mount_path": "/data", "host_path": "/mnt/tfk8s-gluster/data", "read_only": True},
                {"name": "model", "mount_path": "/model", "pvc": "models"}],
    "hide_evaluator": True,
    "chief": {"replicas": 1},
    "ps": {"replicas": 2, "resources": {"cpu": "4", "memory": "8Gi"}},
    "worker": {"replicas": 4, "resources": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1},
               "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
               "node_selector": {"accelerator": "a100"}, "env": {"EXTRA": "1"}},
    "evaluator": {"replicas": 1, "image": "registry.example.com:5000/ml/evaluator@sha256:" + "a" * 64},
}


def test_minimal_spec_defaults():
    s = parse_spec(MINIMAL)
    assert (s.namespace, s.port, s.tf_wiring, s.success_policy) == ("default", 2222, "tf_config", "default")
    assert s.replica_ids() == [("ps", 0), ("worker", 0), ("worker", 1)]
    assert s.roles["ps"].restart_policy == "Never" and not s.roles["ps"].tracked
    assert s.roles["worker"].restart_policy == "OnFailure" and s.roles["worker"].tracked
    assert s.success_replicas() == [("worker", 0)]
    assert s.schedule_timeout == 300 and s.active_deadline is None
    assert (s.clean_pod_policy, s.finished_pod_ttl) == ("All", 600)


@pytest.mark.parametrize("value, ttl, kept", [("None", "5s", 5), ("Running", 0, 0), ("All", "2m", 120)])
def test_clean_pod_policy_and_finished_pod_ttl_parse_and_round_trip(value, ttl, kept):
    s = parse_spec({**MINIMAL, "clean_pod_policy": value, "finished_pod_ttl": ttl})
    assert (s.clean_pod_policy, s.finished_pod_ttl) == (value, kept)
    assert parse_spec(s.to_dict()) == s


def test_a_bad_clean_pod_policy_or_ttl_names_the_field_and_the_fix():
    with pytest.raises(SpecError) as err:
        parse_spec({**MINIMAL, "clean_pod_policy": "Finished", "finished_pod_ttl": "soon"})
    got = {p.field: p.fix for p in err.value.problems}
    assert got["clean_pod_policy"] == "write clean_pod_policy: All"
    assert "duration" in got["finished_pod_ttl"]


def test_full_spec_parses_merges_and_round_trips():
    s = parse_spec(FULL)
    assert s.schedule_timeout == 300 and s.active_deadline == 7200
    w = s.roles["worker"]
    assert dict(w.env) == {"LOG_LEVEL": "info", "EXTRA": "1"}
    assert w.resources.limits["nvidia.com/gpu"] == "1" and w.pod_restart_policy == "Never"  # ExitCode
    assert s.roles["chief"].resources == s.resources
    assert s.roles["evaluator"].image.endswith("a" * 64)
    assert s.success_replicas() == [("chief", 0), ("worker", 0), ("worker", 1), ("worker", 2),
                                    ("worker", 3), ("evaluator", 0)]
    assert parse_spec(s.to_dict()) == s
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "other"  # frozen


CODE = {"uri": "https://artifacts.example.com/ctr.tgz", "entrypoint": "train.py", "sha256": "a" * 64}


@pytest.mark.parametrize("doc,commands", [
    ({"name": "job", "image": "tfk8s/trainer:0.1", "worker": {}, "command": []}, {"worker": ()}),  # found by fuzzing
    ({**MINIMAL, "command": [], "code": CODE}, {"ps": (), "worker": ()}),
    ({**MINIMAL, "command": ["python", "t.py"], "worker": {"replicas": 2, "command": []}},
     {"ps": ("python", "t.py"), "worker": ()}),
    ({**MINIMAL, "worker": {"replicas": 2, "command": None}}, {"ps": None, "worker": None}),
])
def test_an_empty_command_is_the_images_entrypoint_and_round_trips(doc, commands):
    """``command: []`` is Kubernetes' empty command: the image's entrypoint, also over a job-wide command or
    ``code``'s; left out (or null), a role has the job's command and the job the image's or code's entrypoint."""
    s = parse_spec(doc)
    assert {role: rs.command for role, rs in s.roles.items()} == commands
    assert parse_spec(s.to_dict()) == s
    assert s.to_dict().get("command") == (list(s.command) if s.command is not None else None)


JOB_WIDE = {"command": ["python", "t.py"], "args": ["--steps", "9"], "env": {"E": "1"},
            "env_from": [{"secret_ref": "s"}], "resources": {"cpu": 1}, "node_selector": {"pool": "a"},
            "restart_policy": "ExitCode", "tolerations": [{"key": "k", "operator": "Exists"}],
            "annotations": {"example.com/a": "1"}, "pod_template": {"metadata": {"labels": {"l": "1"}}}}


@pytest.mark.parametrize("key", sorted(set(ROLE_KEYS) - {"replicas", "tracked"}))
def test_a_null_key_in_a_role_block_is_the_key_left_out(key):
    """YAML's ``args:`` with nothing after it is null: the job's value, as when the key is left out (before,
    a role's null ``args``, ``resources``, ``node_selector`` or ``tolerations`` emptied them and a null
    ``restart_policy`` was refused; a PS's is still Never, its own default)."""
    given = parse_spec({**MINIMAL, **JOB_WIDE, "ps": {"replicas": 1, key: None}, "worker": {"replicas": 2, key: None}})
    assert given == parse_spec({**MINIMAL, **JOB_WIDE})
    assert (given.roles["ps"].restart_policy, given.roles["worker"].restart_policy) == ("Never", "ExitCode")


def test_an_empty_service_account_is_the_namespaces_default_and_round_trips():
    s = parse_spec({**MINIMAL, "service_account": ""})
    assert s.service_account is None and parse_spec(s.to_dict()) == s


def test_resources_short_form_and_kubernetes_form():
    short = parse_spec({**MINIMAL, "resources": {"cpu": "2", "memory": "4Gi"}})
    assert short.resources == Resources({"cpu": "2", "memory": "4Gi"}, {"cpu": "2", "memory": "4Gi"})
    assert short.to_dict()["resources"] == {"cpu": "2", "memory": "4Gi"}
    long = parse_spec({**MINIMAL, "worker": {"replicas": 2, "resources": {
        "requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1},
        "limits": {"cpu": 2, "nvidia.com/gpu": 1, "ephemeral-storage": "10Gi"}}}})
    res = long.roles["worker"].resources
    assert dict(res.requests) == {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1",
                                  "ephemeral-storage": "10Gi"}  # a limit alone is also the request
    assert dict(res.limits) == {"cpu": "2", "nvidia.com/gpu": "1", "ephemeral-storage": "10Gi"}
    assert res.to_kubernetes() == {"requests": dict(res.requests), "limits": dict(res.limits)}
    assert parse_spec(long.to_dict()) == long
    only_requests = parse_spec({**MINIMAL, "resources": {"requests": {"cpu": 1}}})
    assert only_requests.resources.to_kubernetes() == {"requests": {"cpu": "1"}}
    assert parse_spec(only_requests.to_dict()) == only_requests


def test_env_values_from_secrets_config_maps_and_the_pod():
    s = parse_spec({**MINIMAL, "env": {
        "PLAIN": "x", "ON": True,
        "DB_PASSWORD": {"value_from": {"secret_key_ref": {"name": "db", "key": "password"}}},
        "FEATURES": {"value_from": {"config_map_key_ref": {"name": "cfg", "key": "f.json", "optional": True}}},
        "POD": {"value_from": {"field_ref": {"field_path": "metadata.labels['tfk8s.io/role']"}}},
        "WRAPPED": {"value": 3}},
        "env_from": [{"secret_ref": "db", "prefix": "DB_"}, {"config_map_ref": {"name": "cfg", "optional": True}}],
        "worker": {"replicas": 1, "env": [{"name": "IP", "value_from": {"field_ref": {"field_path": "status.podIP"}}}],
                   "env_from": [{"config_map_ref": "extra"}]}})
    assert s.env["PLAIN"] == "x" and s.env["ON"] == "true" and s.env["WRAPPED"] == "3"
    assert s.env["DB_PASSWORD"] == ValueFrom("secret_key_ref", name="db", key="password")
    assert s.env["FEATURES"] == ValueFrom("config_map_key_ref", name="cfg", key="f.json", optional=True)
    w = s.roles["worker"]
    assert w.env["IP"] == ValueFrom("field_ref", field_path="status.podIP")
    assert w.env["DB_PASSWORD"] == s.env["DB_PASSWORD"]
    assert w.env_from == (EnvFrom("secret_ref", "db", "DB_"), EnvFrom("config_map_ref", "cfg", optional=True),
                          EnvFrom("config_map_ref", "extra"))
    assert s.roles["ps"].env_from == s.env_from
    assert parse_spec(s.to_dict()) == s


def test_secret_config_map_and_empty_dir_volumes():
    s = parse_spec({**MINIMAL, "volumes": [
        {"name": "creds", "mount_path": "/etc/creds", "secret": "creds", "read_only": True},
        {"name": "cfg", "mount_path": "/etc/cfg", "config_map": "trainer-config"},
        {"name": "tmp", "mount_path": "/tmp/x", "empty_dir": True},
        {"name": "shm", "mount_path": "/dev/shm", "empty_dir": {"medium": "Memory", "size_limit": "2Gi"}}]})
    assert [vol.kind for vol in s.volumes] == ["secret", "config_map", "empty_dir", "empty_dir"]
    assert s.volumes[3].empty_dir == EmptyDir("Memory", "2Gi")
    assert parse_spec(s.to_dict()) == s


SECRET = "hunter2-do-not-print"


@pytest.mark.parametrize("env", [
    {"A": {"value": SECRET, "valeu": 1}},
    {"A": {"value": [SECRET]}},
    {"A": [SECRET]},
    {"A": {"value": SECRET, "value_from": {"secret_key_ref": {"name": "db", "key": "k"}}}},
    [{"name": "A", "value": SECRET, "valueFrom": {}}],
    [{"name": "TF_CONFIG", "value": SECRET}],
    {"1A": SECRET},
    {"A": {"valeu": SECRET}},
])
def test_env_errors_never_print_the_value(env):
    with pytest.raises(SpecError) as info:
        parse_spec({**MINIMAL, "env": env})
    assert SECRET not in str(info.value)
    assert all(p.field.startswith("env") and p.fix for p in info.value.problems)


def test_tf2_layout_untracked_workers():
    s = parse_spec({**MINIMAL, "chief": 1, "worker": {"replicas": 2, "tracked": False}})
    assert s.success_replicas() == [("chief", 0)]


def test_overrides_apply_yaml_values():
    d = apply_overrides(MINIMAL, ["worker.replicas=4", "env.A=x", "hide_evaluator=true"])
    assert d["worker"]["replicas"] == 4 and d["env"] == {"A": "x"} and d["hide_evaluator"] is True
    assert MINIMAL["worker"]["replicas"] == 2  # input untouched


def test_role_given_as_an_integer():
    assert parse_spec({**MINIMAL, "worker": 3}).replicas("worker") == 3


def test_max_replicas_is_configurable():
    big = {**MINIMAL, "worker": {"replicas": 600}}
    with pytest.raises(SpecError, match="600 replicas|601 replicas"):
        parse_spec(big)
    assert parse_spec(big, max_replicas=1000).total_replicas == 601


def test_all_problems_reported_at_once():
    with pytest.raises(SpecError) as info:
        parse_spec({"name": "Bad_Name", "image": "x y", "workers": 2, "port": 0})
    assert set(info.value.fields) >= {"name", "image", "workers", "port", "worker"}


# (mutation, field, substring of the message or fix)
BAD = [
    ({"worker": {"replicas": 0}}, "worker.replicas", "must be at least 1"),
    ({"worker": None}, "worker", "is required"),
    ({"chief": {"replicas": 2}}, "chief.replicas", "must be 0 or 1"),
    ({"evaluator": {"replicas": 3}}, "evaluator.replicas", "must be 0 or 1"),
    ({"ps": {"replicas": -1}}, "ps.replicas", "must be >= 0"),
    ({"worker": {"replicas": "many"}}, "worker.replicas", "must be an integer"),
    ({"workers": {"replicas": 2}}, "workers", "did you mean 'worker'?"),
    ({"imge": "x"}, "imge", "did you mean 'image'?"),
    ({"worker": {"replicas": 2, "replica": 1}}, "worker.replica", "did you mean 'replicas'?"),
    ({"image": "Tfk8s/Trainer:0.1"}, "image", "repository names are lowercase"),
    ({"image": "trainer:"}, "image", "not a valid image reference"),
    ({"image": "host:port:x/trainer"}, "image", "not a valid image reference"),
    ({"image": None}, "image", "is required"),
    ({"worker": {"replicas": 2, "image": "bad image"}}, "worker.image", "not a valid image reference"),
    ({"resources": {"cpu": "two"}}, "resources.cpu", "not a resource quantity"),
    ({"resources": {"memory": "4GB"}}, "resources.memory", "not a resource quantity"),
    ({"resources": {"memory": "-1Gi"}}, "resources.memory", "must not be negative"),
    ({"resources": {"nvidia.com/gpu": "0.5"}}, "resources.nvidia.com/gpu", "whole number"),
    ({"resources": {"gpu": 1}}, "resources.gpu", "did you mean 'nvidia.com/gpu'?"),
    ({"port": 70000}, "port", "between 1 and 65535"),
    ({"port": "http"}, "port", "must be an integer"),
    ({"name": "My_Job"}, "name", "not a DNS-1123 label"),
    ({"name": "x" * 64}, "name", "the limit is 63"),
    ({"name": None}, "name", "is required"),
    ({"namespace": "Team A"}, "namespace", "not a DNS-1123 label"),
    ({"labels": {"team": "a b"}}, "labels.team", "label value"),
    ({"labels": {"bad key!": "x"}}, "labels.bad key!", "key name"),
    ({"labels": {"team": "x" * 64}}, "labels.team", "label value"),
    ({"labels": {"tfk8s.io/job": "mine"}}, "labels.tfk8s.io/job", "reserved"),
    ({"annotations": {"-bad": "x"}}, "annotations.-bad", "key name"),
    ({"env": {"TF_CONFIG": "{}"}}, "env.TF_CONFIG", "set by tfk8s-airflow itself"),
    ({"env": {"1BAD": "x"}}, "env.1BAD", "not a valid environment variable name"),
    ({"command": "python train.py"}, "command", "one item per argument"),
    ({"tf_wiring": "env"}, "tf_wiring", "must be one of tf_config, flags, both"),
    ({"success_policy": "any"}, "success_policy", "must be one of default, all_workers"),
    ({"restart_policy": "Always"}, "restart_policy", "must be one of Never, OnFailure, ExitCode"),
    ({"ps": {"replicas": 1, "tracked": True}}, "ps.tracked", "never exit"),
    ({"worker": {"replicas": 2, "tracked": False}}, "worker.tracked", "need a chief"),
    ({"chief": 1, "worker": {"replicas": 2, "tracked": False}, "success_policy": "all_workers"},
     "success_policy", "conflicts with worker.tracked"),
    ({"hide_evaluator": True}, "hide_evaluator", "no evaluator"),
    ({"schedule_timeout": "soon"}, "schedule_timeout", "positive duration"),
    ({"active_deadline": -5}, "active_deadline", "positive duration"),
    ({"max_restarts": -1}, "max_restarts", "must be >= 0"),
    ({"image_pull_policy": "Sometimes"}, "image_pull_policy", "must be one of"),
    ({"service_account": "Bad_SA"}, "service_account", "DNS-1123 subdomain"),
    ({"volumes": [{"name": "data", "mount_path": "/data"}]}, "volumes[0]", "exactly one of host_path, pvc"),
    ({"volumes": [{"name": "data", "mount_path": "data", "host_path": "/x"}]}, "volumes[0].mount_path", "absolute"),
    ({"volumes": [{"name": "d", "mount_path": "/d", "host_path": "/x"}, {"name": "d", "mount_path": "/e", "pvc": "p"}]},
     "volumes[1].name", "duplicate volume name"),
    ({"volumes": [{"name": "d", "mount_path": "/d", "host_path": "/x", "sub_path": "../etc"}]},
     "volumes[0].sub_path", "without '..'"),
    ({"tolerations": [{"key": "a", "operator": "Maybe"}]}, "tolerations[0].operator", "Equal or Exists"),
    ({"code": {"uri": "ftp://host/x.tgz"}}, "code.uri", "http(s)://, hdfs://"),
    ({"code": {"uri": "https://h/x.tgz", "sha256": "abc"}}, "code.sha256", "64 hex"),
    ({"code": {"uri": "https://h/x.tgz", "entrypoint": "../run.sh"}}, "code.entrypoint", "relative path"),
    ({"code": {"uri": "https://h/x.tgz", "entrypoint": "-c"}}, "code.entrypoint", "must not start with '-'"),
    ({"code": {"uri": "http://h/x.tgz"}}, "code.sha256", "required for a plain http://"),
    ({"code": {"uri": "ftp://user:s3cr3t@h/x.tgz"}}, "code.uri", "got 'ftp://***@h/x.tgz'"),
    # numbers that are not numbers, or absurd ones: refused cheaply, never a traceback
    ({"worker": {"replicas": math.inf}}, "worker.replicas", "must be an integer"),
    ({"worker": {"replicas": "²"}}, "worker.replicas", "must be an integer"),
    ({"port": "--2"}, "port", "must be an integer"),
    ({"max_restarts": 2**64}, "max_restarts", "out of range"),
    ({"active_deadline": math.inf}, "active_deadline", "positive duration"),
    ({"active_deadline": math.nan}, "active_deadline", "positive duration"),
    ({"active_deadline": 2**31}, "active_deadline", "longer than 2147483647 seconds"),
    ({"schedule_timeout": "9" * 40 + "d"}, "schedule_timeout", "positive duration"),
    ({"resources": {"cpu": "1e30000000"}}, "resources.cpu", "out of range"),
    ({"resources": {"memory": "9Ei"}}, "resources.memory", "out of range"),
    ({"resources": {"cpu": "\u0663"}}, "resources.cpu", "not a resource quantity"),
    ({"resources": {"cpu": math.nan}}, "resources.cpu", "not a resource quantity"),
    ({"name": math.nan}, "name", "must be a string"),
    ({"env": {"A": math.inf}}, "env.A", "value must be a string"),
    ({"args": ["--lr", math.inf]}, "args[1]", "must be a string"),
    ({"nodeSelector": {"a": "b"}}, "nodeSelector", "write node_selector"),
    # the API server's own rules, mirrored so that setup never creates half a job
    ({"resources": {"a/b c": 1}}, "resources.a/b c", "not a valid extended resource name"),
    ({"resources": {"requests.example.com/x": 1}}, "resources.requests.example.com/x", "starts with 'requests.'"),
    ({"tolerations": [{"operator": "Equal", "value": "x"}]}, "tolerations[0].operator", "must be Exists when key"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoSchedule", "toleration_seconds": 5}]},
     "tolerations[0].effect", "must be NoExecute"),
    ({"tolerations": [{"key": "a b", "operator": "Exists"}]}, "tolerations[0].key", "key name"),
    ({"tolerations": [{"key": "a", "value": "a b"}]}, "tolerations[0].value", "label value"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "toleration_seconds": 2**63}]},
     "tolerations[0].toleration_seconds", "out of range"),
    ({"volumes": [{"name": "tfk8s-code", "mount_path": "/x", "pvc": "p"}]}, "volumes[0].name",
     "adds to the pods itself"),
    ({"volumes": [{"name": "d", "mount_path": "/etc/tfk8s/shards", "pvc": "p"}]}, "volumes[0].mount_path",
     "shard assignments"),
    ({"volumes": [{"name": "d", "mount_path": "/opt/tfk8s/code", "pvc": "p"}], "code": "https://h/x.tgz"},
     "volumes[0].mount_path", "where code is unpacked"),
    ({"volumes": [{"name": "d", "mount_path": "/data/../etc", "pvc": "p"}]}, "volumes[0].mount_path", "without '..'"),
    ({"volumes": [{"name": "d", "mount_path": "/", "pvc": "p"}]}, "volumes[0].mount_path", "other than /"),
    ({"volumes": [{"name": "d", "mount_path": "/d", "host_path": "/mnt/../etc"}]}, "volumes[0].host_path",
     "without '..'"),
    ({"volumes": [{"name": "d", "mount_path": "/d", "pvc": "p"}, {"name": "e", "mount_path": "/d/", "pvc": "q"}]},
     "volumes[1].mount_path", "mounted twice"),
    ({"code": {"uri": "https://h/x.tgz", "mount_path": "/etc/tfk8s/shards"}}, "code.mount_path", "shard assignments"),
    ({"annotations": {"example.com/big": "x" * 300_000}}, "annotations", "more than Kubernetes' limit"),
    # resources in Kubernetes' form: limits never below requests, extended resources equal
    ({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}}, "resources.limits.cpu",
     "below the request '2'"),
    ({"resources": {"requests": {"nvidia.com/gpu": 1}}}, "resources.limits.nvidia.com/gpu", "limit equal"),
    ({"resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}},
     "resources.limits.nvidia.com/gpu", "limit equal"),
    ({"resources": {"cpu": 1, "limits": {"cpu": 2}}}, "resources.cpu", "cannot be mixed with requests/limits"),
    ({"resources": {"requests": {"cpu": "lots"}}}, "resources.requests.cpu", "not a resource quantity"),
    ({"resources": {"limits": "2"}}, "resources.limits", "must be a mapping"),
    # env from Secrets, ConfigMaps and the pod; every unknown key an error
    ({"env": [{"name": "A", "valueFrom": {}}]}, "env[0].valueFrom", "write value_from"),
    ({"env": [{"name": "A", "value": "x", "vaule": "y"}]}, "env[0].vaule", "did you mean 'value'?"),
    ({"env": {"A": {"value_from": {"secret_key_ref": {"name": "db"}}}}}, "env.A.value_from.secret_key_ref.key",
     "is required"),
    ({"env": {"A": {"value_from": {"secret_key_ref": {"name": "Bad_Name", "key": "k"}}}}},
     "env.A.value_from.secret_key_ref.name", "DNS-1123 subdomain"),
    ({"env": {"A": {"value_from": {"secret_key_ref": {"name": "db", "key": "a/b"}}}}},
     "env.A.value_from.secret_key_ref.key", "not a valid Secret/ConfigMap key"),
    ({"env": {"A": {"value_from": {"secret_key_ref": {"name": "db", "key": "k", "optinal": True}}}}},
     "env.A.value_from.secret_key_ref.optinal", "did you mean 'optional'?"),
    ({"env": {"A": {"value_from": {"field_ref": {"field_path": "spec.containers"}}}}},
     "env.A.value_from.field_ref.field_path", "not a pod field"),
    ({"env": {"A": {"value_from": {}}}}, "env.A.value_from", "needs exactly one of"),
    ({"env": {"A": {"value_from": {"secret_key_ref": {"name": "a", "key": "b"}, "field_ref": "metadata.name"}}}},
     "env.A.value_from", "needs exactly one of"),
    ({"env_from": [{"secret_ref": "db", "config_map_ref": "c"}]}, "env_from[0]", "needs exactly one of"),
    ({"env_from": [{"secret_ref": "db", "prefix": "TFK8S_"}]}, "env_from[0].prefix", "set by tfk8s-airflow"),
    ({"env_from": [{"secret_ref": "db", "prefix": "1X"}]}, "env_from[0].prefix", "cannot start"),
    ({"env_from": {"secret_ref": "db"}}, "env_from", "must be a list"),
    ({"volumes": [{"name": "c", "mount_path": "/c", "secret": "Bad_Secret"}]}, "volumes[0].secret",
     "DNS-1123 subdomain"),
    ({"volumes": [{"name": "c", "mount_path": "/c", "secret": "s", "pvc": "p"}]}, "volumes[0]",
     "exactly one of"),
    ({"volumes": [{"name": "t", "mount_path": "/t", "empty_dir": {"medium": "Disk"}}]}, "volumes[0].empty_dir.medium",
     "must be Memory"),
    ({"volumes": [{"name": "t", "mount_path": "/t", "empty_dir": {"size_limit": "-1Gi"}}]},
     "volumes[0].empty_dir.size_limit", "must not be negative"),
    ({"volumes": [{"name": "code", "mount_path": "/c", "pvc": "p"}], "code": "https://h/x.tgz"}, "volumes[0].name",
     "would set TFK8S_CODE_DIR"),
]


@pytest.mark.parametrize("mutation,field,text", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_spec_catalogue(mutation, field, text):
    data = {k: val for k, val in {**MINIMAL, **mutation}.items() if val is not None}
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    matching = [p for p in info.value.problems if p.field == field]
    assert matching, f"no problem for {field}: {info.value}"
    assert any(text in str(p) for p in matching), str(info.value)
    assert field in str(info.value)


def test_spec_must_be_a_mapping():
    with pytest.raises(SpecError, match="must be a mapping"):
        parse_spec(["not", "a", "dict"])


def test_from_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="bad.yaml"):
        parse_spec_file(bad)
    with pytest.raises(SpecError, match="cannot read"):
        parse_spec_file(tmp_path / "missing.yaml")
