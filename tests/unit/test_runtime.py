"""Unit tests of the pod-side runtime (no Airflow, no TensorFlow needed)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.ports import free_port
from tfk8s_airflow.exceptions import (
    DataError,
    PeerTimeoutError,
    RuntimeConfigError,
    SpecError,
)
from tfk8s_airflow.pod import runtime

SVC = "job-abc.ns.svc"


def _cfg(task_type="worker", index=1, **cluster):
    cluster = cluster or {
        "ps": [f"ps-0.{SVC}:2222", f"ps-1.{SVC}:2222"],
        "worker": [f"worker-0.{SVC}:2222", f"worker-1.{SVC}:2222"],
    }
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index},
                       "environment": "cloud"})


# ----------------------------------------------------------------- TF_CONFIG


def test_tf_config_parses_tfjob_layout():
    cfg = runtime.tf_config({"TF_CONFIG": _cfg()})
    assert cfg.task_type == "worker" and cfg.task_index == 1
    assert cfg.environment == "cloud"
    assert cfg.address == f"worker-1.{SVC}:2222"
    assert cfg.task_key == "worker-1"
    assert cfg.num_tasks("ps") == 2
    assert not cfg.is_chief
    assert cfg.chief_task == ("worker", 0)


def test_chief_precedence_and_master_alias():
    cfg = runtime.parse_tf_config(_cfg("chief", 0, chief=["c:1"], ps=["p:1"], worker=["w:1"]))
    assert cfg.is_chief and cfg.chief_task == ("chief", 0)
    cfg = runtime.parse_tf_config(_cfg("master", 0, master=["m:1"], worker=["w:1"]))
    assert cfg.is_chief
    cfg = runtime.parse_tf_config(_cfg("worker", 0, ps=["p:1"], worker=["w:1"]))
    assert cfg.is_chief  # no chief: worker 0 leads


def test_peers_filters_roles_and_self():
    cfg = runtime.parse_tf_config(_cfg())
    assert cfg.peers() == {
        "ps-0": f"ps-0.{SVC}:2222", "ps-1": f"ps-1.{SVC}:2222", "worker-0": f"worker-0.{SVC}:2222",
    }
    assert set(cfg.peers(roles=["ps"])) == {"ps-0", "ps-1"}
    assert set(cfg.peers(exclude_roles=["ps"])) == {"worker-0"}
    assert "worker-1" in cfg.peers(include_self=True)


def test_evaluator_hidden_from_cluster_is_accepted_and_dropped_from_training_cluster():
    cfg = runtime.parse_tf_config(_cfg("evaluator", 0, ps=["p:1"], worker=["w:1"]))
    assert cfg.address is None and cfg.task_key == "evaluator-0"
    cfg = runtime.parse_tf_config(_cfg("chief", 0, chief=["c:1"], ps=["p:1"], evaluator=["e:1"]))
    assert "evaluator" not in cfg.training_cluster()
    assert "evaluator-0" in cfg.peers()
    assert "evaluator-0" not in cfg.peers(exclude_roles=["evaluator"])


def test_round_trip_to_json():
    cfg = runtime.parse_tf_config(_cfg())
    assert runtime.parse_tf_config(cfg.to_json()) == cfg


@pytest.mark.parametrize(
    "text, needle",
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        (json.dumps({"task": {"type": "worker", "index": 0}}), "cluster"),
        (json.dumps({"cluster": {"worker": ["w:1"]}}), "'task'"),
        (json.dumps({"cluster": {"worker": ["w:1"]}, "task": {"type": "ps", "index": 0}}),
         "not in the cluster"),
        (json.dumps({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 3}}),
         "out of range"),
        (json.dumps({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": "x"}}),
         "not an integer"),
        (json.dumps({"cluster": {"worker": ["w"]}, "task": {"type": "worker", "index": 0}}),
         "no port"),
        (json.dumps({"cluster": {"worker": [3]}, "task": {"type": "worker", "index": 0}}),
         "host:port"),
    ],
)
def test_bad_tf_config_is_a_clear_permanent_error(text, needle):
    with pytest.raises(RuntimeConfigError, match=needle) as info:
        runtime.parse_tf_config(text)
    assert "TF_CONFIG" in str(info.value)
    assert runtime.exit_code_for(info.value) == runtime.EXIT_PERMANENT


def test_missing_tf_config_names_the_variable():
    with pytest.raises(RuntimeConfigError, match="TF_CONFIG is not set"):
        runtime.tf_config({})


def test_split_host_port():
    assert runtime.split_host_port("a.b.svc:2222") == ("a.b.svc", 2222)
    assert runtime.split_host_port("[::1]:80") == ("::1", 80)
    assert runtime.split_host_port("host", default_port=2222) == ("host", 2222)
    for bad in ("h:0", "h:x", ":80", "[::1"):
        with pytest.raises(RuntimeConfigError):
            runtime.split_host_port(bad)


# ----------------------------------------------------------------- legacy flags


def test_legacy_flags_build_the_same_structure():
    argv = ["--ps_hosts", "ps-0:2222,ps-1:2222", "--worker_hosts=w-0:2222,w-1:2222",
            "--job_name", "worker", "--task_index", "1", "--steps", "5"]
    cfg, rest = runtime.parse_legacy_flags(argv)
    assert cfg.cluster == {"ps": ["ps-0:2222", "ps-1:2222"], "worker": ["w-0:2222", "w-1:2222"]}
    assert (cfg.task_type, cfg.task_index, cfg.environment) == ("worker", 1, "cloud")
    assert rest == ["--steps", "5"]
    assert runtime.parse_tf_config(cfg.to_json()) == cfg


def test_load_config_prefers_tf_config_then_flags():
    flags = ["--ps_hosts", "p:1", "--worker_hosts", "w:1", "--job_name", "ps", "--task_index", "0"]
    assert runtime.load_config(flags, env={"TF_CONFIG": _cfg()}).task_type == "worker"
    assert runtime.load_config(flags, env={}).task_type == "ps"
    with pytest.raises(RuntimeConfigError, match="TF_CONFIG is not set"):
        runtime.load_config([], env={})


def test_legacy_flags_errors():
    with pytest.raises(RuntimeConfigError, match="--job_name"):
        runtime.parse_legacy_flags(["--ps_hosts", "p:1"])
    with pytest.raises(RuntimeConfigError, match="out of range"):
        runtime.parse_legacy_flags(["--worker_hosts", "w:1", "--job_name", "worker",
                                    "--task_index", "2"])


# ----------------------------------------------------------------- pod env and shards


def test_pod_env():
    pe = runtime.pod_env({"TFK8S_JOB_NAME": "j", "TFK8S_ROLE": "worker", "TFK8S_INDEX": "2",
                          "TFK8S_MODEL_DIR": "/m", "TFK8S_DATA_DIR": "/d"})
    assert (pe.job_name, pe.role, pe.index, pe.model_dir, pe.data_dir, pe.log_dir) == (
        "j", "worker", 2, "/m", "/d", None)
    with pytest.raises(RuntimeConfigError, match="TFK8S_INDEX"):
        runtime.pod_env({"TFK8S_INDEX": "two"})


def test_my_shard_from_file(tmp_path):
    shards = tmp_path / "shards.json"
    shards.write_text(json.dumps({"worker-0": ["/d/a"], "worker-1": ["/d/b", "/d/c"]}))
    env = {"TF_CONFIG": _cfg(), "TFK8S_SHARDS_FILE": str(shards)}
    assert runtime.my_shard(env) == ["/d/b", "/d/c"]
    assert runtime.all_shards(env)["worker-0"] == ["/d/a"]
    # Role/index env vars are enough without TF_CONFIG.
    env = {"TFK8S_ROLE": "worker", "TFK8S_INDEX": "0", "TFK8S_SHARDS_FILE": str(shards)}
    assert runtime.my_shard(env) == ["/d/a"]


def test_shard_env_takes_precedence(tmp_path):
    env = {"TF_CONFIG": _cfg(), "TFK8S_SHARD_FILES": json.dumps(["/x/1", "/x/2"]),
           "TFK8S_SHARDS_FILE": str(tmp_path / "missing.json")}
    assert runtime.my_shard(env) == ["/x/1", "/x/2"]
    with pytest.raises(RuntimeConfigError, match="TFK8S_SHARD_FILES"):
        runtime.my_shard({"TFK8S_SHARD_FILES": "{bad"})
    with pytest.raises(RuntimeConfigError, match="TFK8S_SHARD_FILES must be a JSON list"):
        runtime.my_shard({"TFK8S_SHARD_FILES": '{"a": 1}'})


def test_missing_shard_file_and_key_are_named(tmp_path):
    missing = str(tmp_path / "nope.json")
    with pytest.raises(RuntimeConfigError) as info:
        runtime.my_shard({"TF_CONFIG": _cfg(), "TFK8S_SHARDS_FILE": missing})
    msg = str(info.value)
    assert missing in msg and "TFK8S_SHARD_FILES" in msg and "TFK8S_SHARDS_FILE" in msg
    with pytest.raises(RuntimeConfigError, match=runtime.DEFAULT_SHARDS_FILE):
        runtime.my_shard({"TF_CONFIG": _cfg()})
    other = tmp_path / "shards.json"
    other.write_text(json.dumps({"worker-0": []}))
    with pytest.raises(RuntimeConfigError, match=r"no shard for 'worker-1'.*worker-0"):
        runtime.my_shard({"TF_CONFIG": _cfg(), "TFK8S_SHARDS_FILE": str(other)})
    with pytest.raises(RuntimeConfigError, match="cannot tell which replica"):
        runtime.my_shard({"TFK8S_SHARDS_FILE": str(other)})
    other.write_text("[1, 2]")
    with pytest.raises(RuntimeConfigError, match="JSON object"):
        runtime.my_shard({"TF_CONFIG": _cfg(), "TFK8S_SHARDS_FILE": str(other)})


# ----------------------------------------------------------------- wait_for_peers


@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield s.getsockname()[1]
    s.close()


def test_wait_for_peers_reaches_listening_sockets(listener):
    cfg = runtime.parse_tf_config(_cfg(
        "worker", 1, ps=[f"127.0.0.1:{listener}"], worker=[f"localhost:{listener}", "127.0.0.1:1"]))
    res = runtime.wait_for_peers(5, cfg)
    assert set(res.reached) == {"ps-0", "worker-0"}  # not itself (worker-1 at port 1)
    assert res.elapsed_s < 5


def test_wait_for_peers_waits_for_a_late_peer():
    port = free_port()
    cfg = runtime.parse_tf_config(_cfg("worker", 0, ps=[f"127.0.0.1:{port}"], worker=["127.0.0.1:1"]))
    late = socket.socket()
    calls = []

    def sleep(s):  # the peer starts listening after the first failed round
        calls.append(s)
        if len(calls) == 1:
            late.bind(("127.0.0.1", port))
            late.listen(1)
        time.sleep(min(s, 0.05))

    try:
        res = runtime.wait_for_peers(10, cfg, sleep=sleep)
    finally:
        late.close()
    assert res.reached == {"ps-0": f"127.0.0.1:{port}"} and res.attempts >= 2


def test_wait_for_peers_timeout_names_missing_peer_and_connect_stage(listener):
    dead = free_port()
    cfg = runtime.parse_tf_config(_cfg(
        "worker", 0, ps=[f"127.0.0.1:{listener}"], worker=["127.0.0.1:1", f"127.0.0.1:{dead}"]))
    t0 = time.monotonic()
    with pytest.raises(PeerTimeoutError) as info:
        runtime.wait_for_peers(0.6, cfg, initial_backoff_s=0.05)
    assert time.monotonic() - t0 < 5
    msg = str(info.value)
    assert f"worker-1 (127.0.0.1:{dead}): connect failed" in msg
    assert "ps-0" not in msg
    assert runtime.exit_code_for(info.value) == runtime.EXIT_RETRYABLE


def test_wait_for_peers_timeout_names_dns_stage():
    cfg = runtime.parse_tf_config(_cfg("worker", 0, ps=["ps-0.no-such-svc.invalid:2222"],
                                       worker=["127.0.0.1:1"]))
    with pytest.raises(PeerTimeoutError, match=r"ps-0 \(ps-0.no-such-svc.invalid:2222\): dns failed"):
        runtime.wait_for_peers(0.5, cfg, initial_backoff_s=0.05)


def test_wait_for_peers_role_filters(listener):
    cfg = runtime.parse_tf_config(_cfg(
        "worker", 0, ps=[f"127.0.0.1:{listener}"], worker=["127.0.0.1:1", "127.0.0.1:2"],
        evaluator=["127.0.0.1:3"]))
    assert set(runtime.wait_for_peers(2, cfg, roles=["ps"]).reached) == {"ps-0"}
    assert runtime.wait_for_peers(
        1, cfg, exclude_roles=["ps", "worker", "evaluator"]).reached == {}
    # The evaluator is excluded by default: only worker-1 (unreachable) is missing.
    with pytest.raises(PeerTimeoutError) as info:
        runtime.wait_for_peers(0.3, cfg, initial_backoff_s=0.05)
    assert "worker-1" in str(info.value) and "evaluator" not in str(info.value)


# ----------------------------------------------------------------- device filters


def test_device_filters():
    assert runtime.device_filters("worker", 1) == ["/job:ps", "/job:worker/task:1"]
    assert runtime.device_filters("chief", 0) == ["/job:ps", "/job:chief/task:0"]
    assert runtime.device_filters("ps", 2) == ["/job:ps/task:2"]
    assert runtime.device_filters("evaluator", 0) == ["/job:evaluator/task:0"]


# ----------------------------------------------------------------- exit codes


class UnavailableError(Exception):
    """Stands in for tf.errors.UnavailableError (matched by class name)."""


def test_exit_codes():
    assert (runtime.EXIT_SUCCESS, runtime.EXIT_PERMANENT, runtime.EXIT_RETRYABLE) == (0, 1, 138)
    assert runtime.exit_code_for(None) == 0
    assert runtime.exit_code_for(SpecError("x")) == 1
    assert runtime.exit_code_for(DataError("x")) == 1
    assert runtime.exit_code_for(ValueError("x")) == 1
    assert runtime.exit_code_for(PeerTimeoutError("x")) == 138
    assert runtime.exit_code_for(ConnectionResetError()) == 138
    assert runtime.exit_code_for(UnavailableError("ps gone")) == 138
    assert runtime.exit_code_for(SystemExit(3)) == 3
    assert runtime.exit_code_for(SystemExit()) == 0
    assert runtime.is_retryable_exit(138) and runtime.is_retryable_exit(137)
    assert not runtime.is_retryable_exit(1) and not runtime.is_retryable_exit(127)


def test_run_main(capsys):
    assert runtime.run_main(lambda: None) == 0

    def boom():
        raise RuntimeConfigError("bad shard")

    assert runtime.run_main(boom) == 1
    assert "permanent failure (RuntimeConfigError: bad shard); exit code 1" in capsys.readouterr().err


def test_runtime_imports_without_airflow_or_tensorflow():
    import subprocess
    import sys

    code = ("import sys; import tfk8s_airflow.pod.runtime; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('airflow', 'tensorflow')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
